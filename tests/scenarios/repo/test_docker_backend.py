"""Repo tasks on the ``docker`` sandbox backend, on the project's real Docker engine: the
repository image (cached, labelled, its pins recorded; an uninstallable requirement is one
readable error), shipped toolz tasks (reference passes, blank fails, per-task and per-test
outcomes equal to the ``local`` backend's for the same samples), views read-only inside the
container, ``min_isolation`` still refused, PostgreSQL tasks accepted (they run in
test_postgres_docker.py), the options repo_tests sets itself refused, and ``ianvs -f`` with
``sandbox.backend: docker``."""

from __future__ import annotations

import csv
import json
import shutil
import threading
from dataclasses import replace
from pathlib import Path
from typing import Iterator

import pytest

from core.common.errors import ConfigError, IanvsError
from core.scenarios.repo.env import RepoEnv
from core.scenarios.repo.execute import VIEWS_IN_CONTAINER, Sample, SampleResult, run_samples
from core.scenarios.repo.image_env import ImageEnv, ensure_image_env
from core.scenarios.repo.kind import load_tasks
from core.scenarios.repo.prompts import reference_code
from core.scenarios.repo.scoring import (ENVIRONMENTS_FILE, EXECUTIONS_FILE, _check_task, _environment,
                                         _sandbox_options, source_root)
from core.scenarios.repo.source import content_hash
from core.testenvmanager.sandbox import IsolationUnavailableError
from core.testenvmanager.sandbox.images import (DEFAULT_DOCKER_HOST, HASH_LABEL, KIND_LABEL, LABEL, PINS_LABEL,
                                                connect, run_in_image)
from tests.runner.conftest import run_cli
from tests.sandbox.docker_env import require_docker
from tests.scenarios.repo.conftest import SHIPPED

TOOLZ = SHIPPED / "data" / "toolz-tasks.jsonl"
#: toolz tasks from different modules (import hooks, dicttoolz, itertoolz, functoolz, curried...)
PICK = 8


