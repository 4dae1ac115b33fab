"""The ``dask`` backend against a real scheduler and two real workers (separate processes,
mutual TLS on loopback): gold generators, taxonomy, faults, certificates, resume."""
from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from core.testenvmanager.sandbox import ExecRequest, Outcome
from tests.runner.conftest import kill_when, start_cli

from .helpers import DaskExecutor, edge_cluster, sandbox_options, tls_options

ROOT = Path(__file__).resolve().parents[2]
CHECK = "def check(f):\n    assert f(1) == 1\n"


@pytest.fixture(scope="module")
def cluster():
    with edge_cluster() as running:
        yield running


def _sleepy(n: int, seconds: float) -> list[ExecRequest]:
    return [ExecRequest(id=f"s{i}", program=f"import time\ndef f(x):\n    time.sleep({seconds})\n"
                        f"    return x  # {i}\n", test=CHECK, entry_point="f", timeout=10)
            for i in range(n)]


def _job(folder: Path, cluster: Any, subset: bool = True, **sandbox: Any) -> Path:
    from core.cmd.edge_demo import write_demo_job

    path = write_demo_job(folder, cluster.address, cluster.certs, subset=subset)
    if sandbox:
        testenv = folder / "testenv.yaml"
        data = json.loads(testenv.read_text())
        data["testenv"]["sandbox"].update(sandbox)
        testenv.write_text(json.dumps(data))
    return path


def _executions(case_dir: Path) -> list[dict[str, Any]]:
    lines = (case_dir / "executions.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _ianvs(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "core.cmd.benchmarking", *args], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True,
                          capture_output=True, timeout=timeout)


def test_gold_generators_score_one_and_zero_through_dask(cluster, tmp_path: Path) -> None:
    """canonical = 1.0 and broken = 0.0; every record names node, backend and isolation."""
    from core.cmd.job import load_job
    from core.cmd.runner import run_job
    from core.testenvmanager.sandbox.pool import close_executors

    try:
        summary = run_job(load_job(_job(tmp_path, cluster, batch_size=4)), show_progress=False,
                          report=False)
    finally:
        close_executors()
    assert not summary.failed, [o.error for o in summary.failed]
    by_gen = {o.case.combination["basemodel"][1]["generator"]: o for o in summary.outcomes}
    assert by_gen["canonical"].metrics["pass@1"] == 1.0
    assert by_gen["broken"].metrics["pass@1"] == 0.0
    for outcome in summary.outcomes:
        assert outcome.metrics["infra_error"] == 0
        assert outcome.metrics["executed_by"].startswith("dask:local[")
        records = _executions(Path(outcome.case.url))
        assert len(records) == 21 and len({r["key"] for r in records}) == 21
        for rec in records:
            assert rec["result"]["node"] in ("edge1", "edge2")
            assert rec["result"]["backend"] == "dask:local" and rec["result"]["isolation"]


def test_taxonomy_through_dask(cluster) -> None:
    """Every model-facing outcome of the taxonomy comes back through Dask unchanged."""
    cases = {
        Outcome.PASSED: "def f(x):\n    return x\n",
        Outcome.FAILED: "def f(x):\n    return x + 1\n",
        Outcome.ERROR: "def f(x):\n    raise KeyError(x)\n",
        Outcome.SYNTAX_ERROR: "def f(x)\n    return x\n",
        Outcome.TIMEOUT: "def f(x):\n    while True:\n        pass\n",
        Outcome.MEMORY_EXCEEDED: "def f(x):\n    b = bytearray(400 << 20)\n    return x\n",
        Outcome.SANDBOX_VIOLATION: "import os\nos.kill(os.getppid(), 9)\ndef f(x):\n    return x\n",
    }
    reqs = [ExecRequest(id=o.value, program=p, test=CHECK, entry_point="f", timeout=2.0,
                        memory_mb=200) for o, p in cases.items()]
    reqs.append(ExecRequest(id="infra", program=cases[Outcome.PASSED], test="def check(:\n",
                            entry_point="f"))
    with DaskExecutor(**sandbox_options(cluster, batch_size=3)) as ex:
        results = {r.id: r for r in ex.run(reqs)}
    for outcome in cases:
        assert results[outcome.value].outcome is outcome, results[outcome.value]
    assert results["infra"].outcome is Outcome.INFRA_ERROR
    assert {r.node for r in results.values()} <= {"edge1", "edge2"}
    assert all(r.backend == "dask:local" for r in results.values())


