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
import io
import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from core.common.errors import DatasetError, bad_utf8, read_utf8

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


def write_jsonl(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Write ``rows`` to ``path`` as JSON lines (UTF-8), replacing the file: a metric's
    per-sample scores, rewritten whole each time the metric runs."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def append_durably(path: Path, text: str) -> None:
    """Append ``text`` (whole JSON lines) to the line log ``path`` through :func:`open_append`,
    flushed and fsynced before returning, creating its folder; a writer shared by threads
    holds its own lock around the call, so their lines never interleave."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_append(path) as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


class _NonFinite(ValueError):
    """A ``NaN``/``Infinity`` constant met while parsing strict JSON."""


def _refuse_constant(name: str) -> Any:
    raise _NonFinite(name)


#: JSON as RFC 8259 defines it: ``NaN``, ``Infinity`` and ``-Infinity`` (which Python's json
#: accepts by default) are errors
_STRICT = json.JSONDecoder(parse_constant=_refuse_constant)
NON_FINITE_HINT = "JSON has no NaN or Infinity: write null, a number or a string"


def non_finite_field(value: Any, where: str = "") -> tuple[str, float] | None:
    """``(dotted path, number)`` of the first non-finite float in ``value`` (the path is like
    ``metadata.scores[2]``, ``""`` for ``value`` itself), or None when it has none."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (where, value)
    if isinstance(value, dict):
        items: Iterable[tuple[str, Any]] = ((f"{where}.{k}" if where else str(k), v)
                                            for k, v in value.items())
    elif isinstance(value, list):
        items = ((f"{where}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for path, item in items:
        found = non_finite_field(item, path)
        if found is not None:
            return found
    return None


def non_finite_message(value: Any) -> str | None:
    """``field 'x' is NaN, which is not valid JSON`` for the first non-finite float in the
    parsed JSON ``value`` (see :func:`non_finite_field`), or None when it has none."""
    found = non_finite_field(value)
    if found is None:
        return None
    path, number = found
    label = f"field {path!r}" if path else "the value"
    return f"{label} is {json.dumps(number)}, which is not valid JSON"


def parse_record(raw: bytes, source: Path, line: int, finite: bool = True) -> dict[str, Any]:
    """One line of a JSONL file (its bytes) as the JSON object it must hold. ``NaN`` and
    ``Infinity`` are refused unless not ``finite``.

    Raises:
        DatasetError: not UTF-8 (naming the byte), not valid JSON, a non-finite number (naming
            the field) or not a JSON object; naming ``source`` and ``line``.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        at, message = bad_utf8(raw, exc, line)
        raise DatasetError(message, source=source, line=at, hint="save the file as UTF-8") \
            from None
    try:
        obj = _STRICT.decode(text) if finite else json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"invalid JSON at column {exc.colno}: {exc.msg}",
                           source=source, line=line, hint=_ONE_OBJECT) from exc
    except _NonFinite:
        message = non_finite_message(json.loads(text)) or "NaN or Infinity is not valid JSON"
        raise DatasetError(message, source=source, line=line, hint=NON_FINITE_HINT) from None
    if not isinstance(obj, dict):
        raise DatasetError(f"expected a JSON object, got {type(obj).__name__}",
                           source=source, line=line, hint=_ONE_OBJECT)
    return obj


def read_json_file(path: Path) -> Any:
    """The whole JSON file ``path`` parsed (``NaN``/``Infinity`` are let through here: a caller
    that holds records checks them with :func:`non_finite_message` to name the record).

    Raises:
        DatasetError: unreadable, not UTF-8 or not valid JSON; naming the file and line.
    """
    try:
        return json.loads(read_utf8(path, DatasetError))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"invalid JSON at column {exc.colno}: {exc.msg}", source=path,
                           line=exc.lineno) from exc


def iter_jsonl(path: str | Path, what: str = "dataset file",
               finite: bool = True) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, object)`` for each non-blank line of a JSONL file.

    Lines are read one at a time as bytes (the file is never held in memory whole) and
    decoded one by one, so a byte that is not UTF-8 is reported on its own line; a name ending
    in ``.gz`` is read through gzip. ``what`` names the file in messages ("samples file"
    ...). ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON and are refused, unless
    ``finite`` is False (logs this project wrote itself, whose values a plugin chose).

    Raises:
        DatasetError: the file is missing or unreadable, a line is not valid UTF-8, not valid
            JSON, holds a non-finite number or is not a JSON object, or the gzip stream is
            broken; the message names the file and the line (and the field or byte).
    """
    file = Path(path)
    if not file.is_file():
        raise DatasetError(f"{what} not found", source=file,
                           hint="check the path; relative paths resolve against the working "
                                "directory, then the YAML file's folder")
    try:
        handle: gzip.GzipFile | io.BufferedReader = (
            gzip.GzipFile(file, "rb") if file.name.endswith(".gz") else file.open("rb"))
    except OSError as exc:
        raise DatasetError(f"cannot open {what}: {exc.strerror}", source=file) from exc
    line_no = 0
    with handle:
        try:
            for line_no, raw in enumerate(handle, start=1):
                if raw.strip():
                    yield line_no, parse_record(raw, file, line_no, finite)
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
