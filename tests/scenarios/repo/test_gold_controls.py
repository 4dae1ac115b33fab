"""Gold controls over every shipped repo dataset (every task, in the sandbox): the reference body,
injected by AST position exactly like a model's answer -- so compiled under the grading policy
(:mod:`core.scenarios.repo.policy`) and run with its guards and tripwire -- passes all the task's
tests, and the blanked body passes none of its FAIL_TO_PASS tests. A broken task, or a policy
that refuses honest code, therefore cannot ship. (Injected without the policy, the reference
gives back the original file, asserted per task: the reference text is the file's.)
A set whose tasks need ``services: [postgres]`` runs against the private PostgreSQL service (one
database per sample); it is skipped, naming the install script, where PostgreSQL is not installed.
Such sets run a second time on the ``docker`` backend (the repository image, the service's socket
mounted into the containers): :func:`test_gold_controls_on_docker`.
Also checks each set's records (>= 50 tasks, licence, pins, schema, content hash of the shipped
source) and that the example's testenv names a source for every shipped set.

The gold controls run once per content (:mod:`tests.verified`): their key covers the tasks file,
the shipped source, the repo kind's and the sandbox's code and the grading version, so any change
that could break a task runs them in full; an unchanged set is skipped naming the date it was
verified (``pytest --recheck-verified`` runs them anyway)."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import pytest

from core.scenarios import get_kind
from core.scenarios.repo.env import RepoEnv, record_env
from core.scenarios.repo.execute import Sample, run_samples, site_of
from core.scenarios.repo.functions import inject
from core.scenarios.repo.image_env import ImageEnv, ensure_image_env
from core.scenarios.repo.kind import load_tasks
from core.scenarios.repo.postgres import PostgresService, PostgresUnavailable
from core.scenarios.repo.prompts import reference_code
from core.scenarios.repo.scoring import GRADING_VERSION
from core.scenarios.repo.source import materialise
from tests.sandbox.docker_env import require_docker
from tests.scenarios.repo.conftest import shipped_sets
from tests.verified import REPO, Verified, skip_if_verified

SETS = shipped_sets()
IDS = [path.name.removesuffix("-tasks.jsonl") for _name, path, _src in SETS]


def test_every_set_has_a_source() -> None:
    assert len(SETS) >= 3
    for _name, _tasks, source in SETS:
        assert source.exists(), source


@pytest.mark.parametrize("spec", SETS, ids=IDS)
def test_shipped_records(spec: tuple[str, Path, Path]) -> None:
    name, path, _source = spec
    assert get_kind("repo").check_file(path) >= 50
    for t in load_tasks(path):
        assert t["repo"]["name"] == name
        assert t["repo"]["licence"] and t["env"]["pins"] and t["tests"]["fail_to_pass"]
        assert t["reference"].strip() and t["signature"].lstrip().startswith(("def ", "async def "))


def gold_key(path: Path, source: Path, backend: str = "local") -> Verified:
    """What the gold controls of one set depend on (on ``backend``): the set, its source, the
    grading code and this file (the check itself)."""
    name = path.name.removesuffix("-tasks.jsonl")
    return Verified(f"gold-{name}" if backend == "local" else f"gold-{backend}-{name}",
                    [path, source, REPO / "core/scenarios/repo", REPO / "core/testenvmanager/sandbox",
                     Path(__file__)],
                    [f"grading={GRADING_VERSION}", *([f"backend={backend}"] if backend != "local" else [])])


def _reference_runs(tasks: list[dict], root: Path) -> dict[str, Sample]:
    """The gold runs of the references: ``task id -> the sample that runs its reference``, the
    reference given as a model's answer (so compiled under the grading policy like one). Each
    reference injected without the policy must give back the original file byte for byte
    (asserted here, per task)."""
    runs: dict[str, Sample] = {}
    for t in tasks:
        text = (root / t["file"]).read_text()
        assert inject(text, site_of(t, text), reference_code(t)) == text, f"{t['task_id']}: reference changes the file"
        runs[t["task_id"]] = Sample(t["task_id"] + "#ref", t, reference_code(t))
    return runs


def _check_gold(tasks: list[dict], root: Path, env: RepoEnv | ImageEnv, views: Path, postgres: bool) -> None:
    """Run every task's reference (:func:`_reference_runs`) and blanked body (on ``env``'s
    backend; with a PostgreSQL service when ``postgres``, skipping naming the install script
    where it is missing) and assert the gold controls."""
    ref = _reference_runs(tasks, root)
    blank = [Sample(t["task_id"] + "#blank", t, None) for t in tasks]
    distinct = list({s.sample_id: s for s in ref.values()}.values())
    with ExitStack() as stack:
        service = None
        if postgres:
            try:
                service = stack.enter_context(PostgresService())
            except PostgresUnavailable as exc:
                pytest.skip(exc.render())
        results = {r.sample_id: r for r in run_samples(distinct + blank, root, env, views, timeout=120,
                                                        service=service)}
    bad_ref = [(task_id, s.sample_id, results[s.sample_id].outcome, results[s.sample_id].detail[-200:])
               for task_id, s in ref.items() if results[s.sample_id].outcome != "passed"]
    assert not bad_ref
    for task_id, s in ref.items():   # the run's own tests: every one of this task's ran and passed
        t = next(x for x in tasks if x["task_id"] == task_id)
        assert all(results[s.sample_id].tests.get(n) == "passed" for n in t["tests"]["fail_to_pass"]), task_id
    for s in blank:
        r = results[s.sample_id]
        assert r.outcome != "passed", s.sample_id
        assert all(r.tests.get(name) != "passed" for name in s.task["tests"]["fail_to_pass"]), s.sample_id
    assert {r.executed_by for r in results.values()} == {env.backend}


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("spec", SETS, ids=IDS)
def test_gold_controls(spec: tuple[str, Path, Path], views_dir: Path,
                       request: pytest.FixtureRequest) -> None:
    _name, path, source = spec
    verified = gold_key(path, source)
    skip_if_verified(verified, request, "gold controls")
    tasks = load_tasks(path)
    src = materialise(str(source), views_dir / "src")
    assert {t["repo"]["content_hash"] for t in tasks} == {src.content_hash}
    env: RepoEnv = record_env(tasks[0])
    _check_gold(tasks, src.root, env, views_dir / "views", "postgres" in (tasks[0].get("services") or []))
    verified.record(tasks=len(tasks))


PG_SETS = [spec for spec in SETS if "postgres" in (load_tasks(spec[1], 1)[0].get("services") or [])]


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.parametrize("spec", PG_SETS, ids=[p.name.removesuffix("-tasks.jsonl") for _n, p, _s in PG_SETS])
def test_gold_controls_on_docker(spec: tuple[str, Path, Path], views_dir: Path,
                                 request: pytest.FixtureRequest) -> None:
    """The PostgreSQL sets' gold controls on the ``docker`` backend (every task; once per
    content, like the others; a subset runs every time in test_postgres_docker.py)."""
    _name, path, source = spec
    verified = gold_key(path, source, "docker")
    skip_if_verified(verified, request, "docker gold controls")
    require_docker()
    tasks = load_tasks(path)
    src = materialise(str(source), views_dir / "src")
    assert {t["repo"]["content_hash"] for t in tasks} == {src.content_hash}
    env = ensure_image_env(list(tasks[0]["env"].get("requirements") or []))
    _check_gold(tasks, src.root, env, views_dir / "views", True)
    verified.record(tasks=len(tasks))
