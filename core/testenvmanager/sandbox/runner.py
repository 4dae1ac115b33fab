"""In-process grading tier and the audit policy (stdlib only; loaded by the fork server).

This module serves two purposes:

* :func:`_make_hook` builds the audit hook installed in every process that runs a sample (the
  in-process harness below and the boundary candidate). It gives fast, precise
  ``sandbox_violation`` messages. It is *not* the wall: files, network, processes and signals
  are enforced by the kernel (namespaces, Landlock, seccomp, uid; see ``docs/sandbox.md``).
* :func:`run_request` is the harness of the **in-process grading tier**, for tasks whose test
  needs objects the sample defines (``script`` and ``unittest`` modes, or function tasks marked
  ``grading: in_process``). Sample and test share one process, so a sample that defeats the
  interpreter-level defences below can forge its verdict; results of this tier say so.

Contract with the fork server
-----------------------------
``run_request(req, nonce, result_fd, workdir)`` runs one request *in the current process* (already
forked, walled and chdir'ed by the server) and returns the exit code for ``os._exit``. When the
harness reaches a verdict it writes one record at offset 0 of ``result_fd`` (a memfd)::

    <nonce> <status> <exec_time_s>\\n<utf-8 detail>

The server accepts a verdict only if the nonce matches and the process exits with status 0. The
nonce lives only in this function's frame; the audit hook blocks the usual ways to reach it (frame
introspection, gc walks, ctypes, tracing, signal handlers that receive frames). ``infra_error`` is
reported only before the sample's code starts; anything after that is the sample's outcome.

Policy (enforced by an audit hook that cannot be removed): no subprocesses unless allowed, no
writes/renames/deletes outside the workdir, no /proc, /sys and most of /dev, no signals outside the
own process group, no non-loopback sockets, no ctypes, no tracing/profiling, no new audit hooks.
A blocked action raises :class:`SandboxViolationError` in the program and is remembered: the
request is graded ``sandbox_violation`` even if the program swallowed the exception. Frame
introspection (``sys._getframe``, ``tb_frame``...) is refused without marking a violation, because
ordinary library code (``typing``, ``collections.namedtuple``, ``logging``) probes it and copes.

Without the policy (``audit_hook=False``: the kernel walls alone) a *witness* hook refuses nothing
and only names what the kernel is about to refuse: just before the process starts another process
(which the seccomp filter answers by killing it with ``SIGSYS``, a signal that carries no detail to
the parent) it writes one line, :data:`WITNESS_MARK` + the action, its command line and the
innermost code outside the standard library that asked for it, to the process's own stderr (a
descriptor duplicated before the program runs, so a test framework's capture of fd 2 does not
swallow it). The executor appends that line to the ``sandbox_violation`` message
(:func:`witnessed`). It is the sample's own report: a diagnostic, never a verdict or a wall.
"""

from __future__ import annotations

import builtins
import os
import re
import sys
import time
from types import FrameType

__all__ = ["run_request", "install_policy", "SandboxViolationError", "WITNESS_MARK", "witnessed"]

#: builtins for the test code: a private copy made when the server loads this module, so a
#: program that monkeypatches ``builtins`` cannot change what the tests see (and no per-request
#: copy is needed). The server also loads this module with its own pristine ``__builtins__``.
_TEST_BUILTINS = dict(builtins.__dict__)
_IMPORT_RE = re.compile(r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import|import[ \t]+([\w., \t]+))", re.M)
def _imported_names(source: str) -> list[str]:
    """Module names (and their parent packages) imported anywhere in ``source``."""
    names: list[str] = []
    if "import" not in source:
        return names
    for match in _IMPORT_RE.finditer(source):
        found = [match.group(1)] if match.group(1) else [
            p.split()[0] for p in match.group(2).split(",") if p.strip()]
        for name in found:
            parts = name.split(".")
            names += [".".join(parts[:i + 1]) for i in range(len(parts))]
    return names


