"""The trajectory kinds' default jobs as shipped (their configuration, generators, metrics and
judge), on the real embedded model, each run once with every assertion about it (slow).

To keep the suite within its budget each run reads a cut of the shipped subset -- the first task
of each commit-date period, and for revise one test-graded and one similarity-graded task -- so
the per-period columns, the gold controls and both gradings are still exercised; the full-size
jobs are timed by ``python benchmarks/default_job.py --job <kind>`` (trajectories.md)."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from tests.runner.conftest import run_cli
from tests.scenarios.conftest import BENCH, cut_test_index

OUTCOMES = ("passed", "failed", "error", "syntax_error", "timeout", "malformed_diff", "diff_does_not_apply",
            "no_change", "bad_path")


def _cut(records: list[dict], kind: str) -> list[dict]:
    """The records the suite's run reads (module docstring)."""
    if kind == "revise":
        by_grading = {r["grading"]: r for r in reversed(records)}
        return [by_grading["tests"], by_grading["similarity"]]
    if kind == "implement_change":
        return records[:1]
    early = [r for r in records if r["committed_at"] < "2024-06-01"]
    late = [r for r in records if r["committed_at"] >= "2024-06-01"]
    return [early[0], late[0]]


def _run(kind: str, root: Path) -> dict[str, dict[str, str]]:
    shutil.copytree(BENCH / kind, root, ignore=shutil.ignore_patterns("workspace"))
    cut_test_index(root, lambda records: _cut(records, kind))
    res = run_cli("-f", str(root / "benchmarkingjob.yaml"), "--no-progress", "--no-report", cwd=root,
                  timeout=1200)
    assert res.returncode == 0, res.stderr[-4000:]
    rows = csv.DictReader(open(next(root.glob("workspace/*/rank/all_rank.csv"))))
    return {r["basemodel-generator"]: r for r in rows}


def _bracketed(rows: dict[str, dict[str, str]], metric: str) -> None:
    """The gold controls bracket the scale: the broken control scores below the reference, and
    the model's score lies between 0 and the reference. Where the model lands against the broken
    control is a measurement, not an invariant: on the commit-message cut (two records) the
    0.5B model's chrF is 13.11 and the unrelated weather text's 15.11 (2026-11-27)."""
    ref, model, broken = (float(rows[g][metric]) for g in ("reference", "embedded", "broken"))
    assert 0 <= broken < ref and 0 <= model <= ref, (metric, broken, model, ref)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_commit_message_default_job(tmp_path: Path) -> None:
    rows = _run("commit_message", tmp_path / "job")
    for metric in ("chrf", "bleu", "rouge_l", "subject_chrf"):
        _bracketed(rows, metric)
        assert float(rows["reference"][metric]) == pytest.approx(1.0 if metric == "rouge_l" else 100.0)
    assert rows["embedded"]["scored_samples"] == "2" and "judge_errors" not in rows["embedded"]
    assert rows["reference"]["samples[before 2024-06-01]"] == rows["reference"]["samples[from 2024-06-01]"] == "1"


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_implement_change_default_job(tmp_path: Path) -> None:
    """Also the gold controls through ``ianvs -f``: the reference graded in the sandbox passes,
    the broken reply is ``no_change`` (nothing run)."""
    rows = _run("implement_change", tmp_path / "job")
    _bracketed(rows, "pass@1")
    ref, broken, model = rows["reference"], rows["broken"], rows["embedded"]
    assert ref["pass@1"] == "1.0" and ref["f2p_share"] == "1.0" and broken["pass@1"] == "0.0"
    assert ref["grading"] == "in_process_confined" and ref["form_files"] == "1" and broken["no_change"] == "1"
    assert ref["samples[before 2024-06-01]"] == "1"
    assert sum(int(model[c]) for c in OUTCOMES) + int(model["generation_error"]) == 1
    # replies cut at max_tokens are counted for the model, unknown for the fixed-text controls
    assert model["truncated"] in ("0", "1") and ref["truncated"] == broken["truncated"] == ""
    scores = {}  # implement_scores.jsonl, what period_compare reads, per generator
    for case in (tmp_path / "job").glob("workspace/*/*/*/case.json"):
        generator = json.loads(case.read_text())["modules"]["basemodel"]["hyperparameters"]["generator"]
        scores[generator] = [json.loads(line) for line in (case.parent / "implement_scores.jsonl").open()]
    assert [(r["pass@1"], r["f2p_share"], r["outcome"], r["period"]) for r in scores["reference"]] \
        == [(1.0, 1.0, "passed", "before 2024-06-01")]
    assert [(r["pass@1"], r["f2p_share"], r["outcome"]) for r in scores["broken"]] == [(0.0, 0.0, "no_change")]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_revise_default_job(tmp_path: Path) -> None:
    """Both gradings in one run: the reference scores 1 on each (tests passed in the sandbox,
    similarity 100), the broken reply 0."""
    rows = _run("revise", tmp_path / "job")
    for metric in ("score", "edit_chrf", "exact_match"):
        _bracketed(rows, metric)
    ref, broken = rows["reference"], rows["broken"]
    assert ref["score"] == ref["tests_pass@1"] == ref["exact_match"] == "1.0" and ref["grading"] == "in_process_confined"
    assert (ref["test_graded"], ref["similarity_graded"]) == ("1", "1")
    assert broken["score"] == broken["tests_pass@1"] == "0.0" and broken["no_change"] == "2"
    assert rows["embedded"]["truncated"] in ("0", "1", "2") and ref["truncated"] == ""
