"""The trajectory kinds' default jobs exactly as shipped, on the real embedded model (slow: a few
minutes each on a 2-core CPU): the gold controls bracket the model."""
from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from tests.runner.conftest import run_cli
from tests.scenarios.conftest import BENCH


def _run(kind: str, tmp_path: Path) -> dict[str, dict[str, str]]:
    root = tmp_path / kind
    shutil.copytree(BENCH / kind, root, ignore=shutil.ignore_patterns("workspace"))
    res = run_cli("-f", str(root / "benchmarkingjob.yaml"), "--no-progress", "--no-report", cwd=root,
                  timeout=1800)
    assert res.returncode == 0, res.stderr[-4000:]
    rows = csv.DictReader(open(next(root.glob("workspace/*/rank/all_rank.csv"))))
    return {r["basemodel-generator"]: r for r in rows}


def _bracketed(rows: dict[str, dict[str, str]], metric: str) -> None:
    ref, model, broken = (float(rows[g][metric]) for g in ("reference", "embedded", "broken"))
    assert broken <= model <= ref, (metric, broken, model, ref)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_commit_message_default_job(tmp_path: Path) -> None:
    rows = _run("commit_message", tmp_path)
    for metric in ("chrf", "bleu", "rouge_l", "subject_chrf"):
        _bracketed(rows, metric)
        assert float(rows["reference"][metric]) == pytest.approx(1.0 if metric == "rouge_l" else 100.0)
    assert rows["embedded"]["scored_samples"] == "6" and rows["embedded"]["judge_errors"] == "0"


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_implement_change_default_job(tmp_path: Path) -> None:
    rows = _run("implement_change", tmp_path)
    _bracketed(rows, "pass@1")
    assert rows["reference"]["pass@1"] == "1.0" and rows["broken"]["pass@1"] == "0.0"
    model = rows["embedded"]
    outcomes = ("passed", "failed", "error", "syntax_error", "timeout", "malformed_diff",
                "diff_does_not_apply", "no_change", "bad_path")
    assert sum(int(model[c]) for c in outcomes) + int(model["generation_error"]) == 2


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_revise_default_job(tmp_path: Path) -> None:
    rows = _run("revise", tmp_path)
    for metric in ("edit_chrf", "exact_match"):
        _bracketed(rows, metric)
    assert rows["reference"]["exact_match"] == "1.0" and rows["broken"]["no_change"] == "4"
