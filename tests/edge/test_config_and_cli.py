"""`sandbox: {backend: dask}` is checked strictly without connecting; `ianvs edge` commands."""
from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from .helpers import DaskExecutor, edge_cluster  # noqa: F401  (skips without the edge extra)

from core.edge.certs import write_certs  # noqa: E402
from core.cmd.edge_demo import write_demo_job  # noqa: E402
from core.edge.processes import EdgeCluster, WorkerSpec, free_port  # noqa: E402
from core.edge.settings import parse_address  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _ianvs(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "core.cmd.benchmarking", *args], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True,
                          capture_output=True, timeout=timeout)


@pytest.fixture()
def job(tmp_path: Path) -> Path:
    write_certs(tmp_path / "certs", ["127.0.0.1"], ["edge1"])
    return write_demo_job(tmp_path / "job", f"tls://127.0.0.1:{free_port()}", tmp_path / "certs")


def _edit(job: Path, **changes: Any) -> None:
    testenv = job.parent / "testenv.yaml"
    data = json.loads(testenv.read_text())
    sandbox = data["testenv"]["sandbox"]
    for key, value in changes.items():
        if value is None:
            sandbox.pop(key, None)
        else:
            sandbox[key] = value
    testenv.write_text(json.dumps(data, indent=1))


def test_validate_checks_files_and_values_but_connects_to_nothing(job: Path) -> None:
    start = time.monotonic()
    proc = _ianvs("validate", "-f", str(job))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "OK" in proc.stdout and time.monotonic() - start < 60


@pytest.mark.parametrize("changes, named", [
    ({"scheduler": "tcp://10.0.0.5:8786", "tls": None}, "sandbox.scheduler"),
    ({"scheduler": "tls://scheduler.example:8786"}, "sandbox.scheduler"),
    ({"scheduler": "tls://127.0.0.1"}, "sandbox.scheduler"),
    ({"tls": None}, "sandbox.tls"),
    ({"tls": {"ca_file": "missing-ca.pem", "cert_file": "x", "key_file": "y"}},
     "sandbox.tls.ca_file"),
    ({"batch_size": 0}, "sandbox.batch_size"),
    ({"node_timeout": -1}, "sandbox.node_timeout"),
    ({"node_backend": "dask"}, "sandbox.node_backend"),
    ({"node_backend": "lokal"}, "sandbox.node_backend"),
    ({"nodes": "edge1"}, "sandbox.nodes"),
    ({"node_options": {"wrkers": 2}}, "sandbox.node_options"),
    ({"batch_sise": 4}, "sandbox.batch_sise"),
    ({"min_isolation": "kernal"}, "sandbox.min_isolation"),
    ({"scheduler": "tls://0.0.0.0:8786"}, "sandbox.scheduler"),
])
def test_bad_dask_settings_are_one_error_naming_the_field(job: Path, changes: dict,
                                                          named: str) -> None:
    _edit(job, **changes)
    for argv in (("validate", "-f", str(job)), ("-f", str(job))):
        proc = _ianvs(*argv)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        text = proc.stdout + proc.stderr
        assert "testenv.yaml" in text and f"'testenv.{named}'" in text, text
        assert "Traceback" not in text
    assert not list(job.parent.rglob("generations.jsonl"))


def test_plain_tcp_on_loopback_works_with_a_warning(tmp_path: Path, caplog) -> None:
    cluster = EdgeCluster([WorkerSpec("edge1")], None, log_dir=tmp_path / "logs")
    with cluster:
        cluster.start(timeout=90)
        assert cluster.address.startswith("tcp://127.0.0.1:")
        with caplog.at_level(logging.WARNING):
            with DaskExecutor(scheduler=cluster.address) as ex:
                from core.testenvmanager.sandbox import ExecRequest

                (res,) = ex.run([ExecRequest(id="a", program="def f():\n    return 1\n",
                                             test="def check(f):\n    assert f() == 1\n",
                                             entry_point="f")])
        assert res.passed and res.node == "edge1"
        assert "plain tcp://" in caplog.text


def test_parse_address() -> None:
    assert parse_address("tls://10.0.0.1:8786") == ("tls", "10.0.0.1", 8786)
    assert parse_address("tls://[fd00::1]:8786") == ("tls", "fd00::1", 8786)
    for bad in ("10.0.0.1:8786", "udp://10.0.0.1:1", "tls://host:1", "tls://10.0.0.1:0"):
        with pytest.raises(ValueError):
            parse_address(bad)


def test_edge_certs_command_writes_a_verifiable_chain(tmp_path: Path) -> None:
    from cryptography import x509

    out = tmp_path / "certs"
    proc = _ianvs("edge", "certs", "--out", str(out), "--scheduler-host", "10.1.0.1",
                  "--workers", "edge1,edge2=10.2.0.5")
    assert proc.returncode == 0, proc.stderr
    ca = x509.load_pem_x509_certificate((out / "ca.pem").read_bytes())
    for name in ("scheduler", "edge1", "edge2", "client"):
        cert = x509.load_pem_x509_certificate((out / f"{name}.pem").read_bytes())
        cert.verify_directly_issued_by(ca)
        assert stat.S_IMODE((out / f"{name}.key").stat().st_mode) == 0o600
    sans = x509.load_pem_x509_certificate((out / "scheduler.pem").read_bytes()).extensions \
        .get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["10.1.0.1"]
    edge2 = x509.load_pem_x509_certificate((out / "edge2.pem").read_bytes()).extensions \
        .get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in edge2.get_values_for_type(x509.IPAddress)] == ["10.2.0.5"]
    assert stat.S_IMODE((out / "ca.key").stat().st_mode) == 0o600


