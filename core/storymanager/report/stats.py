"""Uncertainty of scores over tasks: bootstrap confidence intervals and paired tests.

All functions are deterministic (a fixed seed) so a report does not change between renders.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# the exact McNemar test lives below the scenarios, which use it too; re-exported here
from core.common.exact_tests import EXACT_BINOMIAL_UP_TO, mcnemar_exact  # noqa: F401

RESAMPLES = 2000
SEED = 20261123
#: resampled values held at once (bounds memory for large task sets: 100k tasks x 2000
#: resamples would otherwise be a 1.6 GB index matrix)
BATCH_VALUES = 2_000_000


def _resampled_means(data: np.ndarray, resamples: int,
                     weights: np.ndarray | None = None) -> np.ndarray:
    """Means of ``resamples`` bootstrap resamples of ``data``, computed in bounded batches;
    with ``weights``, weighted means (tasks resampled whole with their weights)."""
    rng = np.random.default_rng(SEED)
    per_batch = max(1, BATCH_VALUES // data.size)
    means = np.empty(resamples)
    for start in range(0, resamples, per_batch):
        count = min(per_batch, resamples - start)
        idx = rng.integers(0, data.size, size=(count, data.size))
        if weights is None:
            means[start:start + count] = data[idx].mean(axis=1)
        else:
            means[start:start + count] = (data[idx] * weights[idx]).sum(axis=1) / \
                weights[idx].sum(axis=1)
    return means


def bootstrap_ci(values: Sequence[float], confidence: float = 0.95,
                 resamples: int = RESAMPLES,
                 weights: Sequence[float] | None = None) -> tuple[float, float, float]:
    """``(mean, low, high)``: the percentile bootstrap interval of the mean over tasks.

    With ``weights`` (e.g. each task's number of scored samples, its value being their mean)
    the statistic is the weighted mean and tasks are resampled whole (a cluster bootstrap:
    samples of one task are not independent); equal weights give the plain interval. An empty
    sequence gives NaNs; one value gives a zero-width interval.
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return math.nan, math.nan, math.nan
    w: np.ndarray | None = None
    if weights is not None:
        w = np.asarray(weights, dtype=float)
        if w.shape != data.shape or (w <= 0).any():
            raise ValueError("weights must be positive, one per value")
        if bool((w == w[0]).all()):
            w = None
    mean = float(data.mean()) if w is None else float((data * w).sum() / w.sum())
    if data.size == 1:
        return mean, mean, mean
    means = _resampled_means(data, resamples, w)
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


#: sign flips drawn by :func:`sign_flip_test` when exact enumeration is too large
FLIPS = 20000
EXACT_FLIPS_UP_TO = 16
#: above this many tasks with a difference the sign-flip distribution is taken as normal (its
#: exact variance, the sum of squared differences): the Monte Carlo draws cost FLIPS x n, 500 s
#: for a few columns of a 100k-task run, and the approximation's error there is far below the
#: Monte Carlo's own resolution
NORMAL_FLIPS_ABOVE = 2000
Z_975, Z_80 = 1.959964, 0.841621


def sign_flip_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of "no difference" between paired per-task values: the paired
    permutation (sign-flip) test of the mean difference. Exact over every sign pattern for up
    to 16 tasks with a non-zero difference, else Monte Carlo with ``FLIPS`` seeded draws
    (p never below 1 / (FLIPS + 1)). Tasks with a zero difference carry no information and
    are dropped; no difference at all gives 1. Above ``NORMAL_FLIPS_ABOVE`` such tasks, the
    sign-flip statistic's normal approximation (mean 0, variance the sum of the squared
    differences). Raises ValueError on unequal lengths."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError("paired samples must have the same length")
    d = (x - y)[(x - y) != 0]
    if d.size == 0:
        return 1.0
    observed = abs(float(d.sum())) - 1e-12 * max(1.0, float(np.abs(d).sum()))
    if d.size > NORMAL_FLIPS_ABOVE:
        z = abs(float(d.sum())) / math.sqrt(float((d * d).sum()))
        return math.erfc(z / math.sqrt(2))
    if d.size <= EXACT_FLIPS_UP_TO:
        signs = ((np.arange(2 ** d.size)[:, None] >> np.arange(d.size)) & 1) * 2 - 1
        return float(np.mean(np.abs(signs @ d) >= observed))
    rng = np.random.default_rng(SEED)
    hits = 0
    per_batch = max(1, BATCH_VALUES // d.size)
    for start in range(0, FLIPS, per_batch):
        count = min(per_batch, FLIPS - start)
        signs = rng.integers(0, 2, size=(count, d.size)) * 2 - 1
        hits += int((np.abs(signs @ d) >= observed).sum())
    return (hits + 1) / (FLIPS + 1)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (same order as given): the family-wise error of
    several pairwise comparisons of one column stays at the level tested."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted = [1.0] * len(pvalues)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def min_discordant_for(alpha: float = 0.05) -> int:
    """The fewest discordant tasks, all won by one side, for which the exact McNemar test
    reaches ``p < alpha`` (6 at 0.05): below that no pass/fail difference can be detected."""
    k = 1
    while mcnemar_exact(k, 0) >= alpha:
        k += 1
    return k


def smallest_detectable_difference(sd_difference: float, tasks: int) -> float:
    """The difference of two paired means a two-sided test at 5% finds with 80% power, by the
    normal approximation: ``(z_0.975 + z_0.8) * sd / sqrt(n)``, ``sd`` being the standard
    deviation of the per-task differences. NaN for fewer than 2 tasks."""
    if tasks < 2 or not math.isfinite(sd_difference):
        return math.nan
    return (Z_975 + Z_80) * sd_difference / math.sqrt(tasks)
