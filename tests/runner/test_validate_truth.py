"""``ianvs validate`` tells the truth (issue 14, point 4), through the real command."""
from __future__ import annotations

from pathlib import Path

from tests.runner.conftest import run_cli


def test_recognised_but_unimplemented_paradigm_is_an_error(toy: Path) -> None:
    alg = toy / "algorithm.yaml"
    alg.write_text(alg.read_text().replace("singletasklearning", "lifelonglearning"))
    res = run_cli("validate", "-f", "benchmarkingjob.yaml", cwd=toy)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "paradigm_type 'lifelonglearning'" in out and "does not implement" in out
    assert "OK" not in out


def test_jointinference_without_its_modules_is_an_error(toy: Path) -> None:
    alg = toy / "algorithm.yaml"
    alg.write_text(alg.read_text().replace("singletasklearning", "jointinference"))
    res = run_cli("validate", "-f", "benchmarkingjob.yaml", cwd=toy)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "jointinference needs modules of type" in out
    assert "edgemodel, cloudmodel, hard_example_mining" in out and "OK" not in out


def test_metric_import_error_is_reported_as_itself_only(toy: Path) -> None:
    metric = toy / "acc.py"
    metric.write_text("import module_that_is_not_installed_anywhere\n" + metric.read_text())
    res = run_cli("validate", "-f", "benchmarkingjob.yaml", cwd=toy)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "No module named 'module_that_is_not_installed_anywhere'" in out
    assert "not produced" not in out  # no knock-on complaint about sort_by: acc
    assert "1 problem(s) found" in out


def test_sort_by_on_a_metric_nobody_produces_is_still_reported(toy: Path) -> None:
    job = toy / "benchmarkingjob.yaml"
    job.write_text(job.read_text().replace('{"acc": "descend"}', '{"accuracy": "descend"}'))
    res = run_cli("validate", "-f", "benchmarkingjob.yaml", cwd=toy)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert "rank.sort_by metric 'accuracy' is not produced" in out
