"""What every text-scored kind's metrics share: pairing records with their samples.

Predictions are those of :class:`core.scenarios.model.TaskKindModel` (the codegen model's
layout): per record ``{"task_id", "samples": [<Generation dict>, ...]}``, aligned with
``context.records()``. A sample whose generation failed (``error`` set) is not scored: it is
counted in ``generation_error`` and never as a model failure.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from core.common.errors import ConfigError
from core.scenarios.base import TaskKind


@dataclass(frozen=True)
class ScoredSample:
    """One generated sample ready to score."""

    record: dict[str, Any]
    task_id: str
    sample_index: int
    raw_output: str
    answer: str


def iter_samples(kind: TaskKind, y_pred: Sequence[Any], context: Any,
                 errors: list[str]) -> Iterator[ScoredSample]:
    """Yield every successful sample with its validated record; failed ones go to ``errors``."""
    if y_pred is None or isinstance(y_pred, (str, bytes, Mapping)):
        raise ConfigError(f"{kind.name} metrics need one prediction per test record, got "
                          f"{type(y_pred).__name__}",
                          hint="use the kind's basemodel (core.scenarios.model.TaskKindModel)")
    if context is None:
        raise ConfigError(f"{kind.name} metrics need the framework's context",
                          hint="run them through 'ianvs -f'")
    for record, pred in zip(context.records(), y_pred):
        rec = kind.validate(record)
        for sample in (pred or {}).get("samples", []) if isinstance(pred, Mapping) else []:
            if sample.get("error"):
                errors.append(str(sample.get("task_id")))
                continue
            raw = str(sample.get("raw_output") or "")
            yield ScoredSample(rec, str(sample.get("task_id", rec["id"])),
                               int(sample.get("sample_index", 0)), raw, kind.answer(raw, rec))


def record_per_task(context: Any, rows: Sequence[Mapping[str, Any]], columns: Sequence[str],
                    rename: Mapping[str, str] | None = None,
                    weighting: Literal["samples", "tasks"] = "samples") -> None:
    """Hand the per-sample ``rows``' ``columns`` to the test case's per-task values
    (:mod:`core.testcasecontroller.metrics.per_task`), so the report can give the columns
    (means over these rows) intervals and paired tests; a context without them (a metric
    called outside a job) records nothing. ``rename`` maps a row key to its column name."""
    per_task = getattr(context, "per_task", None)
    if per_task is not None:
        per_task.add_rows(rows, columns, weighting=weighting, rename=rename)


def record_periods(context: Any, rows: Sequence[Mapping[str, Any]], columns: Sequence[str],
                   labels: Sequence[str],
                   weighting: Literal["samples", "tasks"] = "samples") -> None:
    """:func:`record_per_task` of each period's rows (``row["period"]``) under the period's
    column names, ``<column>[<label>]``."""
    for label in labels:
        record_per_task(context, [r for r in rows if r.get("period") == label], columns,
                        rename={c: f"{c}[{label}]" for c in columns}, weighting=weighting)


def mean(values: Sequence[float], digits: int = 4) -> float:
    """Rounded mean; NaN for no values."""
    return round(sum(values) / len(values), digits) if values else math.nan