class SandboxViolationError(PermissionError):
    """Raised inside the sandboxed program when it attempts a blocked action."""


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_DEV_ALLOWED = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_SPAWN_EVENTS = frozenset({
    "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn", "os.system",
    "subprocess.Popen", "pty.spawn",
})
_ALWAYS_DENY = frozenset({
    "sys._current_frames", "sys._current_exceptions", "sys.settrace", "sys.setprofile",
    "sys.addaudithook", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "cpython.remote_debugger_script",
})
_PATH_EVENTS = frozenset({
    "os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate", "os.utime",
    "os.chflags", "os.lchflags", "os.setxattr", "os.removexattr", "shutil.rmtree",
    "shutil.chown", "os.mkfifo", "os.mknod",
})
_DIR_FD_EVENTS = frozenset({"os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown",
                            "os.utime", "os.mkfifo", "os.mknod"})
_SOCKET_FAMILIES = frozenset({1, 2, 10})  # AF_UNIX, AF_INET, AF_INET6
_SOCK_RAW = 3
_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost", "", "0.0.0.0", "::"})
_BLOCKED_IMPORTS = frozenset({"ctypes", "_ctypes", "_signal", "_posixsubprocess", "_testcapi",
                              "_xxsubinterpreters"})


def _abspath(path: object) -> str | None:
    """Absolute normalised string path, or None for fds / unknown types (pure string ops)."""
    if isinstance(path, bytes):
        path = path.decode("utf-8", "surrogateescape")
    elif hasattr(path, "__fspath__") and not isinstance(path, str):
        try:
            path = os.fspath(path)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - hostile __fspath__
            return "<unknown>"
        if isinstance(path, bytes):
            path = path.decode("utf-8", "surrogateescape")
    if not isinstance(path, str):
        return None
    if not path.startswith("/"):
        path = os.getcwd() + "/" + path
    return os.path.normpath(path)


