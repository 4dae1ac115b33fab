"""Is a model worse after a date? Compare per-sample scores between periods, with uncertainty.

The trajectory kinds' metrics write one line per sample with its ``period`` (``before
2024-10-01``, ``from 2024-10-01``; ``periods:`` on the metric) and its scores
(``commit_message_scores.jsonl``, ``revise_scores.jsonl`` in the test case folder). The two
periods hold *different* tasks, so the comparison is unpaired:

* per period: the number of samples and the mean of the metric;
* per pair of consecutive periods: the difference of means (later minus earlier), its 95%
  percentile bootstrap interval (tasks resampled within each period), and the two-sided
  permutation p-value of "no difference" (period labels shuffled), each from 10,000 draws
  with a fixed seed, so a rerun prints the same numbers.

Run as ``python -m core.scenarios.trajectories.period_compare SCORES.jsonl --metric chrf``
(``--metric`` repeatable). A sample without the metric (a failure scored ``null``) or without
a period is an error naming its line.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.common.errors import ConfigError, IanvsError
from core.common.jsonl import iter_jsonl

__all__ = ["Comparison", "compare_periods", "main"]

DRAWS = 10_000
SEED = 1


@dataclass(frozen=True)
class Comparison:
    """A later period against the one before it, on one metric (module docstring)."""

    metric: str
    earlier: str
    later: str
    n_earlier: int
    n_later: int
    mean_earlier: float
    mean_later: float
    difference: float
    low: float
    high: float
    p_value: float

    def line(self) -> str:
        return (f"{self.metric}: {self.earlier} {self.mean_earlier:.4g} (n={self.n_earlier}), "
                f"{self.later} {self.mean_later:.4g} (n={self.n_later}); difference "
                f"{self.difference:+.4g}, 95% interval [{self.low:+.4g}, {self.high:+.4g}], "
                f"permutation p = {self.p_value:.3g}")


def _groups(path: Path, metric: str) -> dict[str, list[float]]:
    groups: dict[str, list[float]] = {}
    # a log this project wrote: a score may be NaN (finite=False), as the metrics wrote it
    for lineno, row in iter_jsonl(path, "scores file", finite=False):
        value, period = row.get(metric), row.get("period")
        if not isinstance(period, str) or not period:
            raise ConfigError(f"{path}:{lineno}: no period", hint="run the metric with periods: "
                              "[\"YYYY-MM-DD\"] in its testenv entry")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}:{lineno}: no numeric {metric!r}",
                              hint=f"metrics of this file: {', '.join(sorted(row))}")
        groups.setdefault(period, []).append(float(value))
    return groups


def _order(periods: Sequence[str]) -> list[str]:
    """``before d`` first, then ``d1..d2`` by date, then ``from d`` (the periods' own labels)."""
    def key(label: str) -> tuple[int, str]:
        if label.startswith("before "):
            return (0, label[7:])
        if label.startswith("from "):
            return (2, label[5:])
        return (1, label)
    return sorted(periods, key=key)


def compare_periods(path: Path, metric: str, draws: int = DRAWS,
                    seed: int = SEED) -> list[Comparison]:
    """Each period against the one before it on ``metric`` (module docstring).

    Raises:
        ConfigError: a line lacks the period or the metric, or the file holds fewer than two
            periods.
        DatasetError: the file is missing or not JSON lines (:func:`iter_jsonl`).
    """
    groups = _groups(path, metric)
    order = _order(list(groups))
    if len(order) < 2:
        raise ConfigError(f"{path}: one period only ({', '.join(order) or 'none'})",
                          hint="the metric needs periods: with a date inside the tasks' range")
    rng = np.random.default_rng(seed)
    out = []
    for earlier, later in zip(order, order[1:]):
        a, b = np.array(groups[earlier]), np.array(groups[later])
        diff = float(b.mean() - a.mean())
        boot = (b[rng.integers(0, len(b), (draws, len(b)))].mean(axis=1)
                - a[rng.integers(0, len(a), (draws, len(a)))].mean(axis=1))
        low, high = np.percentile(boot, [2.5, 97.5])
        pool = np.concatenate([a, b])
        extreme = 0
        for _ in range(draws):
            perm = rng.permutation(pool)
            extreme += abs(perm[len(a):].mean() - perm[:len(a)].mean()) >= abs(diff) - 1e-12
        out.append(Comparison(metric, earlier, later, len(a), len(b), float(a.mean()),
                              float(b.mean()), diff, float(low), float(high),
                              (extreme + 1) / (draws + 1)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.scenarios.trajectories.period_compare",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("scores", type=Path, help="per-sample scores with a 'period' field")
    parser.add_argument("--metric", action="append", required=True,
                        help="a numeric field of the lines (repeatable)")
    args = parser.parse_args(argv)
    try:
        for metric in args.metric:
            for comparison in compare_periods(args.scores, metric):
                sys.stdout.write(comparison.line() + "\n")
    except IanvsError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
