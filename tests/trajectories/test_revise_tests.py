"""Test-graded revise tasks on a real git history made here: the builder grades by tests exactly
the step that flips a test of its pull request, and says why for every other step; the metric
runs those tasks in the sandbox (the real revision 1.0, the unchanged state 0.0) and scores the
rest by similarity, reporting both."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from core.common.errors import DatasetError
from core.scenarios import get_kind
from core.scenarios.trajectories.implement_change.scoring import grade
from core.scenarios.repo.env import ensure_env
from core.scenarios.repo.execute import Sample, default_views_dir, run_samples
from core.scenarios.repo.scoring import source_root
from core.scenarios.trajectories.revise.builder import GRADING_REASONS, ReviseOptions, build_revise_tasks
from core.scenarios.trajectories.revise.metrics import revise_scores, grader_record
from core.scenarios.trajectories.builder import TrajectoryOptions, build_trajectories
from tests.scenarios.conftest import read_jsonl
from tests.trajectories.conftest import MIT, commit, git

pytestmark = pytest.mark.slow  # the module's build runs the history's tests: over 5 s

CALC = "def add(a, b):\n    return a + b\n"
TEST = ("from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_mul():\n    assert mul(2, 3) == 6\n")


def _pr_history(root: Path) -> dict[str, str]:
    """main: init; pull request #5 (never merged): s1 adds a wrong ``mul`` and its test, s2 fixes
    it (flips ``test_mul``), s3 adds a docstring (code, flips nothing), s4 edits only the test."""
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    ids = {"init": commit(root, {"LICENSE": MIT, "calc.py": CALC}, "Initial adder", "2021-01-01T12:00:00+00:00")}
    git(root, "checkout", "-q", "-b", "topic")
    ids["s1"] = commit(root, {"calc.py": CALC + "\n\ndef mul(a, b):\n    return a + b\n", "tests/test_calc.py": TEST},
                       "Add mul with its test", "2021-02-01T12:00:00+00:00")
    ids["s2"] = commit(root, {"calc.py": CALC + "\n\ndef mul(a, b):\n    return a * b\n"},
                       "Fix mul: it added instead of multiplying", "2021-03-01T12:00:00+00:00")
    ids["s3"] = commit(root, {"calc.py": CALC + '\n\ndef mul(a, b):\n    """The product."""\n    return a * b\n'},
                       "Document mul as the review asked", "2021-04-01T12:00:00+00:00")
    ids["s4"] = commit(root, {"tests/test_calc.py": TEST + "\n\ndef test_mul_zero():\n    assert mul(0, 3) == 0\n"},
                       "Test mul with zero as well", "2021-05-01T12:00:00+00:00")
    git(root, "checkout", "-q", "main")
    git(root, "update-ref", "refs/pull/5/head", ids["s4"])
    return ids


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("revise-tests")
    ids = _pr_history(tmp / "proj")
    steps = tmp / "steps.jsonl"
    build_trajectories(TrajectoryOptions(repo=str(tmp / "proj"), output=steps, show_progress=False))
    out = tmp / "data" / "revise.jsonl"
    report = build_revise_tasks(ReviseOptions(steps=steps, repo=str(tmp / "proj"), output=out, grade_tests=True,
                                              timeout=120))
    tasks = {t["commit"]: t for t in read_jsonl(out)}
    return {"ids": ids, "report": report, "tasks": tasks, "out": out, "sources": out.with_name("revise-sources"),
            "steps": steps, "repo": str(tmp / "proj")}


def test_builder_grades_by_tests_the_step_that_flips_a_test(built: dict[str, Any]) -> None:
    ids, tasks, report = built["ids"], built["tasks"], built["report"]
    assert set(tasks) == {ids["s2"], ids["s3"], ids["s4"]}        # s1 is the PR's first step
    fix = tasks[ids["s2"]]
    assert fix["grading"] == "tests" and fix["metadata"]["grading_reason"] == "tests"
    assert fix["tests"]["fail_to_pass"] == ["tests/test_calc.py::test_mul"]
    assert fix["tests"]["pass_to_pass"] == ["tests/test_calc.py::test_add"]
    assert fix["test_files"] == [] and list(fix["files"]) == ["calc.py"]
    assert (built["sources"] / fix["repo"]["source"]).is_file()
    assert fix["repo"]["commit"] == ids["s2"] and fix["env"]["requirements"] == []
    doc, test_only = tasks[ids["s3"]], tasks[ids["s4"]]
    assert doc["grading"] == "similarity" and doc["metadata"]["grading_reason"] == "no_fail_to_pass"
    assert test_only["grading"] == "similarity" and test_only["metadata"]["grading_reason"] == "no_code_change"
    assert "tests" not in doc and "source" not in doc["repo"]
    assert report["grading"] == {"tests": 1, "similarity": 2, "reasons": {
        "no_code_change": 1, "no_tests": 0, "not_validated": 0, "no_pass_at_commit": 0, "no_fail_to_pass": 1,
        "edits_test_side": 0, "policy_refused": 0, "tests": 1}}
    assert tuple(report["grading"]["reasons"]) == GRADING_REASONS
    for task in tasks.values():
        get_kind("revise").validate(task)


def test_without_grade_tests_every_task_is_similarity(built: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "plain.jsonl"
    report = build_revise_tasks(ReviseOptions(steps=built["steps"], repo=built["repo"], output=out))
    assert report["grading"]["tests"] == 0 and report["grading"]["reasons"]["not_validated"] == 2
    assert not out.with_name("plain-sources").exists()


def test_validation_caps_at_max_validate(built: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "capped.jsonl"
    report = build_revise_tasks(ReviseOptions(steps=built["steps"], repo=built["repo"], output=out,
                                              grade_tests=True, max_validate=1, timeout=120))
    # newest first: s3 (no_fail_to_pass) is validated, s2 is not
    assert report["grading"]["reasons"]["not_validated"] == 1 and report["grading"]["tests"] == 0


def test_gold_in_the_sandbox(built: dict[str, Any]) -> None:
    """The real revision passes the test-graded task's tests; the unchanged state fails them."""
    fix = get_kind("revise").validate(built["tasks"][built["ids"]["s2"]])
    task = grader_record(fix)
    res, form = grade([("ref", task, get_kind("revise").reference(fix))], built["sources"])["ref"]
    assert (res.outcome, form) == ("passed", "files"), res.detail[-800:]
    root = source_root(built["sources"] / task["repo"]["source"], task["repo"]["content_hash"])
    (unchanged,) = list(run_samples([Sample("parent", task, None, edits={})], root, ensure_env([]),
                                    default_views_dir(), workers=1, timeout=120))
    assert unchanged.outcome != "passed" and unchanged.tests.get("tests/test_calc.py::test_mul") != "passed"


