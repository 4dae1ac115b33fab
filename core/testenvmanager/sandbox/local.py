"""``local`` backend: a warm fork server per executor, one or two forked children per request.

The fork server (:mod:`.forkserver`) is a separate ``python -I -S`` process started with a
scrubbed environment, so it never inherits the caller's heavy state (models, numpy, HTTP clients,
API keys). It enters private network, mount and IPC namespaces once, so every child inherits them
at zero per-request cost, and applies Landlock and seccomp in each child. See ``docs/sandbox.md``
for what is and is not protected.

Programs and tests never pass through the server's memory: this side writes each request's parts
into memfds and passes the descriptors over a ``SOCK_SEQPACKET`` socket; results come back the
same way (``out``, ``err`` and the verdict's detail as memfds).

Usage::

    with LocalExecutor(workers=2, min_isolation="kernel") as ex:
        for result in ex.run(requests):
            ...

``run`` may be called repeatedly; calls are serialised by a lock. If the consumer abandons the
iterator early (or closes it), requests not yet sent are dropped, the ones already running finish
and their late results are discarded by the next ``run``.
"""

from __future__ import annotations

import array
import json
import logging
import marshal
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Iterable, Iterator, Protocol

from .base import Executor, check_read_paths, under_any
from .leases import FIRST_UID, UidLease
from .leases import acquire as acquire_uids
from .leftovers import remove_cgroup
from .mounts import remove_tree
from .runner import witnessed
from .types import (
    ExecRequest,
    ExecResult,
    ExecutorClosedError,
    GradingTier,
    IsolationLevel,
    IsolationUnavailableError,
    Outcome,
)

__all__ = ["LocalExecutor"]

LOGGER = logging.getLogger(__name__)
_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "boot.py")  # runs forkserver.py
_FDS_SPACE = socket.CMSG_SPACE(8 * array.array("i").itemsize)


class ServerProcess(Protocol):
    """What the executor needs of the fork server's process (a :class:`subprocess.Popen`)."""

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)  # the offset is shared with the receiver (stdin reads from it)
    return fd


def _read_memfd(fd: int, offset: int, limit: int) -> tuple[str, bool]:
    """Text of a memfd from ``offset`` (at most ``limit`` bytes) and whether it was cut."""
    size = os.fstat(fd).st_size
    data = os.pread(fd, max(0, min(size - offset, limit)), offset) if size > offset else b""
    return data.decode("utf-8", "replace"), size - offset > limit


