"""Streaming reader of JSON Lines files with errors that name file and line.

One reader for every JSONL input of the project (datasets, codegen task files, recorded
samples), so each reports bad input the same way; and the few pieces every offset index over a
JSONL file shares (the caches and logs that keep byte offsets instead of values, so memory does
not grow with what the lines hold): :func:`lines_with_offsets`, :func:`read_json_at`,
:func:`key_prefix`.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from core.common.errors import DatasetError

_ONE_OBJECT = "each line must hold one JSON object"


def terminate_torn_line(path: Path) -> None:
    """End a file whose last line was cut mid-write (a killed run) with a newline, so records
    appended later start on a line of their own; the torn line stays unreadable and readers
    skip it. A missing or empty file is left alone."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) != b"\n":
            handle.write(b"\n")


def open_append(path: str | Path, binary: bool = False) -> IO[Any]:
    """Open a line log (JSONL: a resume log, a cache) for appending, after
    :func:`terminate_torn_line`: appended to as it is, a torn last line would swallow the next
    record into one line no reader parses, and that finished result would be lost. Text mode is
    UTF-8. The folder must exist."""
    path = Path(path)
    terminate_torn_line(path)
    return path.open("ab") if binary else path.open("a", encoding="utf-8")


def _open_text(path: Path) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open("r", encoding="utf-8")


def iter_jsonl(path: str | Path, what: str = "dataset file") -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line of a JSONL file.

    Lines are read one at a time (the file is never held in memory whole); a name ending in
    ``.gz`` is read through gzip. ``what`` names the file in messages ("samples file" ...).

    Raises:
        DatasetError: the file is missing or unreadable, a line is not valid JSON or not a
            JSON object, or the file is not valid UTF-8 (or not valid gzip); the message
            names the file and the line.
    """
    file = Path(path)
    if not file.is_file():
        raise DatasetError(f"{what} not found", source=file,
                           hint="check the path; relative paths resolve against the working "
                                "directory, then the YAML file's folder")
    try:
        handle = _open_text(file)
    except OSError as exc:
        raise DatasetError(f"cannot open {what}: {exc.strerror}", source=file) from exc
    line_no = 0
    with handle:
        try:
            for line_no, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(f"invalid JSON at column {exc.colno}: {exc.msg}",
                                       source=file, line=line_no, hint=_ONE_OBJECT) from exc
                if not isinstance(obj, dict):
                    raise DatasetError(f"expected a JSON object, got {type(obj).__name__}",
                                       source=file, line=line_no, hint=_ONE_OBJECT)
                yield line_no, obj
        except UnicodeDecodeError as exc:
            raise DatasetError(f"not valid UTF-8 ({exc.reason})", source=file,
                               line=line_no + 1) from exc
        except (OSError, EOFError) as exc:  # e.g. a truncated or non-gzip .gz file
            raise DatasetError(f"cannot read {what}: {exc}", source=file,
                               line=line_no + 1) from exc


def lines_with_offsets(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """``(line_number, byte offset, raw line with its newline)`` of every line of a plain
    (not gzip) file; nothing when the file does not exist. A torn last line (a killed writer)
    is yielded too: it is the only one not ending with a newline."""
    if not path.exists():
        return
    offset = 0
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            yield line_no, offset, raw
            offset += len(raw)


def read_json_at(path: Path, offset: int) -> Any:
    """The JSON value of the line of ``path`` that starts at byte ``offset``."""
    with path.open("rb") as handle:
        handle.seek(offset)
        return json.loads(handle.readline())


def key_prefix(key: str) -> int:
    """The first 64 bits of a hex key: a small ``int`` to index an offset cache by (check the
    full key when reading the line back). A key that is not hex is hashed first."""
    try:
        return int(key[:16], 16)
    except ValueError:
        return int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:16], 16)
