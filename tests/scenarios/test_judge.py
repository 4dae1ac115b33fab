"""The LLM judge: strict parsing (good, malformed, swapped), counting, caching and the control
check (a judge that passes, one that cannot tell good from bad, one that does not answer).

The judge model is :class:`tests.scenarios.scripted_judge.ScriptedJudge` here, because these
tests must choose what the judge answers; real embedded judges are measured by
``benchmarks/judge_controls.py`` (docs/proposals/scenarios/smart_coding/judging.md)."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

import tests.scenarios.scripted_judge  # noqa: F401 - registers scripted_judge
from core.scenarios import judge as judge_module
from core.common.errors import ConfigError
from core.scenarios import get_kind
from core.scenarios.judge import (JUDGE_CACHE, JUDGE_ITEMS, JudgeInvalid,
                                  load_rubric, parse_preference, parse_scores, run_judge)
from core.scenarios.agreement import bootstrap_interval
from core.scenarios.judge_controls import (CONTROL_FILE, DEFAULT_MIN_LOW, broken_answer,
                                           build_controls, evaluate_controls, request_id)
from tests.scenarios.conftest import BENCH, read_jsonl

RUBRIC = load_rubric(get_kind("issue").rubric_path())


@pytest.fixture(autouse=True)
def _fresh_control_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as a fresh process would: no control answers shared from another test
    (the scripted judge's identity leaves out ``calls_path``, so call counts would depend on
    test order)."""
    monkeypatch.setattr(judge_module, "_CONTROL_MEMO", {})
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
    bad.write_text((get_kind("issue").rubric_path()).read_text().replace("scale: [1, 5]",
                                                                   "scale: [5, 1]"))
    with pytest.raises(ConfigError, match=r"rubric.yaml: 'scale' must be"):
        load_rubric(bad)


def _preds(answers: list[str]) -> list[dict]:
    return [{"task_id": r["id"], "samples": [{"task_id": r["id"], "sample_index": 0,
                                              "raw_output": a, "error": None}]}
            for r, a in zip(ISSUES, answers)]


def _ctx(tmp_path: Path) -> SimpleNamespace:
    return SimpleNamespace(records=lambda: iter(ISSUES), workspace=tmp_path)


LOW = "functionality: 2\nreliability: 2\ninterpretability: 2"


def _refs() -> list[str]:
    kind = get_kind("issue")
    return [kind.reference(kind.validate(r)) for r in ISSUES]


def test_malformed_replies_are_counted_not_scored_zero(tmp_path: Path) -> None:
    calls = tmp_path / "calls.txt"
    opts = {"score": LOW, "pair": "A", "calls_path": str(calls), "reference_aware": True,
            "marker": "NOFORMAT", "marked_score": "Looks fine to me!"}
    answers = [_refs()[0], "NOFORMAT one", "NOFORMAT two"]
    out = run_judge(get_kind("issue"), _preds(answers), _ctx(tmp_path), "scripted_judge", opts)
    # one score parsed (the reference answer: 5s); two unparseable replies counted, not as 0
    assert out["judge_parse_failures"] == 2
    assert out["judge_score"] == 5.0 and out["judge_functionality"] == 5.0
    assert out["judge_valid"] == 1 and out["judge_control_auc"] == 1.0
    # sample 0 is the reference itself: the judge's fixed "A" names the sample first and the
    # reference second -> 1 order disagreement; the other two lose to the reference both ways
    assert out["judge_order_disagreements"] == 1
    assert out["judge_win_rate"] == pytest.approx(1 / 6, abs=1e-4)
    # 3 control tasks x (3 rubric calls + 2 controls x 2 orders) + 3 samples x 3 calls
    assert len(calls.read_text().splitlines()) == 21 + 9
    items = (tmp_path / JUDGE_ITEMS).read_text().splitlines()
    assert len(items) == 3 and '"scores": null' in items[1]
    # cached: a second run (a re-score) asks the judge nothing
    again = run_judge(get_kind("issue"), _preds(answers), _ctx(tmp_path), "scripted_judge", opts)
    assert again == out
    assert len(calls.read_text().splitlines()) == 30
    # another test case of the same process reuses the control answers (copied into its cache)
    other = tmp_path / "other"
    other.mkdir()
    assert run_judge(get_kind("issue"), _preds(answers), _ctx(other), "scripted_judge",
                     opts) == out
    assert len(calls.read_text().splitlines()) == 30 + 9
    assert (other / JUDGE_CACHE).read_text().count('"control/') == 21


