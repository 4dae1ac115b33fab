"""The revise kind: tasks from a real history's pull request, feedback from the code-host fixture,
and its similarity score (gold: the real revision 100 / 1; unchanged 0)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.common.errors import DatasetError
from core.scenarios import get_kind
from core.scenarios.trajectories.implement_change import whole_files_reply
from core.scenarios.trajectories.revise.builder import ReviseOptions, build_revise_tasks
from core.scenarios.trajectories.revise.metrics import changed_lines, score_revision
from core.scenarios.trajectories.builder import TrajectoryOptions, build_trajectories
from core.scenarios.trajectories.filters import FilterOptions
from tests.scenarios.conftest import BENCH, read_jsonl


@pytest.fixture
def tasks(history, tmp_path: Path) -> tuple[list[dict], dict, dict[str, str]]:
    root, ids = history
    data = json.loads(Path(__file__).with_name("codehost_fixture.json").read_text())
    data["pull_requests"][0]["review_comments"][0]["commit"] = ids["topic1"]
    export = tmp_path / "export.json"
    export.write_text(json.dumps(data))
    steps = tmp_path / "steps.jsonl"
    build_trajectories(TrajectoryOptions(repo=str(root), output=steps, show_progress=False, codehost=export,
                                         filters=FilterOptions(max_lines=100)))
    out = tmp_path / "revise.jsonl"
    report = build_revise_tasks(ReviseOptions(steps=steps, repo=str(root), output=out))
    return read_jsonl(out), report, ids


def test_builder_keeps_the_second_step_of_a_pr(tasks) -> None:
    got, report, ids = tasks
    assert report["counts"]["kept"] == report["tasks"] == 1 and report["with_feedback"] == 1
    assert report["counts"]["first_in_pr"] == 2 and report["counts"]["not_in_pr"] == 5
    (task,) = got
    assert task["commit"] == ids["topic2"] and task["previous"]["commit"] == ids["topic1"]
    assert task["message"] == "Test mul as asked in review"
    assert task["feedback"] == "- reviewer (calc.py:9): Please add a test for mul."
    assert task["files"] == {} and list(task["reference_files"]) == ["tests/test_mul.py"]
    kind = get_kind("revise")
    rec = kind.validate(task)
    prompt = kind.messages(rec)[1]["content"]
    assert "Please add a test for mul." in prompt and "Add mul (fixes #3)" in prompt


def test_scores(tasks) -> None:
    got, _report, _ids = tasks
    kind = get_kind("revise")
    rec = kind.validate(got[0])
    assert score_revision(kind.reference(rec), rec) == {"failure": "", "form": "files", "edit_chrf": 100.0,
                                                       "exact_match": 1.0}
    assert score_revision("no idea", rec)["failure"] == "no_change"
    partial = whole_files_reply({"tests/test_mul.py": "from calc import mul\n\n\ndef test_mul():\n"
                                                      "    assert mul(2, 2) == 4\n"})
    scored = score_revision(partial, rec)
    assert 30.0 < scored["edit_chrf"] < 100.0 and scored["exact_match"] == 0.0
    assert changed_lines({"a.py": "x = 1\ny = 2\n"}, {"a.py": "x = 1\ny = 3\n"}) == "-y = 2\n+y = 3"


#: sizes after the leak check dropped 3 ELI5 and 1 toolz revisions already in their previous diff
SHIPPED = {"eli5_revise.jsonl": 340, "toolz_revise.jsonl": 382, "revise_subset.jsonl": 3,
           "networkx_revise.jsonl": 60}


def test_shipped_sets_gold() -> None:
    """Every shipped set has its documented size; the subset's real revisions score 100 / 1
    through the reply parser; every test-graded task has its root archive and a build report."""
    kind = get_kind("revise")
    data = BENCH / "revise" / "data"
    for name, count in SHIPPED.items():
        recs = list(kind.read(data / name))
        assert len(recs) == count
        for rec in recs:
            if rec["grading"] == "tests":
                assert (data / "revise-sources" / rec["repo"]["source"]).is_file(), rec["id"]
        if name == "revise_subset.jsonl":
            for rec in recs:
                assert score_revision(kind.reference(rec), rec)["exact_match"] == 1.0
            assert {r["grading"] for r in recs} == {"tests", "similarity"}
        elif name == "networkx_revise.jsonl":  # two windows merged, graded by similarity
            report = json.loads((data / f"{name}.build.json").read_text())
            assert [p["tasks"] for p in report["parts"]] == [30, 30]
            assert all(p["build"]["grading"]["tests"] == 0 for p in report["parts"])
            assert {r["grading"] for r in recs} == {"similarity"}
        else:
            report = json.loads((data / f"{name}.build.json").read_text())
            assert report["grading"]["tests"] == sum(r["grading"] == "tests" for r in recs) > 0


def test_every_shipped_revision_reads_back_exactly() -> None:
    """The gold control of every similarity-graded task of every shipped set, through the reply
    parser: the real revision as whole files scores exact_match 1 and edit_chrf 100 (a file
    holding fences of its own once broke this: fenced_file)."""
    kind = get_kind("revise")
    data = BENCH / "revise" / "data"
    for name in SHIPPED:
        for rec in kind.read(data / name):
            if rec["grading"] == "similarity":
                scored = score_revision(kind.reference(rec), rec)
                assert (scored["exact_match"], scored["edit_chrf"]) == (1.0, 100.0), (name, rec["id"])


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_shipped_test_graded_tasks_gold_in_the_sandbox(request: pytest.FixtureRequest) -> None:
    """Every shipped test-graded task: the real revision passes its tests (1.0), the state after
    step N left unchanged fails them (0.0) -- both run in the sandbox. Once per content
    (tests/verified.py): the key is the shipped data, the grading code and this test."""
    from core.scenarios.repo.scoring import GRADING_VERSION
    from tests.verified import REPO, Verified, skip_if_verified

    verified = Verified("gold-revise", [BENCH / "revise" / "data", REPO / "core/scenarios/trajectories/revise",
                                        REPO / "core/scenarios/trajectories/implement_change", REPO / "core/scenarios/repo",
                                        REPO / "core/testenvmanager/sandbox", Path(__file__),
                                        REPO / "tests/trajectories/gold.py"],
                        [f"grading={GRADING_VERSION}"])
    skip_if_verified(verified, request, "revise gold controls")
    from core.scenarios.trajectories.revise.metrics import grader_record
    from tests.trajectories.gold import gold_and_unchanged

    kind = get_kind("revise")
    data = BENCH / "revise" / "data"
    tasks = [grader_record(r) for name in ("eli5_revise.jsonl", "toolz_revise.jsonl") for r in kind.read(data / name)
             if r["grading"] == "tests"]
    assert tasks
    for task_id, (form, ref, unchanged) in gold_and_unchanged(tasks, kind.reference, data / "revise-sources").items():
        assert form == "files" and ref.outcome == "passed", (task_id, ref.outcome, ref.detail[-800:])
        task = next(t for t in tasks if t["id"] == task_id)
        assert unchanged.outcome != "passed", task_id
        assert not any(unchanged.tests.get(t) == "passed" for t in task["tests"]["fail_to_pass"]), task_id
    verified.record(tasks=len(tasks))


def test_schema_errors() -> None:
    rec = read_jsonl(BENCH / "revise" / "data" / "revise_subset.jsonl")[0]
    with pytest.raises(DatasetError, match="files"):
        get_kind("revise").validate({**rec, "files": ["x.py"]}, source="r.jsonl", line=1)
    with pytest.raises(DatasetError, match="previous.diff"):
        get_kind("revise").validate({**rec, "previous": {"message": "m"}}, source="r.jsonl", line=1)