def test_each_node_starts_its_executor_once_not_per_task(cluster) -> None:
    """Many tasks over two runs: every node keeps the same executor (same fork-server pid)."""
    from core.edge.node import node_status

    with DaskExecutor(**sandbox_options(cluster, batch_size=1)) as ex:
        first = ex._client.run(node_status)
        assert all(r.passed for r in ex.run(_sleepy(8, 0.0)))
        second = ex._client.run(node_status)
    assert first == second and len(first) == 2
    for status in second.values():
        pids = [c["server_pid"] for c in status["configs"]]
        assert all(pids) and all(c["ok"] for c in status["configs"])


@pytest.mark.slow
def test_worker_killed_mid_run_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """kill -9 of a worker (nanny, worker and its sandbox) in mid-batch: its samples are graded
    by the other node and executions.jsonl holds each sample exactly once."""
    from core.scenarios.codegen.execution import iter_results
    from core.testenvmanager.sandbox.pool import close_executors

    records, preds = [], []
    for i in range(24):
        prompt = "import time\ndef f(x):\n"
        body = f"    time.sleep(0.25)\n    return x  # {i}\n"
        records.append({"task_id": f"T/{i}", "prompt": prompt, "canonical_solution": body,
                        "test": CHECK, "entry_point": "f"})
        preds.append({"samples": [{"code": prompt + body}]})
    with edge_cluster() as cl:
        sandbox = {"backend": "dask", "timeout": 10, **sandbox_options(cl, batch_size=2)}
        log = tmp_path / "executions.jsonl"
        killed = threading.Event()

        def killer() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                lines = log.read_bytes().splitlines() if log.exists() else []
                if any(b'"node": "edge1"' in line for line in lines):  # edge1 is at work
                    cl.kill("edge1")
                    killed.set()
                    return
                time.sleep(0.02)

        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        try:
            rows = list(iter_results(records, preds, sandbox, tmp_path, show_progress=False))
        finally:
            close_executors()
            thread.join(5)
    assert killed.is_set(), "the run finished before the worker could be killed"
    outcomes = [s.outcome for row in rows for s in row]
    assert outcomes == ["passed"] * 24, outcomes
    entries = [json.loads(x) for x in log.read_text().splitlines()]
    assert len(entries) == 24 and len({e["key"] for e in entries}) == 24
    assert {e["result"]["node"] for e in entries} == {"edge1", "edge2"}


def test_no_worker_fails_once_before_generation(tmp_path: Path) -> None:
    """A scheduler without workers: `ianvs -f` stops after node_timeout with one error line
    naming the scheduler and the timeout, exit 1, nothing generated, no flood of warnings."""
    with edge_cluster(names=(), wait=0) as cl:
        job = _job(tmp_path, cl, node_timeout=2)
        start = time.monotonic()
        proc = _ianvs("-f", str(job), "--no-progress", timeout=120)
        took = time.monotonic() - start
    errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
    assert proc.returncode == 1, proc.stderr
    assert len(errors) == 1, proc.stderr
    assert f"no edge node joined scheduler {cl.address} within node_timeout=2s" in errors[0]
    assert "Traceback" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if "WARNING" in line]) <= 2, \
        proc.stderr
    assert not list(tmp_path.rglob("generations.jsonl"))
    assert took < 60


def test_no_worker_is_decided_once_for_every_metric() -> None:
    """Through the metrics' shared executor cache: the first metric waits node_timeout, the
    next ones get the same error at once."""
    from core.edge.executor import NoEdgeNodeError
    from core.testenvmanager.sandbox.pool import close_executors
    from core.testenvmanager.sandbox.pool import shared_executor as _executor

    with edge_cluster(names=(), wait=0) as cl:
        options = sandbox_options(cl, node_timeout=2)
        try:
            start = time.monotonic()
            with pytest.raises(NoEdgeNodeError, match="within node_timeout=2s"):
                _executor("dask", options)
            assert 2 <= time.monotonic() - start < 30
            for _ in range(3):  # three more metrics / test cases
                start = time.monotonic()
                with pytest.raises(NoEdgeNodeError):
                    _executor("dask", options)
                assert time.monotonic() - start < 0.5
        finally:
            close_executors()


def test_node_failing_its_gold_check_grades_nothing(caplog) -> None:
    """edge2's sandbox cannot start (its operator set a broken interpreter): it is named in a
    warning and grades nothing; with only that node allowed, one clear error."""
    from core.edge.executor import NoGoodNodeError

    with edge_cluster(worker_options={"edge2": ["python=/bin/false"]}) as cl:
        with caplog.at_level(logging.WARNING):
            with DaskExecutor(**sandbox_options(cl, batch_size=1)) as ex:
                assert ex.nodes == ["edge1"]
                results = list(ex.run(_sleepy(6, 0.0)))
        assert "edge2 failed its gold check" in caplog.text
        assert {r.node for r in results} == {"edge1"} and all(r.passed for r in results)
        with pytest.raises(NoGoodNodeError, match="edge2"):
            DaskExecutor(**sandbox_options(cl, nodes=["edge2"]))


