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

Nothing the candidate sees depends on whether its answers were right (:func:`_rewrite_asserts`):
every ``assert`` of the test is rewritten so that a failed one is recorded and the test goes on
(the judge decides at the end: the first failure is the verdict, exactly as if the test had
stopped there), the judge hangs up on the candidate before it computes the verdict, and an
assert's message is evaluated only then, its candidate calls answered from the replies already
recorded (:meth:`_Channel.hang_up`). What remains (control flow on results outside assert
statements, timing of ``==`` itself) is described in docs/sandbox.md, "Cross-sample grading".
"""

from __future__ import annotations

import builtins
import os
import sys
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

if TYPE_CHECKING:  # at run time only judges import it (see _rewrite_asserts)
    import ast

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


class _NotReplayed(BaseException):
    """After the hang-up: an assert's message called the candidate with arguments the test
    never used, so there is no recorded reply to give it (the candidate is not asked)."""


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
    given = payload.get("limits")  # a spawner passes one prepared Limits for every candidate
    limits = given if isinstance(given, codec.Limits) else codec.Limits(**(given or {}))
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


#: bytes of replies the judge keeps for replaying them to assert messages after the hang-up
_REPLAY_LIMIT = 8 << 20


class _Channel:
    """The judge's end of the pipes to the candidate (trusted side: validates every frame).

    Every call's reply is also kept, keyed by the encoded call (up to ``_REPLAY_LIMIT`` bytes,
    the same constant work for every call): after :meth:`hang_up` the candidate is never asked
    again, and a call made then (by an assert's message, evaluated only once the test is over)
    gets the recorded reply to the same arguments or raises :class:`_NotReplayed`.
    """

    def __init__(self, codec: Any, limits: Any, rfd: int, wfd: int) -> None:
        self.codec, self.limits, self.rfd, self.wfd = codec, limits, rfd, wfd
        self.violations: list[str] = []
        self.dead = ""
        self.hung_up = False
        self.frame = b""  # the raw bytes of the last message received
        self.replies: dict[bytes, bytes] = {}
        self.kept = 0

    def hang_up(self) -> None:
        """Close the channel to the candidate (it reads end of file); idempotent. The judge
        owns this descriptor from the moment :func:`judge_main` starts and closes it here."""
        if not self.hung_up:
            self.hung_up = True
            try:
                os.close(self.wfd)
            except OSError:
                pass

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
        self.frame = frame
        return message

    def call(self, args: tuple, kwargs: dict) -> Any:
        if self.hung_up:
            return self._replay(args, kwargs)
        if self.dead:
            raise CandidateDied(self.dead)
        codec = self.codec
        try:
            data = codec.encode(("call", args, kwargs), self.limits)
        except codec.EncodeError as exc:
            raise TypeError(f"a test argument cannot cross the data boundary: {exc}; grade this "
                            "task in-process (grading: in_process)") from None
        try:
            codec.write_frame(self.wfd, data)
        except OSError:
            self.dead = "the candidate process ended"
            raise CandidateDied(self.dead) from None
        reply = self.receive(("ok", "raise"))
        if self.kept < _REPLAY_LIMIT:
            self.replies[data] = self.frame
            self.kept += len(data) + len(self.frame)
        return self._outcome(reply, args)

    def _replay(self, args: tuple, kwargs: dict) -> Any:
        """A call after the hang-up: the recorded reply to these arguments, never the candidate."""
        codec = self.codec
        try:
            data = codec.encode(("call", args, kwargs), self.limits)
        except codec.EncodeError:
            raise _NotReplayed() from None
        frame = self.replies.get(data)
        if frame is None:
            raise _NotReplayed()
        return self._outcome(codec.decode(frame, self.limits), args)

    def _outcome(self, reply: tuple, args: tuple) -> Any:
        """The value of a call from its (validated) reply: raise the candidate's exception, or
        apply its changes to mutable arguments in place and return its value."""
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
            # only top-level list, dict, set and bytearray arguments may be updated in place
            if type(index) is int and 0 <= index < len(args) and type(args[index]) in _MUTABLE \
                    and type(new) is type(args[index]):
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
    "timeout", "memory_mb"}`` (``marshal``: from the server, trusted) with four descriptors:
    the judge payload (marshal: test, helpers, entry point), the candidate's channel (read
    end), the channel to the candidate (write end)
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
    hard_cpu = resource.getrlimit(resource.RLIMIT_CPU)[1]  # hard limits never change here
    hard_as = resource.getrlimit(resource.RLIMIT_AS)[1]
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
        owned = list(fds)  # closed below, except what judge_main takes over
        try:
            request = marshal.loads(data)
            payload_fd, from_candidate, to_candidate, verdict_fd = fds
            cpu = resource.getrusage(resource.RUSAGE_SELF)
            used = int(cpu.ru_utime + cpu.ru_stime) + 1
            soft_cpu = used + int(float(request["timeout"])) + 2
            if hard_cpu != resource.RLIM_INFINITY:
                soft_cpu = min(soft_cpu, hard_cpu)
            resource.setrlimit(resource.RLIMIT_CPU, (soft_cpu, hard_cpu))
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
            owned.remove(to_candidate)  # judge_main closes it (hangs up) before its verdict
            judge_main(payload, codec, str(request["nonce"]), verdict_fd, from_candidate, to_candidate)
        finally:
            for fd in owned:
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


# ------------------------------------------------------------------- assert statements, rewritten
#: the one global name the rewritten test code uses; not an identifier, so no test can bind it
_LOG = "<judge>"
#: one entry per rewritten assert: (line, its message as a :class:`_Message`, or None)
_Sites = tuple[tuple[int, Any], ...]


class _AssertLog:
    """One request's record of its rewritten assert statements (bound to ``_LOG``).

    Each rewritten assert calls exactly one method, whatever its outcome: :meth:`passed`,
    :meth:`fail` (false) or :meth:`error` (evaluating it raised). Each does the same constant,
    small work for every assert (the first failure keeps a site number, a reference to the
    exception or to the values the message needs; nothing is formatted and nothing of the
    message is evaluated while the test runs), so the time between two calls the candidate sees
    does not depend on whether its answer was right. :meth:`first` builds the verdict at the end.
    """

    __slots__ = ("sites", "failures", "site", "captured", "exc")
    #: exceptions that still end the test at once: the candidate is gone; a generator is closed
    passthrough = (CandidateDied, GeneratorExit)
    everything = BaseException

    def __init__(self, sites: _Sites) -> None:
        self.sites = sites
        self.failures = 0
        self.site = -1
        self.captured: tuple | None = None
        self.exc: BaseException | None = None

    def passed(self, site: int) -> None:
        """The assert at ``site`` held (does nothing: both outcomes cost one method call)."""

    def fail(self, site: int, captured: tuple | None = None) -> None:
        """The assert at ``site`` was false; ``captured`` holds the values of the names its
        message uses (by reference, as they are now)."""
        if not self.failures:
            self.site, self.captured = site, captured
        self.failures += 1

    def error(self, site: int) -> None:
        """Evaluating the assert at ``site`` raised (the exception being handled)."""
        if not self.failures:
            self.site, self.exc = site, sys.exc_info()[1]
        self.failures += 1

    def first(self, namespace: dict) -> BaseException | None:
        """The first failure as the exception its assert statement would have raised, or None.

        Called once the test is over (after the hang-up): only now is the message of that
        assert evaluated, from the captured values, and an exception it raises is the failure
        instead (as it would have been in place). Its candidate calls get recorded replies.
        """
        if not self.failures:
            return None
        if self.exc is not None:
            return self.exc
        message_code = self.sites[self.site][1]
        if message_code is None:
            return AssertionError()
        try:
            message = eval(message_code.compiled(), namespace)(*(self.captured or ()))
        except _NotReplayed:
            message = ("<not evaluated: the message calls the candidate with arguments the test "
                       "did not call it with>")
        except BaseException as exc:  # noqa: BLE001 - a raising message is the failure
            return exc
        return AssertionError(message)

    def clear(self) -> None:
        """Drop the references a failure holds (exception, frames, captured values)."""
        self.captured = self.exc = None


def _message_names(msg: ast.expr) -> list[str] | None:
    """The names an assert message reads from its scope (names it binds itself, in a
    comprehension, lambda or ``:=``, excluded), or None when the message must be evaluated in
    place because it contains ``yield`` or ``await``."""
    import ast  # only judges rewrite tests: the fork server's image stays without it
    loads: list[str] = []
    bound: set[str] = set()
    for node in ast.walk(msg):
        if isinstance(node, (ast.Yield, ast.YieldFrom, ast.Await)):
            return None
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loads.append(node.id)
        elif isinstance(node, ast.Name):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return [name for name in dict.fromkeys(loads) if name not in bound]


#: fields of statement nodes that hold statement lists (where an ``assert`` can stand)
_BODIES = ("body", "orelse", "finalbody")


def _statement_lists(tree: ast.Module) -> Iterator[list[ast.stmt]]:
    """Every statement list of ``tree`` (module, function, class and compound-statement
    bodies, ``except`` handlers, ``match`` cases). Expressions are not entered: statements
    never stand inside one (a ``lambda`` body is an expression)."""
    import ast  # only judges rewrite tests: the fork server's image stays without it
    stack: list[list[ast.stmt]] = [tree.body]
    while stack:
        stmts = stack.pop()
        yield stmts
        for node in stmts:
            if isinstance(node, (ast.Assert, ast.Expr, ast.Assign, ast.Return)):
                continue  # the common leaves, without attribute look-ups
            for field in _BODIES:
                inner = getattr(node, field, None)
                if type(inner) is list and inner and isinstance(inner[0], ast.stmt):
                    stack.append(inner)
            for holder in getattr(node, "handlers", None) or getattr(node, "cases", None) or ():
                stack.append(holder.body)


def _guarded_asserts(tree: ast.Module) -> set[int]:
    """``id()`` of the assert statements left as they are: those a ``try`` with handlers or a
    ``with`` block (a context manager may swallow exceptions) of the test itself surrounds,
    directly or through a function of the test called by name from inside one. The test can
    catch what they raise, so they must raise it. A test without any such block (found by a
    walk over its statements only) has none."""
    import ast  # only judges rewrite tests: the fork server's image stays without it
    try_types = (ast.Try, getattr(ast, "TryStar", ast.Try))
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    if not any(isinstance(node, (ast.With, ast.AsyncWith)) or
               (isinstance(node, try_types) and node.handlers)
               for stmts in _statement_lists(tree) for node in stmts):
        return set()
    defined = {node.name for node in ast.walk(tree) if isinstance(node, functions)}
    guarded_functions: set[str] = set()
    while True:
        found: set[int] = set()
        called: set[str] = set()
        stack: list[tuple[ast.AST, bool]] = [(tree, False)]
        while stack:
            node, guarded = stack.pop()
            if isinstance(node, functions) and node.name in guarded_functions:
                guarded = True
            if guarded:
                if isinstance(node, ast.Assert):
                    found.add(id(node))
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                        and node.func.id in defined:
                    called.add(node.func.id)
            if isinstance(node, try_types) and node.handlers:
                stack.extend((child, True) for child in node.body)
                stack.extend((child, guarded) for child in [*node.handlers, *node.orelse,
                                                            *node.finalbody])
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                stack.extend((child, guarded) for child in node.items)
                stack.extend((child, True) for child in node.body)
            else:
                stack.extend((child, guarded) for child in ast.iter_child_nodes(node))
        if called <= guarded_functions:
            return found
        guarded_functions |= called


class _Message:
    """An assert's message as ``lambda <captured names>: <msg>``, compiled only when a failure
    needs it (:meth:`_AssertLog.first`), once per process."""

    __slots__ = ("tree", "filename", "code")

    def __init__(self, tree: Any, filename: str) -> None:
        self.tree, self.filename = tree, filename
        self.code: Any = None

    def compiled(self) -> Any:
        if self.code is None:
            self.code = compile(self.tree, self.filename, "eval")
        return self.code


def _assert_guard(node: ast.Assert, site: int, filename: str) -> tuple[ast.stmt, _Message | None]:
    """The statement that replaces ``assert test, msg`` (at site ``site``)::

        try:
            if test:
                <judge>.passed(i)
            else:
                <judge>.fail(i, (name, ...))      # the names msg reads; (msg,) if msg yields
        except <judge>.passthrough:
            raise
        except <judge>.everything:
            <judge>.error(i)

    Statement level, in the assert's own scope (class bodies, ``:=`` and ``yield`` in the test
    keep their meaning); ``msg`` becomes a separate ``lambda name, ...: msg``. Every new node
    takes the assert's position; the original ``test`` and ``msg`` keep theirs."""
    import ast  # only judges rewrite tests: the fork server's image stays without it
    where: dict[str, Any] = {"lineno": node.lineno, "col_offset": node.col_offset,
                             "end_lineno": node.end_lineno, "end_col_offset": node.end_col_offset}

    def log(method: str) -> ast.Attribute:
        return ast.Attribute(value=ast.Name(id=_LOG, ctx=ast.Load(), **where), attr=method,
                             ctx=ast.Load(), **where)

    def report(method: str, *args: ast.expr) -> ast.stmt:
        return ast.Expr(value=ast.Call(func=log(method), args=[ast.Constant(value=site, **where), *args],
                                       keywords=[], **where), **where)

    message, captured = None, []
    if node.msg is not None:
        names = _message_names(node.msg)
        if names is None:  # yield/await: evaluated where it stands, on failure only
            params, values = ["message"], [node.msg]
            body: ast.expr = ast.copy_location(ast.Name(id="message", ctx=ast.Load()), node.msg)
        else:
            params, values = names, [ast.Name(id=n, ctx=ast.Load(), **where) for n in names]
            body = node.msg
        arguments = ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in params],
                                  vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                                  defaults=[])
        lam = ast.copy_location(ast.Lambda(args=arguments, body=body), node.msg)
        message = _Message(ast.fix_missing_locations(ast.Expression(body=lam)), filename)
        captured = [ast.Tuple(elts=values, ctx=ast.Load(), **where)]
    check = ast.If(test=node.test, body=[report("passed")], orelse=[report("fail", *captured)],
                   **where)
    reraise = ast.Raise(exc=None, cause=None, **where)
    guard = ast.Try(body=[check], orelse=[], finalbody=[], handlers=[
        ast.ExceptHandler(type=log("passthrough"), name=None, body=[reraise], **where),
        ast.ExceptHandler(type=log("everything"), name=None, body=[report("error")], **where)],
        **where)
    return guard, message


def _rewrite_asserts(source: str, filename: str) -> tuple[Any, _Sites]:
    """Compile the task's test with its assert statements rewritten (:func:`_assert_guard`,
    :class:`_AssertLog`): the judge makes every call whatever the earlier answers were. Line
    numbers stay those of the source; sites are numbered in source order. Raises SyntaxError
    like :func:`compile`. Only statement lists are walked and only new nodes are given
    positions, so the cost is a parse, a compile and a small constant per assert."""
    import ast  # only judges rewrite tests: the fork server's image stays without it
    if "assert" not in source:
        return compile(source, filename, "exec"), ()
    tree = ast.parse(source, filename, "exec")
    guarded = _guarded_asserts(tree)
    found = [(node.lineno, node.col_offset, id(node), stmts, index)
             for stmts in _statement_lists(tree) for index, node in enumerate(stmts)
             if isinstance(node, ast.Assert) and id(node) not in guarded]
    found.sort(key=lambda item: item[:2])
    sites: list[tuple[int, _Message | None]] = []
    for site, (line, _col, _id, stmts, index) in enumerate(found):
        guard, message = _assert_guard(stmts[index], site, filename)  # type: ignore[arg-type]
        stmts[index] = guard
        sites.append((line, message))
    return compile(tree, filename, "exec"), tuple(sites)


