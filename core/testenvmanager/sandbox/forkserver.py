"""Warm fork server for the ``local`` backend (stdlib only; run as ``python -I -S forkserver.py``).

The caller starts this script once per executor with a scrubbed environment. At start-up it
enters the strongest isolation the kernel grants (new network namespace, child subreaper, a
root-owned scratch directory, per-worker unprivileged uids when running as root), reports the
achieved level in a ``hello`` frame and then serves requests:

* framing on stdin/stdout: 4-byte big-endian length + UTF-8 JSON object;
* caller -> server: ``{"op": "run", "seq": n, "req": {...}}`` and ``{"op": "shutdown"}``;
* server -> caller: ``{"op": "hello", ...}`` once, then one ``{"op": "result", "seq": n, ...}``
  per request, in completion order.

Per request the server forks a child that starts a new session, applies rlimits, enters a fresh
private working directory, drops to the worker uid, closes every inherited descriptor and runs
:mod:`runner`. The server enforces the wall-clock timeout (SIGKILL to the whole process group),
caps captured output, reaps escaped descendants, verifies the nonce'd result record and removes the
working directory. It never runs untrusted code itself and is single-threaded.
"""

from __future__ import annotations

import collections
import errno
import json
import os
import resource
import select
import signal
import struct
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
_HEADER = struct.Struct(">I")
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_PR_SET_CHILD_SUBREAPER = 36
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_LEVELS = ("none", "process", "netns", "full")
_VERDICTS = frozenset({"passed", "failed", "error", "syntax_error", "memory_exceeded",
                       "sandbox_violation", "infra_error"})
#: stdlib modules imported once by the server so children get them for free. Kept lean on purpose:
#: every preloaded page makes each fork (page-table copy) and each exit slower. Other stdlib
#: modules a request imports are pre-imported in the child before it drops privileges.
DEFAULT_PRELOAD = (
    "bisect", "collections", "copy", "fractions", "functools", "hashlib", "heapq", "itertools",
    "math", "operator", "random", "re", "string", "typing", "unicodedata",
)
#: modules the harness itself needs in every child (it patches them before untrusted code runs,
#: and the worker uid may not be able to import them later): always preloaded
REQUIRED_PRELOAD = ("_posixsubprocess", "signal")
#: never pre-imported with privileges (side effects, GUIs, or blocked by the audit policy anyway)
_NO_PREIMPORT = frozenset({
    "antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "webbrowser", "ctypes",
    "_ctypes", "_signal", "pydoc", "ensurepip", "venv", "lib2to3", "__main__", "_testcapi",
    "_xxsubinterpreters", "msilib", "winreg", "winsound", "_winapi", "msvcrt",
})
_IMPORT_RE = None
#: modules that others import lazily at call time (not visible in the request's source)
_IMPLICIT = {"socket": ("encodings.idna",), "ssl": ("encodings.idna",), "http": ("encodings.idna", "email.parser"),
             "urllib": ("encodings.idna",), "datetime": ("_strptime",), "time": ("_strptime",),
             "locale": ("encodings.latin_1",), "codecs": ("encodings.latin_1", "encodings.cp1252")}


def _preload(names: list[str], facts: dict) -> None:
    import importlib

    failed = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - optional module missing on this build
            failed.append(name)
    if failed:
        facts["notes"].append(f"could not preload: {', '.join(failed)}")
    stdlib = os.path.dirname(os.__file__)
    path = stdlib
    facts["stdlib_hidden"] = False
    while path not in ("/", ""):
        if not os.stat(path).st_mode & 0o001:
            facts["stdlib_hidden"] = True
            facts["notes"].append(f"{path} is not searchable by other users: stdlib modules a "
                                  "request imports are pre-imported before dropping privileges")
            break
        path = os.path.dirname(path)


def _preimport(req: dict) -> None:
    """Import the stdlib modules a request names (regex scan of its sources) while the child is
    still privileged, so an unprivileged worker uid can use them even when the interpreter's
    directory is unreadable for it. Only names in ``sys.stdlib_module_names`` are considered."""
    import importlib
    import re

    global _IMPORT_RE
    if _IMPORT_RE is None:
        _IMPORT_RE = re.compile(r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import|import[ \t]+([\w., \t]+))", re.M)
    sources = [req.get("program") or "", req.get("test") or ""]
    sources += [text for name, text in (req.get("files") or {}).items() if name.endswith(".py")]
    names = ["unittest", "traceback"] if req.get("mode") == "unittest" else []
    for src in sources:
        if "import" not in src:
            continue
        for match in _IMPORT_RE.finditer(src):
            if match.group(1):
                names.append(match.group(1))
            else:
                names += [part.split()[0] for part in match.group(2).split(",") if part.strip()]
    stdlib = sys.stdlib_module_names
    names += [dep for name in names for dep in _IMPLICIT.get(name.split(".", 1)[0], ())]
    for name in names:
        top = name.split(".", 1)[0]
        if name in sys.modules or top not in stdlib or top in _NO_PREIMPORT:
            continue
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the program will see the real error itself
            pass


