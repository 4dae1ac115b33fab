"""Commits of a range and what each changed, read with the git command.

* :func:`walk` -- the commits reachable from some tips (oldest first, topological order, so a
  parent always comes before its children), optionally within a committer-date window, with
  identity, parents, author, times and message (one ``git log`` call);
* :func:`changes` -- the files a commit changed (status, rename source, line counts, binary);
* :func:`diff_text` -- its unified diff against the first parent (a merge: git's combined
  ``--cc`` diff, i.e. only what the merge itself resolved), bounded in bytes at a line boundary;
* :func:`whitespace_only` / :func:`merge_only` -- the two content tests the filters need.
"""
from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from dataclasses import dataclass, field

from core.scenarios.trajectories.git import EMPTY_TREE, GitRepo

__all__ = ["Commit", "FileChange", "walk", "changes", "diff_text", "whitespace_only",
           "merge_only", "is_test_path", "TEST_PATTERNS"]

_FS, _RS = "\x1f", "\x00"
_FORMAT = _FS.join(["%H", "%P", "%an", "%ae", "%aI", "%cn", "%ce", "%cI", "%B"])

#: paths counted as tests (``tests_touched``): fnmatch patterns on the path and on its name
TEST_PATTERNS = ("test_*.py", "*_test.py", "tests.py", "conftest.py", "*/tests/*", "tests/*",
                 "*/test/*", "test/*", "*/testing/*", "*.test.js", "*.spec.js", "*_test.go")


def is_test_path(path: str) -> bool:
    """True when ``path`` is a test file by name or folder (:data:`TEST_PATTERNS`)."""
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(path, p) or fnmatch.fnmatchcase(name, p) for p in TEST_PATTERNS)


@dataclass(frozen=True)
class Commit:
    """One commit's identity and metadata (times are ISO 8601 with the recorded offset)."""

    sha: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    authored_at: str
    committer_name: str
    committer_email: str
    committed_at: str
    message: str

    @property
    def is_merge(self) -> bool:
        return len(self.parents) > 1

    @property
    def subject(self) -> str:
        return self.message.strip().split("\n", 1)[0].strip()

    @property
    def base(self) -> str:
        """What the commit's diff is taken against: its first parent, or the empty tree."""
        return self.parents[0] if self.parents else EMPTY_TREE


@dataclass(frozen=True)
class FileChange:
    """One changed file: ``status`` is git's letter (A, M, D, R, C, T), ``old_path`` the rename
    or copy source (else None); binary files have ``binary`` set and 0 line counts."""

    path: str
    status: str
    additions: int
    deletions: int
    binary: bool
    old_path: str | None = None
    is_test: bool = field(default=False)

    def as_dict(self) -> dict[str, object]:
        return {"path": self.path, "old_path": self.old_path, "status": self.status,
                "additions": self.additions, "deletions": self.deletions, "binary": self.binary,
                "is_test": self.is_test}


def walk(repo: GitRepo, tips: list[str]) -> Iterator[Commit]:
    """Commits reachable from ``tips`` (commit ids), oldest first in topological order (a
    parent always before its children; git's order, so the same tips give the same order)."""
    out = repo.run("log", "-z", "--reverse", "--topo-order", f"--format={_FORMAT}", *tips, "--")
    for chunk in out.split(_RS):
        if not chunk.strip():
            continue
        parts = chunk.split(_FS, 8)
        sha, parents, an, ae, at, cn, ce, ct, message = parts
        yield Commit(sha.strip(), tuple(parents.split()), an, ae, at, cn, ce, ct, message)


def changes(repo: GitRepo, commit: Commit) -> list[FileChange]:
    """The files ``commit`` changed against :attr:`Commit.base` (renames detected), sorted by
    path. For a merge these are the changes against its first parent."""
    base = commit.base
    status_out = repo.run("diff-tree", "-r", "-M", "-z", "--no-commit-id", "--name-status",
                          base, commit.sha).split("\0")
    statuses: dict[str, tuple[str, str | None]] = {}
    i = 0
    while i < len(status_out) - 1:
        letter = status_out[i]
        if not letter:
            i += 1
            continue
        if letter[0] in "RC":
            statuses[status_out[i + 2]] = (letter[0], status_out[i + 1])
            i += 3
        else:
            statuses[status_out[i + 1]] = (letter[0], None)
            i += 2
    counts: dict[str, tuple[int, int, bool]] = {}
    num_out = repo.run("diff-tree", "-r", "-M", "-z", "--no-commit-id", "--numstat",
                       base, commit.sha).split("\0")
    i = 0
    while i < len(num_out):
        entry = num_out[i]
        if not entry:
            i += 1
            continue
        added, deleted, path = entry.split("\t", 2)
        if not path:  # a rename: the two paths follow as their own fields
            path = num_out[i + 2]
            i += 3
        else:
            i += 1
        binary = added == "-"
        counts[path] = (0 if binary else int(added), 0 if binary else int(deleted), binary)
    out = []
    for path, (status, old) in sorted(statuses.items()):
        add, dele, binary = counts.get(path, (0, 0, False))
        out.append(FileChange(path, status, add, dele, binary, old, is_test_path(path)))
    return out


def diff_text(repo: GitRepo, commit: Commit, max_bytes: int) -> tuple[str, int, bool]:
    """``(diff, full size in bytes, truncated)``: the unified diff (``-M``, 3 lines of context)
    against the first parent; for a merge, the combined ``--cc`` diff. Cut at the last line
    boundary within ``max_bytes`` (UTF-8) when longer."""
    if commit.is_merge:
        text = repo.run("diff-tree", "--cc", "--no-commit-id", "-p", commit.sha)
    else:
        text = repo.run("diff-tree", "-r", "-M", "--no-commit-id", "-p", "--no-color",
                        commit.base, commit.sha)
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, len(data), False
    cut = data[:max_bytes]
    nl = cut.rfind(b"\n")
    cut = cut[:nl + 1] if nl >= 0 else b""
    return cut.decode("utf-8", "ignore"), len(data), True


def whitespace_only(repo: GitRepo, commit: Commit, files: list[FileChange]) -> bool:
    """True when every change of a non-merge commit is a modification of a text file whose diff
    is empty once whitespace and blank lines are ignored (added, deleted, renamed or binary
    files are never whitespace-only)."""
    if commit.is_merge or not files or any(f.status != "M" or f.binary for f in files):
        return False
    text = repo.run("diff-tree", "-r", "--no-commit-id", "-p", "-w", "--ignore-blank-lines",
                    commit.base, commit.sha)
    return not any(line.startswith("@@") for line in text.splitlines())


def merge_only(repo: GitRepo, commit: Commit) -> bool:
    """True for a merge that changes nothing beyond what its parents bring (git's combined
    ``--cc`` diff is empty: no conflict resolution, no change of its own)."""
    if not commit.is_merge:
        return False
    text = repo.run("diff-tree", "--cc", "--no-commit-id", "-p", commit.sha)
    return not any(line.startswith("@@") for line in text.splitlines())
