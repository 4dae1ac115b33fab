"""Url-less metrics of upstream Ianvs (system metrics read ``system_metric_info``).

These are looked up by name when a testenv metric has no ``url``. The five system metrics
(exact, case-sensitive names) receive the paradigm's ``system_metric_info`` dict as their
only argument, as upstream. ``samples_transfer_ratio`` keeps upstream's ``+ 1`` in the
denominator for compatibility (see docs/deviations.md).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

SYSTEM_METRICS = ("samples_transfer_ratio", "FWT", "BWT", "MATRIX", "task_avg_acc",
                  "forget_rate")


def samples_transfer_ratio(info: Mapping[str, Any]) -> float:
    """Transferred samples / (inferred samples + 1), rounded to 4 places (upstream)."""
    pairs = info.get("samples_transfer_ratio", [])
    inferred = sum(len(a) for a, _ in pairs)
    transferred = sum(len(b) for _, b in pairs)
    return round(transferred / (inferred + 1), 4)


def _accuracy_matrix(info: Mapping[str, Any]) -> list[list[float]]:
    rows = info.get("MATRIX", {}).get("all", [])
    return [[float(cell["accuracy"]) for cell in row] for row in rows]


def BWT(info: Mapping[str, Any]) -> float:  # noqa: N802 - upstream name
    """Backward transfer: mean of (final accuracy - accuracy when learned) over tasks."""
    try:
        m = _accuracy_matrix(info)
        n = len(m) - 1
        return float(np.mean([m[-1][i] - m[i + 1][i] for i in range(n - 1)])) if n > 1 \
            else math.nan
    except (KeyError, IndexError, TypeError, ValueError):
        return math.nan


def FWT(info: Mapping[str, Any]) -> float:  # noqa: N802 - upstream name
    """Forward transfer: mean of (accuracy before learning - initial accuracy) over tasks."""
    try:
        m = _accuracy_matrix(info)
        n = len(m) - 1
        return float(np.mean([m[i][i] - m[0][i] for i in range(1, n)])) if n > 1 else math.nan
    except (KeyError, IndexError, TypeError, ValueError):
        return math.nan


def MATRIX(info: Mapping[str, Any]) -> Any:  # noqa: N802 - upstream name
    """The accuracy matrices themselves (written to the CSV as their ``str()``)."""
    return info.get("MATRIX", {})


def task_avg_acc(info: Mapping[str, Any]) -> float:
    return round(float(info["task_avg_acc"]["accuracy"]), 3)


def forget_rate(info: Mapping[str, Any]) -> float:
    return round(float(np.mean(info["forget_rate"])), 3)


BUILTINS: dict[str, Callable[..., Any]] = {
    "samples_transfer_ratio": samples_transfer_ratio, "fwt": FWT, "bwt": BWT,
    "matrix": MATRIX, "task_avg_acc": task_avg_acc, "forget_rate": forget_rate,
}
