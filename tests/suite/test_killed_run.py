"""A run killed with SIGKILL in the middle leaves nothing that outlives it, and the next run needs
no clean-up by hand.

The "run" is a child process that starts what a test session or an ``ianvs`` run starts: a
``local`` executor (fork server, judges, cgroups, uid lease), a real Dask cluster (scheduler and
two workers, mutual TLS) and the repo kind's PostgreSQL service when its binaries are installed.
It is killed with SIGKILL while all of them run. Then: every process it started is gone within
seconds (fork server: its socket closed; cluster and database: the parent-death signal), what
stays on disk is removed by the next executor's start sweep or ``ianvs sandbox clean``, and the
same parts start again at once.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.scenarios import register_kind_leftovers
from core.testenvmanager.sandbox.leftovers import discover
from tests.processes import running

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import json, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from core.testenvmanager.sandbox import get_executor, ExecRequest
from core.edge.certs import write_certs
from core.edge.processes import EdgeCluster, WorkerSpec
ex = get_executor("local", workers=2)
list(ex.run([ExecRequest(id="a", program="def f():\\n    return 1\\n", test="def check(c):\\n    assert c() == 1\\n", entry_point="f")]))
folder = Path(tempfile.mkdtemp(prefix="ianvs-killed-run-"))
write_certs(folder / "certs", ["127.0.0.1"], ["edge1", "edge2"])
cluster = EdgeCluster([WorkerSpec("edge1"), WorkerSpec("edge2")], folder / "certs",
                      log_dir=folder / "logs").start(timeout=90)
pids = {{"server": ex._proc.pid, "cluster": [p.pid for p in cluster.procs.values()],
        "uid_base": ex.uid_base}}
try:
    from core.scenarios.repo.postgres import PostgresService, PostgresUnavailable
    pg = PostgresService()
    pg.start()
    pids["postgres"] = pg.pid
    pids["postgres_dir"] = str(pg.run_dir)
except Exception as exc:  # not installed here: the test says so
    pids["postgres_missing"] = str(exc)
print(json.dumps(pids), flush=True)
time.sleep(600)
"""


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_killed_run_leaves_nothing_running_and_the_next_run_starts_clean() -> None:
    pytest.importorskip("distributed", reason="the edge extra (dask, distributed) is not installed")
    if os.geteuid() != 0:
        pytest.skip("the walls, cgroups and uid leases this checks need root")
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(repo=str(REPO))],
                             stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line, "the child run did not start"
        pids = json.loads(line)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    started = [pids["server"], *pids["cluster"], *([pids["postgres"]] if "postgres" in pids else [])]
    assert all(isinstance(p, int) for p in started)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(running(p) for p in started):
        time.sleep(0.1)
    assert not [p for p in started if running(p)], "processes outlived their killed owner"

    # what stays on disk belongs to a dead owner; clean removes it, a live run's is never touched
    register_kind_leftovers()  # the repo kind's postgres folders, as 'ianvs sandbox clean' does
    dead = [item for item in discover() if item.owner == child.pid]
    assert all(not item.alive for item in dead), dead
    res = subprocess.run([sys.executable, "-m", "core.cmd.benchmarking", "sandbox", "clean"],
                         cwd=REPO, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert res.returncode == 0, res.stdout + res.stderr
    assert not [item for item in discover() if item.owner == child.pid]
    if "postgres_dir" in pids:
        assert not Path(pids["postgres_dir"]).exists()

    # the same parts start again at once (the killed run's uid lease ended with its processes)
    from core.testenvmanager.sandbox import ExecRequest, get_executor

    with get_executor("local", workers=2) as ex:
        request = ExecRequest(id="b", program="def f():\n    return 1\n",
                              test="def check(c):\n    assert c() == 1\n", entry_point="f")
        (result,) = list(ex.run([request]))
        assert result.outcome.value == "passed"
