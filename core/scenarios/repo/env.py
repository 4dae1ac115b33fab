"""A cached virtual environment per repository, in which its own tests run offline.

``ensure_env(cache_dir, key, requirements)`` creates ``<cache_dir>/<key>`` once (``python -m venv``
plus ``pip install`` of the requirements and the test tools), and returns a :class:`RepoEnv` whose
``pins`` (``pip freeze``) are recorded in every task so a dataset can be rebuilt identically. A
``--env`` pointing at an existing venv is used as is. Installing needs the package index; running
the tests afterwards does not.

An environment must not provide the repository's own package (installed, or an editable install
pointing at a checkout): samples read the environment, so it would hold the original of every
function they must write. :meth:`RepoEnv.provides` (and
:func:`.image_env.image_provides` for images) says which of a list of modules it provides;
:func:`.execute.run_samples` refuses such an environment.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.common.errors import IanvsError

__all__ = ["RepoEnv", "ensure_env", "record_env", "write_metadata_stub", "default_cache_dir", "TEST_TOOLS", "provides_probe"]

LOG = logging.getLogger(__name__)

#: Installed in every repository environment (the builder needs coverage contexts and junit XML).
TEST_TOOLS = ["pytest==8.3.4", "pytest-cov==6.0.0", "coverage==7.6.10"]


_PROBE = r"""
import importlib.util, json, os, sys, sysconfig
sys.path[:0] = %r
std = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")}
def in_stdlib(path):
    path = os.path.realpath(path)
    return (any(path == s or path.startswith(s + os.sep) for s in std)
            and not any(part.endswith("-packages") for part in path.split(os.sep)))
found = {}
for name in %r:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        continue
    places = [p for p in [*(spec.submodule_search_locations or []), spec.origin or ""] if os.path.isabs(p)]
    outside = [p for p in places if not in_stdlib(p)]
    if outside:
        found[name] = outside[0]
print(json.dumps({"found": found, "prefixes": sorted({sys.prefix, sys.base_prefix})}))
"""


def provides_probe(modules: list[str], path: list[str] | None = None) -> str:
    """Python source that prints one JSON line: ``found`` maps each of ``modules`` (top-level
    names) that the interpreter running it can import from outside its standard library
    (site-packages, a ``.pth`` or editable-install path, ``path`` put first on ``sys.path``) to
    where; ``prefixes`` are its ``sys.prefix`` and ``sys.base_prefix``. Imports nothing of
    those modules (``importlib.util.find_spec`` of top-level names runs no module code)."""
    return _PROBE % (list(path or []), list(modules))


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ianvs-smart-coding" / "repo-envs"


@dataclass(frozen=True)
class RepoEnv:
    """A venv on this machine (the ``local`` backend's repository environment)."""

    root: Path
    pins: list[str]

    backend = "local"

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def site_packages(self) -> str:
        out = subprocess.run([str(self.python), "-c", "import sysconfig;print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True)
        return out.stdout.strip()

    def provides(self, modules: list[str]) -> tuple[dict[str, str], list[str]]:
        """``({module: where}, prefixes)``: which of ``modules`` this environment's interpreter
        imports from outside its standard library (run isolated, from ``/``: never the current
        directory), and its ``sys.prefix``/``sys.base_prefix``. Raises :class:`IanvsError` when
        the interpreter cannot run the probe."""
        try:
            out = subprocess.run([str(self.python), "-I", "-c", provides_probe(modules)], check=True,
                                 capture_output=True, text=True, cwd="/", timeout=120,
                                 env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"})
            facts = json.loads(out.stdout.strip().splitlines()[-1])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
            raise IanvsError(f"cannot inspect the repository environment {self.root}: {exc}",
                             hint="rebuild it (remove the folder; it is created again on the next run)") from None
        return {str(k): str(v) for k, v in facts["found"].items()}, [str(p) for p in facts["prefixes"]]


def _freeze(python: Path, exclude: str | None = None) -> list[str]:
    out = subprocess.run([str(python), "-m", "pip", "freeze", "--all"], check=True, capture_output=True, text=True)
    skip = re.sub(r"[-_.]+", "-", exclude).lower() + "==" if exclude else None
    return sorted(line for line in out.stdout.splitlines() if line and not line.startswith("-e ")
                  and not (skip and re.sub(r"[-_.]+", "-", line.split("==")[0]).lower() + "==" == skip))


def write_metadata_stub(site_packages: Path, stub: dict[str, str]) -> Path:
    """A metadata-only distribution of the package under test in ``site_packages``:
    ``<name>-<version>.dist-info`` with ``METADATA`` (name and version only) and the package's
    ``entry_points.txt``, no module. ``importlib.metadata.version(name)`` and entry points
    (pytest plugins) then work as if the package were installed, while its code still comes only
    from the tree (or a sample's view): :meth:`RepoEnv.provides` finds no module."""
    name = re.sub(r"[-_.]+", "_", stub["name"])
    info = site_packages / f"{name}-{stub['version']}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {stub['name']}\nVersion: {stub['version']}\n")
    (info / "INSTALLER").write_text("ianvs-repo-builder\n")
    (info / "RECORD").write_text("")
    if stub.get("entry_points"):
        (info / "entry_points.txt").write_text(stub["entry_points"])
    return info


def ensure_env(requirements: list[str], cache_dir: Path | None = None, existing: Path | None = None,
               project: dict[str, str] | None = None) -> RepoEnv:
    """Return the environment for ``requirements`` (created and cached on first use).

    The cache key is a hash of the requirements, the test tools, ``project`` (the package under
    test's metadata stub, :func:`write_metadata_stub`; the tasks' ``env.project``) and this
    interpreter's version, so two repositories with the same pins and no stub share one venv. A
    half-built venv (no ``.complete`` marker) is rebuilt. An ``existing`` venv is used as it is
    (no stub is written into it).
    """
    if existing is not None:
        return RepoEnv(existing, _freeze(existing / "bin" / "python"))
    reqs = sorted(set(requirements) | set(TEST_TOOLS))
    keyed: list[object] = [sys.version, reqs] if not project else [sys.version, reqs, project]
    key = hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:16]
    root = (cache_dir or default_cache_dir()) / key
    marker = root / ".complete"
    if not marker.exists():
        LOG.info("creating repository environment %s (%s)", root, ", ".join(reqs))
        try:
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True,
                           capture_output=True, text=True)
            subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "-q",
                            "--disable-pip-version-check", *reqs], check=True, capture_output=True, text=True)
        except subprocess.CalledProcessError as exc:
            tail = (exc.stderr or exc.stdout or "").strip().splitlines()[-3:]
            raise IanvsError(f"could not create the repository environment {root}: "
                             f"{' | '.join(tail) or exc}",
                             hint="creating it installs the tasks' pinned requirements once, which needs "
                                  "the package index; later runs are offline") from None
        if project:
            write_metadata_stub(Path(RepoEnv(root, []).site_packages()), project)
        marker.write_text(json.dumps(reqs))
    return RepoEnv(root, _freeze(root / "bin" / "python", (project or {}).get("name")))


def record_env(record: Mapping[str, Any]) -> RepoEnv:
    """The environment a task record names (:func:`ensure_env`): its ``env.requirements``, with
    the metadata stub of ``env.project`` when it has one, as its builder validated it. Every
    reader of a record's environment (the jobs' grading, the gold controls) goes through here,
    so none can leave the stub out."""
    env = record.get("env") or {}
    return ensure_env(list(env.get("requirements") or []), project=env.get("project"))