def _make_hook(workdir: str, allow_subprocess: bool, violations: list[str]):  # noqa: C901
    """Build the audit hook enforcing the sandbox policy (see module docstring)."""
    root = os.path.normpath(workdir)
    prefix = root + "/"
    getpid, getpgid, isdir = os.getpid, os.getpgid, os.path.isdir
    own_pgid = getpgid(0)

    def inside(p: str | None) -> bool:
        return p is None or p == root or p.startswith(prefix)

    def forbidden_read(p: str | None) -> bool:
        if p is None or p == root or p.startswith(prefix):
            return False
        if p == "/proc" or p.startswith(("/proc/", "/sys/")) or p == "/sys":
            return True
        return (p == "/dev" or p.startswith("/dev/")) and p not in _DEV_ALLOWED

    def deny(what: str) -> None:
        violations.append(what)
        raise SandboxViolationError(f"sandbox: {what} is not allowed")

    def hook(event: str, args: tuple) -> None:
        if event in ("exec", "compile", "marshal.loads", "os.listdir", "os.scandir", "import"):
            if event == "import":
                if args[0] in _BLOCKED_IMPORTS:
                    deny(f"import of {args[0]}")
            elif event in ("os.listdir", "os.scandir") and args and forbidden_read(_abspath(args[0])):
                deny(f"listing {args[0]!r}")
            return
        if event == "open":
            path = _abspath(args[0])
            if forbidden_read(path):
                deny(f"opening {args[0]!r}")
            mode, flags = args[1], args[2]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS)
            if not inside(path):
                if writing and path not in _DEV_ALLOWED:
                    deny(f"writing {args[0]!r} outside the working directory")
                if mode is None and path is not None and isdir(path):
                    # a directory descriptor would let *at() calls (dir_fd=) escape the checks
                    deny(f"opening directory {args[0]!r} outside the working directory")
            return
        if event == "object.__getattr__":
            if len(args) > 1 and args[1] in _FRAME_ATTRS:
                raise AttributeError(f"sandbox: {args[1]} is not available")
            return
        if event == "sandbox.blocked":
            deny(str(args[0]) if args else event)
        if event == "sys._getframe":
            raise ValueError("sandbox: frame introspection is disabled")
        if event in _ALWAYS_DENY or event.startswith("ctypes."):
            deny(event)
        if event in _SPAWN_EVENTS:
            if not allow_subprocess:
                deny(f"starting a process ({event})")
            return
        if event in _PATH_EVENTS:
            if args and not inside(_abspath(args[0])):
                deny(f"{event} on {args[0]!r} outside the working directory")
            if any(isinstance(a, int) and not isinstance(a, bool) and a >= 0 for a in args[2:]) and (
                    event in _DIR_FD_EVENTS):
                deny(f"{event} relative to a directory descriptor")
            return
        if event in ("os.rename", "os.link", "os.symlink", "shutil.move", "shutil.copyfile",
                     "shutil.copytree"):
            if not (inside(_abspath(args[0])) and inside(_abspath(args[1]))):
                deny(f"{event} {args[0]!r} -> {args[1]!r} leaves the working directory")
            if any(isinstance(a, int) and not isinstance(a, bool) and a >= 0 for a in args[2:4]):
                deny(f"{event} relative to a directory descriptor")
            return
        if event == "os.chdir":
            if not isinstance(args[0], (str, bytes)) or not inside(_abspath(args[0])):
                deny(f"chdir to {args[0]!r}")
            return
        if event in ("os.kill", "os.killpg"):
            target, ok = args[0], False
            if event == "os.kill":
                if target in (0, getpid()):
                    ok = True
                elif isinstance(target, int) and target > 0:
                    try:
                        ok = getpgid(target) == own_pgid
                    except OSError:
                        ok = True  # no such process: harmless
            else:
                ok = target in (0, own_pgid)
            if not ok:
                deny(f"sending a signal to {target}")
            return
        if event in ("socket.connect", "socket.connect_ex", "socket.sendto", "socket.bind",
                     "socket.sendmsg"):
            addr = args[1] if len(args) > 1 else None
            if isinstance(addr, tuple) and addr and not (isinstance(addr[0], str) and addr[0] in _LOOPBACK):
                deny(f"network access to {addr!r}")
            if isinstance(addr, (str, bytes)):  # AF_UNIX: only sockets inside the workdir
                raw = addr.encode("utf-8", "surrogateescape") if isinstance(addr, str) else addr
                if raw[:1] in (b"\0", b"") or not inside(_abspath(raw)):
                    deny(f"unix socket {addr!r} outside the working directory")
            return
        if event == "socket.__new__":
            if len(args) > 2 and (args[1] not in _SOCKET_FAMILIES or args[2] == _SOCK_RAW):
                deny(f"socket family {args[1]} / type {args[2]}")
            return
        if event == "code.__new__":
            deny("constructing code objects")
            return

    return hook


def _isolated_function(name: str, body: str) -> object:
    """Build a function whose ``__globals__`` holds nothing but ``sys.audit``.

    Functions the harness plants in reachable places (``signal.signal``...) must not be defined
    in this module: their ``__globals__`` would hand the program the harness's namespace (its
    pristine builtins, the tests' builtins). These report through an audit event instead, which
    the hook turns into a recorded violation.
    """
    namespace: dict = {"__builtins__": {}, "audit": sys.audit}
    exec(f"def {name}(*args, **kwargs):\n    {body}\n", namespace)
    return namespace[name]


#: built once when the server loads this module; each child only plants them
_BLOCKED_SIGNAL = _isolated_function("signal", "audit('sandbox.blocked', 'installing a signal handler')")
_BLOCKED_FORK_EXEC = _isolated_function("fork_exec", "audit('sandbox.blocked', 'starting a process (fork_exec)')")
_NO_CLEAR_FRAMES = _isolated_function("clear_frames", "return None")


def _disable_signal_handlers() -> None:
    """Replace ``signal.signal`` so untrusted code cannot get frames through handler arguments."""
    import _signal
    import signal

    _signal.signal = _BLOCKED_SIGNAL  # type: ignore[attr-defined]
    signal.signal = _BLOCKED_SIGNAL  # type: ignore[assignment]


