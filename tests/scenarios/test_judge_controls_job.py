"""A judge that fails its control check, end to end: the real ``ianvs -f`` on a 3-record issue
job whose judge gives every answer the same score (what the embedded 0.5B model does). Its
columns must not appear as scores anywhere: NaN in the rank table, ``invalid`` in the report with
the check's reason under the table, the reason in every test case's ``case.json`` and in the
command's warning. The other metrics of the test cases are unaffected.

The judge is :class:`tests.scenarios.scripted_judge.ScriptedJudge` (a test double: the test
must know the judge's verdicts); everything else is the real pipeline in a child process."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.runner.conftest import run_cli
from tests.scenarios.conftest import BENCH, read_jsonl, write_jsonl

CONSTANT_JUDGE = ('    - name: "llm_judge"\n      url: "./metrics.py"\n'
                  '      generator: "scripted_judge"\n      pairwise: false\n')


@pytest.mark.slow  # over 5 s: a real job in a child process
def test_a_failing_judge_is_marked_invalid_not_shown_as_scores(scenario_job,
                                                               tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "issues.jsonl",
                       read_jsonl(BENCH / "issue/data/issues_subset.jsonl")[:3])
    job = scenario_job("issue", ["reference", "broken"], test_index=data, judge=CONSTANT_JUDGE)
    metrics_py = job.parent / "testenv" / "metrics.py"
    metrics_py.write_text(metrics_py.read_text() + "import tests.scenarios.scripted_judge\n")
    # the shipped job (no judge) does not select judge columns for its leaderboard: add two
    job.write_text(job.read_text().replace('"human_acc",',
                                           '"judge_score", "judge_valid", "human_acc",'))
    assert '"judge_score"' in job.read_text()
    res = run_cli("-f", str(job), "--no-progress", cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]   # the test cases themselves succeed
    assert "metric 'llm_judge' failed in 2 of 2 test cases (JudgeInvalid: the judge failed " \
           "its control check" in res.stderr

    rows = list(csv.DictReader(open(next(tmp_path.glob("workspace/*/rank/all_rank.csv")))))
    assert {r["basemodel-generator"] for r in rows} == {"reference", "broken"}
    for row in rows:
        assert row["judge_score"] == ""                                 # NaN, not 4.0
        assert row["judge_valid"] == "0"                                # the check's verdict
        assert float(row["chrf"]) >= 0.0                                # other metrics stay
    for case_json in tmp_path.glob("workspace/*/*/*/case.json"):
        case = json.loads(case_json.read_text())
        error = case["metric_errors"]["llm_judge"]
        assert "probability 0.50 over 6 control pairs of 3 tasks" in error["error"]
        assert error["invalid"] is True and "judge_score" in error["columns"]
        assert not {"judge_valid", "judge_control_auc"} & set(error["columns"])   # shown as is
        assert case["metrics"]["judge_valid"] == 0 and case["metrics"]["judge_control_auc"] == 0.5
        controls = json.loads((case_json.parent / "judge_controls.json").read_text())
        assert controls["valid"] is False and controls["auc"] == 0.5

    board = next(tmp_path.glob("workspace/*/report/leaderboard.md")).read_text()
    lines = board.splitlines()
    start = next(n for n, line in enumerate(lines) if "judge_score" in line)
    header = [c.strip() for c in lines[start].split("|")]
    table = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        table.append(dict(zip(header, (c.strip() for c in line.split("|")))))
    assert len(table) == 2
    assert all(r["judge_score"] == "invalid" and r["judge_valid"] == "0" for r in table)
    assert all(r["chrf"] not in ("", "error", "invalid") for r in table)
    assert board.count("is invalid, not a score: JudgeInvalid: the judge failed its control check") == 2


@pytest.mark.slow  # the real embedded model: 9 judge calls of several seconds each
def test_the_embedded_judge_goes_through_the_same_check(tmp_path: Path) -> None:
    """The real 0.5B judge on 3 issue records: whatever it answers, the verdict of the check
    and the metric agree (raises exactly when ``judge_controls.json`` says invalid), and a
    re-score asks the model nothing. Which judges pass is measured, not asserted here:
    ``benchmarks/judge_controls.py`` (docs/proposals/scenarios/smart_coding/judging.md)."""
    from types import SimpleNamespace

    from core.scenarios import get_kind
    from core.scenarios.judge import JUDGE_CACHE, JudgeInvalid, run_judge

    records = read_jsonl(BENCH / "issue/data/issues_subset.jsonl")[:3]
    kind = get_kind("issue")
    preds = [{"task_id": r["id"], "samples": [{"task_id": r["id"], "sample_index": 0,
                                               "raw_output": kind.reference(kind.validate(r)),
                                               "error": None}]} for r in records]
    ctx = SimpleNamespace(records=lambda: iter(records), workspace=tmp_path)

    def judge() -> dict | None:
        try:
            return run_judge(kind, preds, ctx, "embedded", None, pairwise=False, max_tokens=24)
        except JudgeInvalid:
            return None

    first = judge()
    controls = json.loads((tmp_path / "judge_controls.json").read_text())
    assert controls["tasks"] == 3 and controls["pairs"] == 6
    assert (first is not None) is controls["valid"]
    if first is not None:
        assert first["judge_valid"] == 1 and first["judge_control_low"] >= 0.7
    calls = len((tmp_path / JUDGE_CACHE).read_text().splitlines())
    assert calls == 9 + (3 if first is not None else 0)
    assert judge() == first
    assert len((tmp_path / JUDGE_CACHE).read_text().splitlines()) == calls
