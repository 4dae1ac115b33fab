"""Uncertainty of scores over tasks: bootstrap confidence intervals and paired tests.

All functions are deterministic (a fixed seed) so a report does not change between renders.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

RESAMPLES = 2000
SEED = 20261123
#: resampled values held at once (bounds memory for large task sets: 100k tasks x 2000
#: resamples would otherwise be a 1.6 GB index matrix)
BATCH_VALUES = 2_000_000


def _resampled_means(data: np.ndarray, resamples: int) -> np.ndarray:
    """Means of ``resamples`` bootstrap resamples of ``data``, computed in bounded batches."""
    rng = np.random.default_rng(SEED)
    per_batch = max(1, BATCH_VALUES // data.size)
    means = np.empty(resamples)
    for start in range(0, resamples, per_batch):
        count = min(per_batch, resamples - start)
        means[start:start + count] = data[rng.integers(0, data.size,
                                                       size=(count, data.size))].mean(axis=1)
    return means


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95,
                 resamples: int = RESAMPLES) -> tuple[float, float, float]:
    """``(mean, low, high)``: the percentile bootstrap interval of the mean over tasks.

    An empty sequence gives NaNs; one value gives a zero-width interval.
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return math.nan, math.nan, math.nan
    mean = float(data.mean())
    if data.size == 1:
        return mean, mean, mean
    means = _resampled_means(data, resamples)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return mean, float(low), float(high)


def paired_bootstrap(a: Sequence[float], b: Sequence[float], confidence: float = 0.95,
                     resamples: int = RESAMPLES) -> tuple[float, float, float, float]:
    """``(mean difference a - b, low, high, p)`` over the same tasks, resampling tasks.

    ``p`` is the two-sided bootstrap p-value of "no difference" (twice the share of resampled
    differences on the other side of zero, capped at 1). Raises ValueError on unequal lengths.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError("paired samples must have the same length")
    if x.size == 0:
        return math.nan, math.nan, math.nan, math.nan
    diff = x - y
    mean = float(diff.mean())
    means = _resampled_means(diff, resamples)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    if not diff.any():
        return 0.0, 0.0, 0.0, 1.0
    other_side = float(np.mean(means <= 0) if mean > 0 else np.mean(means >= 0))
    return mean, float(low), float(high), min(1.0, 2 * other_side)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs (tasks only A passes,
    tasks only B passes): a binomial test of ``only_a`` out of ``only_a + only_b`` at 1/2."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)
