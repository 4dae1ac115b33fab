"""Unbiased pass@k (Chen et al., 2021), for a list of k.

For one task with ``n`` samples of which ``c`` pass, the probability that at least
one of ``k`` samples drawn without replacement passes is

    pass@k = 1 - C(n - c, k) / C(n, k)

which is 1 when ``n - c < k`` (every draw of ``k`` contains a passing sample). It is
undefined when ``n < k``: :func:`estimate_pass_at_k` then returns NaN, and
:func:`pass_at_k` returns NaN for that k with a ``logging`` warning naming the
tasks, never a silently smaller denominator and never a fake 1.0.

The estimator is computed as the product ``prod_{i=n-c+1}^{n} (1 - k / i)``, which is
exact algebraically and numerically stable for large ``n``.
"""
from __future__ import annotations

import logging
import math
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence

LOGGER = logging.getLogger(__name__)


def estimate_pass_at_k(num_samples: int, num_correct: int, k: int) -> float:
    """Unbiased pass@k of one task.

    Args:
        num_samples: n >= 0 samples generated.
        num_correct: c passing samples, 0 <= c <= n.
        k: k >= 1.

    Returns:
        A float in [0, 1]; NaN when ``n < k`` (not enough samples to estimate).

    Raises:
        ValueError: negative counts, ``c > n`` or ``k < 1``.
    """
    n, c = int(num_samples), int(num_correct)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if n < 0 or c < 0 or c > n:
        raise ValueError(f"need 0 <= num_correct <= num_samples, got c={c}, n={n}")
    if n < k:
        return math.nan
    if n - c < k:
        return 1.0
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return min(1.0, max(0.0, 1.0 - product))


def pass_at_k(counts: Mapping[str, tuple[int, int]] | Iterable[tuple[int, int]],
              ks: Sequence[int] = (1,)) -> dict[int, float]:
    """Mean pass@k over tasks for each k in ``ks``.

    Args:
        counts: per task ``(num_samples, num_correct)``, as a mapping task_id -> pair
            (warnings then name the tasks) or an iterable of pairs.
        ks: the k values.

    Returns:
        ``{k: mean pass@k}``. A k is NaN (with a warning) when any task has fewer than
        k samples, or when there are no tasks.
    """
    names: list[str] | None = None
    pairs: Iterable[tuple[int, int]]
    if isinstance(counts, Mapping):
        names = [str(t) for t in counts]
        pairs = counts.values()
    else:
        pairs = counts
    ns, cs = array("q"), array("q")
    for n, c in pairs:
        ns.append(int(n))
        cs.append(int(c))
    return mean_pass_at_k(ns, cs, ks, (lambda i: names[i]) if names else (lambda i: f"#{i}"))


def mean_pass_at_k(ns: Sequence[int], cs: Sequence[int], ks: Sequence[int],
                   name_of: Callable[[int], str]) -> dict[int, float]:
    """:func:`pass_at_k` over flat per-task counts (``ns[i]`` samples, ``cs[i]`` correct), so a
    caller with many tasks need not build a mapping; ``name_of(i)`` names task ``i`` in the
    warning for a k above some task's sample count."""
    result: dict[int, float] = {}
    for k in ks:
        if not ns:
            LOGGER.warning("pass@%d is NaN: no tasks", k)
            result[k] = math.nan
            continue
        short = [i for i, n in enumerate(ns) if n < k]
        if short:
            LOGGER.warning("pass@%d is NaN: %d task(s) have fewer than %d samples (e.g. %s)",
                           k, len(short), k, name_of(short[0]))
            result[k] = math.nan
            continue
        result[k] = math.fsum(estimate_pass_at_k(n, c, k) for n, c in zip(ns, cs)) / len(ns)
    return result


def pass_at_k_from_outcomes(outcomes: Mapping[str, Sequence[bool]],
                            ks: Sequence[int] = (1,)) -> dict[int, float]:
    """Same as :func:`pass_at_k` from per-task lists of pass/fail booleans."""
    return pass_at_k({t: (len(v), sum(bool(x) for x in v)) for t, v in outcomes.items()}, ks)
