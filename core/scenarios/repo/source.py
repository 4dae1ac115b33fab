"""Materialise a repository from a git directory/bundle, an sdist archive, a folder, or one
tree of a roots bundle (``<file>.bundle#<name>``: the tree of ``refs/roots/<name>`` in that
bundle, :mod:`core.scenarios.trajectories.roots`).

The copy lives in a fresh directory the caller owns. Identity recorded per task: ``name``,
``origin`` (the file or directory name given; never a host path), ``commit`` (git only, else ``None``) and ``content_hash`` (sha256
over the sorted relative paths and bytes of every file, ``.git`` excluded), so a dataset can be
rebuilt and checked against the same tree.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from core.common.errors import IanvsError

__all__ = ["RepoSource", "materialise", "content_hash", "RepoSourceError", "ROOTS_REF",
           "bundle_tree"]

#: the refs of a roots bundle: one per task root, ``refs/roots/<name>``
ROOTS_REF = "refs/roots/"


class RepoSourceError(IanvsError):
    """The ``--repo`` argument is not a git directory/bundle, sdist or folder."""


@dataclass(frozen=True)
class RepoSource:
    name: str
    origin: str
    root: Path
    commit: str | None
    content_hash: str

    def identity(self) -> dict[str, str | None]:
        return {"name": self.name, "origin": self.origin, "commit": self.commit,
                "content_hash": self.content_hash}


def content_hash(root: Path) -> str:
    """sha256 over sorted (relative path, bytes) of all files under ``root`` except ``.git``."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in (".git", "__pycache__"))
        for fname in sorted(filenames):
            path = Path(dirpath, fname)
            if path.is_symlink() or path.suffix == ".pyc":
                continue
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def _git(*args: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def materialise(spec: str, dest: Path, rev: str | None = None) -> RepoSource:
    """Copy the repository named by ``spec`` into ``dest/<name>`` and describe it.

    ``spec`` is a git work tree or bare dir (``rev`` or HEAD is checked out), a ``.bundle`` file,
    an sdist (``.tar.gz``/``.tgz``/``.zip``; its single top directory becomes the root), a
    plain folder, or ``<roots>.bundle#<name>`` (the tree of ``refs/roots/<name>``, materialised
    as ``dest/<name>``). Raises :class:`RepoSourceError` for anything else.
    """
    in_bundle = bundle_tree(str(spec))
    if in_bundle is not None:
        return _from_roots_bundle(*in_bundle, dest)
    src = Path(spec).expanduser().resolve()
    if not src.exists():
        raise RepoSourceError(f"--repo {spec}: no such file or directory")
    commit: str | None = None
    is_git = src.suffix == ".bundle" or (src.is_dir() and ((src / ".git").exists() or (src / "HEAD").is_file()))
    if is_git:
        name = src.stem if src.suffix == ".bundle" else src.name.removesuffix(".git")
        root = dest / name
        _git("clone", "-q", str(src), str(root))
        if rev:
            _git("checkout", "-q", rev, cwd=root)
        commit = _git("rev-parse", "HEAD", cwd=root)
    elif src.is_file() and src.name.endswith((".tar.gz", ".tgz", ".zip")):
        out = dest / "_extract"
        out.mkdir(parents=True)
        if src.suffix == ".zip":
            with zipfile.ZipFile(src) as zf:
                zf.extractall(out)
        else:
            with tarfile.open(src) as tf:
                tf.extractall(out, filter="data")
        tops = list(out.iterdir())
        inner = tops[0] if len(tops) == 1 and tops[0].is_dir() else out
        name = inner.name if inner is not out else src.name.split(".")[0]
        root = dest / name
        inner.rename(root)
        shutil.rmtree(out, ignore_errors=True)
    elif src.is_dir():
        name = src.name
        root = dest / name
        shutil.copytree(src, root, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        raise RepoSourceError(f"--repo {spec}: expected a git directory, a .bundle, an sdist "
                              "(.tar.gz/.zip) or a folder")
    return RepoSource(name=name, origin=src.name, root=root, commit=commit, content_hash=content_hash(root))


def bundle_tree(spec: str) -> tuple[Path, str] | None:
    """``(bundle, name)`` when ``spec`` names one tree of a roots bundle
    (``<file>.bundle#<name>``, ``name`` without ``/``), else None."""
    path, sep, name = spec.rpartition("#")
    if sep and path.endswith(".bundle") and name and "/" not in name and not name.startswith("."):
        return Path(path).expanduser().resolve(), name
    return None


@functools.lru_cache(maxsize=16)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    """The first 16 hex digits of the SHA-256 of a file, read once per (path, size, mtime) in
    this process: each root of a bundle asks for its bundle's digest."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _roots_repo(bundle: Path) -> Path:
    """A bare repository with every ``refs/roots/*`` of ``bundle``, fetched once per bundle
    content and kept in the cache (``$XDG_CACHE_HOME/ianvs-smart-coding/roots-git/<hash>``), so
    that reading many roots indexes the bundle once, not once per root."""
    stat = bundle.stat()
    digest = _file_digest(str(bundle), stat.st_size, stat.st_mtime_ns)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    base = cache / "ianvs-smart-coding" / "roots-git" / digest
    if (base / "ianvs-complete").is_file():
        return base
    base.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=base.parent))
    try:
        _git("init", "-q", "--bare", str(tmp))
        try:
            _git("--git-dir", str(tmp), "fetch", "-q", str(bundle),
                 f"{ROOTS_REF}*:{ROOTS_REF}*")
        except subprocess.CalledProcessError as exc:
            raise RepoSourceError(f"roots bundle {bundle.name} cannot be read "
                                  f"({(exc.stderr or '').strip()[:200]})") from exc
        (tmp / "ianvs-complete").write_text(bundle.name + "\n")
        try:
            tmp.rename(base)
        except OSError:  # another process finished first: use its copy
            if not (base / "ianvs-complete").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return base


def _from_roots_bundle(bundle: Path, name: str, dest: Path) -> RepoSource:
    """The tree of ``refs/roots/<name>`` in ``bundle``, written to ``dest/<name>`` (``git
    archive`` from the bundle's cached repository, :func:`_roots_repo`)."""
    if not bundle.is_file():
        raise RepoSourceError(f"roots bundle {bundle}: no such file")
    repo = _roots_repo(bundle)
    root = dest / name
    try:
        commit = _git("--git-dir", str(repo), "rev-parse", "--verify", "-q",
                      f"{ROOTS_REF}{name}^{{commit}}")
    except subprocess.CalledProcessError as exc:
        raise RepoSourceError(f"roots bundle {bundle.name} has no root {name!r}") from exc
    archive = subprocess.run(["git", "--git-dir", str(repo), "archive", "--format=tar", commit],
                             check=True, capture_output=True).stdout
    root.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tf:
        tf.extractall(root, filter="data")
    return RepoSource(name=name, origin=f"{bundle.name}#{name}", root=root, commit=commit,
                      content_hash=content_hash(root))