def _disable_posixsubprocess() -> None:
    """Make the unaudited ``_posixsubprocess.fork_exec`` unusable (subprocesses not allowed)."""
    import _posixsubprocess

    _posixsubprocess.fork_exec = _BLOCKED_FORK_EXEC  # type: ignore[assignment]


_TYPE_NAME = type.__dict__["__name__"]


#: how a witness line starts (module docstring); :func:`witnessed` looks for it in stderr
WITNESS_MARK = "ianvs-sandbox witness: "
#: per process-starting audit event, the index of its argument that holds the command
_COMMAND_ARG = {"subprocess.Popen": 1, "os.exec": 1, "os.posix_spawn": 1, "os.spawn": 2, "os.system": 0,
                "pty.spawn": 0}


def _make_witness(fd: int):
    """The witness hook (module docstring), writing to ``fd``."""
    stdlib = os.path.dirname(os.__file__) + "/"
    getframe, write = sys._getframe, os.write

    def origin() -> str:
        frame: FrameType | None = getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if not name.startswith("<frozen ") and not (name.startswith(stdlib) and "-packages/" not in name):
                return f" from {'/'.join(name.split('/')[-2:])}:{frame.f_lineno} ({frame.f_code.co_name})"
            frame = frame.f_back
        return ""

    def hook(event: str, args: tuple) -> None:
        if event not in _SPAWN_EVENTS:
            return
        try:
            index = _COMMAND_ARG.get(event)
            command = repr(args[index])[:200] if index is not None and len(args) > index else ""
            line = f"\n{WITNESS_MARK}starting a process ({event} {command}".rstrip() + f"){origin()}\n"
            write(fd, line.encode("utf-8", "replace"))
        except Exception:  # noqa: BLE001 - a diagnostic: never in the program's way
            pass

    return hook


def witnessed(detail: str, stderr: str) -> str:
    """``detail`` of a ``sandbox_violation`` with the last witness line of ``stderr`` appended
    (``detail`` unchanged when there is none): what the process said it was starting, and from
    where, just before the kernel killed it."""
    at = stderr.rfind(WITNESS_MARK)
    if at < 0:
        return detail
    said = stderr[at + len(WITNESS_MARK):].split("\n", 1)[0].strip()[:400]
    return f"{detail}; the process reported, just before: {said}" if said else detail


def install_policy(workdir: str, allow_subprocess: bool, violations: list[str],
                   enabled: bool = True) -> None:
    """Install the interpreter-level policy in this (walled) process: the audit hook, no Python
    signal handlers, and no direct ``_posixsubprocess.fork_exec`` unless subprocesses are allowed.
    These only make violations precise; the kernel walls hold without them (``enabled=False``
    skips the policy, which is how the test suite shows that). Without the policy and without
    ``allow_subprocess``, the witness hook (module docstring) names a process start the kernel
    is about to refuse; it refuses nothing itself."""
    if not enabled:
        if not allow_subprocess:
            try:
                sys.addaudithook(_make_witness(os.dup(2)))
            except OSError:  # no stderr to duplicate: nothing to report to
                pass
        return
    _disable_signal_handlers()
    if not allow_subprocess:
        _disable_posixsubprocess()
    sys.addaudithook(_make_hook(workdir, allow_subprocess, violations))


def _describe(exc: BaseException) -> str:
    """``Name: message``; total for hostile exceptions (``__str__``, ``__class__`` or a metaclass
    ``__name__`` that raise or return non-strings)."""
    try:
        name = _TYPE_NAME.__get__(type(exc))
    except BaseException:  # noqa: BLE001
        name = "Exception"
    try:
        text = str(exc)
        if type(text) is not str:
            text = "<unprintable>"
    except BaseException:  # noqa: BLE001 - hostile __str__
        text = "<unprintable>"
    return f"{name}: {text[:500]}"


