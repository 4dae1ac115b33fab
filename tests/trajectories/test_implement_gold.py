"""Gold controls of the shipped implement-change tasks, in the sandbox (slow): the developer's
real change passes every task's tests (1.0), the parent left unchanged fails them (0.0)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.scenarios import get_kind
from core.scenarios.repo.scoring import GRADING_VERSION
from tests.scenarios.conftest import BENCH
from tests.trajectories.gold import gold_and_unchanged
from tests.verified import REPO, Verified, skip_if_verified

DATA = BENCH / "implement_change" / "data"
SOURCES = DATA / "implement_change-sources"


def _tasks() -> list[dict]:
    """Every task of every shipped set (``*_implement_change.jsonl``)."""
    kind = get_kind("implement_change")
    files = sorted(DATA.glob("*_implement_change.jsonl"))
    assert files, f"no shipped sets in {DATA}"
    return [t for f in files for t in kind.read(f)]


def gold_key() -> Verified:
    """What these gold controls depend on: the shipped sets and sources, the grading code (the
    kind's, the repo kind's it runs on, the sandbox) and this test."""
    return Verified("gold-implement_change",
                    [DATA, REPO / "core/scenarios/trajectories/implement_change", REPO / "core/scenarios/repo",
                     REPO / "core/testenvmanager/sandbox", Path(__file__), REPO / "tests/trajectories/gold.py"],
                    [f"grading={GRADING_VERSION}"])


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_real_change_scores_1_and_parent_unchanged_0(request: pytest.FixtureRequest) -> None:
    """Once per content (tests/verified.py, docs/testing.md)."""
    verified = gold_key()
    skip_if_verified(verified, request, "implement-change gold controls")
    tasks = _tasks()
    assert tasks, "the shipped set is empty"
    kind = get_kind("implement_change")
    for task_id, (form, ref, parent) in gold_and_unchanged(tasks, kind.reference, SOURCES).items():
        assert form == "files" and ref.outcome == "passed", (task_id, ref.outcome, ref.detail[-800:])
        task = next(t for t in tasks if t["id"] == task_id)
        assert all(ref.tests.get(t) == "passed" for t in task["tests"]["fail_to_pass"])
        # the parent as it is, tests run (not short-cut as no_change)
        assert parent.outcome != "passed", task_id
        assert not any(parent.tests.get(t) == "passed" for t in task["tests"]["fail_to_pass"]), task_id
    verified.record(tasks=len(tasks))


def test_shipped_set_validates_and_has_provenance() -> None:
    tasks = _tasks()
    for task in tasks:
        assert (SOURCES / task["repo"]["source"]).is_file()
        assert task["tests"]["fail_to_pass"] and task["repo"]["licence"] in ("MIT", "BSD-3-Clause")
    for path in DATA.glob("*_implement_change.jsonl"):
        report = json.loads(path.with_name(path.name + ".build.json").read_text())
        assert report["tasks"] == len(path.read_text().splitlines())
    subset = list(get_kind("implement_change").read(DATA / "implement_change_subset.jsonl"))
    assert {t["id"] for t in subset} <= {t["id"] for t in tasks}
