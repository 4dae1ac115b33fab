"""Is a model worse after a date? Compare per-sample scores between periods, with uncertainty.

The trajectory kinds' metrics write one line per sample with its ``period`` (``before
2024-10-01``, ``from 2024-10-01``; ``periods:`` on the metric) and its scores
(``commit_message_scores.jsonl``, ``revise_scores.jsonl``, ``implement_scores.jsonl`` in the test
case folder). The two periods hold *different* tasks, so the comparison is unpaired:

* per period: the number of samples and the mean of the metric;
* per pair of consecutive periods: the difference of means (later minus earlier), its 95%
  percentile bootstrap interval (tasks resampled within each period), and the two-sided
  permutation p-value of "no difference" (period labels shuffled), each from 10,000 draws
  with a fixed seed, so a rerun prints the same numbers.

**Adjusted for a task property** (``--adjust-for FIELD --tasks TASKS.jsonl``): when the later
tasks differ from the earlier ones in something that moves the score by itself (larger diffs,
longer files), a raw difference cannot tell a model that got worse from tasks that got harder.
Each sample's task is looked up in the task file (by ``id`` or ``task_id``) and its ``FIELD``
read: a number as it is, a string or list by its length (a ``diff`` by its bytes). The adjusted
difference is ``c`` of the least-squares fit ``score = a + b * log(1 + size) + c * later``
(``later`` 1 for the later period): the difference between the periods at equal size, if the
score depends on the log of the size linearly. Its 95% interval comes from resampling tasks
within each period, its p-value from the Freedman-Lane permutation test (the residuals of the
fit without ``c`` shuffled). The tasks of both periods are also cut into ``--bins`` quantile
bins of the size and each bin's range, counts and raw difference printed, so a reader sees how
far the periods overlap and whether the difference holds inside the bins. Where they hardly
overlap, the fit extrapolates: read the bins.

Run as ``python -m core.scenarios.trajectories.period_compare SCORES.jsonl --metric chrf``
(``--metric`` repeatable; ``--adjust-for diff --tasks data/x.jsonl`` adds the adjusted line). A
sample without the metric (a failure scored ``null``) or without a period is an error naming
its line; so is a sample whose task is not in the task file or lacks the field.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.common.errors import ConfigError, IanvsError
from core.common.jsonl import iter_jsonl

__all__ = ["Comparison", "Adjusted", "compare_periods", "adjusted_difference", "task_sizes",
           "main"]

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


@dataclass(frozen=True)
class Adjusted:
    """The later period against the earlier one at equal size of a task property (module
    docstring): the fitted difference, its interval and p, and each quantile bin's
    ``(low, high, n_earlier, n_later, raw difference or None)``."""

    metric: str
    field: str
    difference: float
    low: float
    high: float
    p_value: float
    bins: tuple[tuple[float, float, int, int, float | None], ...]

    def line(self) -> str:
        dropped = sum(1 for b in self.bins if b[4] is None)
        head = (f"{self.metric} adjusted for log(1 + {self.field}): difference "
                f"{self.difference:+.4g}, 95% interval [{self.low:+.4g}, {self.high:+.4g}], "
                f"permutation p = {self.p_value:.3g}")
        rows = [f"  {self.field} bin {lo:.6g}..{hi:.6g}: n {na} / {nb}, raw difference "
                + (f"{d:+.4g}" if d is not None else "n/a") for lo, hi, na, nb, d in self.bins]
        note = [f"  ({dropped} of {len(self.bins)} bins hold one period only)"] if dropped else []
        return "\n".join([head, *rows, *note])


def _size(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return float(len(value.encode("utf-8")))
    if isinstance(value, (list, dict)):
        return float(len(value))
    return None


def task_sizes(path: Path, field: str) -> dict[str, float]:
    """``task id -> FIELD's value`` of every task in ``path`` (a number as it is, a string by
    its UTF-8 bytes, a list or object by its length).

    Raises:
        ConfigError: a task lacks an id, or ``field`` is missing or not measurable.
        DatasetError: the file is missing or not JSON lines.
    """
    out: dict[str, float] = {}
    for lineno, task in iter_jsonl(path, "task file"):
        task_id = task.get("id", task.get("task_id"))
        if not isinstance(task_id, str):
            raise ConfigError(f"{path}:{lineno}: a task without an id")
        size = _size(task.get(field))
        if size is None:
            raise ConfigError(f"{path}:{lineno}: task {task_id} has no measurable {field!r}",
                              hint=f"fields of this task: {', '.join(sorted(task))}")
        out[task_id] = size
    return out


def _groups(path: Path, metric: str, with_ids: bool = False) -> dict[str, list[Any]]:
    groups: dict[str, list[Any]] = {}
    # a log this project wrote: a score may be NaN (finite=False), as the metrics wrote it
    for lineno, row in iter_jsonl(path, "scores file", finite=False):
        value, period = row.get(metric), row.get("period")
        if not isinstance(period, str) or not period:
            raise ConfigError(f"{path}:{lineno}: no period", hint="run the metric with periods: "
                              "[\"YYYY-MM-DD\"] in its testenv entry")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}:{lineno}: no numeric {metric!r}",
                              hint=f"metrics of this file: {', '.join(sorted(row))}")
        if with_ids:
            task_id = row.get("task_id")
            if not isinstance(task_id, str):
                raise ConfigError(f"{path}:{lineno}: no task_id")
            groups.setdefault(period, []).append((task_id, float(value)))
        else:
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


def _two_or_more(path: Path, groups: dict[str, list[Any]]) -> list[str]:
    """The periods of ``groups`` in order (:func:`_order`); ConfigError when fewer than two."""
    order = _order(list(groups))
    if len(order) < 2:
        raise ConfigError(f"{path}: one period only ({', '.join(order) or 'none'})",
                          hint="the metric needs periods: with a date inside the tasks' range")
    return order


def compare_periods(path: Path, metric: str, draws: int = DRAWS,
                    seed: int = SEED) -> list[Comparison]:
    """Each period against the one before it on ``metric`` (module docstring).

    Raises:
        ConfigError: a line lacks the period or the metric, or the file holds fewer than two
            periods.
        DatasetError: the file is missing or not JSON lines (:func:`iter_jsonl`).
    """
    groups = _groups(path, metric)
    order = _two_or_more(path, groups)
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


def _fit_c(y: np.ndarray, design: np.ndarray) -> float:
    """The last coefficient of the least-squares fit of ``y`` on ``design``."""
    return float(np.linalg.lstsq(design, y, rcond=None)[0][-1])


def adjusted_difference(path: Path, metric: str, sizes: dict[str, float], field: str,
                        bins: int = 4, draws: int = DRAWS, seed: int = SEED) -> Adjusted:
    """The last period against the one before it on ``metric`` at equal ``sizes`` (module
    docstring), with the per-bin table.

    Raises:
        ConfigError: as :func:`compare_periods`; a sample's task is not in ``sizes``.
    """
    groups = _groups(path, metric, with_ids=True)
    order = _two_or_more(path, groups)
    earlier, later = order[-2], order[-1]
    missing = sorted({t for per in (earlier, later) for t, _v in groups[per] if t not in sizes})
    if missing:
        raise ConfigError(f"{path}: task(s) {', '.join(missing[:3])} not in the task file",
                          hint="--tasks names the data file the job ran on")
    rows = [(sizes[t], v, 0.0) for t, v in groups[earlier]] + \
           [(sizes[t], v, 1.0) for t, v in groups[later]]
    x = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    side = np.array([r[2] for r in rows])
    design = np.column_stack([np.ones_like(x), np.log1p(np.maximum(x, 0.0)), side])
    diff = _fit_c(y, design)
    rng = np.random.default_rng(seed)
    first, second = np.flatnonzero(side == 0), np.flatnonzero(side == 1)
    boot = np.empty(draws)
    for i in range(draws):
        pick = np.concatenate([rng.choice(first, len(first)), rng.choice(second, len(second))])
        boot[i] = _fit_c(y[pick], design[pick])
    low, high = np.nanpercentile(boot, [2.5, 97.5])
    reduced = design[:, :2]
    coef = np.linalg.lstsq(reduced, y, rcond=None)[0]
    fitted, resid = reduced @ coef, y - reduced @ coef
    extreme = 0
    for _ in range(draws):
        extreme += abs(_fit_c(fitted + rng.permutation(resid), design)) >= abs(diff) - 1e-12
    edges = np.quantile(x, np.linspace(0, 1, bins + 1))
    which = np.clip(np.searchsorted(edges[1:-1], x, side="right"), 0, bins - 1)
    table = []
    for k in range(bins):
        a, b = y[(which == k) & (side == 0)], y[(which == k) & (side == 1)]
        inside = x[which == k]
        lo, hi = (float(inside.min()), float(inside.max())) if len(inside) else (float("nan"),) * 2
        table.append((lo, hi, len(a), len(b),
                      float(b.mean() - a.mean()) if len(a) and len(b) else None))
    return Adjusted(metric, field, diff, float(low), float(high), (extreme + 1) / (draws + 1),
                    tuple(table))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.scenarios.trajectories.period_compare",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("scores", type=Path, help="per-sample scores with a 'period' field")
    parser.add_argument("--metric", action="append", required=True,
                        help="a numeric field of the lines (repeatable)")
    parser.add_argument("--adjust-for", metavar="FIELD",
                        help="also give the difference at equal log(1 + size) of this task "
                             "field (a number, or a string's bytes, e.g. diff), with its "
                             "quantile bins; needs --tasks")
    parser.add_argument("--tasks", type=Path, help="the task file the job ran on")
    parser.add_argument("--bins", type=int, default=4,
                        help="quantile bins of the size printed with --adjust-for (default 4)")
    args = parser.parse_args(argv)
    if bool(args.adjust_for) != bool(args.tasks):
        parser.error("--adjust-for and --tasks go together")
    if args.bins < 1:
        parser.error("--bins must be at least 1")
    try:
        sizes = task_sizes(args.tasks, args.adjust_for) if args.adjust_for else None
        for metric in args.metric:
            for comparison in compare_periods(args.scores, metric):
                sys.stdout.write(comparison.line() + "\n")
            if sizes is not None:
                adjusted = adjusted_difference(args.scores, metric, sizes, args.adjust_for,
                                               args.bins)
                sys.stdout.write(adjusted.line() + "\n")
    except IanvsError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
