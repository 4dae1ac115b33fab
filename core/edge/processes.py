"""Command lines of the real ``distributed`` scheduler and worker, and a small local cluster.

:func:`scheduler_command` and :func:`worker_command` build the argv that ``ianvs edge
scheduler``/``worker`` exec (``python -m distributed.cli.dask_scheduler|dask_worker``) with:
explicit ``--host`` (no outbound probe to find an address), the dashboard off and any HTTP
listener on loopback port 0, mutual TLS from a certificate folder, one thread per worker (the
node's sandbox runs the samples in parallel) and the project's plugin as preload.

:class:`EdgeCluster` starts a scheduler and workers as separate processes (each its own process
group, optionally behind a command prefix such as ``ip netns exec edge1``), waits until the
workers are registered, and kills every process group on :meth:`EdgeCluster.stop` (also when
starting failed). Used by ``ianvs edge demo``, the tests and the benchmark.
"""
from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from core.common.lifetime import die_with_parent

from .settings import TlsFiles, security

__all__ = ["tls_files", "scheduler_command", "worker_command", "free_port", "EdgeCluster",
           "WorkerSpec"]

LOGGER = logging.getLogger(__name__)
_LOOPBACK_HTTP = "127.0.0.1:0"


def tls_files(certs: Path, party: str) -> TlsFiles:
    """The CA and ``party``'s certificate and key in a folder written by ``ianvs edge certs``."""
    return TlsFiles(str(certs / "ca.pem"), str(certs / f"{party}.pem"), str(certs / f"{party}.key"))


def _tls_args(tls: TlsFiles | None) -> list[str]:
    if tls is None:
        return ["--protocol", "tcp"]
    return ["--protocol", "tls", "--tls-ca-file", tls.ca_file, "--tls-cert", tls.cert_file,
            "--tls-key", tls.key_file]


def scheduler_command(host: str, port: int, tls: TlsFiles | None) -> list[str]:
    """argv of the real Dask scheduler listening only on ``host:port``."""
    return [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", host,
            "--port", str(port), *_tls_args(tls), "--no-dashboard",
            "--dashboard-address", _LOOPBACK_HTTP, "--no-jupyter"]


def worker_command(scheduler: str, host: str, name: str, tls: TlsFiles | None,
                   node_options: Sequence[str] = (), memory_limit: str = "0",
                   worker_port: int | None = None, nanny_port: int | None = None) -> list[str]:
    """argv of the real Dask worker (with nanny) for node ``name``, listening only on ``host``,
    with the project's worker plugin (``--preload core.edge.node``) and its node options."""
    argv = [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--host", host,
            "--name", name, "--nthreads", "1", "--nworkers", "1", *_tls_args(tls),
            "--no-dashboard", "--dashboard-address", _LOOPBACK_HTTP,
            "--memory-limit", memory_limit, "--preload", "core.edge.node"]
    if worker_port:
        argv += ["--worker-port", str(worker_port)]
    if nanny_port:
        argv += ["--nanny-port", str(nanny_port)]
    for item in node_options:
        argv += ["--node-option", item]
    return argv


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass
class WorkerSpec:
    """One worker of an :class:`EdgeCluster`: node name, listen host, command prefix (e.g.
    ``["ip", "netns", "exec", "edge1"]``), node options and the certificate party to use."""

    name: str
    host: str = "127.0.0.1"
    prefix: list[str] = field(default_factory=list)
    node_options: list[str] = field(default_factory=list)
    party: str | None = None
    scheduler: str | None = None  # address this worker dials (default: the scheduler's)


class EdgeCluster:
    """A real scheduler and workers as separate processes (see module doc).

    ``certs`` is a folder from :func:`~.certs.write_certs` (``None``: plain tcp, loopback only).
    ``env`` adds variables to the children's environment (``PYTHONPATH`` is set to the project
    so they import this checkout). Logs go to ``log_dir`` when given.
    """

    def __init__(self, workers: Sequence[WorkerSpec], certs: Path | None,
                 host: str = "127.0.0.1", port: int | None = None,
                 scheduler_prefix: Sequence[str] = (), log_dir: Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.host = host
        self.port = port or free_port(host if not scheduler_prefix else "127.0.0.1")
        self.certs = certs
        self.specs = list(workers)
        self.scheduler_prefix = list(scheduler_prefix)
        self.log_dir = log_dir
        root = str(Path(__file__).resolve().parents[2])
        # the owner marker lets `ianvs sandbox clean` stop processes of a run that was killed
        from core.testenvmanager.sandbox.leftovers import EDGE_OWNER_ENV
        from core.testenvmanager.sandbox.owners import owner_token

        self.env = {**os.environ, "PYTHONPATH": root, "PYTHONUNBUFFERED": "1", **(env or {}),
                    EDGE_OWNER_ENV: owner_token()}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def address(self) -> str:
        scheme = "tls" if self.certs is not None else "tcp"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self.port}"

    def client_tls(self) -> TlsFiles | None:
        return tls_files(self.certs, "client") if self.certs is not None else None

    def _spawn(self, key: str, argv: list[str]) -> None:
        out: Any = subprocess.DEVNULL
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            out = (self.log_dir / f"{key}.log").open("ab")
        try:
            self.procs[key] = subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL,
                                               stdout=out, stderr=subprocess.STDOUT,
                                               start_new_session=True, cwd="/",
                                               preexec_fn=die_with_parent(signal.SIGTERM))
        finally:
            if out is not subprocess.DEVNULL:
                out.close()

    def start_scheduler(self) -> None:
        tls = tls_files(self.certs, "scheduler") if self.certs is not None else None
        self._spawn("scheduler", self.scheduler_prefix + scheduler_command(self.host, self.port, tls))

    def start_worker(self, spec: WorkerSpec) -> None:
        tls = tls_files(self.certs, spec.party or spec.name) if self.certs is not None else None
        self._spawn(spec.name, spec.prefix + worker_command(spec.scheduler or self.address,
                                                            spec.host, spec.name, tls,
                                                            spec.node_options))

    def start(self, timeout: float = 60.0, wait_workers: int | None = None) -> "EdgeCluster":
        """Start the scheduler and every worker; wait until ``wait_workers`` (default all) are
        registered. Everything started is stopped again when this fails."""
        try:
            self.start_scheduler()
            for spec in self.specs:
                self.start_worker(spec)
            self.wait_for_workers(len(self.specs) if wait_workers is None else wait_workers,
                                  timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def wait_for_workers(self, count: int, timeout: float = 60.0) -> None:
        """Block until ``count`` workers are registered (``TimeoutError`` naming the logs)."""
        from distributed import Client

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            for key, proc in self.procs.items():
                if key == "scheduler" and proc.poll() is not None:
                    raise RuntimeError(f"the scheduler exited with {proc.returncode}"
                                       f"{self.log_tails(['scheduler'])}")
            try:
                with Client(self.address, security=security(self.client_tls(), "client"),
                            timeout=5, set_as_default=False) as client:
                    if count > 0:
                        client.wait_for_workers(count,
                                                timeout=max(1.0, deadline - time.monotonic()))
                    return
            except Exception as exc:  # noqa: BLE001 - scheduler not up yet
                last = exc
                time.sleep(0.2)
        raise TimeoutError(f"{count} worker(s) did not register within {timeout:.0f}s: {last}"
                           f"{self.log_tails()}")

    def log_tails(self, keys: Sequence[str] | None = None, lines: int = 15) -> str:
        """The last ``lines`` lines of each process's log (``keys``: default all), for an error
        message: a log folder is often a temporary one that is gone when the error is read."""
        if self.log_dir is None:
            return " (no log folder: the processes' output was discarded)"
        parts = []
        for key in keys if keys is not None else list(self.procs):
            try:
                text = (self.log_dir / f"{key}.log").read_text(errors="replace")
            except OSError as exc:
                text = f"(unreadable: {exc})"
            tail = "\n".join(text.splitlines()[-lines:]) or "(empty)"
            parts.append(f"--- {key} log ({self.log_dir / f'{key}.log'}), last lines:\n{tail}")
        return "\n" + "\n".join(parts)

    def kill(self, key: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the process group of ``key`` (a worker name or ``scheduler``)."""
        proc = self.procs.get(key)
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        """Terminate every process group (SIGTERM, then SIGKILL after 5 s). Idempotent."""
        for key in list(self.procs):
            self.kill(key, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for key, proc in list(self.procs.items()):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            self.kill(key, signal.SIGKILL)
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # stragglers of an exited leader
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
        self.procs.clear()

    def __enter__(self) -> "EdgeCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
