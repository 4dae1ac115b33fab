"""Pure table operations of the rank step: layout, column union, sort, selection, dedup.

Nothing here touches the file system.  Rows are ``dict[str, str]`` of CSV cell text
(see :mod:`core.storymanager.rank.csvio`); a missing key means an empty cell.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.storymanager.rank.csvio import Row, canonical_text, format_cell, infer_cell
from core.storymanager.rank.types import ALL, SORT_ASCEND, CaseResult, RankConfig

logger = logging.getLogger(__name__)

RANK = "rank"
ALGORITHM = "algorithm"
PARADIGM = "paradigm"
TIME = "time"
URL = "url"
RESERVED = (RANK, ALGORITHM, PARADIGM, TIME, URL)
DEDUP_EXCLUDED = (TIME, URL)
"""Columns ignored when dropping duplicate rows of ``selected_rank.csv``."""


def _unique(names: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for name in names:
        if name not in seen:
            seen.add(name)
            out.append(name)
    return out


@dataclass
class Layout:
    """Column groups of a rank table, each in output order.

    ``extras`` holds columns found after ``time`` in an old file (not produced by this
    implementation); they are kept, after ``url``.
    """

    metrics: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    hyperparameters: list[str] = field(default_factory=list)
    extras: list[str] = field(default_factory=list)

    def columns(self) -> list[str]:
        """Header without ``rank``: algorithm, metrics, paradigm, modules, hps, time, url.

        A name appearing in two groups is kept at its first position only.
        """
        return _unique([ALGORITHM, *self.metrics, PARADIGM, *self.modules,
                        *self.hyperparameters, TIME, URL, *self.extras])


def rows_from_results(results: Sequence[CaseResult],
                      metric_names: Sequence[str]) -> tuple[Layout, list[Row]]:
    """Build this run's rows and layout (spec §9.2/§9.3).

    Metric columns: ``metric_names`` (testenv order, fix #8), then metric keys of the
    results not in it, in first-appearance order.  Module and ``<type>-<hp>`` columns in
    first-appearance order.  Hyperparameter cells hold ``str(value)``.

    Raises:
        TypeError: a ``hyperparameters`` entry is not a mapping (contract violation).
    """
    layout = Layout(metrics=_unique(metric_names))
    rows: list[Row] = []
    for result in results:
        row: Row = {ALGORITHM: result.algorithm, PARADIGM: result.paradigm,
                    TIME: result.time, URL: result.url}
        for name, value in result.metrics.items():
            row[name] = format_cell(value)
            if name not in layout.metrics:
                layout.metrics.append(name)
        for module_type, module_name in result.modules.items():
            row[module_type] = format_cell(module_name)
            if module_type not in layout.modules:
                layout.modules.append(module_type)
        for module_type, params in result.hyperparameters.items():
            if not isinstance(params, Mapping):
                raise TypeError(f"CaseResult.hyperparameters[{module_type!r}] must map hp "
                                f"names to values, got {type(params).__name__}")
            for hp_name, value in params.items():
                column = f"{module_type}-{hp_name}"
                row[column] = str(value)
                if column not in layout.hyperparameters:
                    layout.hyperparameters.append(column)
        rows.append(row)
    _warn_collisions(layout)
    return layout, rows


def _warn_collisions(layout: Layout) -> None:
    groups = {"metric": layout.metrics, "module": layout.modules,
              "hyperparameter": layout.hyperparameters}
    seen: dict[str, str] = {name: "fixed" for name in RESERVED}
    for kind, names in groups.items():
        for name in names:
            if name in seen:
                logger.warning("rank column %r is both a %s and a %s column; the cells share "
                               "one column (rename the metric or module to avoid this)",
                               name, seen[name], kind)
            else:
                seen[name] = kind


def layout_from_header(header: Sequence[str], known_modules: Sequence[str],
                       known_hyperparameters: Sequence[str]) -> Layout:
    """Classify the columns of an old rank file by position.

    Between ``algorithm`` and ``paradigm``: metrics.  Between ``paradigm`` and ``time``:
    a column is a hyperparameter if this run knows it as one, or (unknown to this run as
    a module) its name contains ``-`` (``<module type>-<hp>``); otherwise a module.
    After ``time``: extras.  A missing anchor (``paradigm``/``time``) makes the following
    group extend to the end.
    """
    layout = Layout()
    section = "metrics"
    for name in header:
        if name in (RANK, ALGORITHM, URL):
            continue
        if name == PARADIGM:
            section = "modules"
            continue
        if name == TIME:
            section = "extras"
            continue
        if section == "metrics":
            layout.metrics.append(name)
        elif section == "extras":
            layout.extras.append(name)
        elif name in known_hyperparameters or (name not in known_modules and "-" in name):
            layout.hyperparameters.append(name)
        else:
            layout.modules.append(name)
    return layout


def merge_layouts(new: Layout, old: Layout) -> Layout:
    """Union of an old file's layout and this run's.

    Metrics: this run's order (testenv order) first, then old-only metrics in old order
    (fix #8).  Modules and hyperparameters: old order first, then new ones (= order of
    first appearance when old rows count as earlier test cases).  Extras: old order.
    """
    return Layout(
        metrics=_unique([*new.metrics, *old.metrics]),
        modules=_unique([*old.modules, *new.modules]),
        hyperparameters=_unique([*old.hyperparameters, *new.hyperparameters]),
        extras=_unique([*old.extras, *new.extras]),
    )


def _sort_value(text: str) -> tuple[int, Any]:
    """(group, value): group 0 = number, 1 = non-numeric text, 2 = missing/NaN."""
    value = infer_cell(text)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return 2, None
    if isinstance(value, (int, float)):  # bool is an int
        return 0, value
    return 1, str(value)


def sort_rows(rows: Sequence[Row], sort_by: Sequence[tuple[str, str]],
              metric_names: Sequence[str]) -> list[Row]:
    """Stable lexicographic sort by ``sort_by`` (first pair = primary key).

    * Direction ``"ascend"`` sorts ascending; anything else descending.
    * Cells are compared as numbers (inferred from their text, so old rows and new rows
      compare alike).  Empty/NaN cells always go last, whatever the direction.
    * Non-numeric text in a sort column does not raise (upstream does): it sorts after
      the numbers and before the empty cells, compared as text, with a warning.
    * Keys whose metric is not in ``metric_names`` (this run's metrics) are skipped with
      a warning.  With no usable key the input order is kept.
    """
    usable: list[tuple[str, str]] = []
    for metric, direction in sort_by:
        if metric in metric_names:
            usable.append((metric, direction))
        else:
            logger.warning("rank.sort_by: metric %r is not a metric of this run (%s); "
                           "ignoring this sort key", metric, ", ".join(metric_names) or "none")
    ordered = list(rows)
    for metric, direction in reversed(usable):
        descending = direction != SORT_ASCEND
        groups: dict[int, list[tuple[Any, Row]]] = {0: [], 1: [], 2: []}
        for row in ordered:
            group, value = _sort_value(row.get(metric, ""))
            groups[group].append((value, row))
        if groups[1]:
            logger.warning("rank.sort_by: column %r has %d non-numeric value(s) (e.g. %r); "
                           "they sort after the numbers", metric, len(groups[1]),
                           groups[1][0][0])
        ordered = []
        for group in (0, 1):
            ranked = sorted(groups[group], key=lambda item: item[0], reverse=descending)
            ordered.extend(row for _, row in ranked)
        ordered.extend(row for _, row in groups[2])
    return ordered


def _resolve_hyperparameters(selected: Sequence[str], available: Sequence[str]) -> list[str]:
    """Map selected hp names to columns; a bare ``<hp>`` expands to every ``<type>-<hp>``."""
    columns: list[str] = []
    for name in selected:
        if name in available:
            columns.append(name)
            continue
        matches = [c for c in available if c.split("-", 1)[-1] == name and "-" in c]
        if matches:
            logger.info("rank.selected_dataitem.hyperparameters: %r resolved to %s",
                        name, ", ".join(matches))
            columns.extend(matches)
        else:
            logger.warning("rank.selected_dataitem.hyperparameters: %r matches no column "
                           "(known: %s); it will be an empty column. Hyperparameter columns "
                           "are named <module type>-<hp>", name, ", ".join(available) or "none")
            columns.append(name)
    return _unique(columns)


def _resolve(kind: str, selected: Sequence[str], available: Sequence[str]) -> list[str]:
    if tuple(selected) == (ALL,):
        return list(available)
    for name in selected:
        if name not in available:
            logger.warning("rank.selected_dataitem.%s: %r is not a known %s (known: %s); "
                           "it will be an empty column", kind, name, kind.rstrip("s"),
                           ", ".join(available) or "none")
    return list(selected)


def selected_header(layout: Layout, config: RankConfig) -> list[str]:
    """Header of ``selected_rank.csv`` without ``rank`` (spec §9.4 step 2).

    Unknown names become (all-empty) columns and are reported with a warning.
    """
    metrics = _resolve("metrics", config.selected_metrics, layout.metrics)
    modules = _resolve("modules", config.selected_modules, layout.modules)
    if tuple(config.selected_hyperparameters) == (ALL,):
        hps = list(layout.hyperparameters)
    else:
        hps = _resolve_hyperparameters(config.selected_hyperparameters,
                                       layout.hyperparameters)
    return _unique([ALGORITHM, *metrics, PARADIGM, *modules, *hps, TIME, URL])


def dedup_key(row: Row, header: Sequence[str]) -> tuple[str, ...]:
    """Dedup key: canonical text of every column of ``header`` except time/url (fix #9).

    Text is canonicalised (:func:`canonical_text`) so a value compares equal whether it
    came from this run (``"0.1"``) or was read back from an old CSV (``0.1``, ``0.10``).
    """
    return tuple(canonical_text(row.get(c, "")) for c in header if c not in DEDUP_EXCLUDED)


def select_rows(rows: Sequence[Row], header: Sequence[str],
                paradigms: Sequence[str]) -> list[Row]:
    """Drop duplicates (keep the first, best-sorted row) and filter by paradigm.

    ``paradigms == ("all",)`` keeps every paradigm.
    """
    seen: set[tuple[str, ...]] = set()
    kept: list[Row] = []
    wanted = None if tuple(paradigms) == (ALL,) else set(paradigms)
    for row in rows:
        key = dedup_key(row, header)
        if key in seen:
            continue
        seen.add(key)
        if wanted is not None and row.get(PARADIGM, "") not in wanted:
            continue
        kept.append(row)
    return kept


def numbered(header: Sequence[str], rows: Sequence[Row]) -> tuple[list[str], list[Row]]:
    """Prepend the ``rank`` column numbered 1..N (replacing any old ``rank`` cells)."""
    out_rows = [{**row, RANK: str(i)} for i, row in enumerate(rows, start=1)]
    return [RANK, *[c for c in header if c != RANK]], out_rows
