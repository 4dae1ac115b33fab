"""Show rank files: the upstream-style text table and a Markdown leaderboard (spec §9.7).

* :func:`print_table` prints a CSV as a bordered text table with the look of upstream
  Ianvs (PrettyTable's default style), without depending on prettytable; every column in one
  table, however wide (``ianvs -f ... --full-table``).
* :func:`format_compact` (the default of ``ianvs -f``) fits the same table into a terminal
  width (120 columns): the ``url`` column moves below the table as one line per rank, cells
  longer than :data:`MAX_CELL` are shortened with ``…`` (the CSV keeps them whole), and the
  remaining columns are split over stacked tables that each repeat ``rank`` and ``algorithm``.
* :func:`render_markdown` returns a GitHub-flavoured Markdown table of a CSV.
* :func:`visualize` dispatches on the ``rank.visualization`` settings.

Cell text is always the raw CSV text (no reformatting); empty cells stay blank.
"""

from __future__ import annotations

import csv
import io
import logging
import sys
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from core.storymanager.rank.types import VISUALIZATION_METHODS, RankConfig, RankFiles

logger = logging.getLogger(__name__)


class VisualizationError(RuntimeError):
    """A rank file could not be shown (missing/malformed file or unknown method)."""


def _read_csv(csv_path: Path) -> tuple[list[str], list[list[str]]]:
    """Return (header, rows) as raw text; rows padded to the header width.

    Raises:
        VisualizationError: file missing, empty, or a row wider than the header.
    """
    try:
        text = Path(csv_path).read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise VisualizationError(f"cannot read rank file {csv_path}: {exc}") from exc
    records = [r for r in csv.reader(io.StringIO(text, newline="")) if r]
    if not records:
        raise VisualizationError(f"rank file {csv_path} is empty (no header row)")
    header, rows = records[0], records[1:]
    for number, row in enumerate(rows, start=2):
        if len(row) > len(header):
            raise VisualizationError(f"rank file {csv_path}: record {number} has {len(row)} "
                                     f"cells but the header has {len(header)}")
    return header, [row + [""] * (len(header) - len(row)) for row in rows]


