"""Gold controls of the shipped implement-change tasks, in the sandbox (slow): the developer's
real change passes every task's tests (1.0), the parent left unchanged fails them (0.0)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from core.scenarios import get_kind
from core.scenarios.repo.scoring import GRADING_VERSION
from core.scenarios.repo.source import ROOTS_REF, bundle_tree
from tests.scenarios.conftest import BENCH
from tests.trajectories.gold import gold_and_unchanged
from tests.verified import REPO, Verified, skip_if_verified

DATA = BENCH / "implement_change" / "data"
SOURCES = DATA / "implement_change-sources"


SETS = sorted(DATA.glob("*_implement_change.jsonl"))


def _tasks(files: list[Path] | None = None) -> list[dict]:
    """Every task of the shipped sets (``*_implement_change.jsonl``), or of ``files``."""
    kind = get_kind("implement_change")
    files = files if files is not None else SETS
    assert files, f"no shipped sets in {DATA}"
    return [t for f in files for t in kind.read(f)]


def gold_key(path: Path) -> Verified:
    """What the gold controls of one shipped set depend on: the set, the roots, the grading
    code (the kind's, the repo kind's it runs on, the sandbox) and this test."""
    return Verified(f"gold-implement_change-{path.stem}",
                    [path, SOURCES, REPO / "core/scenarios/trajectories/implement_change",
                     REPO / "core/scenarios/repo", REPO / "core/testenvmanager/sandbox",
                     Path(__file__), REPO / "tests/trajectories/gold.py"],
                    [f"grading={GRADING_VERSION}"])


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("path", SETS, ids=[p.stem for p in SETS])
def test_real_change_scores_1_and_parent_unchanged_0(path: Path,
                                                      request: pytest.FixtureRequest) -> None:
    """Once per content (tests/verified.py, docs/testing.md); one test per set, so the sets'
    controls run side by side under pytest-xdist."""
    verified = gold_key(path)
    skip_if_verified(verified, request, f"implement-change gold controls of {path.name}")
    tasks = _tasks([path])
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
    bundled: dict[Path, set[str]] = {}
    for task in tasks:
        inside = bundle_tree(str(SOURCES / task["repo"]["source"]))
        if inside is None:
            assert (SOURCES / task["repo"]["source"]).is_file()
        else:  # a root in a roots bundle (ianvs dataset pack-roots)
            bundled.setdefault(inside[0], set()).add(inside[1])
        assert task["tests"]["fail_to_pass"] and task["repo"]["licence"] in ("MIT", "BSD-3-Clause")
    for bundle, names in bundled.items():
        heads = subprocess.run(["git", "bundle", "list-heads", str(bundle)], check=True,
                               capture_output=True, text=True).stdout
        assert names <= {line.split()[1].removeprefix(ROOTS_REF) for line in heads.splitlines()}
    for path in DATA.glob("*_implement_change.jsonl"):
        report = json.loads(path.with_name(path.name + ".build.json").read_text())
        assert report["tasks"] == len(path.read_text().splitlines())
    subset = list(get_kind("implement_change").read(DATA / "implement_change_subset.jsonl"))
    assert {t["id"] for t in subset} <= {t["id"] for t in tasks}