@pytest.mark.slow
def test_foreign_certificates_cannot_submit_or_join(cluster, tmp_path: Path) -> None:
    """A client or worker whose certificate is not signed by the cluster CA is refused; so is a
    plain-TCP client; the cluster keeps its two workers."""
    from core.edge.certs import write_certs
    from core.edge.executor import EdgeConnectionError
    from core.edge.processes import tls_files, worker_command

    write_certs(tmp_path / "other", ["127.0.0.1"], ["intruder"])
    other = tls_files(tmp_path / "other", "client")
    with pytest.raises(EdgeConnectionError, match="cannot connect"):
        DaskExecutor(scheduler=cluster.address, connect_timeout=3,
                     tls={"ca_file": other.ca_file, "cert_file": other.cert_file,
                          "key_file": other.key_file})
    # the cluster CA but a foreign client certificate
    with pytest.raises(EdgeConnectionError):
        DaskExecutor(scheduler=cluster.address, connect_timeout=3,
                     tls={**tls_options(cluster), "cert_file": other.cert_file,
                          "key_file": other.key_file})
    with pytest.raises(EdgeConnectionError):
        DaskExecutor(scheduler=cluster.address.replace("tls://", "tcp://"), connect_timeout=3)
    argv = worker_command(cluster.address, "127.0.0.1", "intruder",
                          tls_files(tmp_path / "other", "intruder"))
    proc = subprocess.Popen(argv, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        time.sleep(8)
        with DaskExecutor(**sandbox_options(cluster)) as ex:
            assert sorted(ex.nodes) == ["edge1", "edge2"]
            assert "intruder" not in ex._workers().values()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.slow
def test_unreachable_or_refused_scheduler_is_one_error_before_generation(cluster,
                                                                          tmp_path: Path) -> None:
    """`ianvs -f job` against a dead port, or with a foreign certificate: exit 1, one error
    line, and no generation started (no generations.jsonl anywhere)."""
    from core.edge.certs import write_certs
    from core.edge.processes import free_port, tls_files

    write_certs(tmp_path / "other", ["127.0.0.1"], [])
    other = tls_files(tmp_path / "other", "client")
    variants = {
        "dead": {"scheduler": f"tls://127.0.0.1:{free_port()}"},
        "foreign": {"tls": {"ca_file": other.ca_file, "cert_file": other.cert_file,
                            "key_file": other.key_file}},
    }
    for name, change in variants.items():
        job = _job(tmp_path / name, cluster, **change)
        proc = _ianvs("-f", str(job), "--no-progress", timeout=120)
        errors = [line for line in proc.stderr.splitlines() if "error" in line.lower()]
        assert proc.returncode == 1, proc.stderr
        assert len(errors) == 1 and "cannot connect to the Dask scheduler" in errors[0], \
            proc.stderr
        assert "Traceback" not in proc.stderr
        assert not list((tmp_path / name).rglob("generations.jsonl"))


@pytest.mark.slow
@pytest.mark.timeout(480)
def test_killed_ianvs_resumes_without_regrading(cluster, tmp_path: Path) -> None:
    """`ianvs` killed -9 mid-grading and restarted: finished samples are not graded again and
    executions.jsonl ends with every sample exactly once. A resumed run that does not finish
    fails with its own log and the cluster's (the run's limit is below the test's)."""
    job = _job(tmp_path, cluster, subset=False, batch_size=4)
    proc = start_cli("-f", str(job), "--no-progress", "--no-report", cwd=ROOT, group=True)
    log = kill_when(proc, tmp_path, "executions.jsonl", 30, limit=180, poll=0.02)
    assert proc.returncode == -signal.SIGKILL, "ianvs finished before it could be killed"
    before = [line for line in log.read_bytes().splitlines(keepends=True) if line.endswith(b"\n")]
    assert 30 <= len(before) < 164
    try:
        done = _ianvs("-f", str(job), "--no-progress", "--no-report", timeout=240)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr
        pytest.fail(f"the resumed run did not end in 240 s; its log:\n{(err or '')[-3000:]}"
                    f"{cluster.log_tails(lines=25)}")
    assert done.returncode == 0, done.stderr[-2000:]
    after = log.read_bytes().splitlines(keepends=True)
    assert after[:len(before)] == before  # nothing rewritten
    logs = list(tmp_path.rglob("executions.jsonl"))
    assert len(logs) == 2  # canonical and broken
    for path in logs:
        keys = [json.loads(line)["key"] for line in path.read_bytes().splitlines()]
        assert len(keys) == 164 and len(set(keys)) == 164, "a sample was graded twice or lost"
    rank = next(tmp_path.rglob("all_rank.csv")).read_text()
    assert "1.0" in rank and "canonical" in rank