def _load_runner():
    """Import runner.py from this directory without touching sys.path (we run with -I -S)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_sandbox_runner", os.path.join(_HERE, "runner.py"))
    module = importlib.util.module_from_spec(spec)
    # the harness resolves builtins through its own pristine copy: a program that monkeypatches
    # ``builtins`` cannot change how the harness classifies or reports
    import builtins

    module.__dict__["__builtins__"] = dict(builtins.__dict__)
    spec.loader.exec_module(module)
    return module


def _log(msg: str) -> None:
    try:
        os.write(2, f"forkserver[{os.getpid()}]: {msg}\n".encode("utf-8", "replace"))
    except OSError:
        pass


# ----------------------------------------------------------------------------------- isolation
def _setup_isolation(cfg: dict) -> dict:
    """Enter netns / subreaper; return facts about what was achieved (never raises)."""
    notes: list[str] = []
    facts: dict = {"netns": False, "subreaper": False, "drop_uid": False, "notes": notes}
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if cfg.get("netns", True):
            if libc.unshare(_CLONE_NEWNET) == 0:
                facts["netns"] = True
            elif os.geteuid() != 0:
                uid, gid = os.geteuid(), os.getegid()
                if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0:
                    try:
                        with open("/proc/self/setgroups", "w") as fh:
                            fh.write("deny")
                        with open("/proc/self/uid_map", "w") as fh:
                            fh.write(f"{uid} {uid} 1")
                        with open("/proc/self/gid_map", "w") as fh:
                            fh.write(f"{gid} {gid} 1")
                    except OSError as exc:
                        facts["notes"].append(f"userns map failed: {exc}")
                    facts["netns"] = True
                    facts["notes"].append("network namespace via user namespace")
                else:
                    facts["notes"].append(f"unshare(NEWNET) failed: {os.strerror(ctypes.get_errno())}")
            else:
                facts["notes"].append(f"unshare(NEWNET) failed: {os.strerror(ctypes.get_errno())}")
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0:
            facts["subreaper"] = True
        del libc
    except Exception as exc:  # noqa: BLE001 - ctypes missing or exotic libc
        facts["notes"].append(f"ctypes isolation setup failed: {exc}")
    for name in [n for n in sys.modules if n == "ctypes" or n.startswith(("ctypes.", "_ctypes"))]:
        del sys.modules[name]
    if facts["netns"]:
        _loopback_up(facts)
    facts["drop_uid"] = bool(cfg.get("drop_uid", True)) and os.geteuid() == 0
    return facts


def _loopback_up(facts: dict) -> None:
    """Bring ``lo`` up inside the new namespace so localhost servers in tests still work."""
    import fcntl
    import _socket  # the C module only: keeps the server (and every fork of it) small

    try:
        sock = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
        try:
            ifreq = struct.pack("16sH14s", b"lo", 0, b"\0" * 14)
            flags = struct.unpack("16sH14s", fcntl.ioctl(sock.fileno(), _SIOCGIFFLAGS, ifreq))[1]
            fcntl.ioctl(sock.fileno(), _SIOCSIFFLAGS,
                        struct.pack("16sH14s", b"lo", flags | _IFF_UP, b"\0" * 14))
        finally:
            sock.close()
    except OSError as exc:
        facts["notes"].append(f"loopback not up: {exc}")


_CGROUP_ROOT = "/sys/fs/cgroup"


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _setup_cgroups(cfg: dict, facts: dict) -> None:
    """Put the server (and so every child, at zero per-request cost) into executor-wide cgroup v1
    ``pids`` and ``memory`` groups when they are writable. Optional: failures become notes."""
    facts["cgroups"] = {}
    if not cfg.get("cgroups", True):
        return
    name = f"ianvs-sandbox-{os.getpid()}-{os.urandom(3).hex()}"
    made: dict[str, str] = {}
    try:
        for ctrl in ("pids", "memory"):
            base = os.path.join(_CGROUP_ROOT, ctrl)
            if not (os.path.isfile(os.path.join(base, "cgroup.procs")) and os.access(base, os.W_OK)):
                continue
            path = os.path.join(base, name)
            os.mkdir(path)
            made[ctrl] = path
        workers = max(1, int(cfg.get("workers", 1)))
        if "pids" in made:
            nproc = int(cfg.get("limits", {}).get("processes", 64))
            _write(os.path.join(made["pids"], "pids.max"), str(workers * nproc + 16))
        if "memory" in made:
            limit = int(cfg.get("cgroup_memory_mb") or workers * 2048 + 512) << 20
            _write(os.path.join(made["memory"], "memory.limit_in_bytes"), str(limit))
            memsw = os.path.join(made["memory"], "memory.memsw.limit_in_bytes")
            if os.path.exists(memsw):
                _write(memsw, str(limit))  # no escaping the limit through swap
        for path in made.values():
            _write(os.path.join(path, "cgroup.procs"), str(os.getpid()))
    except OSError as exc:
        facts["notes"].append(f"cgroups unavailable: {exc}")
        _leave_cgroups(made)
        made = {}
    facts["cgroups"] = made


def _leave_cgroups(made: dict) -> None:
    """Move this process back to the parent groups, kill leftovers and remove the groups."""
    for path in made.values():
        try:
            _write(os.path.join(os.path.dirname(path), "cgroup.procs"), str(os.getpid()))
        except OSError:
            pass
    for _ in range(50):
        alive = False
        for path in made.values():
            try:
                with open(os.path.join(path, "cgroup.procs")) as fh:
                    for pid in fh.read().split():
                        alive = True
                        try:
                            os.kill(int(pid), signal.SIGKILL)
                        except OSError:
                            pass
            except OSError:
                pass
        if not alive:
            break
        time.sleep(0.01)
    for path in made.values():
        try:
            os.rmdir(path)
        except OSError:
            pass


def _oom_kills(memory_cgroup: str) -> int:
    try:
        with open(os.path.join(memory_cgroup, "memory.oom_control")) as fh:
            for line in fh:
                if line.startswith("oom_kill "):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return -1


# ----------------------------------------------------------------------------------- framing
def _send(obj: dict) -> None:
    data = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:  # fd 1 is blocking: the caller always has a reader draining it
        view = view[os.write(1, view):]


class _Job:
    """Book-keeping for one running child (server side only)."""

    __slots__ = ("seq", "req", "pid", "slot", "uid", "workdir", "nonce", "start", "deadline",
                 "bufs", "totals", "truncated", "fds", "mem", "status", "rusage", "timed_out",
                 "reaped")

    def __init__(self, seq: int, req: dict) -> None:
        self.seq, self.req = seq, req
        self.pid = self.slot = self.uid = 0
        self.workdir = self.nonce = ""
        self.start = self.deadline = 0.0
        self.bufs = {"out": bytearray(), "err": bytearray(), "res": bytearray()}
        self.totals = {"out": 0, "err": 0, "res": 0}
        self.truncated = {"out": False, "err": False, "res": False}
        self.fds: dict[int, str] = {}  # pipe read ends still open (the verdict channel)
        self.mem: dict[str, int] = {}  # stream name -> memfd holding stdout / stderr
        self.status: int | None = None
        self.rusage: object = None
        self.timed_out = False
        self.reaped = False


class Server:
    """Single-threaded event loop: control frames, child pipes, SIGCHLD, deadlines."""

    def __init__(self, cfg: dict, facts: dict, runner) -> None:
        self.cfg, self.facts, self.runner = cfg, facts, runner
        self.workers = max(1, int(cfg.get("workers", 1)))
        self.output_limit = int(cfg.get("output_limit", 65536))
        self.drain_limit = max(self.output_limit, int(cfg.get("drain_limit", 8 << 20)))
        self.uid_base = int(cfg.get("uid_base", 61000))
        self.limits = cfg.get("limits", {})
        self.free_slots = list(range(self.workers))
        self.memory_cgroup = facts.get("cgroups", {}).get("memory")
        self.oom_seen = _oom_kills(self.memory_cgroup) if self.memory_cgroup else -1
        self.pending: collections.deque[tuple[int, dict]] = collections.deque()
        self.jobs: dict[int, _Job] = {}  # pid -> job
        self.ep = select.epoll()
        self.owners: dict[int, object] = {}  # fd -> "ctl" | "wake" | (job, stream name)
        self.hard_limits = {rlim: resource.getrlimit(rlim)[1] for rlim in (
            resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_CORE, resource.RLIMIT_FSIZE,
            resource.RLIMIT_NOFILE, resource.RLIMIT_NPROC)}
        self.ctl_buf = bytearray()
        self.shutting_down = False
        self.devnull = os.open(os.devnull, os.O_RDONLY)
        self.scratch = cfg["scratch"]
        self.child_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                          "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
                          "PYTHONIOENCODING": "utf-8"}
        os.environ.clear()
        os.environ.update(self.child_env)
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        os.set_blocking(0, False)
        self._watch(0, "ctl")
        self._watch(self.wake_r, "wake")

    def _watch(self, fd: int, owner: object) -> None:
        self.owners[fd] = owner
        self.ep.register(fd, select.EPOLLIN)

    def _unwatch(self, fd: int) -> None:
        if self.owners.pop(fd, None) is not None:
            try:
                self.ep.unregister(fd)
            except OSError:
                pass

    # -- control ---------------------------------------------------------------------------
    def _read_control(self) -> None:
        while True:
            try:
                chunk = os.read(0, 1 << 20)
            except BlockingIOError:
                break
            if not chunk:
                self.shutting_down = True
                self._unwatch(0)
                break
            self.ctl_buf += chunk
        while len(self.ctl_buf) >= 4:
            (size,) = _HEADER.unpack_from(self.ctl_buf)
            if len(self.ctl_buf) < 4 + size:
                break
            msg = json.loads(bytes(self.ctl_buf[4:4 + size]))
            del self.ctl_buf[:4 + size]
            if msg.get("op") == "run":
                self.pending.append((msg["seq"], msg["req"]))
            elif msg.get("op") == "shutdown":
                self.shutting_down = True

    # -- launching -------------------------------------------------------------------------
    def _start(self, seq: int, req: dict) -> None:
        job = _Job(seq, req)
        job.slot = self.free_slots.pop()
        job.uid = self.uid_base + job.slot if self.facts["drop_uid"] else -1
        job.nonce = os.urandom(16).hex()
        try:
            job.workdir = self._make_workdir(req, job.uid)
            stdin_fd = self._stdin_fd(req.get("stdin") or "")
            # stdout/stderr go to private memory files: nothing to drain while the child runs
            # (no wake-ups, no EOF handling), read once after it exits. RLIMIT_FSIZE caps them.
            out_fd = os.memfd_create("sandbox-stdout", os.MFD_CLOEXEC)
            err_fd = os.memfd_create("sandbox-stderr", os.MFD_CLOEXEC)
            pipes = {"res": os.pipe(), "out": (out_fd, out_fd), "err": (err_fd, err_fd)}
        except OSError as exc:
            self.free_slots.append(job.slot)
            self._cleanup_dir(job.workdir)
            self._emit(job, "infra_error", None, 0.0, f"could not prepare request: {exc}")
            return
        job.start = time.monotonic()
        job.deadline = job.start + float(req.get("timeout", 10.0))
        res_ino = os.fstat(pipes["res"][1]).st_ino
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in {*pipes["res"], pipes["out"][0], pipes["err"][0]}:
                os.close(fd)
            if stdin_fd != self.devnull:
                os.close(stdin_fd)
            self.free_slots.append(job.slot)
            self._cleanup_dir(job.workdir)
            self._emit(job, "infra_error", None, 0.0, f"fork failed: {exc}")
            return
        if pid == 0:  # ------------------------------------------------------------- child
            code = 70
            try:
                code = self._child(job, req, stdin_fd, pipes)
            except BaseException as exc:  # noqa: BLE001 - isolation setup failed: no untrusted
                # code has run yet, so report an infra error through the verdict channel
                detail = f"sandbox setup failed: {type(exc).__name__}: {exc}".encode("utf-8", "replace")
                record = f"{job.nonce} infra_error 0 {detail.hex()}\n".encode("ascii")
                for fd in (pipes["res"][1], 3):  # before / after the dup2 onto fd 3
                    try:
                        if os.fstat(fd).st_ino == res_ino:
                            os.write(fd, record)
                            code = 0
                            break
                    except OSError:
                        continue
            finally:
                os._exit(code)
        job.pid = pid
        if stdin_fd != self.devnull:
            os.close(stdin_fd)
        res_r, res_w = pipes["res"]
        os.close(res_w)
        os.set_blocking(res_r, False)
        job.fds[res_r] = "res"
        self._watch(res_r, (job, "res"))
        job.mem = {"out": pipes["out"][0], "err": pipes["err"][0]}
        self.jobs[pid] = job

    def _make_workdir(self, req: dict, uid: int) -> str:
        path = os.path.join(self.scratch, "r" + os.urandom(8).hex())
        os.mkdir(path, 0o700)
        for rel, text in (req.get("files") or {}).items():
            target = os.path.join(path, rel)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "w", encoding="utf-8") as fh:
                fh.write(text)
        if uid >= 0:
            # root-owned sticky dir: the worker can create files but cannot delete or rewrite
            # the provided ones; other workers cannot guess the name (scratch is 0711)
            for dirpath, dirs, _files in os.walk(path):
                for d in dirs:
                    os.chmod(os.path.join(dirpath, d), 0o1777)
            os.chmod(path, 0o1777)
        return path

    def _stdin_fd(self, text: str) -> int:
        if not text:
            return self.devnull
        fd = os.memfd_create("stdin", 0)
        data = text.encode("utf-8")
        while data:
            data = data[os.write(fd, data):]
        os.lseek(fd, 0, os.SEEK_SET)
        return fd

    def _child(self, job: _Job, req: dict, stdin_fd: int, pipes: dict) -> int:
        """Runs in the forked child: isolate, then hand over to the runner. Returns exit code."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        # close fd-owning objects now: a later garbage collection would otherwise close
        # whatever descriptor number we are about to reuse (e.g. the verdict channel)
        self.ep.close()
        os.setsid()
        os.dup2(stdin_fd, 0)
        os.dup2(pipes["out"][1], 1)
        os.dup2(pipes["err"][1], 2)
        os.dup2(pipes["res"][1], 3)
        os.closerange(4, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        os.chdir(job.workdir)
        lim = self.limits
        timeout = float(req.get("timeout", 10.0))
        mem = int(req.get("memory_mb", 1024)) << 20
        cpu = int(timeout) + 2
        for rlim, value in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_CPU, cpu),
                            (resource.RLIMIT_CORE, 0),
                            (resource.RLIMIT_FSIZE, int(lim.get("file_size_mb", 64)) << 20),
                            (resource.RLIMIT_NOFILE, int(lim.get("open_files", 256))),
                            (resource.RLIMIT_NPROC, int(lim.get("processes", 64)))):
            hard = self.hard_limits[rlim]
            if hard != resource.RLIM_INFINITY and value > hard:
                value = hard
            try:
                resource.setrlimit(rlim, (value, value))
            except (ValueError, OSError):
                pass
        os.umask(0o077)
        try:  # children are the OOM killer's first victims, before the server or the host's jobs
            fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
            try:
                os.write(fd, b"1000")
            finally:
                os.close(fd)
        except OSError:
            pass
        if job.uid >= 0 and self.facts.get("stdlib_hidden"):
            _preimport(req)
        if job.uid >= 0:
            os.setgroups([])
            os.setgid(job.uid)
            os.setuid(job.uid)
        environ = os.environ  # already reduced to child_env once at server start
        environ["HOME"] = environ["TMPDIR"] = environ["PWD"] = job.workdir
        sys.argv[:] = ["sandbox"]
        runner, nonce, workdir = self.runner, job.nonce, job.workdir
        # drop references to server state before untrusted code can look around
        sys.modules.pop("__main__", None)
        del job, pipes
        return runner.run_request(req, nonce, 3, workdir)

    # -- collecting ------------------------------------------------------------------------
    def _on_readable(self, fd: int, job: _Job, name: str) -> None:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:
                self._close_fd(job, fd)
                return
            job.totals[name] += len(chunk)
            buf = job.bufs[name]
            room = self.output_limit - len(buf) if name != "res" else 4096 - len(buf)
            if room > 0:
                buf += chunk[:room]
            if len(chunk) > room:
                job.truncated[name] = True
            if job.totals[name] > self.drain_limit:
                self._close_fd(job, fd)  # writer now gets EPIPE instead of stalling us
                return

    def _close_fd(self, job: _Job, fd: int) -> None:
        if fd in job.fds:
            del job.fds[fd]
            self._unwatch(fd)
            os.close(fd)

    def _reap(self) -> None:
        finished = []
        while True:
            try:
                pid, status, rusage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            job = self.jobs.get(pid)
            if job is None:
                continue  # an adopted orphan (we are a subreaper)
            job.status, job.rusage, job.reaped = status, rusage, True
            self._collect(job)
            finished.append(job)
        if finished:
            # escapees first: the freed slot's uid is about to be reused by the next request
            self._kill_escapees()
            self._launch()  # keep the cores busy; book-keeping of finished jobs comes after
            for job in finished:
                self._cleanup_dir(job.workdir)  # before the verdict leaves: "removed afterwards"
                self._grade(job)

    def _collect(self, job: _Job) -> None:
        """Stop everything of a reaped job and free its worker slot."""
        try:
            os.killpg(job.pid, signal.SIGKILL)  # leftovers in the request's process group
        except OSError:
            pass
        for fd, name in list(job.fds.items()):
            self._on_readable(fd, job, name)  # whatever is already buffered
            self._close_fd(job, fd)
        for name, fd in job.mem.items():
            try:
                size = os.fstat(fd).st_size
                job.bufs[name] = bytearray(os.pread(fd, min(size, self.output_limit), 0))
                job.truncated[name] = size > self.output_limit
                job.totals[name] = size
            except OSError:
                pass
            os.close(fd)
        job.mem = {}
        del self.jobs[job.pid]
        self.free_slots.append(job.slot)

    def _launch(self) -> None:
        while self.pending and self.free_slots and not self.shutting_down:
            seq, req = self.pending.popleft()
            self._start(seq, req)

    def _kill_escapees(self) -> None:
        """Kill direct children that are not current jobs: descendants that escaped their
        process group and were re-parented to us (the server is a child subreaper)."""
        if not self.facts["subreaper"]:
            return
        try:
            with open(f"/proc/self/task/{os.getpid()}/children", "rb") as fh:
                pids = [int(p) for p in fh.read().split()]
        except OSError:
            return
        for pid in pids:
            if pid not in self.jobs:
                for kill in (os.killpg, os.kill):
                    try:
                        kill(pid, signal.SIGKILL)
                    except OSError:
                        pass

    def _cleanup_dir(self, path: str) -> None:
        if not path:
            return
        try:
            os.rmdir(path)
        except OSError:
            _rmtree(path)

    # -- grading ---------------------------------------------------------------------------
    def _grade(self, job: _Job) -> None:
        duration = time.monotonic() - job.start
        status = job.status
        exit_status = None
        sig = 0
        if status is not None:
            if os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
                exit_status = -sig
            else:
                exit_status = os.waitstatus_to_exitcode(status)
        maxrss = getattr(job.rusage, "ru_maxrss", None)
        mem_kb = int(job.req.get("memory_mb", 1024)) << 10
        record, foreign = self._parse_record(job)
        exec_time = None
        if job.timed_out:
            outcome, detail = "timeout", f"killed after {job.req.get('timeout')}s wall-clock limit"
        elif foreign:
            outcome, detail = "sandbox_violation", "the result channel was written by someone else"
        elif record is not None and exit_status == 0:
            outcome, exec_time, detail = record
        elif sig == signal.SIGXCPU:
            outcome, detail = "timeout", "CPU time limit exceeded"
        elif sig == signal.SIGKILL and self.memory_cgroup and _oom_kills(self.memory_cgroup) > self.oom_seen:
            self.oom_seen = _oom_kills(self.memory_cgroup)
            outcome, detail = "memory_exceeded", "killed by the out-of-memory killer (executor cgroup limit)"
        elif sig and maxrss is not None and maxrss >= 0.9 * mem_kb:
            outcome, detail = "memory_exceeded", f"killed by signal {sig} near the memory limit"
        elif sig:
            outcome, detail = "error", f"killed by signal {sig}"
        elif exit_status == 0:
            outcome, detail = "error", "exited with status 0 before the harness reported a result"
        else:
            outcome, detail = "error", f"exited with status {exit_status} without a harness verdict"
        self._emit(job, outcome, exit_status, duration, detail, exec_time, maxrss)

    def _parse_record(self, job: _Job):
        """Return ((status, exec_time, detail) | None, foreign_bytes_seen)."""
        data = bytes(job.bufs["res"])
        if not data:
            return None, job.totals["res"] > 0
        parts = data.split(b" ")
        ok = (len(parts) == 4 and data.endswith(b"\n") and data.count(b"\n") == 1
              and parts[0] == job.nonce.encode("ascii") and job.totals["res"] == len(data))
        if not ok:
            return None, True
        try:
            detail = bytes.fromhex(parts[3].strip().decode("ascii")).decode("utf-8", "replace")
            status = parts[1].decode("ascii")
            if status not in _VERDICTS:
                return None, True
            return (status, float(parts[2]), detail), False
        except ValueError:
            return None, True

    def _emit(self, job: _Job, outcome: str, exit_status, duration: float, detail: str,
              exec_time=None, maxrss=None) -> None:
        _send({"op": "result", "seq": job.seq, "outcome": outcome, "exit_status": exit_status,
               "duration_s": duration, "detail": detail, "exec_time_s": exec_time,
               "max_rss_kb": maxrss,
               "stdout": job.bufs["out"].decode("utf-8", "replace"),
               "stderr": job.bufs["err"].decode("utf-8", "replace"),
               "stdout_truncated": job.truncated["out"], "stderr_truncated": job.truncated["err"],
               "timeout_s": float(job.req.get("timeout", 10.0)),
               "memory_mb": int(job.req.get("memory_mb", 1024))})

    # -- loop ------------------------------------------------------------------------------
    def serve(self) -> None:
        while True:
            self._launch()
            if self.shutting_down and not self.jobs:
                return
            now = time.monotonic()
            timeout = None
            for job in self.jobs.values():
                if not job.timed_out:
                    left = job.deadline - now
                    if left <= 0:
                        job.timed_out = True
                        try:
                            os.killpg(job.pid, signal.SIGKILL)
                        except OSError:
                            pass
                    else:
                        timeout = left if timeout is None else min(timeout, left)
            if self.shutting_down:
                for job in self.jobs.values():
                    job.timed_out = True
                    try:
                        os.killpg(job.pid, signal.SIGKILL)
                    except OSError:
                        pass
                timeout = 0.05
            for fd, _mask in self.ep.poll(-1 if timeout is None else timeout):
                data = self.owners.get(fd)
                if data is None:
                    continue
                if data == "ctl":
                    self._read_control()
                elif data == "wake":
                    try:
                        while os.read(self.wake_r, 4096):
                            pass
                    except BlockingIOError:
                        pass
                else:
                    owner: tuple[_Job, str] = data  # type: ignore[assignment]
                    if fd in owner[0].fds:
                        self._on_readable(fd, owner[0], owner[1])
            self._reap()


