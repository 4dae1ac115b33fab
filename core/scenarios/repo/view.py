"""Copy-on-write view of a repository per sample: a hard-link farm where only edited files are copies.

``make_view(root, dest, edits, pinned)`` recreates ``root``'s directory tree under ``dest``,
hard-links every file (no data copied; O(files) metadata only) and writes each edited path as a
*new* file, first unlinking the link, so the source's inode is never written. Samples only read
their view (the sandbox lets them write nothing but their private working directory), so a
sample's edits never reach another sample or the source. Requires ``dest`` on the same file
system as ``root``; falls back to copying a file when linking fails (``EXDEV``).

Every path of ``edits`` and ``pinned`` must be canonical (:func:`relpath_problem`: one spelling
per file), so no two keys name one file and no key names a file the caller did not check.
``pinned`` paths are made what they are in ``root`` *after* the edits (re-linked from the
root, or removed when the root has no such file): the implement-change and revise kinds pin
their tasks' test side there, so even an edit that slipped past their checks cannot change it
(:mod:`core.scenarios.trajectories.implement_change.paths`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection, Mapping
from pathlib import Path

__all__ = ["make_view", "relpath_problem"]


def relpath_problem(rel: str) -> str | None:
    """Why ``rel`` is not the one canonical spelling of a relative file path, or None: it must be
    non-empty, relative, ``/``-separated segments that are neither empty (``a//b``, a trailing
    ``/``) nor ``.``/``..``, without backslashes, NUL or other control characters."""
    if not rel:
        return "an empty path"
    if any(ord(c) < 32 or c == "\x7f" for c in rel):
        return "a control character in the path"
    if "\\" in rel:
        return "a backslash in the path"
    if rel.startswith("/"):
        return "an absolute path"
    parts = rel.split("/")
    if "" in parts:
        return "an empty path segment ('//' or a trailing '/')"
    if "." in parts or ".." in parts:
        return "a '.' or '..' path segment"
    return None


def _checked(rel: str, dest: Path) -> Path:
    why = relpath_problem(rel)
    if why:
        raise ValueError(f"view path {rel!r}: {why}")
    path = dest / rel
    for parent in path.parents:
        if parent == dest:
            break
        if parent.is_symlink():  # never write through a link of the tree (the path itself is unlinked first)
            raise ValueError(f"view path {rel!r}: goes through the symbolic link {parent.relative_to(dest)}")
    return path


def _link(src: str, dst: Path) -> None:
    if os.path.islink(src):
        os.symlink(os.readlink(src), dst)
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def make_view(root: Path, dest: Path, edits: Mapping[str, str], pinned: Collection[str] = ()) -> Path:
    """Create the view at ``dest`` (must not exist) with ``edits`` (relative path -> text)
    applied, then every ``pinned`` path as it is in ``root`` (module docstring). Raises
    :class:`ValueError` for a path that is not canonical or goes through a symbolic link."""
    dest.mkdir(parents=True)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", "__pycache__")]
        rel = os.path.relpath(dirpath, root)
        target = dest if rel == "." else dest / rel
        for d in dirnames:
            (target / d).mkdir()
        for fname in filenames:
            _link(os.path.join(dirpath, fname), target / fname)
    for rel_path, text in edits.items():
        path = _checked(rel_path, dest)
        path.parent.mkdir(parents=True, exist_ok=True)  # a new file in a new folder
        path.unlink(missing_ok=True)  # break the hard link before writing: the source stays intact
        path.write_text(text)
    for rel_path in pinned:
        path = _checked(rel_path, dest)
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.is_symlink() or path.exists():
            path.unlink()
        src = root / rel_path
        if (src.is_file() or src.is_symlink()) and path.parent.is_dir():
            _link(str(src), path)
    return dest
