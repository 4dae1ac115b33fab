"""Images of the ``docker`` backend, built locally (no registry is ever pulled from).

Base image
    :func:`build_base_image` assembles a minimal Debian root file system with ``debootstrap``
    (variant ``minbase`` plus ``python3``) from the Debian mirror this host's apt is configured
    with, trims it (apt caches, docs, locales) and imports it as a single-layer image
    (``docker import``). Why this route: it needs only Debian's own tools and mirror (reachable
    here, unlike any image registry), the result is a real distribution Python of the same
    minor version as the host's Debian ``python3`` (so wheels fetched on the host fit), and it
    takes about a minute. The image is tagged :data:`BASE_IMAGE` and labelled with a content
    hash of (suite, package list, recipe version): an existing image with the same hash is
    reused.

Task images
    :func:`task_image` derives an image that adds a record's ``package_downloads``. The wheels
    are resolved on the host by ``pip install --target`` with the host's pip configuration
    (its index) for the image's Python version and manylinux platforms, then copied into
    ``/usr/lib/ianvs-packages`` by a ``docker build`` without network. Test containers never
    install anything. Task images are cached by a content hash of (base image id, sorted
    package specs) and tagged ``ianvs-sandbox/task:<hash>``.

Repository images
    :func:`env_image` derives, by the same route, an image with a repository's pinned
    requirements plus the test tools (the repo kind's ``docker`` environment), tagged
    ``ianvs-sandbox/repo-env:<hash>``; every image built with packages records their
    ``pip freeze --all`` on the label :data:`PINS_LABEL` (:func:`image_pins`).

Every image, container and build this module makes carries the label :data:`LABEL` (and
``io.ianvs.kind``); :func:`sweep` removes them by label.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping

from .owners import pid_alive
from .types import SandboxError

__all__ = ["DEFAULT_DOCKER_HOST", "BASE_IMAGE", "LABEL", "PACKAGES_DIR", "ImageError",
           "connect", "build_base_image", "task_image", "env_image", "image_pins", "image_python", "run_in_image", "sweep",
           "parse_package_downloads", "host_debian_mirror"]

LOGGER = logging.getLogger(__name__)

#: the project's own daemon (see ``.ci/docker-engine.sh``); an explicit option, never guessed
DEFAULT_DOCKER_HOST = "unix:///run/ianvs-docker.sock"
BASE_IMAGE = "ianvs-sandbox/python:base"
TASK_REPO = "ianvs-sandbox/task"
#: repository environments (:func:`env_image`)
ENV_REPO = "ianvs-sandbox/repo-env"
#: label on everything the backend creates (value "1"); sweeping goes by it
LABEL = "io.ianvs.sandbox"
KIND_LABEL = "io.ianvs.kind"
HASH_LABEL = "io.ianvs.content-hash"
PYTHON_LABEL = "io.ianvs.python"
#: JSON list of the ``pip freeze --all`` lines of the packages an image added
PINS_LABEL = "io.ianvs.pins"
#: where a task image keeps its packages (under /usr: readable through the Landlock policy)
PACKAGES_DIR = "/usr/lib/ianvs-packages"
#: ``<host>:<pid>`` of the process that started a container (sweeping spares live owners)
OWNER_LABEL = "io.ianvs.owner"
#: non-root uid:gid of the images (their ``USER``, passwd entry ``ianvs``) and of one-off checks
#: (:func:`run_in_image`). The fork server's containers start as root instead and switch every
#: process to a leased uid of its own (``container.START_USER``, docs/sandbox.md)
CONTAINER_USER = "10001:10001"
_RECIPE = 1  # bump when the base recipe changes (changes the content hash)
_ENV_RECIPE = 2  # the same for repository images (2: bytecode compiled in the image)
_TRIM = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
         "usr/share/locale", "usr/share/info")
_PYPI_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?([<>=!~]=?[A-Za-z0-9.*+!-]+)?$")
_IMPORT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def owner_alive(labels: Mapping[str, str]) -> bool:
    """Whether the ``ianvs`` process that started a container may still use it. Containers of
    another host (an engine shared over a socket) are never judged dead here; containers
    without an owner label (checks, builds) count as dead."""
    host, _, pid = str(labels.get(OWNER_LABEL, "")).rpartition(":")
    if host and host != socket.gethostname():
        return True
    return pid.isdigit() and pid_alive(int(pid))



class ImageError(SandboxError):
    """An image is missing or cannot be built (the message says what to do)."""


def connect(docker_host: str = DEFAULT_DOCKER_HOST, timeout: float = 60.0) -> Any:
    """A ``docker.DockerClient`` for ``docker_host`` that answered a ping.

    Raises :class:`ImageError` (with the fix) when the SDK is missing or the daemon does not
    answer.
    """
    try:
        import docker
    except ImportError:
        raise ImageError("the docker backend needs the docker SDK: pip install "
                         "'ianvs-smart-coding[docker]'") from None
    try:
        client = docker.DockerClient(base_url=docker_host, version="auto", timeout=timeout)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any SDK/transport error means the same here
        raise ImageError(f"no Docker engine answers at {docker_host} ({type(exc).__name__}: {exc}); "
                         "start one with .ci/docker-engine.sh (as root) or set the sandbox "
                         "option docker_host") from None
    return client


def owner() -> str:
    """The value of :data:`OWNER_LABEL` for containers this process starts."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _labels(kind: str, content_hash: str = "", **extra: str) -> dict[str, str]:
    labels = {LABEL: "1", KIND_LABEL: kind, **extra}
    if content_hash:
        labels[HASH_LABEL] = content_hash
    return labels


