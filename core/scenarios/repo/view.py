"""Copy-on-write view of a repository per sample: a hard-link farm where only edited files are copies.

``make_view(root, dest, edits)`` recreates ``root``'s directory tree under ``dest``, hard-links every
file (no data copied; O(files) metadata only) and writes each edited path as a *new* file, first
unlinking the link, so the source's inode is never written. Samples only read their view (the
sandbox lets them write nothing but their private working directory), so a sample's edits never
reach another sample or the source. Requires ``dest`` on the same file system as ``root``; falls
back to copying a file when linking fails (``EXDEV``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["make_view"]


def make_view(root: Path, dest: Path, edits: dict[str, str]) -> Path:
    """Create the view at ``dest`` (must not exist) with ``edits`` (relative path -> text) applied."""
    dest.mkdir(parents=True)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", "__pycache__")]
        rel = os.path.relpath(dirpath, root)
        target = dest if rel == "." else dest / rel
        for d in dirnames:
            (target / d).mkdir()
        for fname in filenames:
            src = os.path.join(dirpath, fname)
            dst = target / fname
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
                continue
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)
    for rel_path, text in edits.items():
        path = dest / rel_path
        path.parent.mkdir(parents=True, exist_ok=True)  # a new file in a new folder
        path.unlink(missing_ok=True)  # break the hard link before writing: the source stays intact
        path.write_text(text)
    return dest
