"""A cluster that cannot start fails within its bound and shows its daemons' own words: the log
tails are in the error, since the log folder is usually a temporary one that is gone by then."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from core.edge.processes import EdgeCluster, WorkerSpec
from tests.processes import running


def test_a_scheduler_that_exits_is_reported_with_its_log_tail(tmp_path: Path) -> None:
    cluster = EdgeCluster([WorkerSpec("edge1")], None, log_dir=tmp_path / "logs",
                          scheduler_prefix=["sh", "-c", "echo 'cannot bind: marker-7731' >&2; exit 3", "sh"])
    started = time.monotonic()
    with pytest.raises(RuntimeError) as err:
        cluster.start(timeout=60)
    assert time.monotonic() - started < 30
    assert "exited with 3" in str(err.value) and "marker-7731" in str(err.value)
    assert not cluster.procs  # everything started was stopped again


@pytest.mark.slow  # over 5 s: the fast tier stays under 5 minutes
def test_workers_that_never_register_time_out_with_every_log_tail(tmp_path: Path) -> None:
    """The scheduler is a process that never listens, the worker one that only prints."""
    cluster = EdgeCluster([WorkerSpec("edge1", prefix=["sh", "-c", "echo worker-said-9917; sleep 60", "sh"])],
                          None, log_dir=tmp_path / "logs",
                          scheduler_prefix=["sh", "-c", "echo sched-said-4411; sleep 60", "sh"])
    started = time.monotonic()
    with pytest.raises(TimeoutError) as err:
        cluster.start(timeout=3)
    assert time.monotonic() - started < 30
    text = str(err.value)
    assert "did not register within 3s" in text
    assert "sched-said-4411" in text and "worker-said-9917" in text, text
    assert not cluster.procs


OWNER = """
import sys, time
sys.path.insert(0, {root!r})
from core.edge.processes import EdgeCluster, WorkerSpec
cluster = EdgeCluster([WorkerSpec("edge1", prefix=["sh", "-c", "exec sleep 120", "sh"])], None,
                      scheduler_prefix=["sh", "-c", "exec sleep 120", "sh"])
cluster.start_scheduler()
cluster.start_worker(cluster.specs[0])
print(" ".join(str(p.pid) for p in cluster.procs.values()), flush=True)
time.sleep(120)
"""


def test_a_killed_owner_leaves_no_cluster_process() -> None:
    """SIGKILL of the process that started a cluster (a killed test run or demo): its scheduler
    and workers get SIGTERM from the kernel (parent-death signal) instead of living on."""
    import os
    import signal
    import subprocess
    import sys

    root = str(Path(__file__).resolve().parents[2])
    owner = subprocess.Popen([sys.executable, "-c", OWNER.format(root=root)], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert owner.stdout is not None
        pids = [int(p) for p in owner.stdout.readline().split()]
        assert len(pids) == 2 and all(os.path.exists(f"/proc/{p}") for p in pids)
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(running(p) for p in pids):
        time.sleep(0.05)
    assert not any(running(p) for p in pids)