def _find_image(client: Any, ref: str) -> Any | None:
    import docker.errors

    try:
        return client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None


def image_python(image: Any) -> str:
    """``"3.11"``: the Python version recorded on a base or task image (``""`` when unknown)."""
    return str((image.labels or {}).get(PYTHON_LABEL, ""))


# ------------------------------------------------------------------------------------ base image
def host_debian_mirror() -> tuple[str, str]:
    """(mirror URL, suite) of this host's apt configuration: the first Debian ``main`` source
    that is not the security archive, and the release codename from ``/etc/os-release``."""
    suite = ""
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                suite = line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    uris: list[str] = []
    sources = Path("/etc/apt/sources.list.d")
    for path in sorted(sources.glob("*.sources")) if sources.is_dir() else []:
        text = path.read_text(errors="replace")
        for stanza in text.split("\n\n"):
            fields = dict(line.split(":", 1) for line in stanza.splitlines() if ":" in line
                          and not line.startswith("#"))
            if "main" in fields.get("Components", "") and "Suites" in fields:
                uris += fields.get("URIs", "").split()
    try:
        for line in Path("/etc/apt/sources.list").read_text().splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[0] == "deb" and "main" in parts[3:]:
                uris.append(parts[1] if not parts[1].startswith("[") else parts[2])
    except OSError:
        pass
    uris = [u for u in uris if "security" not in u and "debian" in u]
    if not uris or not suite:
        raise ImageError("cannot find a Debian mirror and release in this host's apt "
                         "configuration; pass --mirror URL --suite NAME")
    return uris[0], suite