def test_consistent_pairwise_verdicts_are_not_disagreements(tmp_path: Path) -> None:
    out = run_judge(get_kind("issue"), _preds(_refs()), _ctx(tmp_path), "scripted_judge",
                    {"pair": "TIE", "score": LOW, "reference_aware": True})
    assert out["judge_order_disagreements"] == 0 and out["judge_win_rate"] == 0.5
    assert out["judge_parse_failures"] == 0 and out["judge_score"] == 5.0


def test_rubric_columns_record_their_per_task_values(tmp_path: Path) -> None:
    """The report's intervals over tasks need each judge column's per-task values."""
    from core.testcasecontroller.metrics.per_task import PerTaskValues

    ctx = _ctx(tmp_path)
    ctx.per_task = PerTaskValues()
    answers = [_refs()[0], "NOFORMAT", "another answer"]
    out = run_judge(get_kind("issue"), _preds(answers), ctx, "scripted_judge",
                    {"score": LOW, "reference_aware": True, "marker": "NOFORMAT",
                     "marked_score": "no"}, pairwise=False)
    means = ctx.per_task.task_means("judge_score")
    # the unparsed sample has no value; the other two: 5 (the reference) and 2
    assert sorted(v for v, _n in means.values()) == [2.0, 5.0]
    assert out["judge_score"] == 3.5 and out["judge_accept_rate"] == 0.5
    assert {"judge_functionality", "judge_accept_rate"} <= set(ctx.per_task.columns())
    assert "judge_win_rate" not in ctx.per_task.columns()


def test_a_judge_that_cannot_tell_good_from_bad_is_invalid(tmp_path: Path) -> None:
    """The 0.5B model's behaviour: the same score for every answer. Its columns must not be
    scores: the metric raises JudgeInvalid (the runner marks the columns), the samples are not
    judged, stale verdicts are removed, the reason and statistic are in judge_controls.json."""
    calls = tmp_path / "calls.txt"
    (tmp_path / JUDGE_ITEMS).write_text('{"task_id": "old", "sample_index": 0}\n')
    with pytest.raises(JudgeInvalid, match=r"failed its control check: .* probability 0\.50 "
                                           r"over 18 control pairs of 3 tasks"):
        run_judge(get_kind("issue"), _preds(_refs()), _ctx(tmp_path), "scripted_judge",
                  {"calls_path": str(calls)})
    assert len(calls.read_text().splitlines()) == 21   # controls only, no sample judged
    assert not (tmp_path / JUDGE_ITEMS).exists()
    report = json.loads((tmp_path / CONTROL_FILE).read_text())
    assert report["valid"] is False and report["auc"] == 0.5 and report["tasks"] == 3
    assert [row["value"] for row in report["per_task"]] == [0.5, 0.5, 0.5]


def test_unparseable_control_replies_count_against_the_judge(tmp_path: Path) -> None:
    # rubric scores separate the controls, but no pairwise verdict parses: per task
    # (1 + 1 + 0 * 4) / 6 = 1/3
    with pytest.raises(JudgeInvalid, match=r"probability 0\.33"):
        run_judge(get_kind("issue"), _preds(_refs()), _ctx(tmp_path), "scripted_judge",
                  {"pair": "maybe A?", "score": LOW, "reference_aware": True})
    # the same judge without pairwise passes
    out = run_judge(get_kind("issue"), _preds(_refs()), _ctx(tmp_path), "scripted_judge",
                    {"pair": "maybe A?", "score": LOW, "reference_aware": True}, pairwise=False)
    assert out["judge_valid"] == 1 and out["judge_control_low"] == 1.0


def test_a_judge_that_does_not_read_the_answer_fails_on_the_broken_control(
        tmp_path: Path) -> None:
    """Unrelated answers graded down, the reference's shuffled words graded like the reference:
    0.75 over both controls, but 0.5 against the broken one, which must fail the check."""
    with pytest.raises(JudgeInvalid, match=r"probability 0\.75 .* broken 0\.50 .*\(broken not\)"):
        run_judge(get_kind("issue"), _preds(_refs()), _ctx(tmp_path), "scripted_judge",
                  {"score": LOW, "reference_aware": True, "word_order_blind": True},
                  pairwise=False)
    report = json.loads((tmp_path / CONTROL_FILE).read_text())
    assert report["controls"]["unrelated"]["low"] == 1.0
    assert report["controls"]["broken"]["auc"] == 0.5


