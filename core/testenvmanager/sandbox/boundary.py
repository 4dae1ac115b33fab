"""Boundary grading: the test runs in a trusted *judge*, the sample in a separate *candidate*.

Stdlib only; the fork server loads this file by path and hands in the codec module (see
:mod:`codec`) and the interpreter-level policy of :mod:`runner`. Both functions run in freshly forked,
already walled children and return the process exit code.

Wire protocol (every message is one codec frame holding a tuple)::

    candidate -> judge   ("ready", violations)
                         ("load", status, exc_name, message, violations)     program did not load
                         ("ok", value, {arg_index: new_value}, violations)   a call returned
                         ("raise", exc_name, message, violations)            a call raised
    judge -> candidate   ("call", args_tuple, kwargs_dict)

The candidate controls only these values. The judge decodes them into plain built-in data
(never an object the candidate defined), re-raises a candidate's exception as the builtin class
of that name (``CandidateError`` for any other name, ``CandidateAborted`` for
``SystemExit``-like ones, which ``except Exception`` in a test does not swallow), and applies
changed mutable arguments (list, dict, set, bytearray) in place, so tests that rely on in-place
mutation behave as they do in-process.

Verdict record (judge only, written at offset 0 of fd 3)::

    <nonce> <status> <exec_time_s>\\n<detail, UTF-8>

``status`` is a sandbox outcome, or ``candidate_died`` (the candidate ended or broke the
protocol mid-test; the server refines it from the candidate's exit status). ``infra_error`` is
written only while the judge is still setting up (reading its payload, running the task's
helper and test code), before it has read a single byte from the candidate.
"""

from __future__ import annotations

import builtins
import os
import sys
import time
from typing import Any, Callable

__all__ = ["judge_loop", "judge_main", "candidate_main", "CandidateError", "CandidateAborted", "CandidateDied"]

#: pristine builtins captured when the server loads this module (before any child exists)
_BUILTINS = dict(builtins.__dict__)
_MUTABLE = (list, dict, set, bytearray)
_DETAIL_LIMIT = 2000


class CandidateError(Exception):
    """The candidate raised an exception whose class is not a builtin one."""


class CandidateAborted(BaseException):
    """The candidate raised ``SystemExit``, ``KeyboardInterrupt`` or ``GeneratorExit``."""


class CandidateDied(BaseException):
    """The candidate process ended, closed its channel or broke the protocol during the test."""


def _exc_text(exc: BaseException) -> tuple[str, str]:
    """(class name, message) of an exception, total even for hostile exceptions."""
    try:
        name = type.__dict__["__name__"].__get__(type(exc))
    except BaseException:  # noqa: BLE001
        name = "Exception"
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001
        message = "<unprintable>"
    if not isinstance(message, str):
        message = "<unprintable>"
    return str(name)[:100], message[:_DETAIL_LIMIT]


def _load_status(exc: BaseException) -> str:
    kind = type(exc)
    if issubclass(kind, AssertionError):
        return "failed"
    if issubclass(kind, MemoryError):
        return "memory_exceeded"
    return "error"


