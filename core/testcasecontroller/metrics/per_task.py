"""Per-task values of metric columns: what the report needs for intervals and paired tests.

A column that is a mean (over tasks, or over samples) says nothing about its uncertainty by
itself. A metric that computes such a column also hands its per-task values to the test
case's :class:`PerTaskValues` (``context.per_task``); after the metrics ran, the test case
writes them to ``per_task_values.jsonl`` in its folder, and the report
(:mod:`core.storymanager.report`) turns them into bootstrap intervals over tasks and paired
tests between rows that ran the same tasks.

Contract of a recorded column:

* its value in the rank table is the mean of the recorded values, either **per sample**
  (``weighting="samples"``: each task contributes its samples' mean with its sample count as
  weight, as a mean over scored samples does) or **per task** (``weighting="tasks"``: each
  task weighs 1);
* a task appears once per column; recording the same task again adds samples to it;
* values must be finite numbers; NaN values are ignored (a task without a value is left out
  of that column, as the column's own mean leaves it out).

``pass@k`` columns need no recording: the report derives them from ``per_task.jsonl`` (the
samples and passes per task that the code metrics write).

File format, one line per task: ``{"task_id": "...", "values": {"<column>": [mean, n], ...}}``,
preceded by one header line ``{"weighting": {"<column>": "samples" | "tasks", ...}}``.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

PER_TASK_VALUES_FILE = "per_task_values.jsonl"
Weighting = Literal["samples", "tasks"]


class PerTaskValues:
    """Per-task values of the columns the metrics of one test case record (module docstring)."""

    def __init__(self) -> None:
        self._sums: dict[str, dict[str, list[float]]] = {}   # column -> task -> [sum, n]
        self._weighting: dict[str, Weighting] = {}

    def add(self, column: str, task_id: str, value: float,
            weighting: Weighting = "samples") -> None:
        """Record one sample's (or one task's) value of ``column``; NaN is ignored.

        Raises:
            ValueError: ``column`` was recorded before with another weighting.
        """
        if weighting not in ("samples", "tasks"):
            raise ValueError(f"weighting must be 'samples' or 'tasks', got {weighting!r}")
        known = self._weighting.setdefault(column, weighting)
        if known != weighting:
            raise ValueError(f"column {column!r} is recorded per {known}, not per {weighting}")
        value = float(value)
        if math.isnan(value):
            return
        if math.isinf(value):
            raise ValueError(f"column {column!r}: task {task_id!r} has an infinite value")
        entry = self._sums.setdefault(column, {}).setdefault(str(task_id), [0.0, 0])
        entry[0] += value
        entry[1] += 1

    def add_rows(self, rows: Iterable[Mapping[str, Any]], columns: Iterable[str],
                 weighting: Weighting = "samples", task_key: str = "task_id",
                 rename: Mapping[str, str] | None = None) -> None:
        """Record ``columns`` of every row (one row per sample, or per task); a column is
        stored under ``rename[column]`` when given (e.g. a period's ``chrf[before ...]``).
        Booleans count as 0/1."""
        names = list(columns)
        for row in rows:
            for name in names:
                if name in row and row[name] is not None:
                    self.add((rename or {}).get(name, name), str(row[task_key]),
                             float(row[name]), weighting)

    def columns(self) -> list[str]:
        """The recorded columns, in the order they were first recorded."""
        return [c for c in self._weighting if self._sums.get(c)]

    def task_means(self, column: str) -> dict[str, tuple[float, int]]:
        """``task -> (mean of its values, number of values)`` of one column."""
        return {t: (s / n, int(n)) for t, (s, n) in self._sums.get(column, {}).items()}

    def write(self, path: Path) -> None:
        """Write the file (module docstring) atomically; nothing is written when no column
        was recorded (an old file is then removed, so a re-score never shows stale values)."""
        columns = self.columns()
        if not columns:
            path.unlink(missing_ok=True)
            return
        tasks: dict[str, dict[str, list[float]]] = {}
        for column in columns:
            for task, (mean, n) in self.task_means(column).items():
                tasks.setdefault(task, {})[column] = [mean, n]
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            fh.write(json.dumps({"weighting": {c: self._weighting[c] for c in columns}}) + "\n")
            for task, values in tasks.items():
                fh.write(json.dumps({"task_id": task, "values": values}) + "\n")
        os.replace(tmp, path)


def read_per_task_values(path: Path) -> tuple[dict[str, dict[str, tuple[float, int]]],
                                              dict[str, Weighting]]:
    """``(column -> task -> (mean, n), column -> weighting)`` from a file :meth:`write` made;
    empty when the file is missing; unreadable lines are skipped."""
    values: dict[str, dict[str, tuple[float, int]]] = {}
    weighting: dict[str, Weighting] = {}
    try:
        fh = path.open(encoding="utf-8")
    except OSError:
        return values, weighting
    with fh:
        for line in fh:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if not isinstance(entry, dict):
                continue
            if isinstance(entry.get("weighting"), dict):
                weighting.update({str(c): "tasks" if w == "tasks" else "samples"
                                  for c, w in entry["weighting"].items()})
                continue
            task, cells = entry.get("task_id"), entry.get("values")
            if task is None or not isinstance(cells, dict):
                continue
            for column, cell in cells.items():
                try:
                    mean, n = float(cell[0]), int(cell[1])
                except (TypeError, ValueError, IndexError):
                    continue
                if math.isfinite(mean) and n > 0:
                    values.setdefault(str(column), {})[str(task)] = (mean, n)
    return values, weighting