def test_too_few_tasks_cannot_prove_the_judge(tmp_path: Path) -> None:
    two = ISSUES[:2]
    ctx = SimpleNamespace(records=lambda: iter(two), workspace=tmp_path)
    with pytest.raises(JudgeInvalid, match="too few tasks for the judge's control check"):
        run_judge(get_kind("issue"), _preds(_refs()[:2]), ctx, "scripted_judge",
                  {"reference_aware": True}, pairwise=False)


def test_control_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'control_tasks' must be an integer >= 3"):
        run_judge(get_kind("issue"), _preds(_refs()), _ctx(tmp_path), "scripted_judge", {},
                  control_tasks=2)
    with pytest.raises(ConfigError, match="'control_min' must be a number in 0..1"):
        run_judge(get_kind("issue"), _preds(_refs()), _ctx(tmp_path), "scripted_judge", {},
                  control_min=1.5)


def test_control_statistic_known_values() -> None:
    kind = get_kind("issue")
    controls = build_controls(kind, ISSUES, 6)
    assert len(controls) == 3
    refs = {c.answers["reference"] for c in controls}
    for c in controls:
        assert c.answers["unrelated"] in refs and c.answers["unrelated"] != c.answers["reference"]
        assert sorted(c.answers["broken"].split()) == sorted(c.answers["reference"].split())
        assert c.answers["broken"] != c.answers["reference"]
    score = "functionality: {0}\nreliability: {0}\ninterpretability: {0}".format
    replies = {}
    # task 0: reference 5 > 1, 1 -> 1.0; task 1: 3 = 3 and 3 > 2 -> 0.75;
    # task 2: reference unparsed -> 0.0
    for c, (ref, unrel, broken) in zip(controls, [(5, 1, 1), (3, 3, 2), (None, 1, 1)]):
        for name, value in (("reference", ref), ("unrelated", unrel), ("broken", broken)):
            replies[request_id(c.task_id, name, "score")] = (
                "no idea" if value is None else score(value))
    result = evaluate_controls(RUBRIC, controls, replies, pairwise=False, min_low=0.5)
    assert [r["value"] for r in result.per_task] == [1.0, 0.75, 0.0]
    assert result.auc == pytest.approx(0.5833, abs=1e-4) and result.pairs == 6
    assert result.controls["unrelated"]["auc"] == 0.5           # 1, 0.5, 0
    assert result.controls["broken"]["auc"] == pytest.approx(2 / 3, abs=1e-4)   # 1, 1, 0
    assert result.low == min(c["low"] for c in result.controls.values())
    assert 0.0 <= result.low < result.auc < result.high <= 1.0
    assert not result.valid  # a bound this wide proves nothing
    missing = evaluate_controls(RUBRIC, controls, {}, pairwise=False)
    assert missing.auc == 0.0 and not missing.valid  # failed calls count against the judge


@pytest.mark.parametrize("values,passes", [
    ([1, 1, 1, 1, 1, 0.5], True),     # one tie in six: lower bound 0.75
    ([1, 1, 1, 1, 0.5, 0.5], False),  # two ties: 0.67
    ([1, 1, 1, 1, 1, 0], False),      # one task the wrong way round: 0.50
    ([1, 1, 1], True),                # three tasks, all right
])
def test_pass_criterion_as_documented(values: list[float], passes: bool) -> None:
    """The thresholds judging.md states for the default 0.7."""
    _mean, low, _high = bootstrap_interval(values, lambda v: sum(v) / len(v))
    assert (low >= DEFAULT_MIN_LOW) is passes


def test_broken_answer_is_fixed_and_different() -> None:
    text = "use the walrus operator to assign inside the loop condition"
    assert broken_answer(text, "t1") == broken_answer(text, "t1")
    assert broken_answer(text, "t1") != text
    assert sorted(broken_answer(text, "t1").split()) == sorted(text.split())
    assert broken_answer("yes yes", "t1") == ""


def test_validate_checks_the_judge_settings(scenario_job, tmp_path: Path) -> None:
    from tests.runner.conftest import run_cli

    judge = ('    - name: "llm_judge"\n      url: "./metrics.py"\n      generator: "embeded"\n')
    job = scenario_job("issue", ["reference"], judge=judge)
    res = run_cli("validate", "-f", str(job), cwd=tmp_path)
    assert res.returncode == 1
    assert "unknown generator 'embeded'" in res.stderr and "did you mean 'embedded'" in res.stderr