def display_width(text: str) -> int:
    """Terminal columns taken by ``text``: wide East Asian characters count 2,
    combining marks 0, everything else 1."""
    width = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def _centre(text: str, width: int) -> str:
    """Centre ``text`` in ``width`` columns.

    When the free space is odd, the extra space goes on the right of text with an odd
    width and on the left of text with an even width (the look of upstream's output,
    e.g. ``|         time        |`` and ``|  1   |`` in spec §9.7).
    """
    used = display_width(text)
    free = width - used
    left = free // 2
    if free % 2 and used % 2 == 0:
        left += 1
    return " " * left + text + " " * (free - left)


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Render a bordered text table (no trailing newline).

    Every column is as wide as its widest cell (header included) plus one space of
    padding on each side; headers and cells are centred; ``+`` at junctions, ``-`` on
    rules, ``|`` between cells.  A cell with line breaks spans several text lines (top
    aligned).  With no data rows the header box is followed by one more rule
    (as upstream prints it).
    """
    def lines(cell: str) -> list[str]:
        return cell.replace("\r\n", "\n").split("\n")

    widths = [display_width(name) for name in header]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], *(display_width(part) for part in lines(cell)))
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def render(cells: Sequence[str]) -> list[str]:
        split = [lines(c) for c in cells]
        height = max((len(s) for s in split), default=1)
        out = []
        for k in range(height):
            parts = [_centre(s[k] if k < len(s) else "", w)
                     for s, w in zip(split, widths, strict=True)]
            out.append("|" + "|".join(f" {p} " for p in parts) + "|")
        return out

    output = [rule, *render(header), rule]
    for row in rows:
        output.extend(render(row))
    output.append(rule)
    return "\n".join(output)


#: widest cell of the compact table (longer text is shortened with an ellipsis)
MAX_CELL = 40
#: columns repeated in every part of a compact table
KEY_COLUMNS = ("rank", "algorithm")


def _shorten(text: str, limit: int) -> str:
    if display_width(text) <= limit:
        return text
    out, used = "", 0
    for char in text:
        w = display_width(char)
        if used + w > limit - 1:
            break
        out, used = out + char, used + w
    return out + "…"


def format_compact(header: Sequence[str], rows: Sequence[Sequence[str]],
                   width: int = 120) -> str:
    """The table of :func:`format_table`, fitted to ``width`` terminal columns.

    ``url`` is listed below the table (``rank <n>: <url>``); every other cell longer than
    :data:`MAX_CELL` columns is shortened with ``…``; columns that do not fit beside ``rank`` and
    ``algorithm`` go to further tables below, each repeating those two. Every line is at most
    ``width`` columns unless a single column cannot fit even alone (it is then shortened to fit).
    """
    url = header.index("url") if "url" in header else None
    keys = [i for i, h in enumerate(header) if h in KEY_COLUMNS]
    others = [i for i, h in enumerate(header) if i != url and i not in keys]
    short = [[_shorten(cell, MAX_CELL) for cell in row] for row in rows]

    def col_width(i: int) -> int:
        return max([display_width(header[i])] + [display_width(r[i]) for r in short])

    def table_width(cols: list[int]) -> int:
        return 1 + sum(col_width(i) + 3 for i in cols)

    room = width - table_width(keys)
    limit = max(4, room - 4)
    if any(col_width(i) > limit for i in others):  # a column too wide even alone
        short = [[_shorten(cell, limit) if i in others else cell for i, cell in enumerate(row)]
                 for row in short]
    parts: list[list[int]] = []
    current: list[int] = []
    for i in others:
        if current and table_width(keys + current + [i]) > width:
            parts.append(current)
            current = []
        current.append(i)
    parts.append(current)
    blocks = []
    for part in parts:
        cols = keys + part
        blocks.append(format_table([header[i] for i in cols],
                                   [[row[i] for i in cols] for row in short]))
    if url is not None and rows:
        rank = header.index("rank") if "rank" in header else None
        lines = ["url:"] + [f"  rank {row[rank] if rank is not None else n}: {row[url]}"
                            for n, row in enumerate(rows, start=1)]
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def print_compact_table(csv_path: Path, stream: TextIO | None = None, width: int = 120) -> None:
    """Print ``csv_path`` with :func:`format_compact` to ``stream`` (default: ``sys.stdout``).

    Raises:
        VisualizationError: the file is missing, empty or malformed.
    """
    header, rows = _read_csv(csv_path)
    target = stream if stream is not None else sys.stdout
    target.write(format_compact(header, rows, width) + "\n")
    target.flush()


def print_table(csv_path: Path, stream: TextIO | None = None) -> None:
    """Print ``csv_path`` (normally ``selected_rank.csv``) as a text table to ``stream``
    (default: the current ``sys.stdout``), followed by a newline.

    Raises:
        VisualizationError: the file is missing, empty or malformed.
    """
    header, rows = _read_csv(csv_path)
    target = stream if stream is not None else sys.stdout
    target.write(format_table(header, rows) + "\n")
    target.flush()


def _markdown_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r\n", "<br>") \
        .replace("\n", "<br>").replace("\r", "<br>")


def render_markdown(csv_path: Path) -> str:
    """Return ``csv_path`` as a GitHub-flavoured Markdown table (ends with a newline).

    Cells are the raw CSV text; ``|`` and ``\\`` are escaped and line breaks become
    ``<br>``.  Empty cells stay empty.

    Raises:
        VisualizationError: the file is missing, empty or malformed.
    """
    header, rows = _read_csv(csv_path)
    lines = ["| " + " | ".join(_markdown_cell(h) for h in header) + " |",
             "|" + "|".join(" --- " for _ in header) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(_markdown_cell(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


METHODS: dict[str, Callable[[Path, TextIO | None], None]] = {"print_table": print_table}
"""Visualisation methods by the name used in ``rank.visualization.method``."""

assert tuple(METHODS) == VISUALIZATION_METHODS, "keep types.VISUALIZATION_METHODS in sync"


def visualize(config: RankConfig, rank_files: RankFiles, stream: TextIO | None = None,
              full: bool = True, width: int = 120) -> None:
    """Show ``rank_files.selected_rank`` as ``config`` asks.

    Nothing is shown unless ``config.visualization_mode == "selected_only"``. ``full=False``
    shows ``print_table`` fitted to ``width`` columns (:func:`format_compact`).

    Raises:
        VisualizationError: unknown method (the message lists the known ones), or the
            method failed (message names method, file and cause).
    """
    if config.visualization_mode != "selected_only":
        logger.debug("visualization mode %r: nothing to show", config.visualization_mode)
        return
    method = METHODS.get(config.visualization_method)
    if method is None:
        raise VisualizationError(
            f"unknown visualization method {config.visualization_method!r} for rank file "
            f"{rank_files.selected_rank}; known methods: {', '.join(METHODS)}")
    if not full and config.visualization_method == "print_table":
        method = lambda path, out: print_compact_table(path, out, width)  # noqa: E731
    try:
        method(rank_files.selected_rank, stream)
    except VisualizationError as exc:
        raise VisualizationError(
            f"process visualization(method={config.visualization_method}) of rank file"
            f"({rank_files.selected_rank}) failed, error: {exc}.") from exc
