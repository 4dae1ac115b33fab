"""A node that stops answering while still connected (SIGSTOP of its whole process group: the
scheduler keeps it for minutes) must not hang a run: its batches are resubmitted to the other
node once, or become ``infra_error`` when no other node is there."""
from __future__ import annotations

import logging
import signal
import time

import pytest

from core.testenvmanager.sandbox import ExecRequest, Outcome

from .helpers import DaskExecutor, edge_cluster, sandbox_options, tls_options

CHECK = "def check(f):\n    assert f(1) == 1\n"


def _requests(n: int) -> list[ExecRequest]:
    return [ExecRequest(id=f"r{i}", program=f"import time\ndef f(x):\n    time.sleep(0.2)\n"
                        f"    return x  # {i}\n", test=CHECK, entry_point="f", timeout=2)
            for i in range(n)]


@pytest.mark.slow
@pytest.mark.parametrize("stopped", [("edge1",), ("edge1", "edge2")])
def test_a_frozen_node_does_not_hang_the_run(stopped: tuple[str, ...],
                                             caplog: pytest.LogCaptureFixture) -> None:
    """One node frozen: every request passes, graded once, by the other node, and one warning
    names the frozen node. Both frozen: every request is ``infra_error`` within the stall limit
    (twice the batch budget plus the grace), not a hang."""
    with edge_cluster() as cluster:
        executor = DaskExecutor(**sandbox_options(cluster, batch_size=1))
        executor.stall_grace_s = 15.0  # generous: a loaded machine must not look stalled
        executor.prepare_timeout_s = 20.0  # a node asked again must not hold the run long
        try:
            for name in stopped:
                cluster.kill(name, signal.SIGSTOP)
            start = time.monotonic()
            with caplog.at_level(logging.WARNING, logger="core.edge.executor"):
                results = list(executor.run(_requests(10)))
            took = time.monotonic() - start
        finally:
            for name in stopped:
                cluster.kill(name, signal.SIGCONT)
            executor.close()
    assert sorted(r.id for r in results) == sorted(f"r{i}" for i in range(10))
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    if len(stopped) == 1:
        assert {r.outcome for r in results} == {Outcome.PASSED}, [r.detail for r in results]
        assert {r.node for r in results} == {"edge2"}
        assert any("edge1" in w and "resubmitted" in w for w in warnings), warnings
    else:
        assert {r.outcome for r in results} == {Outcome.INFRA_ERROR}
        assert all("no batch came back" in r.detail for r in results)
        assert took < 4 * executor.stall_limit([_requests(1)]), took


@pytest.mark.slow
def test_a_node_frozen_before_its_gold_check_is_refused_not_waited_for(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """edge1 frozen before the executor connects: its gold check times out, it is named in a
    warning and never given work; the run grades everything on edge2."""
    monkeypatch.setattr(DaskExecutor, "prepare_timeout_s", 20.0)  # edge2 answers well within
    with edge_cluster() as cluster:
        cluster.kill("edge1", signal.SIGSTOP)
        executor = None
        try:
            with caplog.at_level(logging.WARNING, logger="core.edge.executor"):
                start = time.monotonic()
                executor = DaskExecutor(**sandbox_options(cluster, batch_size=1))
                took = time.monotonic() - start
                results = list(executor.run(_requests(4)))
            assert executor.nodes == ["edge2"]
        finally:
            cluster.kill("edge1", signal.SIGCONT)
            if executor is not None:
                executor.close()
    assert took < 60, took
    assert {r.outcome for r in results} == {Outcome.PASSED} and {r.node for r in results} == {"edge2"}
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("edge1" in w and "within 20s" in w for w in warnings), warnings


def test_connected_nodes_never_read_as_gone() -> None:
    """``allowed_workers`` asked again and again while the client's own periodic refresh of its
    scheduler cache runs every few milliseconds: both connected nodes are listed every time.
    (``Client.scheduler_info`` read from this thread came back with no workers now and then;
    in CI that made two healthy nodes "leave" mid-run and be prepared again.)"""
    import dask
    import distributed

    from core.edge.executor import allowed_workers
    from core.edge.settings import TlsFiles, security

    with edge_cluster() as cluster:
        tls = tls_options(cluster)
        with dask.config.set({"distributed.client.scheduler-info-interval": "5ms"}):
            client = distributed.Client(cluster.address, set_as_default=False, timeout=60,
                                        security=security(TlsFiles(**tls), "client"))
        try:
            seen = [len(allowed_workers(client)) for _ in range(1500)]
        finally:
            client.close(timeout=10)
    assert seen.count(2) == len(seen), f"{len(seen) - seen.count(2)} of {len(seen)} looks " \
                                       "saw fewer than the two connected nodes"
