"""Every column that is a mean over tasks carries its uncertainty, and every comparison says
whether it is real (issue 44, point 4): per-task values recorded by the metrics, bootstrap
intervals over tasks (weighted by samples where the column is a mean over samples), paired
tests between rows on the same tasks for pass/fail and text columns alike (Holm-adjusted), the
rows a row differs from, and the smallest difference the tasks can detect."""
from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from core.storymanager.report.stats import (bootstrap_ci, holm, min_discordant_for,
                                            sign_flip_test, smallest_detectable_difference)
from core.storymanager.report.writer import CaseView, comparisons, detectable
from core.testcasecontroller.metrics.per_task import PerTaskValues, read_per_task_values
from tests.runner.conftest import run_cli
from tests.scenarios.conftest import BENCH, cut_test_index
from tests.storymanager.test_report import _markdown_tables


def test_sign_flip_test_exact_values() -> None:
    # 6 tasks all won by one side: 2 of the 64 sign patterns are as extreme -> 1/32
    assert sign_flip_test([1.0] * 6, [0.0] * 6) == pytest.approx(2 / 64)
    assert sign_flip_test([1.0] * 5, [0.0] * 5) == pytest.approx(2 / 32)
    # zero differences carry no information and are dropped
    assert sign_flip_test([1.0] * 6 + [0.5] * 10, [0.0] * 6 + [0.5] * 10) == pytest.approx(2 / 64)
    assert sign_flip_test([3.0, 1.0], [3.0, 1.0]) == 1.0
    # symmetric differences: no evidence at all
    assert sign_flip_test([1.0, 0.0], [0.0, 1.0]) == 1.0
    # many tasks: Monte Carlo, deterministic, never zero
    big = sign_flip_test(list(np.linspace(0.5, 1.5, 40)), [0.0] * 40)
    assert 0 < big < 1e-3 and big == sign_flip_test(list(np.linspace(0.5, 1.5, 40)), [0.0] * 40)
    with pytest.raises(ValueError):
        sign_flip_test([1.0], [1.0, 2.0])


def test_holm_and_detectable_difference() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5] and holm([]) == []
    assert min_discordant_for(0.05) == 6 and min_discordant_for(0.01) == 8
    assert smallest_detectable_difference(1.0, 100) == pytest.approx(0.28016, abs=1e-4)
    assert math.isnan(smallest_detectable_difference(1.0, 1))


def test_weighted_bootstrap_is_the_mean_over_samples() -> None:
    # task values are their samples' means; the column is the mean over all 5 samples
    mean, low, high = bootstrap_ci([1.0, 0.0, 0.5], weights=[1, 2, 2])
    assert mean == pytest.approx((1 + 0 + 1) / 5) and low <= mean <= high
    # equal weights: the plain interval
    assert bootstrap_ci([1.0, 0.0, 1.0], weights=[3, 3, 3]) == bootstrap_ci([1.0, 0.0, 1.0])
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, 0.0], weights=[1, 0])


def test_per_task_values_round_trip(tmp_path: Path) -> None:
    values = PerTaskValues()
    values.add_rows([{"task_id": "a", "chrf": 10.0, "ok": True},
                     {"task_id": "a", "chrf": 30.0, "ok": False},
                     {"task_id": "b", "chrf": float("nan"), "ok": True}], ["chrf", "ok"])
    values.add("pass@1", "a", 1.0, "tasks")
    with pytest.raises(ValueError):
        values.add("pass@1", "b", 1.0, "samples")
    with pytest.raises(ValueError):
        values.add("chrf", "c", float("inf"))
    path = tmp_path / "per_task_values.jsonl"
    values.write(path)
    got, weighting = read_per_task_values(path)
    assert got["chrf"] == {"a": (20.0, 2)}            # NaN left out, as the column's mean does
    assert got["ok"] == {"a": (0.5, 2), "b": (1.0, 1)}
    assert got["pass@1"] == {"a": (1.0, 1)}
    assert weighting == {"chrf": "samples", "ok": "samples", "pass@1": "tasks"}
    PerTaskValues().write(path)                       # nothing recorded: no stale file
    assert not path.exists()
    assert read_per_task_values(path) == ({}, {})


def _view(label: str, column: str, values: list[float]) -> CaseView:
    view = CaseView({}, label, math.nan)
    view.values[column] = {f"t{i}": (v, 1) for i, v in enumerate(values)}
    return view


