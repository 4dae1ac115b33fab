"""``local`` backend: a warm fork server per executor, one forked child per request.

The fork server (:mod:`.forkserver`) is a separate ``python -I -S`` process started with a
scrubbed environment, so it never inherits the caller's heavy state (models, numpy, HTTP clients,
API keys). It enters a fresh network namespace once, so every child inherits "no network" at zero
per-request cost. See ``docs/sandbox.md`` for what is and is not protected.

Usage::

    with LocalExecutor(workers=2, min_isolation="netns") as ex:
        for result in ex.run(requests):
            ...

``run`` may be called repeatedly; calls are serialised by a lock. If the consumer abandons the
iterator early (or closes it), requests not yet sent are dropped, the ones already running finish
and their late results are discarded by the next ``run``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
from typing import Iterable, Iterator

from .base import Executor
from .types import (
    ExecRequest,
    ExecResult,
    ExecutorClosedError,
    IsolationLevel,
    IsolationUnavailableError,
    Outcome,
)

__all__ = ["LocalExecutor"]

LOGGER = logging.getLogger(__name__)
_HEADER = struct.Struct(">I")
_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "forkserver.py")


class LocalExecutor(Executor):
    """Run requests in isolated forked children of a warm, small fork server.

    Parameters
    ----------
    workers:
        parallel children (default: number of CPUs available to this process).
    min_isolation:
        refuse to run (raise :class:`IsolationUnavailableError` at construction) when the
        achieved level is lower. Default ``none`` (always run, but report the level).
    output_limit:
        bytes of stdout and of stderr kept per request (the rest is drained and dropped).
    drop_uid / uid_base:
        when running as root, run worker ``i`` as uid/gid ``uid_base + i`` (no passwd entry
        needed). Required for ``full``.
    netns:
        try to enter a fresh network namespace (required for ``netns`` and ``full``).
    processes / open_files / file_size_mb:
        per-child RLIMIT_NPROC, RLIMIT_NOFILE, RLIMIT_FSIZE.
    scratch_parent:
        where private working directories are created (default ``/dev/shm`` when writable,
        a tmpfs where creating and removing a directory is ~1000x cheaper than on ext4;
        otherwise ``/tmp``).
    python:
        interpreter for the fork server (default: the current one).
    start_timeout:
        seconds to wait for the fork server's hello.
    cgroups / cgroup_memory_mb:
        when cgroup v1 ``pids``/``memory`` hierarchies are writable (root), put the fork server and
        all its children into executor-wide groups: at most ``workers * processes + 16`` tasks
        and ``cgroup_memory_mb`` of RAM+swap in total (default ``workers * 2048 + 512``). Children
        killed by that group's OOM killer are graded ``memory_exceeded``. Zero per-request cost;
        silently skipped (noted in ``facts``) where unavailable.
    preload:
        modules the fork server imports once before forking (default: a list of common stdlib
        modules, see ``forkserver.DEFAULT_PRELOAD``); children get them for free. The modules
        the harness itself needs (``forkserver.REQUIRED_PRELOAD``) are always added.
    """

    name = "local"

    def __init__(
        self,
        workers: int | None = None,
        min_isolation: IsolationLevel | str | int = IsolationLevel.NONE,
        output_limit: int = 64 * 1024,
        drop_uid: bool = True,
        uid_base: int = 61000,
        netns: bool = True,
        processes: int = 64,
        open_files: int = 256,
        file_size_mb: int = 64,
        scratch_parent: str | None = None,
        python: str | None = None,
        start_timeout: float = 20.0,
        preload: list[str] | None = None,
        cgroups: bool = True,
        cgroup_memory_mb: int | None = None,
    ) -> None:
        if workers is None:
            try:
                workers = len(os.sched_getaffinity(0))
            except (AttributeError, OSError):
                workers = os.cpu_count() or 1
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.workers = workers
        self.min_isolation = IsolationLevel.parse(min_isolation)
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._next_seq = 0
        self._closed = False
        cfg = {
            "workers": workers, "output_limit": int(output_limit), "drop_uid": bool(drop_uid),
            "uid_base": int(uid_base), "netns": bool(netns), "scratch_parent": scratch_parent,
            "preload": list(preload) if preload is not None else None,
            "cgroups": bool(cgroups), "cgroup_memory_mb": cgroup_memory_mb,
            "limits": {"processes": processes, "open_files": open_files, "file_size_mb": file_size_mb},
        }
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        self._proc = subprocess.Popen(
            [python or sys.executable, "-I", "-S", "-B", _SERVER, json.dumps(cfg)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None,
            env=env, close_fds=True, cwd="/", bufsize=0,
        )
        hello = self._read_frame(timeout=start_timeout)
        if hello is None or hello.get("op") != "hello":
            self._kill()
            raise ExecutorClosedError("the local fork server did not start (no hello frame)")
        self._isolation = IsolationLevel.parse(hello["isolation"])
        self.facts: dict = hello.get("facts", {})
        LOGGER.info("local executor: %d workers, isolation=%s, facts=%s", workers,
                    self._isolation, self.facts)
        if self._isolation < self.min_isolation:
            self.close()  # orderly: the server removes its scratch directory and cgroups
            raise IsolationUnavailableError(self._explain_shortfall())

    # ------------------------------------------------------------------------------ helpers
    def _explain_shortfall(self) -> str:
        missing = []
        if not self.facts.get("netns"):
            missing.append("a new network namespace (needs root, or unprivileged user "
                           "namespaces: sysctl kernel.unprivileged_userns_clone=1)")
        if not self.facts.get("drop_uid"):
            missing.append("dropping to an unprivileged uid (the executor must run as root)")
        if not self.facts.get("subreaper"):
            missing.append("PR_SET_CHILD_SUBREAPER (Linux >= 3.4 with ctypes available)")
        notes = "; ".join(self.facts.get("notes", []))
        return (f"local executor achieved isolation '{self._isolation}' but min_isolation is "
                f"'{self.min_isolation}'. Missing: {', '.join(missing) or 'unknown'}."
                + (f" Notes: {notes}." if notes else "")
                + " Lower min_isolation explicitly or use a container backend.")

    def _read_exact(self, n: int) -> bytes | None:
        chunks, left = [], n
        stdout = self._proc.stdout
        assert stdout is not None
        while left:
            chunk = stdout.read(left)
            if not chunk:
                return None
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _read_frame(self, timeout: float | None = None) -> dict | None:
        if timeout is not None:
            import selectors

            assert self._proc.stdout is not None
            with selectors.DefaultSelector() as sel:
                sel.register(self._proc.stdout, selectors.EVENT_READ)
                if not sel.select(timeout):
                    return None
        head = self._read_exact(4)
        if head is None:
            return None
        body = self._read_exact(_HEADER.unpack(head)[0])
        return None if body is None else json.loads(body)

    def _write_frame(self, obj: dict) -> None:
        data = json.dumps(obj, separators=(",", ":")).encode("utf-8")
        stdin = self._proc.stdin
        assert stdin is not None
        with self._write_lock:
            stdin.write(_HEADER.pack(len(data)) + data)

    def _kill(self) -> None:
        try:
            self._proc.kill()
        except OSError:
            pass
        self._proc.wait()
        self._remove_cgroups()

    @property
    def isolation(self) -> IsolationLevel:
        return self._isolation

    # ------------------------------------------------------------------------------ run
    def run(self, requests: Iterable[ExecRequest]) -> Iterator[ExecResult]:
        """Stream results in completion order (see :meth:`Executor.run`)."""
        if self._closed:
            raise ExecutorClosedError("executor is closed")
        return self._run(requests)

    def _infra(self, req: ExecRequest, detail: str) -> ExecResult:
        return ExecResult(id=req.id, outcome=Outcome.INFRA_ERROR, exit_status=None, duration_s=0.0,
                          backend=self.name, isolation=self._isolation, timeout_s=float(req.timeout),
                          memory_mb=req.memory_mb, detail=detail)

    def _run(self, requests: Iterable[ExecRequest]) -> Iterator[ExecResult]:
        with self._lock:
            if self._closed:
                raise ExecutorClosedError("executor is closed")
            by_seq: dict[int, ExecRequest | None] = {}
            seen: set[str] = set()
            window = threading.Semaphore(self.workers * 4)
            done_sending = threading.Event()
            cancelled = threading.Event()
            send_error: list[BaseException] = []
            sent = [0]
            lock = threading.Lock()

            def sender() -> None:
                try:
                    for req in requests:
                        if req.id in seen:
                            raise ValueError(f"duplicate request id {req.id!r}")
                        seen.add(req.id)
                        while not window.acquire(timeout=0.1):
                            if cancelled.is_set():
                                return
                        if cancelled.is_set():
                            return
                        with lock:
                            seq = self._next_seq
                            self._next_seq += 1
                            by_seq[seq] = req
                            sent[0] += 1
                        self._write_frame({"op": "run", "seq": seq, "req": req.to_wire()})
                except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
                    send_error.append(exc)
                finally:
                    done_sending.set()

            thread = threading.Thread(target=sender, name="sandbox-sender", daemon=True)
            thread.start()
            received = 0
            try:
                while True:
                    with lock:
                        outstanding = sent[0] - received
                    if done_sending.is_set() and outstanding == 0:
                        break
                    if outstanding == 0:
                        done_sending.wait(0.05)
                        continue
                    frame = self._read_frame()
                    if frame is None:  # server died: everything outstanding is an infra error
                        self._closed = True
                        with lock:
                            lost = [r for r in by_seq.values() if r is not None]
                            by_seq.clear()
                        for req in lost:
                            yield self._infra(req, "fork server died")
                        raise ExecutorClosedError("the local fork server died; see stderr for details")
                    if frame.get("op") != "result":
                        continue
                    with lock:
                        owner = by_seq.pop(frame["seq"], None)
                    if owner is None:  # late result of an abandoned earlier run
                        continue
                    received += 1
                    window.release()
                    yield self._to_result(owner, frame)
            finally:
                cancelled.set()
                thread.join()
            if send_error:
                raise send_error[0]

    def _to_result(self, req: ExecRequest, frame: dict) -> ExecResult:
        return ExecResult(
            id=req.id, outcome=Outcome(frame["outcome"]), exit_status=frame["exit_status"],
            duration_s=frame["duration_s"], stdout=frame["stdout"], stderr=frame["stderr"],
            stdout_truncated=frame["stdout_truncated"], stderr_truncated=frame["stderr_truncated"],
            backend=self.name, isolation=self._isolation, timeout_s=frame["timeout_s"],
            memory_mb=frame["memory_mb"], detail=frame["detail"],
            exec_time_s=frame["exec_time_s"], max_rss_kb=frame["max_rss_kb"],
        )

    # ------------------------------------------------------------------------------ close
    def close(self) -> None:
        """Ask the fork server to stop (running children are killed) and wait for it."""
        if getattr(self, "_proc", None) is None:
            self._closed = True
            return
        if self._proc.poll() is not None:  # server already gone (killed or crashed)
            self._closed = True
            self._remove_cgroups()
            return
        self._closed = True
        try:
            self._write_frame({"op": "shutdown"})
            assert self._proc.stdin is not None
            self._proc.stdin.close()
        except OSError:
            pass
        deadline = time.monotonic() + 5.0
        while self._proc.poll() is None and time.monotonic() < deadline:
            try:
                self._read_frame(timeout=0.1)  # drain late results so the server never blocks
            except (OSError, ValueError):
                break
        if self._proc.poll() is None:
            self._kill()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._remove_cgroups()

    def _remove_cgroups(self) -> None:
        """Normally the server removes its scratch directory and groups; this covers a server
        that was killed: kill whatever is still inside (orphaned children), remove the groups
        and the scratch directory."""
        facts = getattr(self, "facts", None) or {}
        groups = list(facts.get("cgroups", {}).values())
        scratch = facts.get("scratch")
        if scratch and os.path.isdir(scratch) and os.path.basename(scratch).startswith("ianvs-sandbox-"):
            shutil.rmtree(scratch, ignore_errors=True)
        for _ in range(100):
            left = False
            for path in groups:
                if not os.path.isdir(path):
                    continue
                try:
                    with open(os.path.join(path, "cgroup.procs")) as fh:
                        pids = [int(p) for p in fh.read().split()]
                    for pid in pids:
                        try:
                            os.kill(pid, 9)
                        except OSError:
                            pass
                    os.rmdir(path)
                except OSError:
                    left = True
            if not left:
                return
            time.sleep(0.02)
        LOGGER.warning("could not remove cgroups %s", groups)

    def __del__(self) -> None:  # best effort; close() is the contract
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass
