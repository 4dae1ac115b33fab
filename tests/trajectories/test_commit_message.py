"""The commit_message kind: schema, builder, gold controls through ``ianvs -f``, periods and the
after:/before: window (real jobs with the reference and broken generators; no model needed)."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from core.common.errors import DatasetError
from core.scenarios import get_kind
from core.scenarios.trajectories.commit_message.builder import CommitTaskOptions, build_commit_tasks, outline
from core.scenarios.trajectories.commit_message.metrics import score_message
from core.scenarios.trajectories.builder import TrajectoryOptions, build_trajectories
from core.scenarios.trajectories.filters import FilterOptions
from tests.runner.conftest import run_cli
from tests.scenarios.conftest import BENCH, read_jsonl, scenario_job, write_jsonl  # noqa: F401 (fixture)

DATA = BENCH / "commit_message" / "data"


def test_shipped_sets_validate() -> None:
    kind = get_kind("commit_message")
    assert kind.check_file(DATA / "commit_messages.jsonl") == 857
    assert kind.check_file(DATA / "commit_messages_subset.jsonl") == 4
    report = json.loads((DATA / "commit_messages.jsonl.build.json").read_text())
    assert report["tasks"] == 857 and sum(report["counts"][k] for k in report["counts"]
                                          if k != "over_limit") == 1343


def test_schema_errors_name_the_field(tmp_path: Path) -> None:
    good = read_jsonl(DATA / "commit_messages_subset.jsonl")[0]
    kind = get_kind("commit_message")
    for change, field in (({"message": ""}, "message"), ({"files": []}, "files"),
                          ({"commit": "abc"}, "commit"), ({"committed_at": "yesterday"}, "committed_at"),
                          ({"mesage": "x"}, "mesage")):
        bad = {**good, **change}
        with pytest.raises(DatasetError, match=field):
            kind.validate(bad, source="t.jsonl", line=3)


def test_answer_and_scores() -> None:
    kind = get_kind("commit_message")
    rec = kind.validate(read_jsonl(DATA / "commit_messages_subset.jsonl")[1])
    assert kind.answer("Commit message: Fix the thing\n", rec) == "Fix the thing"
    assert kind.answer("Here:\n```\nAdd rbf note\n\nbody\n```\nThanks", rec) == "Add rbf note\n\nbody"
    ref = score_message(rec["message"], rec["message"])
    assert ref == pytest.approx({"chrf": 100.0, "bleu": 100.0, "rouge_l": 1.0, "subject_chrf": 100.0})
    assert score_message("", rec["message"]) == {"chrf": 0.0, "bleu": 0.0, "rouge_l": 0.0, "subject_chrf": 0.0}
    prompt = kind.messages(rec)[1]["content"]
    assert rec["diff"] in prompt and "Outline of the changed files" in prompt


def test_outline() -> None:
    src = "import os\n\nclass A:\n    @property\n    def b(self):\n        return 1\n\ndef c(x, y=2):\n    pass\n"
    assert outline(src) == ["3: class A:", "5:     def b(self):", "8: def c(x, y=2):"]
    assert outline("def (:\n") == []


def test_builder_on_a_real_history(history, tmp_path: Path) -> None:
    root, ids = history
    steps = tmp_path / "steps.jsonl"
    build_trajectories(TrajectoryOptions(repo=str(root), output=steps, show_progress=False,
                                         filters=FilterOptions(max_lines=100)))
    out = tmp_path / "tasks.jsonl"
    report = build_commit_tasks(CommitTaskOptions(steps=steps, output=out, repo=str(root), max_diff_bytes=2000))
    assert report["counts"]["merge"] == 1 and report["counts"]["kept"] == report["tasks"] == 7
    tasks = {t["commit"]: t for t in read_jsonl(out)}
    assert tasks[ids["feature"]]["context"] == "calc.py:\n  1: def add(a, b):"
    assert tasks[ids["init"]]["context"] == ""               # a root commit has no parent
    assert tasks[ids["topic1"]]["pull_request_title"] == "Add mul"
    assert get_kind("commit_message").check_file(out) == 7
    short = build_commit_tasks(CommitTaskOptions(steps=steps, output=tmp_path / "s.jsonl", min_words=5))
    assert short["counts"]["short_message"] >= 1 and short["options"]["repo"] is None
    assert "not_mainline" not in report["counts"] and "mainline_only" not in report["options"]
    # --mainline-only: the steps only a pull-request ref reaches are dropped, each counted
    off_main = {s["commit"] for s in read_jsonl(steps) if not s["on_mainline"]}
    main = build_commit_tasks(CommitTaskOptions(steps=steps, output=tmp_path / "m.jsonl",
                                                repo=str(root), max_diff_bytes=2000,
                                                mainline_only=True))
    kept = {t["commit"] for t in read_jsonl(tmp_path / "m.jsonl")}
    assert off_main and main["counts"]["not_mainline"] >= 1 and main["options"]["mainline_only"]
    assert kept == set(tasks) - off_main and not kept & off_main
    assert main["tasks"] == 7 - main["counts"]["not_mainline"]


def _rows(root: Path) -> dict[str, dict[str, str]]:
    rows = csv.DictReader(open(next(root.glob("workspace/*/rank/all_rank.csv"))))
    return {r["basemodel-generator"]: r for r in rows}


@pytest.mark.slow
def test_gold_controls_per_period_and_window(scenario_job) -> None:
    """reference scores the top of every reference metric and broken below it, in each period;
    the testenv window (after:) keeps only the later tasks for generation and scoring alike."""
    job = scenario_job("commit_message", ["reference", "broken"], judge="")
    res = run_cli("-f", str(job), "--no-progress", "--no-report", cwd=job.parent, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = _rows(job.parent)
    ref, broken = rows["reference"], rows["broken"]
    for col in ("chrf", "bleu", "subject_chrf", "chrf[before 2024-06-01]", "chrf[from 2024-06-01]"):
        assert float(ref[col]) == 100.0 and float(broken[col]) < 25.0, col
    assert float(ref["rouge_l"]) == 1.0 and float(broken["rouge_l"]) < 0.1
    assert ref["samples[before 2024-06-01]"] == "2" and ref["samples[from 2024-06-01]"] == "2"
    env = job.parent / "testenv" / "testenv.yaml"
    env.write_text(env.read_text().replace('    x_field: "diff"', '    x_field: "diff"\n    after: "2024-06-01"'))
    res = run_cli("-f", str(job), "--no-progress", "--no-report", "--fresh", cwd=job.parent, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = _rows(job.parent)
    assert rows["reference"]["scored_samples"] == "2" and rows["reference"]["samples[before 2024-06-01]"] == "0"
    env.write_text(env.read_text().replace('after: "2024-06-01"', 'after: "soon"'))
    bad = run_cli("validate", "-f", str(job), cwd=job.parent)
    said = bad.stdout + bad.stderr
    assert bad.returncode != 0 and "after" in said and "must be a date" in said, said


def test_window_record_without_date_names_the_line(scenario_job, tmp_path: Path) -> None:
    rows = read_jsonl(DATA / "commit_messages_subset.jsonl")
    rows[2]["metadata"] = {}
    rows[2]["committed_at"] = "not a date"
    data = write_jsonl(tmp_path / "bad.jsonl", rows)
    job = scenario_job("commit_message", ["reference"], test_index=str(data), judge="")
    env = job.parent / "testenv" / "testenv.yaml"
    env.write_text(env.read_text().replace('    x_field: "diff"', '    x_field: "diff"\n    before: "2020-01-01"'))
    res = run_cli("validate", "-f", str(job), cwd=job.parent)
    assert res.returncode != 0 and "bad.jsonl:3" in res.stdout + res.stderr, res.stdout
