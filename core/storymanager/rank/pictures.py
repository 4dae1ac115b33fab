"""Optional heatmaps for ``save_mode: selected_and_all_and_picture`` (fix #11).

For every test case of this run whose ``MATRIX`` metric is a mapping
``key -> 2-D matrix``, one PNG ``<test case url>/output/<key>-heatmap.png`` is drawn.
Matrix cells may be numbers or mappings with an ``accuracy`` entry (the shape the
lifelong-learning paradigm produces).

matplotlib is optional: without it a warning names the package to install and no
picture is written; the rank CSVs are unaffected.  Drawing uses matplotlib's
object API with the Agg canvas, so no global backend or pyplot state is touched.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core.storymanager.rank.types import CaseResult

logger = logging.getLogger(__name__)

MATRIX_METRIC = "MATRIX"
INSTALL_HINT = "pip install matplotlib"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def matplotlib_available() -> bool:
    """True if matplotlib can be imported (checked without importing it)."""
    return importlib.util.find_spec("matplotlib") is not None


def _cell_number(cell: Any) -> float:
    if isinstance(cell, Mapping):
        cell = cell.get("accuracy")
    if isinstance(cell, bool) or not isinstance(cell, (int, float)):
        try:
            return float(cell)  # numpy scalars, numeric strings
        except (TypeError, ValueError):
            return math.nan
    return float(cell)


def _as_matrix(value: Any) -> list[list[float]] | None:
    """Return ``value`` as a numeric matrix (ragged rows NaN-padded), or None if not 2-D."""
    if hasattr(value, "tolist"):  # numpy arrays
        value = value.tolist()
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        return None
    rows: list[list[float]] = []
    for row in value:
        if isinstance(row, (str, bytes, Mapping)) or not isinstance(row, Sequence):
            return None
        try:
            rows.append([_cell_number(cell) for cell in row])
        except TypeError:
            return None
    if not rows or not any(rows):
        return None
    width = max(len(r) for r in rows)
    return [r + [math.nan] * (width - len(r)) for r in rows]


def _draw(matrix: list[list[float]], title: str, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # optional dependency
    from matplotlib.figure import Figure

    figure = Figure(figsize=(2.5 + 0.7 * len(matrix[0]), 2.0 + 0.7 * len(matrix)))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    image = axes.imshow(matrix, cmap="viridis", aspect="auto")
    figure.colorbar(image, ax=axes)
    finite = [c for row in matrix for c in row if math.isfinite(c)]
    middle = (min(finite) + max(finite)) / 2 if finite else 0.0
    for i, row in enumerate(matrix):
        for j, cell in enumerate(row):
            if math.isfinite(cell):  # dark text on the bright half of the colour map
                axes.text(j, i, f"{cell:.3g}", ha="center", va="center", fontsize=8,
                          color="black" if cell > middle else "white")
    axes.set_xticks(range(len(matrix[0])))
    axes.set_yticks(range(len(matrix)))
    axes.set_title(title)
    axes.set_xlabel("evaluated on task")
    axes.set_ylabel("after training round")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100, bbox_inches="tight")


def draw_matrix_pictures(results: Sequence[CaseResult]) -> tuple[Path, ...]:
    """Draw one heatmap per ``MATRIX`` key per test case; return the paths written.

    Never raises for bad data or a missing matplotlib: problems are logged as warnings
    and the picture is skipped.
    """
    candidates = [r for r in results if MATRIX_METRIC in r.metrics]
    if not candidates:
        logger.info("save_mode selected_and_all_and_picture: no %s metric in this run; "
                    "no picture to draw", MATRIX_METRIC)
        return ()
    if not matplotlib_available():
        logger.warning("save_mode selected_and_all_and_picture: matplotlib is not installed, "
                       "so no heatmap was drawn (the rank CSVs were written). Install it "
                       "with `%s` to get the pictures.", INSTALL_HINT)
        return ()
    written: list[Path] = []
    for result in candidates:
        value = result.metrics[MATRIX_METRIC]
        if not isinstance(value, Mapping):
            logger.warning("test case %s: %s metric is not a mapping key -> matrix (%s); "
                           "no picture", result.url, MATRIX_METRIC, type(value).__name__)
            continue
        for key, raw in value.items():
            matrix = _as_matrix(raw)
            if matrix is None:
                logger.warning("test case %s: %s[%r] is not a 2-D matrix; no picture",
                               result.url, MATRIX_METRIC, key)
                continue
            path = Path(result.folder or result.url) / "output" / f"{_UNSAFE.sub('_', str(key))}-heatmap.png"
            try:
                _draw(matrix, f"{result.algorithm}: {key}", path)
            except Exception as exc:  # noqa: BLE001 - a picture must never fail the job
                logger.warning("test case %s: drawing %s failed: %s", result.url, path, exc)
                continue
            written.append(path)
    return tuple(written)