def _context(records: list[dict[str, Any]], workspace: Path, config_dir: Path) -> SimpleNamespace:
    return SimpleNamespace(records=lambda: records, workspace=str(workspace), config_dir=str(config_dir),
                           sandbox={"backend": "local", "workers": 1}, show_progress=False)


def _preds(replies: list[str]) -> list[dict[str, Any]]:
    return [{"samples": [{"raw_output": r, "sample_index": 0}]} for r in replies]


def test_metric_reports_both_gradings(built: dict[str, Any], tmp_path: Path) -> None:
    kind = get_kind("revise")
    records = sorted(built["tasks"].values(), key=lambda t: t["committed_at"])
    ctx = _context(records, tmp_path, built["out"].parent)
    refs = [kind.reference(kind.validate(r)) for r in records]
    gold = revise_scores(None, _preds(refs), ctx, periods=["2021-04-01"], sources_dir="revise-sources")
    assert gold["score"] == 1.0 and gold["tests_pass@1"] == 1.0 and gold["edit_chrf"] == 100.0
    assert (gold["test_graded"], gold["similarity_graded"], gold["grading"]) == (1, 2, "in_process_confined")
    assert gold["score[before 2021-04-01]"] == 1.0 and gold["samples[from 2021-04-01]"] == 2
    rows = [json.loads(line) for line in (tmp_path / "revise_scores.jsonl").read_text().splitlines()]
    assert [r["grading"] for r in rows] == ["tests", "similarity", "similarity"]
    assert rows[0]["test_outcome"] == "passed" and rows[0]["tests"]["tests/test_calc.py::test_mul"] == "passed"
    unchanged = revise_scores(None, _preds(["no change at all"] * 3), ctx, sources_dir="revise-sources")
    assert unchanged["score"] == 0.0 and unchanged["tests_pass@1"] == 0.0 and unchanged["no_change"] == 3
    # a wrong fix that applies: runs and fails (0 on tests), but shares characters with the real one
    wrong = refs[:]
    wrong[0] = refs[0].replace("a * b", "a - b")
    got = revise_scores(None, _preds(wrong), ctx, sources_dir="revise-sources")
    assert got["tests_pass@1"] == 0.0 and got["grading"] == "in_process_confined" and got["score"] == pytest.approx(2 / 3, abs=1e-3)
    row = json.loads((tmp_path / "revise_scores.jsonl").read_text().splitlines()[0])
    assert row["test_outcome"] == "failed" and 0.0 < row["edit_chrf"] < 100.0