def _classify(exc: BaseException, violations: list[str]) -> str:
    """Outcome of an exception, from ``type(exc)`` only (never ``__class__``, which a sample
    can make lie or raise)."""
    kind = type(exc)
    if violations or issubclass(kind, SandboxViolationError):
        return "sandbox_violation"
    if issubclass(kind, AssertionError):
        return "failed"
    if issubclass(kind, MemoryError):
        return "memory_exceeded"
    return "error"


def _unittest_result_class():
    import unittest

    class CountingResult(unittest.TestResult):
        """Counts outcomes without formatting tracebacks (frames are hidden in the sandbox)."""

        def __init__(self) -> None:
            super().__init__()
            self.first_problem = ""

        def _note(self, kind: str, test: object, err: tuple) -> None:
            if not self.first_problem:
                self.first_problem = f"{kind} in {test}: {_describe(err[1])}"

        def addFailure(self, test, err):  # noqa: N802 - unittest API
            self.failures.append((test, ""))
            self._note("failure", test, err)

        def addError(self, test, err):  # noqa: N802
            self.errors.append((test, ""))
            self._note("error", test, err)

        def addSubTest(self, test, subtest, err):  # noqa: N802
            if err is not None:
                if issubclass(err[0], test.failureException):
                    self.failures.append((subtest, ""))
                    self._note("failure", subtest, err)
                else:
                    self.errors.append((subtest, ""))
                    self._note("error", subtest, err)

        def addUnexpectedSuccess(self, test):  # noqa: N802
            self.unexpectedSuccesses.append(test)
            self.first_problem = self.first_problem or f"unexpected success in {test}"

    return CountingResult


