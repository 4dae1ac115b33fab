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
from typing import Any

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


def mean(values: Sequence[float], digits: int = 4) -> float:
    """Rounded mean; NaN for no values."""
    return round(sum(values) / len(values), digits) if values else math.nan
