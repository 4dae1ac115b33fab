"""Cell formatting, type inference and atomic CSV I/O for the rank files.

Rows are held as ``dict[str, str]`` of *CSV cell text*.  Python values are turned into
text once (:func:`format_cell`), and cells read back from an old file keep their exact
text, so re-writing ``all_rank.csv`` never alters historical cells.  Numbers are
recovered from text only where they matter: sorting (:func:`infer_cell`) and
deduplication (:func:`canonical_text`).

CSV conventions (spec §9.3): comma separated, header row, ``\\n`` line endings, UTF-8
without BOM, minimal quoting (fields with a comma, quote or line break are quoted and
inner quotes doubled), floats in shortest round-trip form, ``None``/NaN empty.
"""

from __future__ import annotations

import contextlib
import csv
import io
import logging
import math
import numbers
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

Row = dict[str, str]
"""One table row: column name -> CSV cell text (``""`` = empty)."""

_INT_RE = re.compile(r"[+-]?\d+")
_FLOAT_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?(?:inf|Infinity)")
_MISSING_TEXT = frozenset({"", "nan", "NaN", "-nan", "-NaN", "None", "null", "NULL",
                           "NA", "N/A", "n/a", "<NA>"})


class RankFileError(ValueError):
    """An existing rank file cannot be parsed as a rank table."""


def format_cell(value: Any) -> str:
    """Return the CSV text of a metric or other cell value.

    ``None`` and float NaN -> ``""``; ``bool`` -> ``True``/``False``; integers
    (including numpy integers) -> decimal digits; other reals (including numpy floats)
    -> shortest round-trip ``repr`` of the ``float`` (``0.6667``, ``1.0``, ``1e-05``,
    ``inf``); strings unchanged; anything else -> ``str(value)``.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        number = float(value)
        return "" if math.isnan(number) else float.__repr__(number)
    return str(value)


def infer_cell(text: str) -> int | float | bool | str | None:
    """Infer a typed value from CSV cell text (used for sorting and dedup only).

    Empty and NA-like text (``nan``, ``None``, ``NA``, ...) -> ``None``; integer text ->
    ``int``; decimal/exponent/``inf`` text -> ``float``; ``True``/``False`` -> ``bool``;
    anything else is returned unchanged as ``str``.
    """
    stripped = text.strip()
    if stripped in _MISSING_TEXT:
        return None
    if _INT_RE.fullmatch(stripped):
        return int(stripped)
    if _FLOAT_RE.fullmatch(stripped):
        return float(stripped)
    if stripped in ("True", "False"):
        return stripped == "True"
    return text


def canonical_text(text: str) -> str:
    """Return a normalised form of cell text: ``format_cell(infer_cell(text))``.

    Identical for equal values whatever their spelling (``0.10`` and ``0.1`` -> ``0.1``,
    ``007`` -> ``7``), and idempotent.  NA-like text collapses to ``""``.
    """
    return format_cell(infer_cell(text))


def read_table(path: Path) -> tuple[list[str], list[Row]]:
    """Read a rank CSV: return ``(header, rows)`` with cells as raw text.

    Short rows are padded with empty cells.  A missing file yields ``([], [])``.

    Raises:
        RankFileError: the file is empty, not UTF-8, has duplicate or empty column
            names, or has a row with more cells than the header.
    """
    if not path.exists():
        return [], []
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise RankFileError(f"{path}: not UTF-8 text ({exc})") from exc
    records = list(csv.reader(io.StringIO(text, newline="")))
    if not records:
        raise RankFileError(f"{path}: file is empty (no header row)")
    header = records[0]
    if len(set(header)) != len(header) or "" in header:
        raise RankFileError(f"{path}: header has duplicate or empty column names: {header}")
    rows: list[Row] = []
    for line_no, record in enumerate(records[1:], start=2):
        if not record:  # blank line
            continue
        if len(record) > len(header):
            raise RankFileError(f"{path}: record {line_no} has {len(record)} cells but the "
                                f"header has {len(header)}")
        record = record + [""] * (len(header) - len(record))
        rows.append(dict(zip(header, record, strict=True)))
    return header, rows


def render_csv(header: Sequence[str], rows: Sequence[Row]) -> str:
    """Render ``header`` and ``rows`` (missing cells empty) with the rank CSV conventions."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow(header)
    for row in rows:
        writer.writerow([row.get(column, "") for column in header])
    return buffer.getvalue()


def _target_mode(path: Path) -> int:
    """Permissions for the new file: the old file's, else 0o666 minus the umask.

    (``mkstemp`` creates files with mode 0o600, which would surprise other readers.)
    """
    try:
        return path.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (UTF-8, no newline translation) atomically.

    The data goes to a temporary file in the same directory, is flushed and fsync'ed,
    then renamed over ``path``; a crash leaves either the old file or the new one,
    never a partial one.  The parent directory is created if needed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp_name, _target_mode(path))
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    logger.debug("wrote %s", path)


def write_table(path: Path, header: Sequence[str], rows: Sequence[Row]) -> None:
    """Atomically write a rank CSV (see :func:`render_csv`, :func:`write_text_atomic`)."""
    write_text_atomic(path, render_csv(header, rows))