def build_base_image(client: Any, mirror: str | None = None, suite: str | None = None,
                     force: bool = False, tag: str = BASE_IMAGE) -> str:
    """Build (or reuse) the base Python image; returns its id. Needs root and ``debootstrap``.

    Raises :class:`ImageError` naming what is missing (root, debootstrap, the mirror).
    """
    if mirror is None or suite is None:
        host_mirror, host_suite = host_debian_mirror()
        mirror, suite = mirror or host_mirror, suite or host_suite
    content = hashlib.sha256(json.dumps(["debootstrap-minbase", suite, ["python3"], _RECIPE])
                             .encode()).hexdigest()[:16]
    old = _find_image(client, tag)
    if old is not None and not force and (old.labels or {}).get(HASH_LABEL) == content:
        LOGGER.info("base image %s is up to date (%s)", tag, old.short_id)
        return str(old.id)
    if os.geteuid() != 0:
        raise ImageError("building the base image needs root (debootstrap); run "
                         "'ianvs sandbox image build' as root")
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise ImageError("debootstrap is missing: apt-get install debootstrap")
    work = Path(tempfile.mkdtemp(prefix="ianvs-rootfs-", dir="/var/tmp"))
    try:
        root = work / "rootfs"
        LOGGER.info("debootstrap %s from %s into %s (about a minute)", suite, mirror, root)
        proc = subprocess.run([debootstrap, "--variant=minbase", "--include=python3", suite,
                               str(root), mirror], capture_output=True, text=True)
        if proc.returncode != 0:
            raise ImageError(f"debootstrap failed ({proc.returncode}): "
                             f"{(proc.stderr or proc.stdout).strip()[-800:]}")
        for rel in _TRIM:
            target = root / rel
            if target.is_dir():
                for child in target.iterdir():
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink(missing_ok=True)
        uid, gid = CONTAINER_USER.split(":")
        with open(root / "etc/passwd", "a") as fh:
            fh.write(f"ianvs:x:{uid}:{gid}:ianvs sandbox:/tmp:/usr/sbin/nologin\n")
        with open(root / "etc/group", "a") as fh:
            fh.write(f"ianvs:x:{gid}:\n")
        (root / PACKAGES_DIR.lstrip("/")).mkdir(parents=True, exist_ok=True)
        pythons = sorted(p.name for p in (root / "usr/bin").glob("python3.*")
                         if re.fullmatch(r"python3\.\d+", p.name))
        if not pythons:
            raise ImageError("debootstrap produced no python3 interpreter")
        version = pythons[-1].removeprefix("python")
        archive = work / "rootfs.tar"
        subprocess.run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(archive), "."],
                       check=True, capture_output=True)
        changes = [f"LABEL {k}={v}" for k, v in _labels("base", content, **{PYTHON_LABEL: version}).items()]
        changes += ["ENV LANG=C.UTF-8", f"USER {CONTAINER_USER}", "WORKDIR /tmp",
                    'CMD ["python3"]']
        repo, _, name = tag.rpartition(":")
        out = client.api.import_image(src=str(archive), repository=repo, tag=name, changes=changes)
        LOGGER.debug("import: %s", out)
        image = _find_image(client, tag)
        if image is None:
            raise ImageError(f"docker import did not create {tag}: {out}")
        if old is not None and old.id != image.id:
            _remove_image(client, old.id)
        LOGGER.info("built base image %s (%s, Python %s)", tag, image.short_id, version)
        return str(image.id)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ------------------------------------------------------------------------------------ task images