def test_comparisons_of_a_text_column_and_the_holm_family() -> None:
    rng = np.random.default_rng(7)
    base = list(rng.uniform(20, 60, 30))
    better = [v + 15 + rng.normal(0, 3) for v in base]
    same = [v + rng.normal(0, 3) for v in base]
    views = [_view("#1 a", "chrf", better), _view("#2 b", "chrf", base), _view("#3 c", "chrf", same)]
    comps = {(c["a"], c["b"]): c for c in comparisons(views, "chrf")}
    assert len(comps) == 3 and {c["test"] for c in comps.values()} == {"sign-flip"}
    assert comps[("#1 a", "#2 b")]["significant"] and comps[("#1 a", "#3 c")]["significant"]
    assert not comps[("#2 b", "#3 c")]["significant"]
    assert comps[("#2 b", "#3 c")]["p_adjusted"] >= comps[("#2 b", "#3 c")]["p"]
    found = detectable(list(comps.values()))["chrf"]
    assert found["tasks"] == 30 and 0 < found["mde"] < 15 and "floor" not in found
    # rows over different tasks are not compared
    other = _view("#4 d", "chrf", base[:10])
    assert all("#4 d" not in (c["a"], c["b"]) for c in comparisons([*views, other], "chrf"))


@pytest.mark.slow
def test_a_text_job_reports_intervals_and_paired_tests_for_every_mean(tmp_path: Path) -> None:
    """The comment job as shipped, its gold controls only (no model), on its 6 records: every
    text column gets an interval per row, and the paired test tells the controls apart on
    each of them; per-task values match the rank table's means."""
    root = tmp_path / "comment"
    shutil.copytree(BENCH / "comment", root, ignore=shutil.ignore_patterns("workspace"))
    cut_test_index(root, lambda records: records[:6])
    alg = root / "testalgorithms/gen/gen_algorithm.yaml"
    alg.write_text(alg.read_text().replace('["embedded", "reference", "broken"]',
                                           '["reference", "broken"]'))
    res = run_cli("-f", str(root / "benchmarkingjob.yaml"), "--no-progress", cwd=root, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    job = next(root.glob("workspace/*/rank")).parent
    rows = {r["basemodel-generator"]: r for r in csv.DictReader(open(job / "rank/all_rank.csv"))}
    files = sorted(job.rglob("per_task_values.jsonl"))
    assert len(files) == 2
    means = []
    for path in files:
        values, weighting = read_per_task_values(path)
        assert weighting["chrf"] == "samples" and len(values["chrf"]) == 6
        cells = values["chrf"].values()
        means.append(round(sum(v * n for v, n in cells) / sum(n for _, n in cells), 2))
    assert sorted(means) == sorted(float(r["chrf"]) for r in rows.values())
    md = (job / "report/leaderboard.md").read_text()
    tables = _markdown_tables(md)
    leaderboard, intervals, comparison = tables[0], tables[1], tables[2]
    assert leaderboard[0][-2] == "differs from (line_coverage)"
    assert {"line_coverage", "chrf", "bleu", "rouge_l", "code_preserved"} <= set(intervals[0])
    assert all(cell != "n/a" for row in intervals[1:] for cell in row[1:])
    by_column = {r[0]: r for r in comparison[1:]}
    assert by_column["chrf"][7] == "sign-flip" and by_column["chrf"][-1] == "significant"
    assert by_column["chrf"][3] == "6"
    assert by_column["code_preserved"][7].startswith("McNemar (6 / 0)")


def test_sign_flip_test_on_many_tasks_is_its_normal_limit() -> None:
    """Above NORMAL_FLIPS_ABOVE tasks the test is the normal approximation of the same
    statistic (the Monte Carlo draws would cost minutes on a 100k-task run): it agrees with the
    Monte Carlo value just below the switch, and a shift of a tenth of the spread is found."""
    from core.storymanager.report import stats

    rng = np.random.default_rng(3)
    d = rng.normal(0.05, 1.0, stats.NORMAL_FLIPS_ABOVE + 1)
    normal = sign_flip_test(list(d), [0.0] * d.size)
    monte_carlo = sign_flip_test(list(d[:-1]), [0.0] * (d.size - 1))
    assert abs(normal - monte_carlo) < 0.02
    shifted = sign_flip_test(list(rng.normal(0.1, 1.0, 100_000)), [0.0] * 100_000)
    assert shifted < 1e-10
    assert sign_flip_test([1.0, -1.0] * 5000, [0.0] * 10_000) == 1.0


def test_mcnemar_on_many_discordant_tasks_is_the_same_tail_in_floating_point() -> None:
    """Above EXACT_BINOMIAL_UP_TO discordant pairs the binomial tail is summed from logarithms
    (the integer sum of a 100k-task run's tail took minutes): the same value to 1e-9."""
    import math as m

    from core.storymanager.report import stats

    n = stats.EXACT_BINOMIAL_UP_TO + 1
    for k in (400, 480, 500):
        exact = min(1.0, 2 * sum(m.comb(n, i) for i in range(k + 1)) / 2 ** n)
        assert stats.mcnemar_exact(k, n - k) == pytest.approx(exact, rel=1e-9)
    assert 0.1 < stats.mcnemar_exact(25_000, 25_300) < 0.3
