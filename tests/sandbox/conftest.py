"""Shared fixtures for the sandbox tests: warm executors per session (strongest isolation)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.testenvmanager.sandbox import ExecRequest, Executor, get_executor  # noqa: E402
from core.testenvmanager.sandbox.images import DEFAULT_DOCKER_HOST as DOCKER_HOST  # noqa: E402

#: a fake secret placed in the caller's environment before the executor starts
SECRET = "sk-test-DO-NOT-LEAK-0123456789"


def _options() -> dict:
    # SANDBOX_TEST_OPTIONS="drop_uid=0,netns=0" runs the suite at a lower isolation level
    options: dict = {}
    for item in filter(None, os.environ.get("SANDBOX_TEST_OPTIONS", "").split(",")):
        key, _, value = item.partition("=")
        options[key.strip()] = value.strip() not in ("0", "false", "no")
    return options


def _with_secrets(factory: Callable[[], Executor]) -> Executor:
    """Start an executor while fake secrets sit in the caller's environment (removed again right
    after start-up so other test modules never see them)."""
    saved = {key: os.environ.get(key) for key in ("OPENAI_API_KEY", "GITHUB_TOKEN")}
    os.environ.update({key: SECRET for key in saved})
    try:
        return factory()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


#: Every backend the hostile suite runs against, from one parametrised definition: name ->
#: factory(**extra options). A new backend (docker, dask, ...) adds its entry here and every
#: hostile test runs against it too.
def _dask(**extra: object) -> Executor:
    """The ``dask`` backend on a real two-worker cluster (separate processes, mutual TLS on
    loopback) whose nodes grade with ``local`` under the same options as the ``local`` entry;
    closing the executor stops the cluster. Skipped when the edge extra is not installed."""
    from tests.edge.helpers import cluster_executor

    return cluster_executor(node_options={"workers": 2, **_options(),
                                          **extra})


BACKENDS: dict[str, Callable[..., Executor]] = {
    "local": lambda **extra: get_executor("local", **{"workers": 2, **_options(),
                                                      **extra}),
    "dask": _dask,
    # the project's Docker engine (.ci/docker-engine.sh) and base image (built on first use)
    "docker": lambda **extra: get_executor("docker", **{"workers": 2, "docker_host": DOCKER_HOST,
                                                        **extra}),
}


def _start(name: str, **extra: object) -> Executor:
    """An executor of backend ``name``; skips (with the reason) when the backend cannot run on
    this machine (docker: no root to run the engine)."""
    if name == "docker":
        from tests.sandbox.docker_env import require_docker

        require_docker()
    return _with_secrets(lambda: BACKENDS[name](**extra))


@pytest.fixture(scope="session")
def executor():
    """Session executor of the ``local`` backend (strongest isolation this host grants)."""
    ex = _with_secrets(BACKENDS["local"])
    yield ex
    ex.close()


#: the fast tier (``-m "not slow"``) runs the conformance suites on ``local``; the same tests on
#: the other backends (a Dask cluster, Docker containers) are marked slow and run in the full suite
BACKEND_PARAMS = [pytest.param(name, marks=() if name == "local" else pytest.mark.slow)
                  for name in sorted(BACKENDS)]


@pytest.fixture(scope="package", params=BACKEND_PARAMS)
def backend(request):
    """One warm executor per registered backend (the conformance suites are parametrised over
    them: taxonomy, limits, hostile samples, gold runs). Package scope: the last backend's
    executor (a Dask cluster of three processes, heartbeating) is closed when ``tests/sandbox``
    ends, not kept busy until the end of the session."""
    ex = _start(request.param)
    yield ex
    ex.close()


@pytest.fixture(scope="package", params=BACKEND_PARAMS)
def bare_backend(request):
    """Per backend, an executor with the interpreter-level policy (audit hook) switched off:
    what it still refuses is refused by the kernel walls alone."""
    ex = _start(request.param, audit_hook=False)
    yield ex
    ex.close()


def run_one(executor, **fields) -> "object":
    """Run a single request and return its result."""
    fields.setdefault("id", "r")
    fields.setdefault("timeout", 5.0)
    (result,) = list(executor.run([ExecRequest(**fields)]))
    return result


GOOD_PROGRAM = "def add(a, b):\n    return a + b\n"
CHECK_ADD = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"


def uid_processes(first: int, count: int) -> list[int]:
    """Pids of running processes whose real uid is in ``[first, first + count)``."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as fh:
                    for line in fh:
                        if line.startswith("Uid:"):
                            if first <= int(line.split()[1]) < first + count:
                                pids.append(int(entry))
                            break
            except OSError:
                continue
    return pids


def _descendants(root: int) -> set[int]:
    """``root`` and every process below it (from ``/proc/<pid>/stat`` parent pids)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    data = fh.read()
                parents[int(entry)] = int(data[data.rindex(b")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, todo = {root}, [root]
    while todo:
        pid = todo.pop()
        for child, parent in parents.items():
            if parent == pid and child not in found:
                found.add(child)
                todo.append(child)
    return found


def own_sample_uids() -> list[tuple[int, int]]:
    """``(first uid, count)`` of the sample uids of every executor this test process or its
    descendants (edge nodes) hold a uid lease for: what survivor checks look at (judges, at
    ``first + count``, are long-lived and never run sample code)."""
    from core.testenvmanager.sandbox.leases import lease_status

    mine = _descendants(os.getpid())
    ranges = set()
    for info in lease_status():
        owner = str(info.record.get("owner", "")).partition(":")[0]
        if info.held and owner.isdigit() and int(owner) in mine and "uid_base" in info.record:
            ranges.add((int(info.record["uid_base"]), int(info.record.get("count", 2)) // 2))
    return sorted(ranges)


def server_alive(executor) -> bool:
    """The executor's server survived: the local fork server's process is running; a backend
    whose server runs elsewhere (dask: on the nodes) must still grade a correct program."""
    alive = getattr(executor, "alive", None)
    if callable(alive):
        return bool(alive())
    return run_one(executor, id="alive", program=GOOD_PROGRAM, test=CHECK_ADD,
                   entry_point="add").outcome.value == "passed"


def assert_alive(executor) -> None:
    """The harness still grades a correct program as passed."""
    res = run_one(executor, id="alive", program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add")
    assert res.outcome.value == "passed", res


def walls_check() -> "ModuleType":
    """``benchmarks/walls_check.py`` as a module (loaded once): its ``CHECKS`` are the hostile
    memory and process attacks, one home for the script and the tests."""
    from tests.benchmark_scripts import benchmark_module

    return benchmark_module("walls_check")