def parse_package_downloads(value: Any, where: str) -> dict[str, str]:
    """``package_downloads`` (import name -> PyPI name, or null when equal) as a checked dict
    ``import name -> pip requirement``. Raises ``ValueError`` naming ``where`` and the entry."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{where}: package_downloads must map import names to PyPI names "
                         f"(or null), got {type(value).__name__}")
    out: dict[str, str] = {}
    for module, dist in value.items():
        if not isinstance(module, str) or not _IMPORT_NAME.match(module):
            raise ValueError(f"{where}: package_downloads key {module!r} is not an import name")
        spec = module.split(".")[0] if dist is None else dist
        if not isinstance(spec, str) or not _PYPI_NAME.match(spec.strip()):
            raise ValueError(f"{where}: package_downloads[{module!r}] = {dist!r} is not a PyPI "
                             "package name (optionally with a version, e.g. 'numpy==1.26.4')")
        out[module] = spec.strip()
    return out


def _platforms(python: str) -> list[str]:
    """manylinux tags a bookworm-era glibc (2.36) accepts, newest first."""
    arch = os.uname().machine
    return [f"manylinux_2_{minor}_{arch}" for minor in range(36, 16, -1)] + [
        f"manylinux2014_{arch}"]


def task_image(client: Any, base: str, packages: Mapping[str, str]) -> str:
    """The tag of ``base`` plus ``packages`` (``import name -> pip requirement``), built on
    first use and then reused by content hash. ``base`` itself when ``packages`` is empty.

    Raises :class:`ImageError` naming the package when pip cannot resolve it from the host's
    index, or when the built image cannot import a declared module.
    """
    base_image = _require_image(client, base)
    if not packages:
        return base
    specs = sorted(set(packages.values()))
    content = hashlib.sha256(json.dumps([base_image.id, specs]).encode()).hexdigest()[:16]
    tag = f"{TASK_REPO}:{content}"
    if _find_image(client, tag) is not None:
        return tag
    _build_with_packages(client, base, base_image, specs, tag, _labels("task", content))
    _check_imports(client, tag, list(packages))
    return tag


def env_image(client: Any, base: str, requirements: list[str], tools: list[str]) -> str:
    """The tag of ``base`` plus a repository environment: ``requirements`` (a repository's pinned
    requirements) and ``tools`` (the test tools every repository environment has), installed
    into :data:`PACKAGES_DIR` exactly like :func:`task_image`'s packages (wheels resolved by
    the host's pip for the image's Python, copied in by a build without network).

    Built on first use, then reused by content hash of (base image id, sorted requirements and
    tools); tagged ``ianvs-sandbox/repo-env:<hash>`` and labelled like every image here, plus
    :data:`PINS_LABEL`: the installed distributions as ``pip freeze --all`` lists them
    (:func:`image_pins` reads it back). The built image must import ``pytest``.

    Raises :class:`ImageError` naming the requirements when pip cannot resolve them (e.g. a
    package with no wheel for the image's Python) or the image cannot import pytest.
    """
    base_image = _require_image(client, base)
    specs = sorted(set(requirements) | set(tools))
    content = hashlib.sha256(json.dumps(["repo-env", _ENV_RECIPE, base_image.id, specs]).encode()).hexdigest()[:16]
    tag = f"{ENV_REPO}:{content}"
    if _find_image(client, tag) is not None:
        return tag
    _build_with_packages(client, base, base_image, specs, tag, _labels("repo-env", content), compile_bytecode=True)
    _check_imports(client, tag, ["pytest"])
    return tag


def image_pins(client: Any, tag: str) -> list[str]:
    """The ``pip freeze`` lines recorded on an image made by :func:`env_image` (``[]`` for any
    other image)."""
    image = _require_image(client, tag)
    try:
        pins = json.loads((image.labels or {}).get(PINS_LABEL, "[]"))
    except ValueError:
        return []
    return [str(p) for p in pins] if isinstance(pins, list) else []


def _require_image(client: Any, ref: str) -> Any:
    image = _find_image(client, ref)
    if image is None:
        raise ImageError(f"image {ref!r} does not exist on the Docker engine; build the base "
                         "image with 'ianvs sandbox image build' or name an existing image")
    return image


def _build_with_packages(client: Any, base: str, base_image: Any, specs: list[str], tag: str,
                         labels: dict[str, str], compile_bytecode: bool = False) -> None:
    """Resolve ``specs`` on the host (wheels only, for the image's Python and platforms) and
    build ``tag`` = ``base`` + those packages in :data:`PACKAGES_DIR`, labelled ``labels`` plus
    the Python version and the installed distributions (:data:`PINS_LABEL`).

    ``compile_bytecode``: the build also compiles the packages with the image's own Python
    (``compileall``, hash-based ``.pyc`` that are never re-checked against sources). Without it
    every process in a read-only container compiles each module it imports again; for a heavy
    stack (scikit-learn, pandas, scipy) that is most of a short test run."""
    python = image_python(base_image) or f"{sys.version_info.major}.{sys.version_info.minor}"
    work = Path(tempfile.mkdtemp(prefix="ianvs-task-image-"))
    try:
        target = work / "packages"
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               "--no-compile", "--target", str(target), "--only-binary=:all:",
               "--python-version", python, "--implementation", "cp"]
        for plat in _platforms(python):
            cmd += ["--platform", plat]
        LOGGER.info("fetching %s for image %s (Python %s)", ", ".join(specs), tag, python)
        proc = subprocess.run([*cmd, *specs], capture_output=True, text=True)
        if proc.returncode != 0:
            raise ImageError(f"cannot fetch package(s) {', '.join(specs)} for Python {python} "
                             f"from the configured package index: "
                             f"{(proc.stderr or proc.stdout).strip()[-600:]}")
        freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--all", "--path", str(target)],
                                capture_output=True, text=True)
        pins = sorted(line for line in freeze.stdout.splitlines() if line.strip())
        steps = [f"FROM {base}", f"COPY --chown=0:0 packages {PACKAGES_DIR}"]
        if compile_bytecode:  # files a Python 3 cannot compile (bundled py2 examples) are skipped
            steps += ["USER 0:0", f"RUN python3 -m compileall -q -j 0 --invalidation-mode unchecked-hash "
                                  f"{PACKAGES_DIR} || true", f"USER {CONTAINER_USER}"]
        (work / "Dockerfile").write_text("\n".join(steps) + "\n")
        try:
            client.images.build(path=str(work), tag=tag, network_mode="none", rm=True,
                                forcerm=True, pull=False,
                                labels={**labels, PYTHON_LABEL: python, PINS_LABEL: json.dumps(pins)})
        except Exception as exc:  # noqa: BLE001 - docker.errors.BuildError / APIError
            raise ImageError(f"building image {tag} failed: {exc}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_in_image(client: Any, tag: str, code: str, timeout: float = 120.0) -> str:
    """Run ``python3 -I -c code`` once in ``tag`` (no network, :data:`CONTAINER_USER`,
    labelled) and return its output. Raises :class:`ImageError` with the output's tail when it
    exits non-zero or the image does not exist."""
    import docker.errors

    try:
        container = client.containers.create(tag, ["python3", "-I", "-c", code], network_mode="none",
                                             labels=_labels("check", **{OWNER_LABEL: owner()}),
                                             user=CONTAINER_USER)
    except docker.errors.ImageNotFound:
        raise ImageError(f"image {tag!r} does not exist on the Docker engine") from None
    try:
        container.start()
        status = container.wait(timeout=timeout)
        logs = container.logs().decode("utf-8", "replace").strip()
    finally:
        container.remove(force=True)
    if status.get("StatusCode") != 0:
        raise ImageError(f"python3 in {tag} exited with status {status.get('StatusCode')}: {logs[-600:]}")
    return logs


def _check_imports(client: Any, tag: str, modules: list[str]) -> None:
    """Run the image once (no network) and import every declared module; a failing image is
    removed."""
    code = ("import importlib, sys\nsys.path.append(%r)\nbad = []\nfor m in %r:\n"
            "    try:\n        importlib.import_module(m)\n"
            "    except Exception as e:\n        bad.append(f'{m}: {e!r}')\n"
            "print('\\n'.join(bad))\nsys.exit(1 if bad else 0)\n") % (PACKAGES_DIR, modules)
    try:
        run_in_image(client, tag, code)
    except ImageError as exc:
        _remove_image(client, tag)
        raise ImageError(f"image {tag} cannot import {', '.join(modules)}: {exc}") from None


def _remove_image(client: Any, ref: str) -> None:
    try:
        client.images.remove(ref, force=True, noprune=False)
    except Exception as exc:  # noqa: BLE001 - in use or already gone
        LOGGER.debug("could not remove image %s: %s", ref, exc)


# ------------------------------------------------------------------------------------ sweeping
def sweep(client: Any, images: bool = False, owner_alive: Any = None,
          containers_only: bool = False) -> dict[str, int]:
    """Remove what the backend left behind, found by :data:`LABEL`.

    Containers are removed (killed first) unless ``owner_alive(labels)`` says their owner
    process still runs; then (unless ``containers_only``: what an executor sweeps at start, so a
    build of another run on this machine never loses its intermediate images) unused labelled
    volumes and dangling labelled images; with ``images=True`` also the base and task images.
    Returns counts by kind.
    """
    counts = {"containers": 0, "volumes": 0, "images": 0}
    for container in client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True):
        if owner_alive is not None and owner_alive(container.labels or {}):
            continue
        try:
            container.remove(force=True)
            counts["containers"] += 1
        except Exception as exc:  # noqa: BLE001 - removed concurrently (auto-remove)
            LOGGER.debug("sweep: %s: %s", container.short_id, exc)
    if containers_only:
        return counts
    for volume in client.volumes.list(filters={"label": LABEL}):
        try:
            volume.remove(force=True)
            counts["volumes"] += 1
        except Exception as exc:  # noqa: BLE001
            LOGGER.debug("sweep: volume %s: %s", volume.name, exc)
    filters: dict[str, Any] = {"label": LABEL}
    for image in client.images.list(filters={**filters, "dangling": True}):
        _remove_image(client, image.id)
        counts["images"] += 1
    if images:
        for image in client.images.list(filters=filters):
            _remove_image(client, image.id)
            counts["images"] += 1
    return counts