# ------------------------------------------------------------------------------------ candidate
def candidate_main(payload: dict, codec: Any, install_policy: Callable[..., None],
                   workdir: str, to_judge: int = 3, from_judge: int = 4) -> int:
    """Load the sample's program and answer the judge's calls until it hangs up."""
    import gc

    gc.freeze()  # the server's objects never need collecting here: GC passes stay short
    limits = codec.Limits(**payload.get("limits", {}))
    violations: list[str] = []
    write_frame, encode, decode = codec.write_frame, codec.encode, codec.decode

    out, err = sys.stdout, sys.stderr

    def flush() -> None:  # the process ends with os._exit: nothing would flush its output
        for stream in (out, err):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001 - closed or replaced by the program
                pass

    def send(message: tuple) -> None:
        flush()
        write_frame(to_judge, encode(message, limits))

    try:
        code = compile(payload.get("program", ""), "<program>", "exec")
    except (SyntaxError, ValueError) as exc:
        send(("load", "syntax_error", *_exc_text(exc), []))
        return 0
    install_policy(workdir, bool(payload.get("allow_subprocess")), violations,
                   bool(payload.get("audit_hook", True)))
    namespace: dict = {"__name__": "__candidate__", "__builtins__": builtins}
    try:
        exec(code, namespace)
        entry = namespace.get(payload["entry_point"])
        if not callable(entry):
            raise NameError(f"entry point {payload['entry_point']!r} is not defined by the program")
    except BaseException as exc:  # noqa: BLE001 - graded by the judge
        send(("load", "sandbox_violation" if violations else _load_status(exc), *_exc_text(exc),
              violations[:5]))
        return 0
    send(("ready", violations[:5]))
    while True:
        frame = codec.read_frame(from_judge, limits.max_bytes)
        if frame is None:
            flush()
            return 0
        _kind, args, kwargs = decode(frame, limits)
        before = {i: encode(a, limits) for i, a in enumerate(args) if isinstance(a, _MUTABLE)}
        try:
            value = entry(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - sent to the judge as the call's outcome
            send(("raise", *_exc_text(exc), violations[:5]))
            continue
        try:
            changed = {}
            for i, old in before.items():
                new = encode(args[i], limits)
                if new != old:
                    changed[i] = args[i]
            data = encode(("ok", value, changed, violations[:5]), limits)
        except codec.BoundaryError as exc:
            send(("raise", "TypeError", f"the return value cannot cross the data boundary: {exc}",
                  violations[:5]))
            continue
        flush()
        write_frame(to_judge, data)


# ---------------------------------------------------------------------------------------- judge
def _rebuild_exception(name: str, message: str) -> BaseException:
    if name in ("SystemExit", "KeyboardInterrupt", "GeneratorExit"):
        return CandidateAborted(f"candidate raised {name}: {message}")
    cls = _BUILTINS.get(name)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except BaseException:  # noqa: BLE001 - classes with special constructors
            pass
    return CandidateError(f"{name}: {message}")


class _Channel:
    """The judge's end of the pipes to the candidate (trusted side: validates every frame)."""

    def __init__(self, codec: Any, limits: Any, rfd: int, wfd: int) -> None:
        self.codec, self.limits, self.rfd, self.wfd = codec, limits, rfd, wfd
        self.violations: list[str] = []
        self.dead = ""

    def receive(self, expected: tuple[str, ...]) -> tuple:
        if self.dead:
            raise CandidateDied(self.dead)
        codec = self.codec
        try:
            frame = codec.read_frame(self.rfd, self.limits.max_bytes)
            if frame is None:
                raise CandidateDied("the candidate process ended")
            message = codec.decode(frame, self.limits)
        except codec.DecodeError as exc:
            self.dead = f"the candidate broke the protocol: {exc}"
            raise CandidateDied(self.dead) from None
        except CandidateDied as exc:
            self.dead = str(exc)
            raise
        except OSError as exc:
            self.dead = f"the candidate's channel failed: {exc}"
            raise CandidateDied(self.dead) from None
        sizes = {"ready": 2, "load": 5, "ok": 4, "raise": 4}
        kind = message[0] if type(message) is tuple and message else None
        if kind not in expected or len(message) != sizes[kind] or type(message[-1]) is not list:
            self.dead = f"the candidate sent an unexpected message ({str(kind)[:40]})"
            raise CandidateDied(self.dead)
        for item in message[-1][:5]:
            if type(item) is str and len(self.violations) < 5:
                self.violations.append(item[:500])
        return message

    def call(self, args: tuple, kwargs: dict) -> Any:
        if self.dead:
            raise CandidateDied(self.dead)
        codec = self.codec
        try:
            data = codec.encode(("call", args, kwargs), self.limits)
        except codec.EncodeError as exc:
            raise TypeError(f"a test argument cannot cross the data boundary: {exc}; grade this "
                            "task in-process (grading: in_process)") from None
        mutable = {i for i, a in enumerate(args) if type(a) in _MUTABLE}  # may be updated in place
        try:
            codec.write_frame(self.wfd, data)
        except OSError:
            self.dead = "the candidate process ended"
            raise CandidateDied(self.dead) from None
        reply = self.receive(("ok", "raise"))
        if reply[0] == "raise":
            if type(reply[1]) is not str or type(reply[2]) is not str:
                self.dead = "the candidate sent a malformed exception"
                raise CandidateDied(self.dead)
            raise _rebuild_exception(reply[1], reply[2])
        value, changed = reply[1], reply[2]
        if type(changed) is not dict:
            self.dead = "the candidate sent malformed argument changes"
            raise CandidateDied(self.dead)
        for index, new in changed.items():
            if type(index) is int and index in mutable and type(new) is type(args[index]):
                old = args[index]
                if type(old) is dict:
                    old.clear()
                    old.update(new)
                elif type(old) is set:
                    old.clear()
                    old.update(new)
                else:
                    old[:] = new
        return value


def judge_loop(codec: Any, limits: dict, control: int = 3) -> int:
    """A slot's long-lived judge: run one request at a time until the server hangs up.

    Each request arrives on ``control`` (a SOCK_SEQPACKET socket) as ``{"seq", "nonce",
    "timeout", "memory_mb"}`` with four descriptors: the judge payload (marshal: test, helpers,
    entry point), the candidate's channel (read end), the channel to the candidate (write end)
    and the verdict memfd. Per request the CPU and memory soft limits are set from the request,
    and the state a test may change in this process (random generator, recursion limit, working
    directory, standard streams) is restored, so every test starts as in a fresh process; a
    test's namespace and builtins are new each time. The server kills and replaces this process
    after a timeout, after any death, and after a bounded number of requests.
    """
    import _socket
    import marshal
    import random
    import resource
    from array import array

    import gc

    gc.freeze()  # what this process inherited never needs collecting: keep GC passes short
    sock = _socket.socket(fileno=control)
    space = _socket.CMSG_SPACE(4 * array("i").itemsize)
    rng_state = random.getstate()
    recursion = sys.getrecursionlimit()
    streams = (sys.stdout, sys.stderr, sys.stdin)
    while True:
        try:
            data, anc, _flags, _addr = sock.recvmsg(4096, space)
        except InterruptedError:
            continue
        fds = array("i")
        for level, kind, blob in anc:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                fds.frombytes(blob[:len(blob) - len(blob) % fds.itemsize])
        if not data:
            return 0
        try:
            import json

            request = json.loads(data)
            payload_fd, from_candidate, to_candidate, verdict_fd = fds
            cpu = resource.getrusage(resource.RUSAGE_SELF)
            used = int(cpu.ru_utime + cpu.ru_stime) + 1
            hard_cpu = resource.getrlimit(resource.RLIMIT_CPU)[1]
            soft_cpu = used + int(float(request["timeout"])) + 2
            if hard_cpu != resource.RLIM_INFINITY:
                soft_cpu = min(soft_cpu, hard_cpu)
            resource.setrlimit(resource.RLIMIT_CPU, (soft_cpu, hard_cpu))
            hard_as = resource.getrlimit(resource.RLIMIT_AS)[1]
            soft_as = int(request["memory_mb"]) << 20
            if hard_as != resource.RLIM_INFINITY:
                soft_as = min(soft_as, hard_as)
            resource.setrlimit(resource.RLIMIT_AS, (soft_as, hard_as))
            random.setstate(rng_state)
            sys.setrecursionlimit(recursion)
            sys.stdout, sys.stderr, sys.stdin = streams
            os.chdir("/")
            size = os.fstat(payload_fd).st_size
            payload = marshal.loads(os.pread(payload_fd, size, 0)) if size else {}
            payload["limits"] = limits
            judge_main(payload, codec, str(request["nonce"]), verdict_fd, from_candidate, to_candidate)
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
        sock.send(f"done {request['seq']}".encode("ascii"))


def _make_proxy(channel: _Channel, name: str) -> Callable[..., Any]:
    def candidate(*args: Any, **kwargs: Any) -> Any:
        return channel.call(args, kwargs)

    candidate.__name__ = candidate.__qualname__ = name
    return candidate


_CODE_CACHE: dict[tuple[str, str], Any] = {}


def _compiled(source: str, name: str) -> Any:
    """Compiled trusted code, cached by its text: a judge runs the same task's test for every
    sample of that task (code objects are immutable, so sharing them is safe). Bounded."""
    key = (name, source)
    code = _CODE_CACHE.get(key)
    if code is None:
        code = compile(source, name, "exec")
        if len(_CODE_CACHE) >= 512:
            _CODE_CACHE.clear()
        _CODE_CACHE[key] = code
    return code


def judge_main(payload: dict, codec: Any, nonce: str, verdict_fd: int = 3,
               from_candidate: int = 4, to_candidate: int = 5) -> int:
    """Run the task's test against the candidate across the boundary; write the verdict."""
    perf = time.perf_counter

    def report(status: str, elapsed: float, detail: str) -> int:
        record = f"{nonce} {status} {elapsed:.6f}\n".encode("ascii")
        record += detail[:_DETAIL_LIMIT].encode("utf-8", "replace")
        os.pwrite(verdict_fd, record, 0)
        return 0

    # ---- setup: trusted code only, nothing read from the candidate yet -----------------------
    try:
        limits = codec.Limits(**payload.get("limits", {}))
        # a fresh copy for every test: this process runs many tests one after the other
        namespace: dict = {"__name__": "__judge__", "__builtins__": dict(_BUILTINS)}
        helpers = payload.get("helpers") or ""
        if helpers:
            exec(_compiled(helpers, "<helpers>"), namespace)
        exec(_compiled(payload.get("test") or "", "<test>"), namespace)
        check = namespace.get("check")
        if not callable(check):
            return report("infra_error", 0.0, "the test code defines no check(candidate)")
        channel = _Channel(codec, limits, from_candidate, to_candidate)
        entry = str(payload["entry_point"])
        proxy = _make_proxy(channel, entry)
        namespace[entry] = proxy  # a test that calls the entry point by name reaches the candidate
    except BaseException as exc:  # noqa: BLE001
        name, message = _exc_text(exc)
        return report("infra_error", 0.0, f"the task's test or helper code failed: {name}: {message}")

    # ---- grading: from here on everything is the sample's outcome --------------------------------
    t0 = perf()
    status, detail = "error", ""
    try:
        first = channel.receive(("ready", "load"))
        if first[0] == "load":
            status = first[1] if first[1] in ("syntax_error", "error", "failed", "memory_exceeded",
                                              "sandbox_violation") else "error"
            detail = f"{first[2]}: {first[3]}"
        else:
            t0 = perf()
            check(proxy)
            status = "passed"
    except CandidateDied as exc:
        status, detail = "candidate_died", str(exc)
    except BaseException as exc:  # noqa: BLE001
        status = _load_status(exc)
        name, message = _exc_text(exc)
        detail = f"{name}: {message}"
    elapsed = perf() - t0
    if channel.violations:
        status, detail = "sandbox_violation", channel.violations[0]
    return report(status, elapsed, detail)
