"""The exact McNemar test, for every layer that compares two rows' pass/fail over the same tasks
(the report's paired tests, the self-align verdict command); :mod:`core.storymanager.report.stats`
re-exports it."""
from __future__ import annotations

import math

#: discordant pairs up to which :func:`mcnemar_exact` sums the binomial tail in integers
EXACT_BINOMIAL_UP_TO = 1000


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs (tasks only A passes,
    tasks only B passes): a binomial test of ``only_a`` out of ``only_a + only_b`` at 1/2.

    Up to ``EXACT_BINOMIAL_UP_TO`` discordant pairs the tail is summed in integers; above, the
    same terms are summed in floating point from their logarithms (the integer sum of a
    50,000-pair tail took minutes; the terms below double precision's range add nothing)."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    if n <= EXACT_BINOMIAL_UP_TO:
        tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    else:
        log_norm = math.lgamma(n + 1) - n * math.log(2)
        tail = math.fsum(math.exp(log_norm - math.lgamma(i + 1) - math.lgamma(n - i + 1))
                         for i in range(k + 1))
    return min(1.0, 2 * tail)
