"""The LLM judge: strict parsing (good, malformed, swapped), counting and caching.

The judge model is :class:`tests.scenarios.scripted_judge.ScriptedJudge` here, because these
tests must choose what the judge answers; the embedded model judges in the default jobs."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

import tests.scenarios.scripted_judge  # noqa: F401 - registers scripted_judge
from core.common.errors import ConfigError
from core.scenarios import get_kind
from core.scenarios.judge import (RUBRIC_DIR, JUDGE_ITEMS, load_rubric, parse_preference,
                                  parse_scores, run_judge)
from tests.scenarios.conftest import BENCH, read_jsonl

RUBRIC = load_rubric(RUBRIC_DIR / "issue.yaml")
ISSUES = read_jsonl(BENCH / "issue/data/issues_subset.jsonl")[:3]


@pytest.mark.parametrize("reply,expected", [
    ("functionality: 4\nreliability: 5\ninterpretability: 3",
     {"functionality": 4, "reliability": 5, "interpretability": 3}),
    ("Here is my grade:\n**Functionality**: 2\nreliability: 1/5\ninterpretability : 5\n",
     {"functionality": 2, "reliability": 1, "interpretability": 5}),
])
def test_scores_parse(reply: str, expected: dict) -> None:
    assert parse_scores(reply, RUBRIC) == expected


@pytest.mark.parametrize("reply", [
    "functionality: 4\nreliability: 5",                                  # a dimension missing
    "functionality: 4\nreliability: 5\ninterpretability: 6",             # off the scale
    "functionality: 4\nreliability: 5\ninterpretability: 3\nreliability: 2",  # twice
    "functionality: four\nreliability: 5\ninterpretability: 3",          # not a number
    "The answer is great, I would give it 5 overall.",                   # prose
    "",
])
def test_malformed_scores_fail(reply: str) -> None:
    assert parse_scores(reply, RUBRIC) is None


@pytest.mark.parametrize("reply,expected", [
    ("A", "A"), (" b.", "B"), ("TIE", "TIE"), ("Answer A", "A"), ("**B**", "B"),
    ("A and B are equal", None), ("I prefer A", None), ("", None), ("C", None),
])
def test_preference_parsing(reply: str, expected: str | None) -> None:
    assert parse_preference(reply) == expected


def test_rubric_errors_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "rubric.yaml"
    bad.write_text((RUBRIC_DIR / "issue.yaml").read_text().replace("scale: [1, 5]",
                                                                   "scale: [5, 1]"))
    with pytest.raises(ConfigError, match=r"rubric.yaml: 'scale' must be"):
        load_rubric(bad)


def _preds(answers: list[str]) -> list[dict]:
    return [{"task_id": r["id"], "samples": [{"task_id": r["id"], "sample_index": 0,
                                              "raw_output": a, "error": None}]}
            for r, a in zip(ISSUES, answers)]


def _ctx(tmp_path: Path) -> SimpleNamespace:
    return SimpleNamespace(records=lambda: iter(ISSUES), workspace=tmp_path)


def test_malformed_replies_are_counted_not_scored_zero(tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    opts = {"score": "Looks fine to me!", "pair": "A", "calls_path": str(calls),
            "marker": "GOOD", "marked_score":
                "functionality: 5\nreliability: 5\ninterpretability: 4"}
    answers = ["GOOD answer", "an answer", "another answer"]
    out = run_judge(get_kind("issue"), _preds(answers), _ctx(tmp_path), "scripted_judge", opts)
    # one score parsed; two unparseable score replies counted (not averaged in as 0)
    assert out["judge_parse_failures"] == 2
    assert out["judge_score"] == pytest.approx(14 / 3, abs=1e-3)
    assert out["judge_functionality"] == 5.0
    # the judge always says "A": the sample wins as A and loses as B -> 3 disagreements
    assert out["judge_order_disagreements"] == 3
    assert out["judge_win_rate"] == 0.5
    assert len(calls.read_text().splitlines()) == 9
    items = (tmp_path / JUDGE_ITEMS).read_text().splitlines()
    assert len(items) == 3 and '"scores": null' in items[1]
    # cached: a second run (a re-score) asks the judge nothing
    again = run_judge(get_kind("issue"), _preds(answers), _ctx(tmp_path), "scripted_judge", opts)
    assert again == out
    assert len(calls.read_text().splitlines()) == 9


def test_consistent_pairwise_verdicts_are_not_disagreements(tmp_path: Path) -> None:
    out = run_judge(get_kind("issue"), _preds(["x", "y", "z"]), _ctx(tmp_path),
                    "scripted_judge", {"pair": "TIE"})
    assert out["judge_order_disagreements"] == 0 and out["judge_win_rate"] == 0.5
    assert out["judge_parse_failures"] == 0 and out["judge_score"] == 4.0
    out = run_judge(get_kind("issue"), _preds(["x", "y", "z"]), _ctx(tmp_path / "b"),
                    "scripted_judge", {"pair": "maybe A?"}) if (tmp_path / "b").mkdir() is None \
        else None
    assert out is not None and out["judge_parse_failures"] == 6
    assert out["judge_win_rate"] != out["judge_win_rate"]  # NaN: no verdict parsed


def test_validate_checks_the_judge_settings(scenario_job, tmp_path: Path) -> None:
    from tests.runner.conftest import run_cli

    judge = ('    - name: "llm_judge"\n      url: "./metrics.py"\n      generator: "embeded"\n')
    job = scenario_job("issue", ["reference"], judge=judge)
    res = run_cli("validate", "-f", str(job), cwd=tmp_path)
    assert res.returncode == 1
    assert "unknown generator 'embeded'" in res.stdout and "did you mean 'embedded'" in res.stdout