_CODE_CACHE: dict[tuple[str, bool, str], tuple[Any, _Sites]] = {}


def _compiled(source: str, name: str, rewrite: bool = False) -> tuple[Any, _Sites]:
    """Compiled trusted code and its assert sites, cached by its text: a judge runs the same
    task's test for every sample of that task (code objects are immutable, so sharing them is
    safe; the rewrite is done once per distinct text). ``rewrite`` rewrites the asserts (the
    test; never the helpers). Bounded."""
    key = (name, rewrite, source)
    entry = _CODE_CACHE.get(key)
    if entry is None:
        entry = _rewrite_asserts(source, name) if rewrite else (compile(source, name, "exec"), ())
        if len(_CODE_CACHE) >= 512:
            _CODE_CACHE.clear()
        _CODE_CACHE[key] = entry
    return entry


def judge_main(payload: dict, codec: Any, nonce: str, verdict_fd: int = 3,
               from_candidate: int = 4, to_candidate: int = 5) -> int:
    """Run the task's test against the candidate across the boundary; write the verdict.

    Takes over ``to_candidate``: it is closed (the judge hangs up) as soon as the test is over,
    before the verdict is computed, and in every case before this returns; the caller closes
    the other descriptors. The test's asserts are rewritten (:func:`_rewrite_asserts`): the
    verdict is the first failed assert if any (whatever happened after it: a later exception,
    even the candidate's death), else what ended ``check`` (an exception outside an assert
    statement, ``CandidateDied``), else ``passed``; statuses and details as an unmodified test
    stopping at that point would give.
    """
    perf = time.perf_counter
    channel: _Channel | None = None
    namespace: dict = {}
    log: _AssertLog | None = None

    def report(status: str, elapsed: float, detail: str) -> int:
        record = f"{nonce} {status} {elapsed:.6f}\n".encode("ascii")
        record += detail[:_DETAIL_LIMIT].encode("utf-8", "replace")
        os.pwrite(verdict_fd, record, 0)
        return 0

    try:
        # ---- setup: trusted code only, nothing read from the candidate yet -------------------
        try:
            limits = codec.Limits(**payload.get("limits", {}))
            channel = _Channel(codec, limits, from_candidate, to_candidate)
            # a fresh copy for every test: this process runs many tests one after the other
            namespace.update({"__name__": "__judge__", "__builtins__": dict(_BUILTINS)})
            helpers = payload.get("helpers") or ""
            if helpers:
                exec(_compiled(helpers, "<helpers>")[0], namespace)
            code, sites = _compiled(payload.get("test") or "", "<test>", rewrite=True)
            log = namespace[_LOG] = _AssertLog(sites)
            exec(code, namespace)
            if log.failures:  # an assert at the test's top level failed: reported below
                raise AssertionError()
            check = namespace.get("check")
            if not callable(check):
                return report("infra_error", 0.0, "the test code defines no check(candidate)")
            entry = str(payload["entry_point"])
            proxy = _make_proxy(channel, entry)
            namespace[entry] = proxy  # a test calling the entry point by name reaches the candidate
        except BaseException as exc:  # noqa: BLE001
            top = log.first(namespace) if log is not None else None  # a failed top-level assert
            name, message = _exc_text(exc if top is None else top)
            return report("infra_error", 0.0,
                          f"the task's test or helper code failed: {name}: {message}")

        # ---- grading: from here on everything is the sample's outcome ----------------------------
        t0 = perf()
        loaded: tuple | None = None
        ended: BaseException | None = None  # what ended check() early, if anything did
        try:
            first = channel.receive(("ready", "load"))
            if first[0] == "load":
                loaded = first
            else:
                t0 = perf()
                check(proxy)
        except BaseException as exc:  # noqa: BLE001 - graded below, once the candidate is gone
            ended = exc
        elapsed = perf() - t0
        channel.hang_up()  # the test is over: nothing below can reach the candidate
        if loaded is not None:
            status = loaded[1] if loaded[1] in ("syntax_error", "error", "failed",
                                                "memory_exceeded", "sandbox_violation") else "error"
            detail = f"{loaded[2]}: {loaded[3]}"
        else:
            failure = log.first(namespace)  # the first failed assert comes first
            if failure is None:
                failure = ended
            if failure is None:
                status, detail = "passed", ""
            elif isinstance(failure, CandidateDied):
                status, detail = "candidate_died", str(failure)
            else:
                status = _load_status(failure)
                name, message = _exc_text(failure)
                detail = f"{name}: {message}"
            failure = ended = None
        if channel.violations:
            status, detail = "sandbox_violation", channel.violations[0]
        return report(status, elapsed, detail)
    finally:
        if channel is not None:
            channel.hang_up()
        else:
            try:
                os.close(to_candidate)
            except OSError:
                pass
        # free what the test left (a failure's traceback keeps its frames, which keep this
        # namespace) now, by reference counting, not in a later request's garbage collection
        if log is not None:
            log.clear()
        namespace.clear()
