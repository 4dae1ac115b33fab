"""The real embedded model writes problems and tests for 3 shipped toolz tasks (slow: a few minutes
of CPU generation). The model's output is not fixed, so the test checks the contract, not the
numbers: every written test is accounted for exactly once, problems go only to functions without
a docstring, and every kept test really passes on the original and fails on the blank when the
task is run again the way the job runs it (real sandbox, real repository environment)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.scenarios.repo.authoring import DROP_REASONS, AuthoringOptions, author, node_outcome
from core.scenarios.repo.env import RepoEnv
from core.scenarios.repo.execute import Sample, run_samples
from core.scenarios.repo.kind import load_tasks
from core.scenarios.repo.source import materialise

from .conftest import SHIPPED


@pytest.mark.slow
def test_embedded_model_counts_add_up(repo_env: RepoEnv, views_dir: Path) -> None:
    every = {t["qualname"]: t for t in load_tasks(SHIPPED / "data/toolz-tasks.jsonl", None)}
    tasks = [every["check_arity"], every["valmap"], every["identity"]]  # one without a docstring
    src = materialise(str(SHIPPED / "data/toolz-1.0.0.tar.gz"), views_dir / "src")
    report = author(tasks, src.root, repo_env, AuthoringOptions(problems=True, tests=True, views_dir=views_dir))
    row = report.as_dict()
    assert set(row["tests_dropped"]) == set(DROP_REASONS)
    assert row["tests_written"] == row["tests_kept"] + sum(row["tests_dropped"].values())
    assert row["tests_written"] >= len(tasks) - row["generation_errors"]
    assert row["problems_asked"] == 1
    assert row["problems_asked"] == row["problems_written"] + sum(row["problems_dropped"].values())
    assert bool(tasks[0].get("problem")) == (row["problems_written"] == 1)
    assert all(not t.get("problem") for t in tasks[1:])
    kept = [t for t in tasks if t["model_written_tests"]]
    assert sum(len(w["tests"]) for t in kept for w in t["model_written_tests"]) == row["tests_kept"]
    if kept:
        orig = {r.task_id: r for r in run_samples([Sample(t["task_id"], t, None) for t in kept], src.root,
                                                   repo_env, views_dir, reference=True)}
        blank = {r.task_id: r for r in run_samples([Sample(t["task_id"], t, None) for t in kept], src.root,
                                                    repo_env, views_dir)}
        for t in kept:
            for node in (n for w in t["model_written_tests"] for n in w["tests"]):
                assert node_outcome(orig[t["task_id"]].tests, node) == "passed"
                assert node_outcome(blank[t["task_id"]].tests, node) == "failed"
            assert orig[t["task_id"]].outcome == "passed"