def _pick(n: int) -> list[dict]:
    tasks = load_tasks(TOOLZ)
    step = max(1, len(tasks) // n)
    return tasks[::step][:n]


@pytest.fixture(scope="module")
def image_env() -> ImageEnv:
    require_docker()
    return ensure_image_env([])


@pytest.fixture(scope="module")
def toolz_root() -> Path:
    tasks = load_tasks(TOOLZ, 1)
    return source_root((SHIPPED / "data" / "toolz-1.0.0.tar.gz").resolve(), tasks[0]["repo"]["content_hash"])


def _run(samples: list[Sample], root: Path, env: RepoEnv | ImageEnv, views: Path, **kw: object) -> dict[str, SampleResult]:
    return {r.sample_id: r for r in run_samples(samples, root, env, views, timeout=60, **kw)}  # type: ignore[arg-type]


def test_repository_image_is_cached_labelled_and_records_its_pins(image_env: ImageEnv) -> None:
    again = ensure_image_env([])
    assert again.image == image_env.image and image_env.image.startswith("ianvs-sandbox/repo-env:")
    assert image_env.site == ["/usr/lib/ianvs-packages"] and image_env.backend == "docker"
    assert {"pytest==8.3.4", "pytest-cov==6.0.0", "coverage==7.6.10"} <= set(image_env.pins)
    client = connect(DEFAULT_DOCKER_HOST)
    try:
        labels = client.images.get(image_env.image).labels
    finally:
        client.close()
    assert labels[LABEL] == "1" and labels[KIND_LABEL] == "repo-env" and labels[HASH_LABEL] in image_env.image
    assert json.loads(labels[PINS_LABEL]) == image_env.pins
    # bytecode is compiled in the image (the root is read-only at run time): no sample recompiles pytest
    client = connect(DEFAULT_DOCKER_HOST)
    try:
        out = run_in_image(client, image_env.image, "import os, sys\nsys.path.append('/usr/lib/ianvs-packages')\n"
                                                    "import _pytest.python as m\nprint(os.path.isfile(m.__cached__))")
    finally:
        client.close()
    assert out.strip() == "True"


def test_an_uninstallable_requirement_is_one_readable_error() -> None:
    require_docker()
    with pytest.raises(IanvsError, match="could not build the repository image") as info:
        ensure_image_env(["no-such-package-ianvs-zzz==9.9.9"])
    assert "no-such-package-ianvs-zzz" in str(info.value) and "package index" in info.value.render()


def test_a_run_env_image_is_used_as_is(image_env: ImageEnv) -> None:
    env = ensure_image_env(["ignored==1"], run_env=image_env.image)
    assert env.image == image_env.image and "pytest==8.3.4" in env.pins
    assert "/usr/lib/python3/dist-packages" in env.site
    with pytest.raises(IanvsError, match="cannot run the repository's tests"):
        ensure_image_env([], run_env="ianvs-sandbox/python:base")  # no pytest there


@pytest.mark.slow  # over 5 s: the fast tier stays under 5 minutes
def test_shipped_toolz_tasks_match_the_local_backend(image_env: ImageEnv, repo_env: RepoEnv, toolz_root: Path,
                                                     views_dir: Path) -> None:
    tasks = _pick(PICK)
    samples = ([Sample(t["task_id"] + "#ref", t, reference_code(t)) for t in tasks]
               + [Sample(t["task_id"] + "#blank", t, None) for t in tasks])
    on_docker = _run(samples, toolz_root, image_env, views_dir / "d")
    on_local = _run(samples, toolz_root, repo_env, views_dir / "l")
    for t in tasks:
        ref, blank = on_docker[t["task_id"] + "#ref"], on_docker[t["task_id"] + "#blank"]
        assert ref.outcome == "passed", (t["task_id"], ref.detail)
        assert blank.outcome == "failed", (t["task_id"], blank.detail)
        assert all(blank.tests.get(n) != "passed" for n in t["tests"]["fail_to_pass"])
    assert {k: r.outcome for k, r in on_docker.items()} == {k: r.outcome for k, r in on_local.items()}
    assert {k: r.tests for k, r in on_docker.items()} == {k: r.tests for k, r in on_local.items()}
    assert {r.executed_by for r in on_docker.values()} == {"docker"}
    assert {r.isolation for r in on_docker.values()} == {"full"}
    assert {r.executed_by for r in on_local.values()} == {"local"}


def _mounts_of_live_containers(found: list[dict], stop: threading.Event) -> None:
    client = connect(DEFAULT_DOCKER_HOST)
    try:
        while not stop.is_set() and not found:
            for c in client.containers.list(filters={"label": f"{LABEL}=1"}, ignore_removed=True):
                found += [m for m in c.attrs.get("Mounts", []) if m.get("Destination") == VIEWS_IN_CONTAINER]
            stop.wait(0.1)
    finally:
        client.close()


def test_a_sample_cannot_write_its_view(image_env: ImageEnv, toolz_root: Path, views_dir: Path) -> None:
    task = _pick(1)[0]
    ref = reference_code(task)
    header, _, body = ref.partition("\n")  # a one-line header, then the body (4-space indent)
    writes = [("module", "open(__file__, 'a').close()"),
              ("new file", "open(__file__ + '.leak', 'w').close()"),
              ("test file", "import os; open(os.path.dirname(__file__) + '/../toolz/__init__.py', 'a').close()")]
    samples = [Sample("ref", task, ref)] + [
        Sample(name, task, f"{header}\n    {stmt}\n{body}") for name, stmt in writes]
    before = content_hash(toolz_root)
    found: list[dict] = []
    stop = threading.Event()
    watcher = threading.Thread(target=_mounts_of_live_containers, args=(found, stop))
    watcher.start()
    try:
        results = _run(samples, toolz_root, image_env, views_dir)
    finally:
        stop.set()
        watcher.join()
    assert results["ref"].outcome == "passed", results["ref"].detail
    for name, _stmt in writes:
        assert results[name].outcome == "failed", (name, results[name].outcome, results[name].detail)
    assert content_hash(toolz_root) == before and not list(toolz_root.rglob("*.leak"))
    assert found and all(m["RW"] is False and m["Type"] == "bind" for m in found), found


def test_min_isolation_is_still_refused(image_env: ImageEnv, toolz_root: Path, views_dir: Path) -> None:
    """Containers reach ``full``; one without Landlock reaches ``netns`` only and refuses a
    ``min_isolation`` of ``kernel``."""
    task = _pick(1)[0]
    weaker = replace(image_env, options={**image_env.options, "landlock": False})
    with pytest.raises(IsolationUnavailableError, match="min_isolation is 'kernel'"):
        _run([Sample("ref", task, reference_code(task))], toolz_root, weaker, views_dir, min_isolation="kernel")


def test_backend_choice_and_postgres_tasks_on_docker() -> None:
    task = {**_pick(1)[0], "id": "t"}
    with pytest.raises(ConfigError, match="'local' or 'docker'"):
        _sandbox_options({"backend": "dask"})
    docker = _sandbox_options({"backend": "docker", "workers": 3, "runtime": "runc", "timeout": 9, "memory_mb": 64})
    assert (docker.backend, docker.workers, docker.docker_options) == ("docker", 3, {"runtime": "runc"})
    _check_task({**task, "services": ["postgres"]}, docker)  # no longer refused: its socket is mounted
    for key in ("read_mounts", "request_read_roots", "socket_mounts"):
        with pytest.raises(ConfigError, match=f"sandbox.{key} is set by repo_tests itself"):
            _sandbox_options({"backend": "docker", key: {}})
    with pytest.raises(ConfigError, match="run_env.*needs the docker backend"):
        _environment({**task, "run_env": "some/image:1"}, _sandbox_options({}))


@pytest.fixture()
def job(tmp_path: Path) -> Iterator[Path]:
    """The shipped repo example, on 4 toolz tasks, reference and broken, ``sandbox.backend: docker``."""
    require_docker()
    root = tmp_path / "repo"
    shutil.copytree(SHIPPED, root, ignore=shutil.ignore_patterns("workspace"))
    (root / "data" / "docker_subset.jsonl").write_text("".join(json.dumps(t) + "\n" for t in _pick(4)))
    env = root / "testenv" / "testenv.yaml"
    text = env.read_text().replace('"../data/default_subset.jsonl"', '"../data/docker_subset.jsonl"') \
        .replace('backend: "local"', 'backend: "docker"')
    assert text.count("docker") >= 2
    env.write_text(text)
    algo = root / "testalgorithms" / "gen" / "gen_algorithm.yaml"
    algo.write_text(algo.read_text().replace('values: ["embedded", "reference", "broken"]',
                                             'values: ["reference", "broken"]'))
    yield root


def test_ianvs_f_with_the_docker_backend(job: Path) -> None:
    res = run_cli("-f", str(job / "benchmarkingjob.yaml"), "--no-progress", cwd=job, timeout=900)
    assert res.returncode == 0, res.stderr[-4000:]
    rows = {r["basemodel-generator"]: r for r in csv.DictReader(open(next(job.glob("workspace/*/rank/all_rank.csv"))))}
    assert rows["reference"]["pass@1"] == "1.0" and rows["reference"]["passed"] == "4"
    assert rows["broken"]["pass@1"] == "0.0" and rows["broken"]["passed"] == "0"
    assert rows["reference"]["isolation"] == "full"  # broken answers never run: no isolation to report
    assert rows["reference"]["executed_by"] == rows["broken"]["executed_by"] == "docker"
    logs = sorted(job.glob(f"workspace/*/*/*/{EXECUTIONS_FILE}"))
    assert logs and all(json.loads(line)["executed_by"] == "docker" for p in logs for line in p.read_text().splitlines())
    envs = [json.loads(line) for p in job.glob(f"workspace/*/*/*/{ENVIRONMENTS_FILE}") for line in p.read_text().splitlines()]
    assert envs and all(e["backend"] == "docker" and "pytest==8.3.4" in e["pins"] for e in envs)


def test_read_mounts_are_checked_before_anything_starts(tmp_path: Path) -> None:
    from core.testenvmanager.sandbox import get_executor

    for inside in ("/tmp/views", "relative", "/opt", "/usr/lib/x"):
        with pytest.raises(ValueError, match="read_mounts"):
            get_executor("docker", read_mounts={str(tmp_path): inside})
    with pytest.raises(ValueError, match="not a directory"):
        get_executor("docker", read_mounts={str(tmp_path / "missing"): "/opt/ianvs/views"})
