"""Checks that run once per content: a record of what was verified, keyed by everything that can
change the result.

Some checks are expensive and depend only on inputs in this repository (the gold controls of a
shipped dataset: every task's reference passes and its blanked body fails, in the sandbox). They
must run whenever any of those inputs change, and need not run again when none did. A
:class:`Verified` key is the SHA-256 of the named input files' bytes, the source files of the named
packages (the grading code), the interpreter's version and any extra strings; a record is written
under ``~/.cache/ianvs-smart-coding/verified/`` (``XDG_CACHE_HOME`` respected) only after the check
passed. A test asks :meth:`Verified.recorded` first and skips with the record's date when the key
is known; ``pytest --recheck-verified`` ignores records.

What still catches a broken task: CI runs every check whose key it has not seen, so a changed
task record, shipped source, pin list, or any change to the grading code (the packages hashed)
runs the check in full; a fresh machine (an empty cache) runs all of them.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import pytest

REPO = Path(__file__).resolve().parents[1]


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "ianvs-smart-coding" / "verified"


def _package_files(package: Path) -> list[Path]:
    """Every file under ``package`` (a data folder's tasks and sources as much as a package's
    code), bytecode caches excepted."""
    return sorted(p for p in package.rglob("*") if p.is_file() and p.suffix != ".pyc"
                  and "__pycache__" not in p.parts)


@dataclass
class Verified:
    """One check's key. ``name`` names the record file; ``inputs`` are files or directories (every
    file under a directory counts, by path relative to the repository and content); ``extra`` any
    further strings that change the result (a grading version, a backend)."""

    name: str
    inputs: Iterable[Path]
    extra: Iterable[str] = ()
    key: str = field(init=False)

    def __post_init__(self) -> None:
        digest = hashlib.sha256()
        digest.update(sys.version.encode())
        for item in sorted(Path(p).resolve() for p in self.inputs):
            files = _package_files(item) if item.is_dir() else [item]
            for path in files:
                try:
                    rel = str(path.relative_to(REPO))
                except ValueError:
                    rel = str(path)
                digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
        for text in self.extra:
            digest.update(text.encode() + b"\0")
        self.key = digest.hexdigest()

    @property
    def path(self) -> Path:
        return cache_dir() / f"{self.name}-{self.key[:24]}.json"

    def recorded(self) -> dict[str, Any] | None:
        """The record of an earlier pass with this key, or None."""
        try:
            record = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        return record if record.get("key") == self.key else None

    def record(self, **facts: Any) -> None:
        """Write the record (call only after the check passed). Atomic: a killed run leaves either
        no record or a whole one."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"name": self.name, "key": self.key,
                                   "date": time.strftime("%Y-%m-%d %H:%M:%S"), **facts}))
        os.replace(tmp, self.path)


def skip_if_verified(verified: Verified, request: pytest.FixtureRequest, what: str) -> None:
    """Skip the calling test when ``verified`` has a record and ``--recheck-verified`` is off; the
    reason names ``what`` was verified, when, and the key."""
    earlier = verified.recorded()
    if earlier and not request.config.getoption("recheck_verified"):
        count = f"{earlier['tasks']} tasks; " if "tasks" in earlier else ""
        pytest.skip(f"{what} passed for this content on {earlier['date']} ({count}key "
                    f"{verified.key[:12]}); --recheck-verified reruns")
