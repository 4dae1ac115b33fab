"""Agreement statistics for judged answers: Cohen's kappa, Krippendorff's alpha and a
bootstrap interval over items.

All functions are pure and deterministic (the bootstrap uses a fixed seed). Labels are any
hashable values (the human sheets use 1 = acceptable, 0 = not); statistics that are undefined
on the data given are NaN, never an exception.

* :func:`cohen_kappa`: two raters, the same items, each item labelled by both.
* :func:`krippendorff_alpha`: any number of raters, nominal labels, missing ratings allowed
  (an item with fewer than two ratings carries no information and is ignored). For two raters
  without missing ratings it differs from Cohen's kappa only by the small-sample correction
  of its expected disagreement.
* :func:`bootstrap_interval`: the percentile interval of any statistic of a list of items,
  resampling *items* with replacement (ratings of one item stay together), so pooled
  agreement over many cases gets an interval that reflects how many items it rests on.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

T = TypeVar("T")
RESAMPLES = 2000
SEED = 20240601


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Cohen's kappa of two raters' labels on the same items (``a[i]`` and ``b[i]`` label item
    ``i``); NaN when undefined: unequal lengths, fewer than two items, or expected agreement 1
    (both raters constant on the same label)."""
    if len(a) != len(b) or len(a) < 2:
        return math.nan
    n = len(a)
    labels = set(a) | set(b)
    observed = sum(x == y for x, y in zip(a, b)) / n
    expected = sum((list(a).count(v) / n) * (list(b).count(v) / n) for v in labels)
    if expected >= 1.0:
        return math.nan
    return (observed - expected) / (1.0 - expected)


def krippendorff_alpha(units: Sequence[Sequence[Hashable]]) -> float:
    """Krippendorff's alpha for nominal labels; ``units[i]`` holds the labels item ``i`` got
    from the raters who rated it (any number, missing ones simply absent).

    alpha = 1 - D_o / D_e, from the coincidence matrix of pairable values (items with at
    least two labels). NaN when fewer than two pairable values exist or every pairable value
    is the same label (D_e = 0).
    """
    pairable = [list(u) for u in units if len(u) >= 2]
    coincidence: dict[tuple[Hashable, Hashable], float] = {}
    for unit in pairable:
        m = len(unit)
        for i, x in enumerate(unit):
            for j, y in enumerate(unit):
                if i != j:
                    coincidence[(x, y)] = coincidence.get((x, y), 0.0) + 1.0 / (m - 1)
    n = sum(coincidence.values())
    if n < 2:
        return math.nan
    marginal: dict[Hashable, float] = {}
    for (x, _y), weight in coincidence.items():
        marginal[x] = marginal.get(x, 0.0) + weight
    observed = sum(w for (x, y), w in coincidence.items() if x != y)
    expected = (n * n - sum(v * v for v in marginal.values())) / (n - 1)
    if expected <= 0:
        return math.nan
    return 1.0 - observed / expected


def bootstrap_interval(items: Sequence[T], statistic: Callable[[Sequence[T]], float],
                       confidence: float = 0.95, resamples: int = RESAMPLES,
                       seed: int = SEED) -> tuple[float, float, float]:
    """``(value, low, high)``: ``statistic(items)`` and its percentile bootstrap interval,
    resampling ``items`` with replacement. Resamples where the statistic is NaN are left out
    of the percentiles; an empty list, a NaN value or fewer than 20 finite resamples give NaN
    bounds. One item gives a zero-width interval (nothing to resample)."""
    value = statistic(items) if items else math.nan
    if not items or math.isnan(value):
        return value, math.nan, math.nan
    if len(items) == 1:
        return value, value, value
    rng = random.Random(seed)
    stats = sorted(s for s in (statistic([items[rng.randrange(len(items))]
                                          for _ in items]) for _ in range(resamples))
                   if not math.isnan(s))
    if len(stats) < 20:
        return value, math.nan, math.nan
    tail = (1.0 - confidence) / 2.0
    return value, _percentile(stats, tail), _percentile(stats, 1.0 - tail)


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (``q`` in 0..1) of a sorted, non-empty list."""
    pos = q * (len(sorted_values) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def pooled_kappa(pairs: Sequence[Sequence[tuple[Hashable, Hashable]]]) -> float:
    """Cohen's kappa over every ``(a, b)`` pair of every item (an item may hold several pairs,
    e.g. the judge's verdict against each human rater's rating)."""
    flat = [p for item in pairs for p in item]
    return cohen_kappa([p[0] for p in flat], [p[1] for p in flat])


def rounded(value: float, digits: int = 4) -> float:
    """``round(value, digits)``, NaN kept."""
    return value if math.isnan(value) else round(value, digits)
