"""Gold controls over every shipped repo dataset (every task, in the sandbox): the reference body,
injected by AST position exactly like a model's answer, passes all the task's tests, and the
blanked body passes none of its FAIL_TO_PASS tests. A broken task therefore cannot ship.
A set with ``services: [postgres]`` runs against the private PostgreSQL service (one database
per sample); it is skipped, naming the install script, where PostgreSQL is not installed.
Also checks each set's records (>= 50 tasks, licence, pins, content hash of the shipped source)."""

from __future__ import annotations

import json
from contextlib import ExitStack
from pathlib import Path

import pytest
import yaml

from core.scenarios.repo.env import RepoEnv, ensure_env
from core.scenarios.repo.execute import Sample, run_samples
from core.scenarios.repo.job import _reference_code, load_tasks
from core.scenarios.repo.postgres import PostgresService, PostgresUnavailable
from core.scenarios.repo.source import materialise
from tests.scenarios.repo.conftest import SHIPPED

SETS = yaml.safe_load((SHIPPED / "job.yaml").read_text())["repo_job"]["datasets"]


@pytest.mark.parametrize("spec", SETS, ids=[s["name"] for s in SETS])
def test_shipped_records(spec: dict) -> None:
    tasks = load_tasks(SHIPPED / spec["tasks"], None)
    assert len(tasks) >= 50
    assert len({t["task_id"] for t in tasks}) == len(tasks)
    for t in tasks:
        assert t["repo"]["licence"] and t["env"]["pins"] and t["tests"]["fail_to_pass"]
        assert t["reference"].strip() and t["signature"].lstrip().startswith(("def ", "async def "))


@pytest.mark.slow
@pytest.mark.parametrize("spec", SETS, ids=[s["name"] for s in SETS])
def test_gold_controls(spec: dict, views_dir: Path) -> None:
    tasks = load_tasks(SHIPPED / spec["tasks"], None)
    src = materialise(str(SHIPPED / spec["source"]), views_dir / "src")
    assert {t["repo"]["content_hash"] for t in tasks} == {src.content_hash}
    env: RepoEnv = ensure_env(list(spec.get("requirements") or []))
    ref = [Sample(t["task_id"] + "#ref", t, _reference_code(t)) for t in tasks]
    blank = [Sample(t["task_id"] + "#blank", t, None) for t in tasks]
    with ExitStack() as stack:
        service = None
        if "postgres" in (spec.get("services") or []):
            try:
                service = stack.enter_context(PostgresService())
            except PostgresUnavailable as exc:
                pytest.skip(exc.render())
        results = {r.sample_id: r for r in run_samples(ref + blank, src.root, env, views_dir / "views",
                                                       timeout=120, service=service)}
    bad_ref = [(s.sample_id, results[s.sample_id].outcome, results[s.sample_id].detail[-200:])
               for s in ref if results[s.sample_id].outcome != "passed"]
    assert not bad_ref
    for s in blank:
        r = results[s.sample_id]
        assert r.outcome != "passed", s.sample_id
        assert all(r.tests.get(name) != "passed" for name in s.task["tests"]["fail_to_pass"]), s.sample_id