def _rmtree(path: str) -> None:
    """Remove a directory tree without following symlinks (the program may have planted some);
    best effort, never raises. A small replacement for shutil.rmtree, which would pull
    compression modules into the server and make every fork a little more expensive."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        entries = []
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                _rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass
    try:
        os.rmdir(path)
    except OSError:
        try:  # a directory the program made unreadable / unwritable: fix its mode and retry
            os.chmod(path, 0o700)
            for entry in os.scandir(path):
                if entry.is_dir(follow_symlinks=False):
                    _rmtree(entry.path)
                else:
                    os.unlink(entry.path)
            os.rmdir(path)
        except OSError:
            pass


def _default_scratch_parent() -> str:
    """Prefer a tmpfs (``/dev/shm``): creating/removing a directory there costs microseconds,
    on a journaling disk file system it can cost milliseconds per request."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return os.environ.get("TMPDIR") or "/tmp"


def main() -> int:
    cfg = json.loads(sys.argv[1])
    facts = _setup_isolation(cfg)
    _setup_cgroups(cfg, facts)
    scratch = ""
    try:
        runner = _load_runner()
        _preload([*(cfg.get("preload") or DEFAULT_PRELOAD), *REQUIRED_PRELOAD], facts)
        _preimport({"program": "import re"})  # compiles the import scanner once, in the server
        parent = cfg.get("scratch_parent") or _default_scratch_parent()
        path = os.path.join(parent, f"ianvs-sandbox-{os.getpid()}-{os.urandom(4).hex()}")
        os.mkdir(path, 0o711 if facts["drop_uid"] else 0o700)
        cfg["scratch"] = facts["scratch"] = scratch = path
        level = 1
        if facts["netns"]:
            level = 2
            if facts["drop_uid"] and facts["subreaper"]:
                level = 3
        _send({"op": "hello", "pid": os.getpid(), "isolation": _LEVELS[level], "facts": facts,
               "python": sys.version.split()[0]})
        server = Server(cfg, facts, runner)
        import gc

        gc.collect()
        gc.freeze()  # preloaded objects go to the permanent generation: children never scan or
        #             touch them during garbage collection (fewer copy-on-write faults)
        server.serve()
    except Exception as exc:  # noqa: BLE001 - report and die; the caller turns this into infra_error
        _log(f"fatal: {exc!r}")
        raise
    finally:
        if scratch:
            _rmtree(scratch)
        _leave_cgroups(facts.get("cgroups", {}))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        sys.exit(0)
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