def test_metric_resumes_from_its_executions_log(built: dict[str, Any], tmp_path: Path) -> None:
    """A test-graded sample's result goes to revise_executions.jsonl as it arrives; a rerun with
    the same reply takes it from there (the logged verdict is what counts, shown by editing it),
    a cut last line is ignored, and another reply runs afresh."""
    from core.scenarios.trajectories.revise.metrics import EXECUTIONS_FILE

    kind = get_kind("revise")
    fix = kind.validate(built["tasks"][built["ids"]["s2"]])
    ctx = _context([fix], tmp_path, built["out"].parent)
    first = revise_scores(None, _preds([kind.reference(fix)]), ctx, sources_dir="revise-sources")
    assert first["tests_pass@1"] == 1.0
    log = tmp_path / EXECUTIONS_FILE
    (line,) = log.read_text().splitlines()
    entry = json.loads(line)
    assert entry["outcome"] == "passed" and entry["tests"]["tests/test_calc.py::test_mul"] == "passed"
    log.write_text(json.dumps({**entry, "outcome": "failed"}) + "\n" + line[: len(line) // 2])
    again = revise_scores(None, _preds([kind.reference(fix)]), ctx, sources_dir="revise-sources")
    assert again["tests_pass@1"] == 0.0 and again["grading"] == "in_process_confined"
    other = kind.reference(fix).replace("a * b", "b * a")
    assert revise_scores(None, _preds([other]), ctx, sources_dir="revise-sources")["tests_pass@1"] == 1.0
    assert [json.loads(x)["outcome"] for x in log.read_text().splitlines()[2:]] == ["passed"]


def test_test_graded_record_errors(built: dict[str, Any]) -> None:
    fix = built["tasks"][built["ids"]["s2"]]
    kind = get_kind("revise")
    with pytest.raises(DatasetError, match="grading"):
        kind.validate({**fix, "grading": "vibes"}, source="r.jsonl", line=3)
    with pytest.raises(DatasetError, match="fail_to_pass"):
        kind.validate({**fix, "tests": {"fail_to_pass": []}}, source="r.jsonl", line=3)
    with pytest.raises(DatasetError, match="content_hash"):
        kind.validate({**fix, "repo": {"name": "proj", "licence": "MIT"}}, source="r.jsonl", line=3)


def test_metric_needs_sources_dir_for_test_graded_tasks(built: dict[str, Any], tmp_path: Path) -> None:
    from core.common.errors import ConfigError

    fix = built["tasks"][built["ids"]["s2"]]
    with pytest.raises(ConfigError, match="sources_dir"):
        revise_scores(None, _preds([get_kind("revise").reference(get_kind("revise").validate(fix))]),
                      _context([fix], tmp_path, tmp_path))
