"""The git command as the one way this package reads history (never ``.git`` by hand).

:class:`GitRepo` wraps a repository directory and runs read-only ``git`` subcommands in it
(``rev-list``, ``log``, ``diff-tree``, ``show-ref``, ``merge-base``, ``show``). :func:`open_repo`
turns what the user names -- a work tree, a bare repository or a ``.bundle`` file -- into one:
a bundle is mirrored (``git clone --mirror``, every ref including ``refs/pull/*`` and tags) into
a directory the caller owns; a repository directory is used in place and never written.
"""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from core.common.errors import IanvsError

__all__ = ["GitError", "GitRepo", "open_repo", "EMPTY_TREE"]

#: the id of git's empty tree (the "parent" of a root commit in a diff)
EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"


class GitError(IanvsError):
    """A git command failed (its stderr's last line is in the message)."""


@dataclass(frozen=True)
class GitRepo:
    """A git repository directory (work tree or bare) and how to query it."""

    path: Path

    def run(self, *args: str, check: bool = True) -> str:
        """stdout of ``git <args>`` (text, UTF-8 with replacement). Raises :class:`GitError`."""
        proc = subprocess.run(["git", "-c", "core.quotepath=off", *args], cwd=self.path,
                              capture_output=True, check=False)
        if check and proc.returncode != 0:
            tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["(no output)"]
            raise GitError(f"git {' '.join(args[:3])} failed in {self.path}: {tail[0]}")
        return proc.stdout.decode("utf-8", "replace")

    def ok(self, *args: str) -> bool:
        """True when ``git <args>`` exits 0 (``merge-base --is-ancestor`` and the like)."""
        return subprocess.run(["git", *args], cwd=self.path, capture_output=True,
                              check=False).returncode == 0

    def resolve(self, rev: str) -> str:
        """The full commit id ``rev`` names. Raises :class:`GitError` naming the revision."""
        out = self.run("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False).strip()
        if not out:
            raise GitError(f"no commit {rev!r} in {self.path}",
                           hint="give --rev a branch, tag or commit id of this repository")
        return out

    def refs(self, prefix: str) -> dict[str, str]:
        """``{refname: commit}`` of the refs under ``prefix`` (e.g. ``refs/pull/``)."""
        out = self.run("for-each-ref", "--format=%(refname) %(objectname)", prefix)
        pairs = (line.split(" ", 1) for line in out.splitlines() if line)
        return {name: sha for name, sha in pairs}

    def show_file(self, commit: str, path: str) -> str | None:
        """Text of ``path`` at ``commit``, or None when it does not exist there."""
        proc = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=self.path,
                              capture_output=True, check=False)
        return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else None

    def ls_tree(self, commit: str) -> list[str]:
        """Every file path at ``commit`` (recursive, sorted as git lists them)."""
        return [p for p in self.run("ls-tree", "-r", "-z", "--name-only", commit).split("\0") if p]


def open_repo(spec: str | Path, workdir: Path) -> tuple[GitRepo, str]:
    """The repository named by ``spec`` and its origin (the file or directory *name*).

    ``spec`` is a work tree, a bare repository or a ``.bundle``; a bundle is mirrored into
    ``workdir/<name>.git`` (created by the caller, removed by the caller). Raises
    :class:`IanvsError` for anything else.
    """
    src = Path(spec).expanduser().resolve()
    if not src.exists():
        raise IanvsError(f"--repo {spec}: no such file or directory")
    if src.is_file() and src.suffix == ".bundle":
        dest = workdir / f"{src.stem}.git"
        proc = subprocess.run(["git", "clone", "-q", "--mirror", str(src), str(dest)],
                              capture_output=True, check=False)
        if proc.returncode != 0:
            raise GitError(f"--repo {spec}: not a readable git bundle: "
                           f"{proc.stderr.decode('utf-8', 'replace').strip()[-200:]}")
        return GitRepo(dest), src.name
    if src.is_dir():
        probe = subprocess.run(["git", "rev-parse", "--git-dir"], cwd=src, capture_output=True,
                               check=False)
        if probe.returncode == 0:
            return GitRepo(src), src.name
    raise IanvsError(f"--repo {spec}: expected a git work tree, a bare repository or a .bundle file")
