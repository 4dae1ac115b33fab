"""Both default jobs exactly as shipped, on the real embedded model (slow: a few minutes each
on a 2-core CPU): the gold controls bracket the model on every reference-based metric."""
from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path

import pytest

from tests.runner.conftest import run_cli
from tests.scenarios.conftest import BENCH


def _run(kind: str, tmp_path: Path) -> dict[str, dict[str, str]]:
    root = tmp_path / kind
    shutil.copytree(BENCH / kind, root, ignore=shutil.ignore_patterns("workspace"))
    res = run_cli("-f", str(root / "benchmarkingjob.yaml"), "--no-progress", cwd=root,
                  timeout=1800)
    assert res.returncode == 0, res.stderr[-4000:]
    rows = csv.DictReader(open(next(root.glob("workspace/*/rank/all_rank.csv"))))
    return {r["basemodel-generator"]: r for r in rows}


def _bracketed(rows: dict[str, dict[str, str]], metric: str) -> tuple[float, float, float]:
    ref, model, broken = (float(rows[g][metric]) for g in ("reference", "embedded", "broken"))
    assert broken <= model <= ref, (metric, broken, model, ref)
    return ref, model, broken


@pytest.mark.slow
def test_comment_default_job(tmp_path: Path) -> None:
    rows = _run("comment", tmp_path)
    assert set(rows) == {"embedded", "reference", "broken"}
    assert rows["reference"]["code_altered"] == "0" and rows["broken"]["code_altered"] == "6"
    for metric in ("line_coverage", "chrf", "bleu", "rouge_l"):
        ref, _model, broken = _bracketed(rows, metric)
        assert ref == (1.0 if metric in ("line_coverage", "rouge_l") else 100.0)
        assert broken == 0.0
    assert int(rows["embedded"]["scored_samples"]) == 6


@pytest.mark.slow
def test_issue_default_job(tmp_path: Path) -> None:
    rows = _run("issue", tmp_path)
    assert set(rows) == {"embedded", "reference", "broken"}
    for metric in ("chrf", "bleu", "rouge_l", "embedding_sim"):
        ref, _model, broken = _bracketed(rows, metric)
        assert ref == pytest.approx(100.0 if metric in ("chrf", "bleu") else 1.0, abs=1e-3)
    for row in rows.values():   # the judge ran on every test case; failures are shown, not hidden
        assert int(row["judge_parse_failures"]) >= 0 and row["judge_errors"] == "0"
        score = float(row["judge_score"]) if row["judge_score"] else math.nan
        assert math.isnan(score) or 1.0 <= score <= 5.0