def run_request(req: dict, nonce: str, result_fd: int, workdir: str) -> int:  # noqa: C901
    """Run one request in this (forked, limited) process; return the process exit code.

    Exit code 0 means a record was written; any other code means the harness could not report
    (the server then grades from the exit status alone, never as ``passed``).
    """
    import gc

    gc.freeze()  # the server's objects never need collecting here: GC passes stay short
    write, perf, exec_, compile_ = os.pwrite, time.perf_counter, exec, compile
    dict_, isinstance_ = dict, isinstance
    modules = sys.modules
    bdict = builtins.__dict__
    test_builtins = _TEST_BUILTINS
    out, err = sys.stdout, sys.stderr
    mode = req.get("mode", "function")
    violations: list[str] = []
    status, detail, t0 = "error", "", perf()

    def report(status: str, detail: str, elapsed: float) -> int:
        for stream in (out, err):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001 - closed/broken pipe/hostile replacement
                pass
        record = f"{nonce} {status} {elapsed:.6f}\n".encode("ascii")
        try:
            write(result_fd, record + detail[:2000].encode("utf-8", "replace"), 0)
        except OSError as exc:
            try:
                os.write(2, f"sandbox harness: cannot write the verdict: {exc}\n".encode())
            except OSError:
                pass
            return 71
        return 0

    # ---- preparation (trusted) -------------------------------------------------------------
    try:
        testcase_snapshot: dict = {}
        pristine_builtins: dict = {}
        if mode == "unittest":
            pristine_builtins = dict_(bdict)
            import traceback
            import unittest

            # would need tb_frame (hidden); replacement must not expose this module's globals
            traceback.clear_frames = _NO_CLEAR_FRAMES  # type: ignore[assignment]
            result_cls = _unittest_result_class()
            for cls in (unittest.TestCase, unittest.TestSuite, unittest.TestLoader,
                        unittest.TestResult, result_cls):
                testcase_snapshot[cls] = dict_(vars(cls))
        modules.pop("__main__", None)
        program, test = req.get("program", ""), req.get("test", "")
        try:
            test_code = compile_(test, "<test>", "exec") if test else None
        except (SyntaxError, ValueError) as exc:
            return report("infra_error", "test code does not compile: " + _describe(exc), 0.0)
        if mode == "unittest":
            code = None
            for dirpath, _dirs, names in os.walk(workdir):
                for name in names:
                    if name.endswith(".py"):
                        path = os.path.join(dirpath, name)
                        with open(path, "rb") as fh:
                            source = fh.read()
                        try:
                            compile_(source, path, "exec")
                        except (SyntaxError, ValueError) as exc:
                            return report("syntax_error", f"{name}: " + _describe(exc), 0.0)
        else:
            try:
                code = compile_(program, "<program>", "exec")
            except (SyntaxError, ValueError) as exc:
                return report("syntax_error", _describe(exc), 0.0)
        modules_before = {name: modules.get(name) for name in _imported_names(test)}
        install_policy(workdir, bool(req.get("allow_subprocess")), violations,
                       bool(req.get("audit_hook", True)))
    except BaseException as exc:  # noqa: BLE001
        return report("infra_error", "harness setup failed: " + _describe(exc), 0.0)

    # ---- untrusted phase ---------------------------------------------------------------------
    t0 = perf()
    try:
        if mode == "unittest":
            import unittest

            sys.path.insert(0, workdir)
            suite = unittest.TestLoader().discover(workdir, pattern=req.get("test_pattern") or "test*.py",
                                                   top_level_dir=workdir)
            bdict.clear()
            bdict.update(pristine_builtins)
            for cls, attrs in testcase_snapshot.items():
                for name in [n for n in vars(cls) if n not in attrs]:
                    delattr(cls, name)
                for name, value in attrs.items():
                    if name not in ("__dict__", "__weakref__", "__doc__"):
                        setattr(cls, name, value)
            result = result_cls()
            suite.run(result)
            if result.errors:
                status, detail = "error", result.first_problem
            elif result.failures or result.unexpectedSuccesses:
                status, detail = "failed", result.first_problem
            elif result.testsRun == 0:
                status, detail = "error", "no tests were collected"
            else:
                status, detail = "passed", f"{result.testsRun} tests passed"
        else:
            # the program runs as a real module, registered like ``python program.py`` would
            # register it (``inspect``, ``pickle`` and ``warnings`` look it up in sys.modules)
            main_module = type(sys)("__main__" if mode == "script" else "__candidate__")
            namespace: dict = main_module.__dict__
            namespace["__builtins__"] = builtins
            modules["__main__"] = modules[main_module.__name__] = main_module
            assert code is not None
            exec_(code, namespace)
            # the tests see pristine builtins and the preloaded (or fresh) copies of the modules
            # they import, even if the program replaced or patched entries of sys.modules
            for name, original in modules_before.items():
                if modules.get(name) is not original:
                    if original is None:
                        modules.pop(name, None)
                    else:
                        modules[name] = original
            # the tests see the program's definitions but never its rebinding of a builtin name
            # (a program that defines ``abs`` or ``range`` must not change what the test computes)
            entry = req.get("entry_point", "")
            test_ns = {k: v for k, v in namespace.items() if k not in test_builtins
                       or k == entry or (k[:2] == "__" and k[-2:] == "__")}
            test_ns["__builtins__"] = test_builtins
            if test_code is not None:
                exec_(test_code, test_ns)
            if mode == "function":
                check = test_ns.get("check")
                if check is None:
                    raise LookupError("test code defines no check(candidate)")
                if entry not in test_ns:
                    raise NameError(f"entry point {entry!r} is not defined by the program")
                check(test_ns[entry])
            status, detail = "passed", ""
    except BaseException as exc:  # noqa: BLE001 - everything the program throws is graded
        try:
            status, detail = _classify(exc, violations), _describe(exc)
        except BaseException:  # noqa: BLE001 - never infra once the sample has run
            status, detail = "error", "the program raised an unclassifiable exception"
    elapsed = perf() - t0
    if violations and status != "sandbox_violation":
        status, detail = "sandbox_violation", violations[0]
    if not isinstance_(status, str):  # paranoia: locals cannot be rebound, but keep it total
        status = "error"
    return report(status, detail, elapsed)