@pytest.mark.parametrize("argv, says", [
    (["scheduler", "--host", "10.1.2.3", "--insecure"], "only allowed on loopback"),
    (["scheduler", "--host", "127.0.0.1"], "--certs DIR is required"),
    (["scheduler", "--host", "my-host", "--insecure"], "must be an IP address"),
    (["worker", "--scheduler", "tls://10.0.0.1:8786", "--host", "10.0.0.2", "--name", "e1",
      "--certs", "/nonexistent"], "not found"),
    (["worker", "--scheduler", "tcp://10.0.0.1:8786", "--host", "127.0.0.1", "--name", "e1",
      "--insecure"], "loopback"),
    (["scheduler", "--host", "0.0.0.0", "--insecure"], "wildcard address"),
    (["scheduler", "--host", "::", "--certs", "/nonexistent"], "wildcard address"),
    (["scheduler", "--host", "[::]", "--insecure"], "wildcard address"),
    (["scheduler", "--host", "", "--insecure"], "wildcard address"),
    (["worker", "--scheduler", "tls://10.0.0.1:8786", "--host", "0.0.0.0", "--name", "e1",
      "--certs", "/nonexistent"], "give the IP address of the interface"),
    (["worker", "--scheduler", "tls://10.0.0.1:8786", "--host", "::", "--name", "e1",
      "--certs", "/nonexistent"], "wildcard address"),
    (["worker", "--scheduler", "tls://0.0.0.0:8786", "--host", "10.0.0.2", "--name", "e1",
      "--certs", "/nonexistent"], "wildcard address"),
])
def test_edge_commands_refuse_unsafe_or_missing_settings(argv: list[str], says: str) -> None:
    proc = _ianvs("edge", *argv)
    assert proc.returncode == 1
    lines = [line for line in proc.stderr.splitlines() if line.startswith("ianvs edge: error:")]
    assert len(lines) == 1 and says in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_wildcard_helpers() -> None:
    from core.edge.settings import is_wildcard, refuse_wildcard

    for host in ("0.0.0.0", "::", "[::]", "", " ", "0:0::0"):
        assert is_wildcard(host), host
        with pytest.raises(ValueError, match="give the IP address of the interface"):
            refuse_wildcard(host)
    for host in ("127.0.0.1", "10.0.0.2", "fd00::1", "not-an-ip"):
        assert not is_wildcard(host), host


def test_min_isolation_is_a_dask_option_not_ignored(job: Path) -> None:
    """The job's isolation floor is kept for backend dask (no 'option of another backend'
    warning) and reaches the executor's settings."""
    from core.cmd.job import load_job
    from core.edge.settings import check_options
    from core.testenvmanager.sandbox import IsolationLevel

    _edit(job, min_isolation="kernel")
    loaded = load_job(job)
    assert loaded.testenv.sandbox["min_isolation"] == "kernel"
    assert not [w for w in loaded.warnings if "min_isolation" in w], loaded.warnings
    assert check_options(loaded.testenv.sandbox).min_isolation is IsolationLevel.KERNEL


def test_scheduler_and_worker_commands_start_the_real_dask_processes() -> None:
    """The argv the CLI would exec: the distributed entry points, explicit hosts, dashboard
    off, TLS from the certificate folder, the node plugin preloaded."""
    from core.edge.processes import scheduler_command, tls_files, worker_command

    tls = tls_files(Path("/c"), "edge1")
    argv = worker_command("tls://10.0.0.1:8786", "10.0.0.2", "edge1", tls, ["workers=2"])
    assert argv[1:3] == ["-m", "distributed.cli.dask_worker"]
    for pair in (("--host", "10.0.0.2"), ("--preload", "core.edge.node"), ("--protocol", "tls"),
                 ("--tls-cert", "/c/edge1.pem"), ("--node-option", "workers=2")):
        assert argv[argv.index(pair[0]) + 1] == pair[1]
    assert "--no-dashboard" in argv
    sched = scheduler_command("10.0.0.1", 8786, tls_files(Path("/c"), "scheduler"))
    assert sched[1:3] == ["-m", "distributed.cli.dask_scheduler"]
    assert sched[sched.index("--host") + 1] == "10.0.0.1"
    assert sched[sched.index("--dashboard-address") + 1].startswith("127.0.0.1:")


def test_the_same_job_runs_locally_by_changing_backend_only(job: Path, tmp_path: Path) -> None:
    """backend: local with the dask keys still present: they are ignored with a warning each,
    and the gold generators grade on this machine."""
    from core.cmd.job import load_job
    from core.cmd.runner import run_job
    from core.testenvmanager.sandbox.pool import close_executors

    _edit(job, backend="local")
    loaded = load_job(job)
    assert loaded.testenv.sandbox == {"backend": "local", "timeout": "auto"}
    assert sum("option of another backend" in w for w in loaded.warnings) == 5
    try:
        summary = run_job(loaded, show_progress=False, report=False)
    finally:
        close_executors()
    scores = {o.case.combination["basemodel"][1]["generator"]:
              (o.metrics["pass@1"], o.metrics["executed_by"]) for o in summary.outcomes}
    assert scores == {"canonical": (1.0, "local"), "broken": (0.0, "local")}


def test_edge_demo_command(tmp_path: Path) -> None:
    """`ianvs edge demo`: a cluster here, the gold generators through it, then nothing left."""
    proc = _ianvs("edge", "demo", "--workdir", str(tmp_path), "--no-progress", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "canonical: pass@1=1.0" in proc.stdout and "broken: pass@1=0.0" in proc.stdout
    assert "executed_by=dask:local[" in proc.stdout
    left = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True)
    assert not left.stdout.strip(), left.stdout