class LocalExecutor(Executor):
    """Run requests in walled, forked children of a warm, small fork server.

    Parameters
    ----------
    workers:
        requests run in parallel (default: number of CPUs available to this process).
    min_isolation:
        refuse to run (raise :class:`IsolationUnavailableError` at construction) when the
        achieved level is lower. Default ``none`` (always run, but report the level).
    output_limit:
        bytes of stdout and of stderr kept per request (the rest is dropped).
    drop_uid / uid_base:
        when running as root, the sample of worker slot ``i`` runs as uid/gid ``uid_base + i``
        and its judge as ``uid_base + workers + i`` (no passwd entry needed). Required for ``full``.
        By default (``None``) the ``2 * workers`` uids are leased from a machine-wide range
        (:mod:`.leases`), so no two live executors share a uid; an explicit base takes the lease
        of its uids too and raises :class:`.leases.UidLeaseError` if a live executor holds it.
        The lease is held by the executor and its fork server and ends when both are gone.
        ``executor.uid_base`` is the base in use.
    netns / mountns / landlock / seccomp:
        each kernel mechanism can be switched off (for diagnosis); ``kernel`` and ``full`` need
        all of them.
    read_paths:
        extra directories every sandboxed process may read (Landlock); by default only system
        directories (``/usr``, ``/lib*``, ``/bin``, ``/sbin``, ``/etc``) and the interpreter's
        prefix.
    request_read_roots:
        directories that are visible in the sandbox (bound into the server's mount namespace
        like ``read_paths``) but readable by no request by default: a request reads beneath
        them only the paths it names in :attr:`ExecRequest.read_paths` (each must be a root or
        lie beneath one: ``ValueError`` when the request is sent; the fork server checks again
        with symlinks resolved and refuses a request outside them as ``infra_error``). The
        child adds a Landlock read rule for exactly those paths before untrusted code runs
        (e.g. the repo kind: the run's views directory is the root, each sample names its own
        view). A root beneath a directory every request may read (system directories, the
        interpreter's prefixes, ``read_paths``) or holding a ``read_paths`` entry is refused
        (``ValueError`` at construction): it would hide nothing. Without Landlock nothing is
        enforced (the level is below ``kernel`` then): a request reads whatever its uid can.
    socket_dirs:
        the one allowance for services (default none): each directory is bound read-only at its
        own path into the sandbox's view (also when it sits under ``/tmp`` or ``/run``, which are
        otherwise private) and seccomp lets ``socket(AF_UNIX)`` through, so samples can connect
        to a service's socket there (the repo kind's PostgreSQL). Landlock (ABI <= 7) does not
        govern connecting to named sockets: with this set, a sample can also reach any other
        named socket its uid may open that is visible in its view; nothing under the private
        ``/tmp``, ``/run``, ``/var/tmp``, ``/dev/shm`` is visible, and abstract sockets stay
        blocked by the network namespace. The service must authenticate each sample.
    hide_packages:
        cover the interpreter's site-/dist-packages with an empty file system (default), so
        third-party packages and the data they ship (benchmark problem files) are unreadable.
    workdir_mb / workdir_inodes:
        size and inode cap of each worker slot's private tmpfs (kernel tier).
    boundary_limit_mb:
        largest message (arguments or a return value) that crosses the data boundary.
    audit_hook:
        the interpreter-level policy (precise ``sandbox_violation`` messages). Turning it off
        leaves only the kernel walls; the hostile test suite does that to show they hold alone.
    judge_requests:
        requests a slot's long-lived judge runs before it is replaced by a fresh one.
    processes / open_files / file_size_mb:
        per-child RLIMIT_NPROC, RLIMIT_NOFILE, RLIMIT_FSIZE.
    scratch_parent:
        where working directories are created when no private mount namespace is available
        (default ``/dev/shm`` when writable, otherwise ``/tmp``).
    python:
        interpreter for the fork server (default: the current one).
    pin_slots:
        pin each slot's spawner and judge, and so its samples, to one CPU (slot ``i`` to the
        ``i``-th usable CPU, round robin), so a judge and its candidate answer each other on one
        CPU instead of waking another (default). Done only when ``workers`` is a multiple of the
        usable CPUs, so every CPU carries as many slots as any other; the slots' CPUs are in
        ``facts["slot_cpus"]`` (empty: not pinned).
    sweep_leftovers:
        at start, remove what dead executors of this machine left (their cgroups, after
        killing what still runs in them, and host scratch folders; :mod:`.leftovers`). Only
        ever touches resources whose owner process is gone.
    start_timeout:
        seconds to wait for the fork server's hello.
    cgroups / cgroup_memory_mb / cgroup_parent:
        put the fork server and all its children into an executor-wide group (cgroup v1, v2 or
        hybrid; :mod:`.cgroups`): at most ``workers * (processes + 2) + 16`` tasks and
        ``cgroup_memory_mb`` of memory in total, swap closed (default ``workers * 2048 +
        512``), and make one memory group per worker slot limited to each request's
        ``memory_mb``. Children killed by an OOM killer there are graded ``memory_exceeded``.
        Needs root (v1) or a writable v2 parent: ``cgroup_parent`` names a v2 group prepared
        for it (controllers enabled in its ``cgroup.subtree_control``, no member processes).
        Where a wall cannot be made the executor says so in ``facts["notes"]`` and
        :meth:`missing`, and its level stays below ``full`` (``cgroups=False`` does the same).
    preload:
        modules the fork server imports once before forking (default: a list of common stdlib
        modules, see ``forkserver.DEFAULT_PRELOAD``); children get them for free. A module that
        fails to import is skipped and named in ``facts["notes"]``.
    sys_path:
        directories appended to the fork server's ``sys.path`` at start (it runs ``-I -S``, so
        an interpreter's site-packages is not on it), e.g. so ``preload`` can name packages of
        a repository environment. Children inherit the path. They must be readable by samples
        (``read_paths`` / ``hide_packages=False``) for anything imported later from them.
    """

    name = "local"

    def __init__(
        self,
        workers: int | None = None,
        min_isolation: IsolationLevel | str | int = IsolationLevel.NONE,
        output_limit: int = 64 * 1024,
        drop_uid: bool = True,
        uid_base: int | None = None,
        netns: bool = True,
        mountns: bool = True,
        landlock: bool = True,
        seccomp: bool = True,
        read_paths: list[str] | None = None,
        request_read_roots: list[str] | None = None,
        hide_packages: bool = True,
        socket_dirs: list[str] | None = None,
        workdir_mb: int = 256,
        workdir_inodes: int = 16384,
        boundary_limit_mb: int = 16,
        audit_hook: bool = True,
        judge_requests: int = 500,
        processes: int = 64,
        open_files: int = 256,
        file_size_mb: int = 64,
        scratch_parent: str | None = None,
        python: str | None = None,
        start_timeout: float = 20.0,
        preload: list[str] | None = None,
        sys_path: list[str] | None = None,
        cgroups: bool = True,
        cgroup_memory_mb: int | None = None,
        cgroup_parent: str | None = None,
        sweep_leftovers: bool = True,
        pin_slots: bool = True,
    ) -> None:
        if workers is None:
            try:
                workers = len(os.sched_getaffinity(0))
            except (AttributeError, OSError):
                workers = os.cpu_count() or 1
        if workers < 1:
            raise ValueError("workers must be >= 1")
        if boundary_limit_mb < 1:
            raise ValueError("boundary_limit_mb must be >= 1")
        if judge_requests < 1:
            raise ValueError("judge_requests must be >= 1")
        self.workers = workers
        self.min_isolation = IsolationLevel.parse(min_isolation)
        self.output_limit = int(output_limit)
        self._recv_size = 65536 + 2 * self.output_limit  # room for inline output (gVisor)
        self._lock = threading.Lock()
        self._next_seq = 0
        self._closed = False
        self.facts: dict = {}
        self._audit_hook = bool(audit_hook)
        self._lease: UidLease | None = None
        if sweep_leftovers:
            self._sweep_leftovers()
        if drop_uid and os.geteuid() == 0:
            self._lease = acquire_uids(2 * workers, None if uid_base is None else int(uid_base))
            uid_base = self._lease.base
        #: first uid of this executor's samples (its judges follow at ``uid_base + workers``)
        self.uid_base: int = FIRST_UID if uid_base is None else int(uid_base)
        #: directories readable only by the requests naming paths beneath them (``read_paths``)
        self.request_read_roots: list[str] = [os.path.abspath(p) for p in request_read_roots or []]
        cfg = {
            "workers": workers, "drop_uid": bool(drop_uid), "uid_base": self.uid_base,
            "netns": bool(netns), "mountns": bool(mountns), "landlock": bool(landlock),
            "seccomp": bool(seccomp), "read_paths": [os.path.abspath(p) for p in read_paths or []],
            "request_read_roots": self.request_read_roots,
            "hide_packages": bool(hide_packages), "socket_dirs": [os.path.abspath(p) for p in socket_dirs or []],
            "workdir_mb": int(workdir_mb),
            "workdir_inodes": int(workdir_inodes), "scratch_parent": scratch_parent,
            "boundary_limits": {"max_bytes": int(boundary_limit_mb) << 20},
            "audit_hook": bool(audit_hook), "judge_requests": int(judge_requests),
            "preload": list(preload) if preload is not None else None,
            "sys_path": [os.path.abspath(p) for p in sys_path or []],
            "cgroups": bool(cgroups), "cgroup_memory_mb": cgroup_memory_mb,
            "cgroup_parent": os.path.abspath(cgroup_parent) if cgroup_parent else None,
            "pin_slots": bool(pin_slots),
            "limits": {"processes": processes, "open_files": open_files, "file_size_mb": file_size_mb},
        }
        try:
            self._proc, self._sock = self._start_server(cfg, python, start_timeout)
        except BaseException:
            self._release_lease()
            raise
        hello = self._receive(timeout=start_timeout)
        if hello is None or hello[0].get("op") != "hello":
            self._kill()
            raise ExecutorClosedError(f"the {self.name} fork server did not start (no hello message)")
        self._isolation = IsolationLevel.parse(hello[0]["isolation"])
        self.facts = hello[0].get("facts", {})
        LOGGER.info("%s executor: %d workers, isolation=%s, mechanisms=%s", self.name, workers,
                    self._isolation, self.mechanisms)
        if self._isolation < self.min_isolation:
            self.close()  # orderly: the server removes its scratch directory and cgroups
            raise IsolationUnavailableError(self._explain_shortfall())
        clash = self._readable_roots([os.path.abspath(p) for p in read_paths or []])
        if clash:
            self.close()
            raise ValueError(f"{self.name} executor: request_read_roots {clash}")

    # ------------------------------------------------------------------------------ helpers
    def _readable_roots(self, read_paths: list[str]) -> str:
        """Why a request read root would hide nothing ('' when none): it lies beneath a
        directory every request reads (as the server reported them), or a ``read_paths``
        entry lies beneath it."""
        from .forkserver import READ_DIRS

        everyone = [*READ_DIRS, *self.facts.get("interpreter_dirs", []), *read_paths]
        for root in self.request_read_roots:
            wider = under_any(root, everyone)
            if wider is not None:
                return f"entry {root!r} lies beneath {wider!r}, which every request may read"
            inner = next((p for p in read_paths if under_any(p, [root])), None)
            if inner is not None:
                return f"entry {root!r} holds the read path {inner!r}, which every request may read"
        return ""

    def _start_server(self, cfg: dict, python: str | None,
                      start_timeout: float) -> tuple["ServerProcess", socket.socket]:
        """Start the fork server with ``cfg``; return its process handle and our socket end.

        This backend passes one end of a socket pair as ``ctl_fd``. Subclasses that run the
        server elsewhere (the ``docker`` backend: inside a container) override this; the handle
        only needs ``poll``, ``kill`` and ``wait`` like :class:`subprocess.Popen`.
        """
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        cfg = {**cfg, "ctl_fd": theirs.fileno()}
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
        try:
            proc = subprocess.Popen(
                [python or sys.executable, "-I", "-S", "-B", _SERVER, json.dumps(cfg)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=None,
                env=env, close_fds=True, pass_fds=(theirs.fileno(), *self._lease_fds()), cwd="/")
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        return proc, mine

    @property
    def mechanisms(self) -> dict[str, object]:
        """Which isolation mechanisms are active (for reports and ``min_isolation`` errors)."""
        facts = self.facts
        mounts = facts.get("mounts", {})
        return {"netns": bool(facts.get("netns")), "mountns": bool(facts.get("mountns")),
                "ipcns": bool(facts.get("ipcns")), "landlock_abi": int(facts.get("landlock_abi", 0)),
                "seccomp": bool(facts.get("seccomp")), "uid_drop": bool(facts.get("drop_uid")),
                "subreaper": bool(facts.get("subreaper")),
                "cgroups": sorted(facts.get("cgroups", {})),
                "cgroup_version": str((facts.get("cgroup") or {}).get("layout", {}).get("version", "")),
                "slot_memory_groups": len(facts.get("slot_memory") or []),
                "readonly_root": bool(mounts.get("readonly_root")),
                "hidepid": bool(mounts.get("hidepid")),
                "hidden_packages": len(mounts.get("hidden_packages", [])),
                "rlimits": True, "audit_hook": self._audit_hook}

    def missing(self) -> list[tuple[IsolationLevel, str]]:
        """Each mechanism this executor lacks, with the level that needs it and how to get it
        (empty at ``full``). ``ianvs sandbox doctor`` prints the ones of the next level."""
        facts = self.facts
        needs = [
            ("netns", IsolationLevel.NETNS, "a new network namespace (needs root, or unprivileged "
             "user namespaces: sysctl kernel.unprivileged_userns_clone=1)"),
            ("mountns", IsolationLevel.KERNEL, "a private mount namespace (root or a user namespace)"),
            ("landlock_abi", IsolationLevel.KERNEL,
             "Landlock (Linux >= 5.13 with 'landlock' in the lsm= boot parameter)"),
            ("seccomp", IsolationLevel.KERNEL,
             "seccomp filters (Linux with CONFIG_SECCOMP_FILTER, x86_64 or aarch64)"),
            ("drop_uid", IsolationLevel.FULL,
             "dropping to an unprivileged uid (the executor must run as root)"),
            ("subreaper", IsolationLevel.FULL,
             "PR_SET_CHILD_SUBREAPER (Linux >= 3.4 with ctypes available)"),
        ]
        found = [(level, text) for key, level, text in needs if not facts.get(key)]
        mounts = facts.get("mounts") or {}
        if facts.get("mountns") and not facts.get("container"):
            found += [(IsolationLevel.KERNEL, text) for key, text in (
                ("ipcns", "a private IPC namespace"),
                ("readonly_root", "the host's tree read-only in the private mount namespace "
                                  "(mount_setattr: Linux >= 5.12)"),
                ("hidepid", "/proc mounted with hidepid=invisible (Linux >= 5.8)"))
                if not (facts if key == "ipcns" else mounts).get(key)]
        from .cgroups import WALLS, cgroup_fix, walls

        lacking = [WALLS[name] for name, present in walls(facts).items() if not present]
        if lacking:  # the fix once, after the last
            lacking[-1] += cgroup_fix(facts)
        return found + [(IsolationLevel.FULL, text) for text in lacking]

    def _explain_shortfall(self) -> str:
        missing = [text for _level, text in self.missing()]
        facts = self.facts
        notes = "; ".join(facts.get("notes", []))
        return (f"local executor achieved isolation '{self._isolation}' but min_isolation is "
                f"'{self.min_isolation}'. Missing: {', '.join(missing) or 'unknown'}."
                + (f" Notes: {notes}." if notes else "")
                + " Lower min_isolation explicitly or use a container backend.")

    def _receive(self, timeout: float | None = None) -> tuple[dict, list[int]] | None:
        """Next message from the server with its descriptors; None at EOF or on timeout."""
        if timeout is not None:
            import select

            if not select.select([self._sock], [], [], timeout)[0]:
                return None
        try:
            data, anc, _flags, _addr = self._sock.recvmsg(self._recv_size, _FDS_SPACE,
                                                          socket.MSG_CMSG_CLOEXEC)
        except OSError:
            return None
        fds: list[int] = []
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                arr = array.array("i")
                arr.frombytes(payload[:len(payload) - len(payload) % arr.itemsize])
                fds.extend(arr)
        if not data:
            for fd in fds:
                os.close(fd)
            return None
        return marshal.loads(data), fds

    def _send(self, obj: dict, fds: list[int] = ()) -> None:  # type: ignore[assignment]
        data = marshal.dumps(obj)
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())] if fds else []
        self._sock.sendmsg([data], anc)

    def _submit(self, seq: int, req: ExecRequest) -> None:
        meta, parts = req.payloads()
        names = list(parts)
        # marshal: plain dicts of str/bool/int, decoded by C code in the child (fewer page faults)
        fds = [_memfd(name, marshal.dumps(part)) for name, part in parts.items()]
        if req.stdin:
            names.append("stdin")
            fds.append(_memfd("stdin", req.stdin.encode("utf-8")))
        try:
            self._send({"op": "run", "seq": seq, "meta": meta, "fds": names}, fds)
        finally:
            for fd in fds:
                os.close(fd)

    def _kill(self) -> None:
        try:
            self._proc.kill()
        except OSError:
            pass
        self._proc.wait()
        self._sock.close()
        self._remove_leftovers()
        self._release_lease()

    # ------------------------------------------------------------------------------ uids
    def _lease_fds(self) -> tuple[int, ...]:
        """Descriptors of this executor's uid lease, inherited by the fork server (so the
        lease outlives this process exactly as long as the server runs)."""
        return tuple(self._lease.fds) if self._lease is not None else ()

    def _release_lease(self) -> None:
        lease = getattr(self, "_lease", None)
        if lease is not None:
            lease.release()

    def _sweep_leftovers(self) -> None:
        """Remove dead executors' cgroups and host scratch folders (never a live one's)."""
        from .leftovers import sweep_executor_leftovers

        try:
            removed = sweep_executor_leftovers()
        except OSError as exc:  # best effort: never stop an executor from starting
            LOGGER.debug("leftover sweep failed: %s", exc)
            return
        if removed:
            LOGGER.info("%s executor: removed %d cgroup(s)/scratch folder(s) of dead executors",
                        self.name, len(removed))
            LOGGER.debug("removed: %s", ", ".join(item.name for item in removed))

    @property
    def isolation(self) -> IsolationLevel:
        return self._isolation

    def alive(self) -> bool:
        """Whether the fork server still runs (tests check that hostile samples cannot kill it)."""
        return not self._closed and self._proc.poll() is None

    # ------------------------------------------------------------------------------ run
    def run(self, requests: Iterable[ExecRequest]) -> Iterator[ExecResult]:
        """Stream results in completion order (see :meth:`Executor.run`)."""
        if self._closed:
            raise ExecutorClosedError("executor is closed")
        return self._run(requests)

    def _infra(self, req: ExecRequest, detail: str) -> ExecResult:
        return ExecResult(id=req.id, outcome=Outcome.INFRA_ERROR, exit_status=None, duration_s=0.0,
                          backend=self.name, isolation=self._isolation, timeout_s=float(req.timeout),
                          memory_mb=req.memory_mb, detail=detail, grading=req.tier)

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
                        check_read_paths(req, self.request_read_roots, self.name)
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
                        self._submit(seq, req)
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
                    message = self._receive()
                    if message is None:  # server died: everything outstanding is an infra error
                        self._closed = True
                        with lock:
                            lost = [r for r in by_seq.values() if r is not None]
                            by_seq.clear()
                        for req in lost:
                            yield self._infra(req, "fork server died")
                        raise ExecutorClosedError("the local fork server died; see stderr for details")
                    frame, fds = message
                    try:
                        if frame.get("op") != "result":
                            continue
                        with lock:
                            owner = by_seq.pop(frame["seq"], None)
                        if owner is None:  # late result of an abandoned earlier run
                            continue
                        received += 1
                        window.release()
                        result = self._to_result(owner, frame, dict(zip(frame.get("fds", []), fds)))
                    finally:
                        for fd in fds:
                            os.close(fd)
                    yield result
            finally:
                cancelled.set()
                thread.join()
            if send_error:
                raise send_error[0]

    def _to_result(self, req: ExecRequest, frame: dict, fds: dict[str, int]) -> ExecResult:
        stdout, out_cut = _read_memfd(fds["out"], 0, self.output_limit) if "out" in fds else ("", False)
        stderr, err_cut = _read_memfd(fds["err"], 0, self.output_limit) if "err" in fds else ("", False)
        inline = frame.get("inline") or {}  # a server that cannot pass descriptors (gVisor)
        if "out" in inline:
            stdout, out_cut = inline["out"][0].decode("utf-8", "replace"), inline["out"][1] > self.output_limit
        if "err" in inline:
            stderr, err_cut = inline["err"][0].decode("utf-8", "replace"), inline["err"][1] > self.output_limit
        detail = frame["detail"]
        if frame.get("detail_offset") and "verdict" in fds:
            detail = _read_memfd(fds["verdict"], int(frame["detail_offset"]), 2000)[0]
        if frame["outcome"] == Outcome.SANDBOX_VIOLATION.value and frame.get("exit_status") == -signal.SIGSYS:
            detail = witnessed(detail, stderr)  # killed by SIGSYS: what the process said it was starting
        return ExecResult(
            id=req.id, outcome=Outcome(frame["outcome"]), exit_status=frame["exit_status"],
            duration_s=frame["duration_s"], stdout=stdout, stderr=stderr,
            stdout_truncated=out_cut, stderr_truncated=err_cut,
            backend=self.name, isolation=self._isolation, timeout_s=frame["timeout_s"],
            memory_mb=frame["memory_mb"], detail=detail, exec_time_s=frame["exec_time_s"],
            max_rss_kb=frame["max_rss_kb"], grading=req.tier,
        )

    # ------------------------------------------------------------------------------ close
    def close(self) -> None:
        """Ask the fork server to stop (running children are killed) and wait for it."""
        if getattr(self, "_proc", None) is None:
            self._closed = True
            self._release_lease()
            return
        if self._proc.poll() is not None:  # server already gone (killed or crashed)
            self._closed = True
            self._sock.close()
            self._remove_leftovers()
            self._release_lease()
            return
        self._closed = True
        try:
            self._send({"op": "shutdown"})
            self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        deadline = time.monotonic() + 5.0
        while self._proc.poll() is None and time.monotonic() < deadline:
            message = self._receive(timeout=0.1)  # drain late results so the server never blocks
            if message is not None:
                for fd in message[1]:
                    os.close(fd)
            elif self._proc.poll() is None:
                time.sleep(0.01)
        if self._proc.poll() is None:
            self._kill()
        self._sock.close()
        self._remove_leftovers()
        self._release_lease()

    def _remove_leftovers(self) -> None:
        """Normally the server removes its scratch directory and groups (a private mount
        namespace vanishes with it); this covers a server that was killed: kill whatever is
        still inside the groups (orphaned children), remove them and any host scratch dir."""
        facts = self.facts
        scratch = facts.get("scratch")
        if (scratch and not facts.get("mountns") and os.path.isdir(scratch)
                and os.path.basename(scratch).startswith("ianvs-sandbox-")):
            remove_tree(scratch)
        left = [path for path in facts.get("cgroups", {}).values()
                if not remove_cgroup(path, timeout=2.0)]
        if left:
            LOGGER.warning("could not remove cgroups %s", left)

    def __del__(self) -> None:  # best effort; close() is the contract
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass
