"""Which calls of the repository tasks' target functions carry only plain data (issue 43, point 5).

Out-of-process grading of a repository task (docs/proposals/out-of-process-repo-grading.md) would
run the repository's tests in a trusted process and execute every call of the task's target
function in the candidate's process, across a data-only codec. This script measures, on the
shipped repository sets, how many of those calls such a codec could carry.

For every task of the shipped sets (``examples/.../repo/data/*-tasks.jsonl``), the task's own
tests (FAIL_TO_PASS + PASS_TO_PASS, its deselections) run against the *reference* (the unmodified
repository: trusted code, so directly in the repository's environment, not sandboxed, with the
builder's command line: :func:`core.scenarios.repo.testrun.run_pytest`) with one more pytest
plugin, this very file loaded as ``-p _ianvs_plain_probe`` from a temporary folder on
``PYTHONPATH``. The plugin traces calls of the target code object (found by file, qualname and
recorded position, so aliases, re-exports, decorators and dispatch registries are all seen) and
classifies, per call that would cross the boundary (an *outermost* call: one made while no call
of the same function is active on that thread; calls the function makes of itself, directly or
through other code, stay in the candidate's process):

* the bound parameters (values equal by identity to the function's own defaults are not passed,
  so they are left out), ``self`` separately for a method called on an instance;
* the return value, or the exception raised (by type);
* the arguments (and ``self``) after the call: an argument whose encoding changed was mutated and
  its new state would have to cross back;
* the module's globals (and for a method, its class's attributes): a rebinding, or a change of
  size of a module-level ``dict``/``list``/``set``, means module state the candidate changed.

Each value gets the lowest crossing *tier* that can carry it (:data:`TIERS`):

``core``
    the project's boundary codec as it is (:mod:`core.testenvmanager.sandbox.codec`), exact types
    only: ``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes``, ``bytearray``,
    ``range``, ``list``, ``tuple``, ``dict``, ``set``, ``frozenset`` and builtin exceptions;
``extended``
    still data only: stdlib value types (``datetime``, ``Decimal``, ``Fraction``, ``UUID``,
    paths, enum members, ``slice``, ``re.Pattern``...), the ``collections`` containers and named
    tuples, numpy arrays of non-object dtype, numpy scalars and dtypes, pandas frames, series and
    indexes, and *references* to module-level classes and functions (crossing by qualified name;
    not those of the repository's test modules, which the candidate never imports: callbacks);
``state``
    an instance of a class importable by name (repository, environment or stdlib), rebuilt on the
    other side from its ``__dict__``/``__slots__`` state (recursively carried); needs an
    allow-list of classes (docs note); also cyclic structures and non-builtin exceptions;
``handle``
    only a remote handle works: callbacks (lambdas, local functions, bound methods, functions and
    classes of test modules), iterators and generators (streamed), instances of local classes,
    resources without state (modules, locks, connections, files), anything over the limits
    (:class:`Limits`).

A call is *plain* when every value of it is ``core`` or ``extended`` and it changed no module
state. Per task: calls, outermost and nested, classified calls (the first ``--max-calls`` per test
node), plain calls, method calls, mutating calls, calls per tier, and the *reasons*: for each
non-core value, the outermost non-core type on its path (e.g. ``state[repo]:dataset.table.Table``
for ``self``), counted once per call. A task is *all plain* when it has classified calls and every
one is plain. Tasks whose tests did not all pass under the probe are reported (``tests_ok``).

Runs: tasks that select the same tests (and deselections, environment and services) share one
pytest run (``--group selection``, the default; 289 runs for the 458 shipped tasks) or, faster,
one run per set with the union of the tests, calls attributed per test node
(``--group repo``). Each finished run is appended to the state file (``--state``, default
``<out>.runs.jsonl``): a rerun (same options) skips what is done, so a killed run loses at most the
run in flight; ``--fresh`` starts over. A run that fails (pytest cannot start, timeout, probe
error) is recorded and reported, never a crash. The PostgreSQL set runs against a private server
(:class:`core.scenarios.repo.postgres.PostgresService`, a database per run), and is skipped,
saying so, where PostgreSQL is not installed. The implement-change sets are not measured: their
records name no target function (a change may touch any code of its files).

``--round-trip N`` instead measures what a call costs to cross processes on this machine (median
microseconds of ``N`` calls): a 1-byte pipe ping-pong, a call through the project's codec to a
persistent candidate process, and a fresh forked process per call (``--rt-python`` and
``--rt-preload`` run it in another interpreter with modules loaded first, e.g. a repository's
environment with its scientific stack).

Usage (from the repository root)::

    python benchmarks/plain_data_calls.py --out plain.json [--sets eli5 toolz ...] [--group repo]
        [--max-calls 200] [--timeout 900] [--limit N] [--fresh]
    python benchmarks/plain_data_calls.py --round-trip 20000 [--rt-python PY --rt-preload numpy,...]

Prints a provenance line, a table per set and overall, the top reasons, and (``--out``) writes
every figure as JSON. This file is also the probe: its top level imports only the standard
library and does nothing unless ``IANVS_PLAIN_CONFIG`` names a probe configuration.
"""

from __future__ import annotations

import atexit
import collections
import dis
import gc
import hashlib
import json
import logging
import os
import sys
import threading
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, NamedTuple

#: crossing tiers, cheapest first (module docstring)
CORE, EXTENDED, STATE, HANDLE = 0, 1, 2, 3
TIERS = ("core", "extended", "state", "handle")
#: a call is plain when no value needs more than this tier
PLAIN_MAX = EXTENDED
#: environment variable naming the probe's JSON configuration
CONFIG_ENV = "IANVS_PLAIN_CONFIG"
#: module name the probe is loaded under (``-p``)
PROBE_MODULE = "_ianvs_plain_probe"
#: node id of calls made outside any test (collection, imports)
OUTSIDE = "<outside-tests>"
#: bumped when what is measured changes, so resumed runs never mix versions
PROBE_VERSION = 3


# ---------------------------------------------------------------------------------------------
# Part 1: the classifier (standard library only; runs in the repository's interpreter)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Limits:
    """Bounds of one value's walk, the boundary codec's defaults
    (:class:`core.testenvmanager.sandbox.codec.Limits`): container nesting (``max_depth``),
    elements over all containers (``max_items``) and bytes of strings, bytes and array data
    (``max_bytes``, one message). A value over any of them is ``handle`` (reason
    ``limit:<which>``; ``limit:recursion`` when the walk itself runs out of stack) and its
    mutation is not checked."""

    max_depth: int = 100
    max_items: int = 1_000_000
    max_bytes: int = 16 << 20


DEFAULT_LIMITS = Limits()


class Verdict(NamedTuple):
    """One value's classification: the lowest ``tier`` that carries it, the ``reasons`` (outermost
    non-core type on each path, ``kind:type``), every non-core type met (``leaves``), a
    ``fingerprint`` that changes when the value's carried state changes (equal fingerprints ==
    no mutation visible to the codec) and whether the walk was ``complete`` (within the limits)."""

    tier: int
    reasons: frozenset[str]
    leaves: frozenset[str]
    fingerprint: object
    complete: bool


class _OverLimit(Exception):
    pass


_CORE_SCALARS = frozenset({type(None), bool, int, str, bytes})
_FUNCTION_REFS = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
                  types.ClassMethodDescriptorType, types.GetSetDescriptorType,
                  types.MemberDescriptorType)
#: stdlib value types carried by value (``extended``), by module and qualified name
_STDLIB_VALUES = frozenset({
    "datetime.date", "datetime.datetime", "datetime.time", "datetime.timedelta", "datetime.timezone",
    "decimal.Decimal", "fractions.Fraction", "uuid.UUID", "pathlib.PosixPath", "pathlib.PurePosixPath",
    "pathlib.WindowsPath", "pathlib.PureWindowsPath", "re.Pattern", "builtins.ellipsis",
    "builtins.NotImplementedType", "zoneinfo.ZoneInfo", "ipaddress.IPv4Address",
    "ipaddress.IPv6Address", "builtins.memoryview", "array.array",
})
_COLLECTIONS = frozenset({"collections.OrderedDict", "collections.Counter", "collections.defaultdict",
                          "collections.deque", "collections.ChainMap"})


def type_name(t: type) -> str:
    """``module.qualname`` of a type (``builtins.`` kept, so names are unambiguous)."""
    return f"{getattr(t, '__module__', '?')}.{getattr(t, '__qualname__', getattr(t, '__name__', '?'))}"


def importable(obj: object) -> bool:
    """Whether ``obj`` (a class or function) is reachable as ``module.qualname`` from an already
    imported module, i.e. could cross as a reference by name. Never imports anything."""
    try:
        module = sys.modules.get(getattr(obj, "__module__", None) or "")
        qual = getattr(obj, "__qualname__", None)
        if module is None or not isinstance(qual, str) or "<" in qual:
            return False
        found: object = module
        for part in qual.split("."):
            found = getattr(found, part)
        return found is obj
    except Exception:  # noqa: BLE001 - a lazy module attribute may raise anything
        return False


def _state_of(value: object) -> dict[str, object] | None:
    """An instance's carried state: its ``__dict__`` plus its ``__slots__`` values (read through
    the slot descriptors, so no user ``__getattr__`` runs); ``None`` when it has neither."""
    state: dict[str, object] = {}
    has = False
    try:
        d = object.__getattribute__(value, "__dict__")
    except Exception:  # noqa: BLE001
        d = None
    if isinstance(d, dict):
        state.update(d)
        has = True
    for klass in type(value).__mro__:
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name in ("__dict__", "__weakref__"):
                continue
            key = f"_{klass.__name__.lstrip('_')}{name}" if name.startswith("__") and not name.endswith("__") else name
            desc = klass.__dict__.get(key)
            if isinstance(desc, types.MemberDescriptorType):
                has = True
                try:
                    state[key] = desc.__get__(value, type(value))
                except AttributeError:
                    continue
    return state if has else None


class _Walker:
    """One walk over one value (see :func:`classify`)."""

    def __init__(self, limits: Limits, origin: Callable[[object], str]) -> None:
        self.limits = limits
        self.origin = origin
        self.tier = CORE
        self.reasons: set[str] = set()
        self.leaves: set[str] = set()
        self.items = 0
        self.nbytes = 0
        self.nested = 0          # > 0 while inside a non-core value
        self.path: set[int] = set()
        self.seen: set[int] = set()

    def note(self, tier: int, reason: str) -> None:
        if tier > self.tier:
            self.tier = tier
        if tier > CORE:
            self.leaves.add(reason)
            if self.nested == 0:
                self.reasons.add(reason)

    def count(self, n: int, nbytes: int = 0) -> None:
        self.items += n
        self.nbytes += nbytes
        if self.items > self.limits.max_items:
            raise _OverLimit("items")
        if self.nbytes > self.limits.max_bytes:
            raise _OverLimit("bytes")

    def inside(self, value: object, depth: int, fn: Callable[[], object]) -> object:
        """Run ``fn`` (walking ``value``'s children) with cycle detection and nesting kept."""
        if depth > self.limits.max_depth:
            raise _OverLimit("depth")
        key = id(value)
        if key in self.path:
            self.note(STATE, "cycle")
            return ("cycle",)
        if key in self.seen:     # shared: walked (and fingerprinted) once, at its first place
            return ("ref", key)
        self.seen.add(key)
        self.path.add(key)
        try:
            return fn()
        finally:
            self.path.discard(key)

    def walk(self, v: Any, depth: int) -> object:
        t = type(v)
        if t in _CORE_SCALARS:
            if t is str or t is bytes:
                self.count(0, len(v))
            return (t, v)
        if t is float:
            return (t, v.hex())
        if t is complex:
            return (t, v.real.hex(), v.imag.hex())
        if t is bytearray:
            self.count(0, len(v))
            return (t, bytes(v))
        if t is range:
            return (t, v.start, v.stop, v.step)
        if t is list or t is tuple:
            self.count(len(v))
            return self.inside(v, depth, lambda: (t, tuple(self.walk(x, depth + 1) for x in v)))
        if t is dict:
            self.count(len(v))
            return self.inside(v, depth, lambda: (t, tuple((self.walk(k, depth + 1), self.walk(x, depth + 1))
                                                           for k, x in list(v.items()))))
        if t is set or t is frozenset:
            self.count(len(v))
            return self.inside(v, depth, lambda: (t, frozenset(self.walk(x, depth + 1) for x in list(v))))
        return self.other(v, t, depth)

    def children(self, tier: int, reason: str, v: Any, depth: int, fn: Callable[[], object]) -> object:
        """Note ``v`` as a non-core node and walk its children (``fn``) below it."""
        self.note(tier, reason)
        self.nested += 1
        try:
            return (reason, self.inside(v, depth, fn))
        finally:
            self.nested -= 1

    def other(self, v: Any, t: type, depth: int) -> object:
        name = type_name(t)
        if isinstance(v, BaseException):
            tier = CORE if t.__module__ == "builtins" else (STATE if importable(t) else HANDLE)
            label = f"exception:{name}"
            if tier == CORE:
                return (name, self.walk(v.args, depth + 1))
            return self.children(tier, label, v, depth, lambda: self.walk(v.args, depth + 1))
        if isinstance(v, type):
            ok = importable(v)
            if ok and self.origin(v) == "test":   # never imported by the candidate: a callback
                self.note(HANDLE, "callback:test-class")
            else:
                self.note(EXTENDED if ok else HANDLE, "ref:class" if ok else "callback:local-class")
            return ("class", id(v))
        if t is types.FunctionType:
            ok = importable(v)
            if ok and self.origin(v) == "test":
                self.note(HANDLE, "callback:test-function")
            else:
                self.note(EXTENDED if ok else HANDLE, "ref:function" if ok else "callback:function")
            return ("fn", id(v))
        if isinstance(v, _FUNCTION_REFS):
            owner = getattr(v, "__self__", None)
            if owner is None or isinstance(owner, (types.ModuleType, type)):
                self.note(EXTENDED, "ref:builtin")
            else:
                self.note(HANDLE, "callback:bound-builtin-method")
            return ("fn", id(v))
        if t is types.MethodType:
            owner = getattr(v, "__self__", None)
            ok = isinstance(owner, type) and importable(owner) and self.origin(owner) != "test"
            self.note(EXTENDED if ok else HANDLE, "ref:classmethod" if ok else "callback:bound-method")
            return ("fn", id(v))
        if t is types.MethodWrapperType:
            self.note(HANDLE, "callback:method-wrapper")
            return ("fn", id(v))
        if isinstance(v, types.ModuleType):
            self.note(HANDLE, "resource:module")
            return ("module", id(v))
        if name in ("functools.partial", "operator.itemgetter", "operator.attrgetter", "operator.methodcaller"):
            return self._reduced(v, name, depth)
        found = self._libraries(v, t, name, depth)
        if found is not None:
            return found
        if name in _STDLIB_VALUES or self._stdlib_instance(v):
            if name == "builtins.memoryview":
                self.count(0, v.nbytes)
                self.note(EXTENDED, f"ext:{name}")
                return (name, bytes(v))
            self.note(EXTENDED, f"ext:{name}")
            return (name, repr(v)[:1000])
        enum = sys.modules.get("enum")
        if enum is not None and isinstance(v, enum.Enum):
            ok = importable(t)
            self.note(EXTENDED if ok else HANDLE, "ext:enum" if ok else f"local-class:{name}")
            return (name, getattr(v, "name", None))
        rnd = sys.modules.get("random")
        if rnd is not None and isinstance(v, rnd.Random) and importable(t):
            # the Mersenne Twister's state is not in __dict__: carried (and compared) by getstate()
            return self.children(STATE, f"state[stdlib]:{name}", v, depth,
                                 lambda: (self.walk(v.getstate(), depth + 1), self.walk(_state_of(v) or {}, depth + 1)))
        if t is slice:
            return self.children(EXTENDED, "ext:builtins.slice", v, depth,
                                 lambda: self.walk((v.start, v.stop, v.step), depth + 1))
        if name in _COLLECTIONS:
            return self._collection(v, name, depth)
        if t is types.MappingProxyType:  # a read-only view of a dict: carried as its items
            return self.children(EXTENDED, f"ext:{name}", v, depth, lambda: self.walk(dict(v), depth + 1))
        if isinstance(v, tuple) and hasattr(t, "_fields"):
            ok = importable(t)
            return self.children(EXTENDED if ok else STATE, "ext:namedtuple" if ok else "state:namedtuple(local)",
                                 v, depth, lambda: self.walk(tuple(v), depth + 1))
        io = sys.modules.get("io")
        if io is not None and isinstance(v, io.IOBase):
            self.note(HANDLE, "resource:file")
            return ("h", id(v))
        logging_ = sys.modules.get("logging")
        if logging_ is not None and isinstance(v, (logging_.Logger, logging_.Manager)):
            self.note(EXTENDED, "ref:logger")  # a process singleton, found by its name on either side
            return ("logger", getattr(v, "name", ""))
        if hasattr(t, "__next__") and hasattr(t, "__iter__"):
            self.note(HANDLE, f"iterator:{name}")
            return ("iter", id(v))
        return self._object(v, t, name, depth)

    @staticmethod
    def _stdlib_instance(v: object) -> bool:
        """Instances of subclasses of the stdlib value types (``pandas.Timestamp`` is a
        ``datetime``): carried by value like their base."""
        for module, names in (("datetime", ("date", "time", "timedelta")), ("decimal", ("Decimal",)),
                              ("pathlib", ("PurePath",))):
            mod = sys.modules.get(module)
            if mod is not None and isinstance(v, tuple(getattr(mod, n) for n in names)):
                return True
        return False

    def _reduced(self, v: Any, name: str, depth: int) -> object:
        """``functools.partial`` and the ``operator`` getters: carried by their constructor
        arguments (their ``__reduce__``), as data plus references."""
        try:
            parts = v.__reduce__()
            payload = tuple(parts[1:3]) if isinstance(parts, tuple) else ()
        except Exception:  # noqa: BLE001
            self.note(HANDLE, f"resource:{name}")
            return ("h", id(v))
        return self.children(EXTENDED, f"ext:{name}", v, depth, lambda: self.walk(payload, depth + 1))

    def _collection(self, v: Any, name: str, depth: int) -> object:
        if name == "collections.defaultdict":
            return self.children(EXTENDED, f"ext:{name}", v, depth,
                                 lambda: (self.walk(v.default_factory, depth + 1),
                                          self.walk(dict(v), depth + 1)))
        if name == "collections.ChainMap":
            return self.children(EXTENDED, f"ext:{name}", v, depth, lambda: self.walk(list(v.maps), depth + 1))
        if name == "collections.deque":
            return self.children(EXTENDED, f"ext:{name}", v, depth,
                                 lambda: (v.maxlen, self.walk(list(v), depth + 1)))
        return self.children(EXTENDED, f"ext:{name}", v, depth, lambda: self.walk(dict(v), depth + 1))

    def _libraries(self, v: Any, t: type, name: str, depth: int) -> object | None:
        """numpy and pandas values (only when the tests already imported them)."""
        np = sys.modules.get("numpy")
        if np is not None:
            if isinstance(v, np.ndarray):
                if v.dtype.hasobject:
                    self.count(int(v.size))
                    return self.children(EXTENDED, f"ext:{name}[object]", v, depth,
                                         lambda: (v.shape, self.walk(list(v.ravel()), depth + 1)))
                self.count(0, int(v.nbytes))
                self.note(EXTENDED, f"ext:{name}")
                data = np.ascontiguousarray(v).tobytes()
                mask = getattr(v, "mask", None)
                extra = np.asarray(mask).tobytes() if mask is not None else b""
                return (name, v.dtype.str, v.shape, hashlib.blake2b(data + extra, digest_size=16).digest())
            if isinstance(v, np.generic):
                self.note(EXTENDED, "ext:numpy.scalar")
                return (name, v.tobytes() if not isinstance(v, np.object_) else repr(v))
            if isinstance(v, np.dtype):
                self.note(EXTENDED, "ext:numpy.dtype")
                return (name, str(v))
            random = getattr(np, "random", None)
            if random is not None and isinstance(v, (random.RandomState, random.Generator)):
                # a generator's state is data (its bit generator's state dict); advancing it
                # in the candidate is a mutation that must cross back
                state = v.get_state(legacy=False) if isinstance(v, random.RandomState) else v.bit_generator.state
                return self.children(STATE, f"state[env]:{name}", v, depth, lambda: self.walk(state, depth + 1))
        pd = sys.modules.get("pandas")
        if pd is not None and isinstance(v, (pd.DataFrame, pd.Series, pd.Index)):
            self.count(int(getattr(v, "size", 0)))
            self.note(EXTENDED, f"ext:pandas.{t.__name__}")
            try:
                digest = pd.util.hash_pandas_object(v, index=not isinstance(v, pd.Index)).to_numpy().tobytes()
                cols = repr(list(getattr(v, "columns", []))), repr(getattr(v, "dtypes", None))
                return (name, v.shape, cols, hashlib.blake2b(digest, digest_size=16).digest())
            except Exception:  # noqa: BLE001 - unhashable cells: mutation not checked
                return (name, id(v), "unhashed")
        return None

    def _object(self, v: Any, t: type, name: str, depth: int) -> object:
        """Anything else: an instance rebuilt from its state if its class is importable by name
        (``state[<origin>]``), a local class's instance or a stateless resource (``handle``)."""
        state = _state_of(v)
        base: object = None
        builtins: tuple[Callable[[Any], object], ...] = (dict, list, tuple, set, frozenset, str, bytes, int, float)
        for builtin in builtins:
            if isinstance(v, builtin):  # type: ignore[arg-type]  # a builtin's subclass: its content too
                base = builtin(v)
                break
        if state is None and base is None:
            self.note(HANDLE, f"resource:{name}")
            return ("h", id(v))
        if not importable(t):
            self.note(HANDLE, f"local-class:{name}")
            return ("h", id(v))
        label = f"state[{self.origin(t)}]:{name}"
        return self.children(STATE, label, v, depth,
                             lambda: (self.walk(base, depth + 1), self.walk(state or {}, depth + 1)))


def _no_origin(_obj: object) -> str:
    return "?"


def classify(value: object, limits: Limits = DEFAULT_LIMITS,
             origin: Callable[[object], str] = _no_origin) -> Verdict:
    """Classify ``value`` (module docstring): never raises, never consumes an iterator, runs no
    code of the value's class except numpy/pandas hashing and ``repr`` of stdlib value types.
    ``origin`` names where a class comes from (``repo``, ``env``, ``stdlib``) in state reasons."""
    w = _Walker(limits, origin)
    try:
        fp = w.walk(value, 0)
        return Verdict(w.tier, frozenset(w.reasons), frozenset(w.leaves), fp, True)
    except _OverLimit as exc:
        reason = f"limit:{exc.args[0]}"
        return Verdict(HANDLE, frozenset(w.reasons | {reason}), frozenset(w.leaves | {reason}),
                       ("limit", id(value)), False)
    except RecursionError:
        return Verdict(HANDLE, frozenset({"limit:recursion"}), frozenset({"limit:recursion"}),
                       ("limit", id(value)), False)
    except Exception as exc:  # noqa: BLE001 - a hostile or broken value: reported, never raised
        reason = f"probe-error:{type(exc).__name__}"
        return Verdict(HANDLE, frozenset({reason}), frozenset({reason}), ("error", id(value)), False)


# ---------------------------------------------------------------------------------------------
# Part 2: the probe (a pytest plugin in the repository's interpreter)
# ---------------------------------------------------------------------------------------------

_GEN_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
_VARARGS, _VARKW = 0x04, 0x08


@dataclass(frozen=True)
class Target:
    """A task's function: ``path`` (absolute, resolved), ``qualname`` (``f`` or ``Class.f``),
    ``def_line`` (the ``def`` line, after decorators) and ``body_start`` (first body line) as
    the task records them, and ``class_name`` (``None`` for a module-level function)."""

    id: str
    path: str
    qualname: str
    def_line: int
    body_start: int
    class_name: str | None

    def matches(self, code: types.CodeType) -> bool:
        """Whether ``code`` is this function's code (by qualname, file and line range)."""
        if getattr(code, "co_qualname", code.co_name) != self.qualname:
            return False
        if os.path.realpath(code.co_filename) != self.path or code.co_firstlineno > self.def_line:
            return False
        lines = [line for _s, _e, line in code.co_lines() if line is not None]
        return bool(lines) and max(lines) >= self.body_start


def new_stats() -> dict[str, Any]:
    """Empty per (target, test node) counters; see :func:`merge_stats` for their meaning."""
    return {"calls": 0, "nested": 0, "classified": 0, "unclassified": 0, "tiers": [0, 0, 0, 0],
            "plain": 0, "method": 0, "generator": 0, "raised": 0, "raised_types": {}, "mutated": 0,
            "mutation_kinds": {}, "self_mutated": 0, "module_state": 0, "mutation_unknown": 0,
            "where": {}, "reasons": {}, "leaves": {}, "probe_errors": 0}


def merge_stats(into: dict[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """Add ``other``'s counters into ``into`` (both :func:`new_stats` shaped); return ``into``.

    ``calls``: outermost calls seen; ``nested``: calls made while the same function was active
    (they stay in the candidate's process); ``classified``/``unclassified``: outermost calls
    classified or over the per-node cap; ``tiers``: classified calls by their highest tier;
    ``plain``: classified calls with every value at most ``extended`` and no module state
    changed; ``method``: calls on an instance (``self`` crosses); ``generator``: calls of a
    generator function (the result is a generator); ``raised``/``raised_types``; ``mutated``:
    calls that changed an argument (``mutation_kinds``: ``container`` for an exact
    list/dict/set/bytearray, ``object``, ``other``), ``self_mutated``, ``module_state``;
    ``mutation_unknown``: calls with a value over the limits (mutation not checked); ``where``:
    non-plain calls by the part that made them so; ``reasons``: non-core outermost types, once
    per call; ``leaves``: every non-core type met; ``probe_errors``."""
    for key, value in other.items():
        if isinstance(value, dict):
            bucket = into.setdefault(key, {})
            for k, n in value.items():
                bucket[k] = bucket.get(k, 0) + n
        elif isinstance(value, list):
            cur = into.setdefault(key, [0] * len(value))
            for i, n in enumerate(value):
                cur[i] += n
        else:
            into[key] = into.get(key, 0) + value
    return into


class _Call:
    """One outermost call in flight: what was passed and its fingerprints before the call."""

    __slots__ = ("target", "stats", "values", "pre", "self_obj", "pre_self", "globals", "cls_dict",
                 "module_fp", "exc")

    def __init__(self, target: Target, stats: dict[str, Any]) -> None:
        self.target = target
        self.stats = stats
        self.values: dict[str, object] = {}
        self.pre: dict[str, Verdict] = {}
        self.self_obj: object = None
        self.pre_self: Verdict | None = None
        self.globals: dict[str, object] = {}
        self.cls_dict: Mapping[str, object] | None = None
        self.module_fp: tuple[object, ...] = ()
        self.exc: BaseException | None = None


def _shallow_fp(namespace: Mapping[str, object]) -> tuple[object, ...]:
    """Names, identities and container sizes of a namespace (module globals, class attributes)."""
    out = []
    for k, v in list(namespace.items()):
        t = type(v)
        out.append((k, id(v), len(v) if t is dict or t is list or t is set else -1))  # type: ignore[arg-type]
    return tuple(out)


class Probe:
    """Traces the targets' calls in this interpreter and counts them per test node.

    ``sys.settrace`` (and ``threading.settrace``): a Python-level trace function sees every new
    frame; frames of a target's code object get a local tracer (exceptions, return value);
    generator frames are counted at their first resume. Every failure inside the tracer is
    counted (``probe_errors``) and never reaches the traced code."""

    def __init__(self, targets: list[Target], repo_root: str, max_calls: int, out: str,
                 limits: Limits = DEFAULT_LIMITS) -> None:
        self.targets = targets
        self.by_qualname: dict[str, list[Target]] = collections.defaultdict(list)
        for t in targets:
            self.by_qualname[t.qualname].append(t)
        self.repo_root = os.path.realpath(repo_root)
        self.max_calls = max_calls
        self.out = out
        self.limits = limits
        self.node = OUTSIDE
        self.stats: dict[str, dict[str, dict[str, Any]]] = {t.id: {} for t in targets}
        self._codes: dict[types.CodeType, Target | None] = {}
        self._first_resume: dict[types.CodeType, int] = {}
        self._params: dict[types.CodeType, tuple[list[str], dict[str, object]]] = {}
        self._origins: dict[str, str] = {}
        self.tracer_reinstalled = 0
        self.errors = 0
        self.written = False

    @classmethod
    def from_config(cls, path: str) -> "Probe":
        with open(path, encoding="utf-8") as fh:
            cfg = json.load(fh)
        targets = [Target(**t) for t in cfg["targets"]]
        return cls(targets, cfg["repo_root"], int(cfg["max_calls"]), cfg["out"])

    # -- tracing -------------------------------------------------------------------------------

    def start(self) -> None:
        sys.settrace(self._trace)
        threading.settrace(self._trace)

    def stop(self) -> None:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]

    def ensure_tracing(self) -> None:
        """Reinstall the tracer if something replaced it (counted)."""
        if sys.gettrace() != self._trace:
            self.tracer_reinstalled += 1
            sys.settrace(self._trace)

    def _target_of(self, code: types.CodeType) -> Target | None:
        found = self._codes.get(code, False)
        if found is False:
            found = None
            for t in self.by_qualname.get(getattr(code, "co_qualname", code.co_name), ()):
                if t.matches(code):
                    found = t
                    break
            self._codes[code] = found
        return found  # type: ignore[return-value]

    def _trace(self, frame: types.FrameType, event: str, arg: object) -> Any:
        if event != "call":
            return None
        try:
            target = self._target_of(frame.f_code)
            if target is None:
                return None
            return self._on_call(frame, target)
        except Exception:  # noqa: BLE001 - never disturb the traced code
            self.errors += 1
            return None

    def _node_stats(self, target: Target) -> dict[str, Any]:
        per = self.stats[target.id]
        st = per.get(self.node)
        if st is None:
            st = per[self.node] = new_stats()
        return st

    def _resume_offset(self, code: types.CodeType) -> int:
        off = self._first_resume.get(code)
        if off is None:
            off = next((i.offset for i in dis.get_instructions(code) if i.opname == "RESUME"), 0)
            self._first_resume[code] = off
        return off

    def _signature(self, code: types.CodeType) -> tuple[list[str], dict[str, object]]:
        """Parameter names of ``code`` in order and the defaults its functions carry."""
        found = self._params.get(code)
        if found is None:
            n = code.co_argcount + code.co_kwonlyargcount
            n += bool(code.co_flags & _VARARGS) + bool(code.co_flags & _VARKW)
            names = list(code.co_varnames[:n])
            defaults: dict[str, object] = {}
            for fn in gc.get_referrers(code):
                if isinstance(fn, types.FunctionType) and fn.__code__ is code:
                    pos = fn.__defaults__ or ()
                    if pos:
                        defaults.update(zip(code.co_varnames[code.co_argcount - len(pos):code.co_argcount], pos))
                    defaults.update(fn.__kwdefaults__ or {})
                    break
            found = self._params[code] = (names, defaults)
        return found

    def origin(self, obj: object) -> str:
        """Where the module defining ``obj`` (a class or function) lives: ``test`` (a test module
        or conftest of the repository: a file ``test_*.py``, ``*_test.py`` or ``conftest.py``, or
        a folder ``test``/``tests``/``testing`` on its path), ``repo`` (elsewhere under the
        repository), ``env`` (a site-packages folder) or ``stdlib``."""
        name = getattr(obj, "__module__", "") or ""
        found = self._origins.get(name)
        if found is None:
            mod = sys.modules.get(name)
            path = os.path.realpath(getattr(mod, "__file__", None) or "") if mod is not None else ""
            if path.startswith(self.repo_root + os.sep):
                parts = path[len(self.repo_root) + 1:].split(os.sep)
                base = parts[-1]
                found = "test" if (base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py"
                                   or any(p in ("test", "tests", "testing") for p in parts[:-1])) else "repo"
            elif "-packages" + os.sep in path:
                found = "env"
            else:
                found = "stdlib"
            self._origins[name] = found
        return found

    def classify(self, value: object) -> Verdict:
        return classify(value, self.limits, self.origin)

    def _on_call(self, frame: types.FrameType, target: Target) -> Any:
        code = frame.f_code
        generator = bool(code.co_flags & _GEN_FLAGS)
        if generator and frame.f_lasti > self._resume_offset(code):
            return None  # a generator resumed, not called
        st = self._node_stats(target)
        back = frame.f_back
        while back is not None:
            if back.f_code is code:
                st["nested"] += 1
                return None
            back = back.f_back
        st["calls"] += 1
        if st["classified"] >= self.max_calls:
            st["unclassified"] += 1
            return None
        call = _Call(target, st)
        names, defaults = self._signature(code)
        local = frame.f_locals
        for name in names:
            if name in local:
                value = local[name]
                if name in defaults and value is defaults[name]:
                    continue
                call.values[name] = value
        if target.class_name and code.co_argcount and names and names[0] in call.values:
            first = call.values[names[0]]
            if not isinstance(first, type) and any(k.__name__ == target.class_name for k in type(first).__mro__):
                call.self_obj = call.values.pop(names[0])
                call.pre_self = self.classify(call.self_obj)
                call.cls_dict = type(call.self_obj).__dict__
        call.pre = {k: self.classify(v) for k, v in call.values.items()}
        call.globals = frame.f_globals
        call.module_fp = (_shallow_fp(frame.f_globals), _shallow_fp(call.cls_dict) if call.cls_dict is not None else ())
        if generator:
            self._finish(call, None, generator=True)
            return None

        def local_trace(fr: types.FrameType, event: str, arg: Any) -> Any:
            try:
                if event == "exception":
                    call.exc = arg[1]
                elif event == "line":
                    call.exc = None
                elif event == "return":
                    self._finish(call, arg)
            except Exception:  # noqa: BLE001
                st["probe_errors"] += 1
            return local_trace

        return local_trace

    def _finish(self, call: _Call, result: object, generator: bool = False) -> None:
        """Classify a finished call and add it to its node's counters."""
        st = call.stats
        st["classified"] += 1
        parts: dict[str, list[Verdict]] = collections.defaultdict(list)
        for verdict in call.pre.values():
            parts["args"].append(verdict)
        if call.pre_self is not None:
            st["method"] += 1
            parts["self"].append(call.pre_self)
        if generator:
            st["generator"] += 1
            parts["result"].append(Verdict(HANDLE, frozenset({"iterator:generator-function"}),
                                           frozenset({"iterator:generator-function"}), None, True))
        elif call.exc is not None and result is None:
            st["raised"] += 1
            name = type_name(type(call.exc))
            st["raised_types"][name] = st["raised_types"].get(name, 0) + 1
            parts["exception"].append(self.classify(call.exc))
        else:
            parts["result"].append(self.classify(result))
        if not generator:
            kinds = set()
            for key, value in call.values.items():
                before = call.pre[key]
                after = self.classify(value)
                if not (before.complete and after.complete):
                    st["mutation_unknown"] += 1
                elif after.fingerprint != before.fingerprint:
                    parts["mutation"].append(after)
                    t = type(value)
                    kinds.add("container" if t in (list, dict, set, bytearray) else
                              "object" if _state_of(value) is not None else "other")
            if call.pre_self is not None:
                after = self.classify(call.self_obj)
                if after.fingerprint != call.pre_self.fingerprint:
                    st["self_mutated"] += 1
                    parts["mutation"].append(after)
            if kinds:
                st["mutated"] += 1
                for k in kinds:
                    st["mutation_kinds"][k] = st["mutation_kinds"].get(k, 0) + 1
        module_changed = False
        if not generator:
            after_fp = (_shallow_fp(call.globals), _shallow_fp(call.cls_dict) if call.cls_dict is not None else ())
            module_changed = after_fp != call.module_fp
        tier = max((v.tier for vs in parts.values() for v in vs), default=CORE)
        st["tiers"][tier] += 1
        if module_changed:
            st["module_state"] += 1
        plain = tier <= PLAIN_MAX and not module_changed
        if plain:
            st["plain"] += 1
        else:
            where = {p for p, vs in parts.items() if any(v.tier > PLAIN_MAX for v in vs)}
            if module_changed:
                where.add("module_state")
            for p in where:
                st["where"][p] = st["where"].get(p, 0) + 1
        reasons = {r for vs in parts.values() for v in vs for r in v.reasons}
        leaves = {r for vs in parts.values() for v in vs for r in v.leaves}
        if module_changed:
            reasons.add("module-state")
        for r in reasons:
            st["reasons"][r] = st["reasons"].get(r, 0) + 1
        for r in leaves:
            st["leaves"][r] = st["leaves"].get(r, 0) + 1

    # -- output --------------------------------------------------------------------------------

    def write(self) -> None:
        """Write the counters as JSON to ``self.out`` (once; tracing stops first)."""
        if self.written:
            return
        self.written = True
        self.stop()
        data = {"version": PROBE_VERSION, "targets": self.stats,
                "tracer_reinstalled": self.tracer_reinstalled, "probe_errors": self.errors,
                "found": sorted({t.id for t in self._codes.values() if t is not None})}
        tmp = self.out + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, self.out)


_PROBE: Probe | None = None
if os.environ.get(CONFIG_ENV) and __name__ != "__main__":
    _PROBE = Probe.from_config(os.environ[CONFIG_ENV])
    _PROBE.start()
    atexit.register(_PROBE.write)


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    """pytest hook: calls from here to :func:`pytest_runtest_logfinish` belong to ``nodeid``
    (setup, call and teardown)."""
    if _PROBE is not None:
        _PROBE.ensure_tracing()
        _PROBE.node = nodeid


def pytest_runtest_logfinish(nodeid: str, location: object) -> None:
    """pytest hook: the test node is over."""
    if _PROBE is not None:
        _PROBE.node = OUTSIDE


def pytest_sessionfinish(session: object, exitstatus: object) -> None:
    """pytest hook: write the counters."""
    if _PROBE is not None:
        _PROBE.write()


# ---------------------------------------------------------------------------------------------
# Part 3: the runner (the project's interpreter)
# ---------------------------------------------------------------------------------------------

LOG = logging.getLogger("plain_data_calls")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED = os.path.join(REPO, "examples", "smart_coding", "smart_coding_learning_bench", "repo")


def target_of(task: Mapping[str, Any], root: str) -> Target:
    """The probe's :class:`Target` for a repo task record whose repository is at ``root``."""
    pos = task["position"]
    return Target(task["task_id"], os.path.realpath(os.path.join(root, task["file"])), task["qualname"],
                  int(pos["def_line"]), int(pos["body_start"]), task.get("class_name"))


def task_tests(task: Mapping[str, Any]) -> list[str]:
    """The node ids a task runs: FAIL_TO_PASS, PASS_TO_PASS, then its model-written tests."""
    written = [n for w in task.get("model_written_tests") or [] for n in w["tests"]]
    return [*task["tests"]["fail_to_pass"], *task["tests"]["pass_to_pass"], *written]


def probe_run(python: str, root: str, targets: list[Target], tests: list[str], *, deselect: Iterable[str] = (),
              import_roots: list[str] | None = None, timeout: float = 900.0, max_calls: int = 200,
              env_extra: Mapping[str, str] | None = None, scratch: str | None = None) -> dict[str, Any]:
    """Run ``tests`` under ``root`` with ``python`` (the repository's environment) and the probe
    tracing ``targets``; the core of this script.

    Returns ``{"outcomes": {node: outcome}, "exitstatus", "timed_out", "collected",
    "targets": {target id: {node: counters}}, "found": [target ids whose code was seen],
    "tracer_reinstalled", "error": None | text}``. Never raises for a run that fails: pytest that
    cannot start, a timeout or a probe that wrote nothing come back with ``error`` set (and the
    counters the probe managed to write, if any)."""
    import tempfile

    from core.scenarios.repo.testrun import PLUGIN_SOURCE, python_path, run_pytest

    with tempfile.TemporaryDirectory(prefix="ianvs-plain-", dir=scratch) as tmp:
        with open(os.path.join(tmp, f"{PROBE_MODULE}.py"), "w", encoding="utf-8") as fh, \
                open(os.path.abspath(__file__), encoding="utf-8") as src:
            fh.write(src.read())
        with open(os.path.join(tmp, "ianvs_repo_report.py"), "w", encoding="utf-8") as fh:
            fh.write(PLUGIN_SOURCE)  # run_pytest's own plugin: its folder is replaced by ours below
        out = os.path.join(tmp, "probe.json")
        cfg = os.path.join(tmp, "probe-config.json")
        with open(cfg, "w", encoding="utf-8") as fh:
            json.dump({"targets": [t.__dict__ for t in targets], "repo_root": root, "max_calls": max_calls,
                       "out": out}, fh)
        from pathlib import Path

        env = {"PYTHONPATH": os.pathsep.join([tmp, *python_path(Path(root), import_roots)]), CONFIG_ENV: cfg,
               **(env_extra or {})}
        extra = ["-p", PROBE_MODULE, *[f"--deselect={d}" for d in deselect]]
        try:
            res = run_pytest(Path(python), Path(root), list(tests), timeout, extra=extra, env_extra=env,
                             import_roots=import_roots, scratch=Path(tmp))
        except Exception as exc:  # noqa: BLE001 - reported per run, never a crash
            return {"outcomes": {}, "exitstatus": None, "timed_out": False, "collected": 0, "targets": {},
                    "found": [], "tracer_reinstalled": 0, "error": f"{type(exc).__name__}: {exc}"}
        probe: dict[str, Any] = {}
        error = None
        try:
            with open(out, encoding="utf-8") as fh:
                probe = json.load(fh)
        except (OSError, ValueError) as exc:
            error = f"probe wrote nothing ({type(exc).__name__}); pytest output: {res.output[-600:]}"
        if res.timed_out:
            error = f"timed out after {timeout:.0f} s"
        elif res.exitstatus is None and error is None:
            error = f"pytest did not finish: {res.output[-600:]}"
        return {"outcomes": res.outcomes, "exitstatus": res.exitstatus, "timed_out": res.timed_out,
                "collected": res.collected, "targets": probe.get("targets", {}), "found": probe.get("found", []),
                "tracer_reinstalled": probe.get("tracer_reinstalled", 0), "error": error,
                "output": res.output[-1500:] if res.exitstatus not in (0, None) else ""}


def _belongs(node: str, tests: Iterable[str]) -> bool:
    return any(node == t or node.startswith((t + "[", t + "::")) for t in tests)


def summarise_task(task: Mapping[str, Any], run: Mapping[str, Any], own_run: bool) -> dict[str, Any]:
    """One task's figures from its run: the counters (:func:`merge_stats`) summed over its test
    nodes (and, when the run is the task's own selection, over calls outside tests), whether
    every one of its tests passed under the probe (``tests_ok``), whether its function's code was
    seen at all (``found``), ``in_class`` (the task's function is defined in a class), and its
    ``verdict``: ``all_core``, ``all_plain`` (every classified call plain, some extended),
    ``needs_state`` (no handle, no module state), ``needs_handle``, ``no_calls`` (its tests made
    no outermost call of the function) or ``run_failed`` (the run failed before any call)."""
    tests = task_tests(task)
    total = new_stats()
    for node, counters in (run.get("targets", {}).get(task["task_id"]) or {}).items():
        if (node == OUTSIDE and own_run) or _belongs(node, tests):
            merge_stats(total, counters)
    mine = [o for n, o in run.get("outcomes", {}).items() if _belongs(n, tests)]
    tests_ok = bool(mine) and all(o == "passed" for o in mine) and not run.get("error")
    if run.get("error") and not total["classified"]:
        verdict = "run_failed"
    elif total["classified"] == 0:
        verdict = "no_calls"
    elif total["plain"] == total["classified"]:
        verdict = "all_core" if total["tiers"][CORE] == total["classified"] else "all_plain"
    elif total["tiers"][HANDLE] == 0 and total["module_state"] == 0:
        verdict = "needs_state"
    else:
        verdict = "needs_handle"
    return {"task_id": task["task_id"], "qualname": task["qualname"], "in_class": bool(task.get("class_name")),
            "verdict": verdict, "tests_ok": tests_ok, "found": task["task_id"] in run.get("found", []),
            "error": run.get("error"), **total}


@dataclass(frozen=True)
class TaskSet:
    """A shipped set: its ``name`` (file stem without ``-tasks``), tasks file and source."""

    name: str
    tasks_path: str
    source: str


def shipped_sets() -> list[TaskSet]:
    """Every ``data/*-tasks.jsonl`` of the repo example, with the source the example's
    testenv.yaml names for its repository."""
    import glob

    import yaml

    with open(os.path.join(SHIPPED, "testenv", "testenv.yaml"), encoding="utf-8") as fh:
        env = yaml.safe_load(fh)["testenv"]
    sources = next(m for m in env["metrics"] if m["name"] == "repo_tests")["sources"]
    out = []
    for path in sorted(glob.glob(os.path.join(SHIPPED, "data", "*-tasks.jsonl"))):
        with open(path, encoding="utf-8") as fh:
            name = json.loads(fh.readline())["repo"]["name"]
        out.append(TaskSet(os.path.basename(path).removesuffix("-tasks.jsonl"), path,
                           os.path.normpath(os.path.join(SHIPPED, "testenv", sources[name]))))
    return out


def group_runs(tasks: list[dict[str, Any]], mode: str) -> list[list[dict[str, Any]]]:
    """Tasks sharing one pytest run: same tests, deselections, written tests, environment and
    services (``selection``), or every task of the set (``repo``), in first-seen order."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for t in tasks:
        what = "all" if mode == "repo" else json.dumps(
            [t["tests"], t.get("model_written_tests"), t.get("env"), t.get("services")], sort_keys=True)
        groups.setdefault(what, []).append(t)
    return list(groups.values())


def run_key(set_name: str, group: list[dict[str, Any]], mode: str, max_calls: int) -> str:
    """The state file's key of one run: what decides its result."""
    what = [PROBE_VERSION, set_name, mode, max_calls, sorted(t["task_id"] for t in group),
            [[t["tests"], t["position"], t["repo"]["content_hash"]] for t in group]]
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:24]


def _union_tests(group: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    tests: dict[str, None] = {}
    deselect: dict[str, None] = {}
    for t in group:
        tests.update(dict.fromkeys(task_tests(t)))
        deselect.update(dict.fromkeys(t["tests"].get("deselect", [])))
    return list(tests), list(deselect)


def load_state(path: str) -> dict[str, dict[str, Any]]:
    """Finished runs of the state file (a cut last line is ignored: that run is redone)."""
    done: dict[str, dict[str, Any]] = {}
    if not os.path.isfile(path):
        return done
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
                done[rec["key"]] = rec
            except (ValueError, KeyError, TypeError):
                continue
    return done


def measure_set(ts: TaskSet, mode: str, max_calls: int, timeout: float, limit: int | None,
                done: dict[str, dict[str, Any]], state_fh: Any, scratch: str) -> dict[str, Any]:
    """Run (or take from ``done``) every run of one set; return ``{"set", "skipped", "tasks":
    [summaries], "runs", "seconds"}``. A set whose source, environment or service cannot be had
    is ``skipped`` with the reason."""
    import shutil
    import time
    from contextlib import ExitStack
    from pathlib import Path

    from core.common.errors import IanvsError
    from core.scenarios.repo.env import ensure_env
    from core.scenarios.repo.kind import load_tasks
    from core.scenarios.repo.postgres import PostgresService, PostgresUnavailable
    from core.scenarios.repo.scoring import source_root

    tasks = load_tasks(Path(ts.tasks_path), limit)
    groups = group_runs(tasks, mode)
    keys = [run_key(ts.name, g, mode, max_calls) for g in groups]
    started = time.monotonic()
    runs: dict[str, dict[str, Any]] = {k: done[k] for k in keys if k in done}
    if len(runs) < len(keys):
        first = tasks[0]
        try:
            root = str(source_root(Path(ts.source), first["repo"]["content_hash"]))
            env = ensure_env(list(first["env"].get("requirements") or []), project=first["env"].get("project"))
        except (IanvsError, OSError) as exc:
            return {"set": ts.name, "skipped": f"{type(exc).__name__}: {exc}", "tasks": [], "runs": 0, "seconds": 0.0}
        work = os.path.join(scratch, ts.name)
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(root, os.path.join(work, os.path.basename(root)), symlinks=True)
        work_root = os.path.join(work, os.path.basename(root))
        with ExitStack() as stack:
            service = None
            if any("postgres" in (t.get("services") or []) for t in tasks):
                try:
                    service = stack.enter_context(PostgresService())
                except PostgresUnavailable as exc:
                    return {"set": ts.name, "skipped": exc.render(), "tasks": [], "runs": 0, "seconds": 0.0}
            for n, (key, group) in enumerate(zip(keys, groups)):
                if key in runs:
                    continue
                tests, deselect = _union_tests(group)
                extra: dict[str, str] = {}
                db = None
                if service is not None:
                    db = service.create_database(f"plain-{n}")
                    extra = dict(db.env)
                t0 = time.monotonic()
                try:
                    run = probe_run(str(env.python), work_root, [target_of(t, work_root) for t in group], tests,
                                    deselect=deselect, import_roots=group[0]["env"].get("import_roots"),
                                    timeout=timeout, max_calls=max_calls, env_extra=extra, scratch=scratch)
                finally:
                    if db is not None and service is not None:
                        service.drop_database(db)
                run.update(key=key, set=ts.name, task_ids=[t["task_id"] for t in group],
                           seconds=round(time.monotonic() - t0, 2))
                runs[key] = run
                state_fh.write(json.dumps(run) + "\n")
                state_fh.flush()
                LOG.info("%s: run %d/%d (%d tasks, %d tests) in %.1f s%s", ts.name, n + 1, len(groups),
                         len(group), len(tests), run["seconds"], f": {run['error']}" if run["error"] else "")
    summaries = [summarise_task(t, runs[k], mode == "selection") for k, g in zip(keys, groups) for t in g]
    return {"set": ts.name, "skipped": None, "tasks": summaries, "runs": len(keys),
            "seconds": round(sum(float(r.get("seconds", 0.0)) for r in runs.values()), 1),
            "wall_seconds_now": round(time.monotonic() - started, 1)}


def _share(n: int, d: int) -> float | None:
    return round(n / d, 4) if d else None


#: leaf kinds by the stage of the note's plan that carries them (docs/proposals/out-of-process-repo-grading.md)
PLAIN_KINDS = ("ext:", "ref:")
PROXY_KINDS = ("callback:", "iterator:")
STATE_KINDS = ("state[", "state:", "cycle", "exception:")
#: the state tier with an allow-list of the repository's own classes only
REPO_STATE_KINDS = ("state[repo]", "state:", "cycle", "exception:")


def covered_by(summary: Mapping[str, Any], kinds: tuple[str, ...]) -> bool:
    """Whether every call of a task (with classified calls) carries only values whose non-core
    types (its ``leaves``, over all calls) start with one of ``kinds``, and changed no module
    state: the task would run out of process once those kinds can cross."""
    return bool(summary["classified"]) and not summary["module_state"] \
        and all(leaf.startswith(kinds) for leaf in summary["leaves"])


def aggregate(summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """Per set (or overall) figures from task summaries (:func:`summarise_task`): task counts by
    verdict; shares of tasks (over tasks with classified calls; ``..._of_all_tasks`` over every
    task) whose calls are all ``core``, all plain, or need at most ``state``; whose calls would all
    cross once callbacks and iterators cross as handles (``..._with_proxies``) and, besides,
    objects of the repository's own classes by state (``..._with_proxies_and_repo_state``) or of
    any importable class (``..._with_proxies_and_state``; :func:`covered_by`); the same for
    tasks whose calls are method calls on an instance (``methods``) and the others
    (``functions``); call totals; tasks with mutations, module state, raises, generators; the
    parts that made calls non-plain; and the top reasons by tasks affected and by calls."""
    n = len(summaries)
    measured = [s for s in summaries if s["classified"]]
    m = len(measured)
    verdicts = collections.Counter(s["verdict"] for s in summaries)
    core = verdicts["all_core"]
    plain = core + verdicts["all_plain"]
    state = plain + verdicts["needs_state"]

    def plain_share(group: list[dict[str, Any]]) -> float | None:
        return _share(sum(s["verdict"] in ("all_core", "all_plain") for s in group), len(group))

    reasons_calls: collections.Counter[str] = collections.Counter()
    reasons_tasks: collections.Counter[str] = collections.Counter()
    where: collections.Counter[str] = collections.Counter()
    for s in summaries:
        reasons_calls.update(s["reasons"])
        reasons_tasks.update(set(s["reasons"]))
        where.update(s["where"])
    classified = sum(s["classified"] for s in summaries)
    plain_calls = sum(s["plain"] for s in summaries)
    return {
        "tasks": n, "with_calls": m, "verdicts": dict(verdicts),
        "tests_not_ok": sum(not s["tests_ok"] for s in summaries),
        "share_all_core": _share(core, m), "share_all_plain": _share(plain, m),
        "share_at_most_state": _share(state, m), "share_all_plain_of_all_tasks": _share(plain, n),
        "share_plain_with_proxies": _share(sum(covered_by(s, PLAIN_KINDS + PROXY_KINDS) for s in measured), m),
        "share_plain_with_proxies_and_repo_state": _share(
            sum(covered_by(s, PLAIN_KINDS + PROXY_KINDS + REPO_STATE_KINDS) for s in measured), m),
        "share_plain_with_proxies_and_state": _share(
            sum(covered_by(s, PLAIN_KINDS + PROXY_KINDS + STATE_KINDS) for s in measured), m),
        "method_tasks": sum(bool(s["method"]) for s in measured),
        "share_all_plain_methods": plain_share([s for s in measured if s["method"]]),
        "share_all_plain_functions": plain_share([s for s in measured if not s["method"]]),
        "calls": sum(s["calls"] for s in summaries), "nested_calls": sum(s["nested"] for s in summaries),
        "classified_calls": classified, "unclassified_calls": sum(s["unclassified"] for s in summaries),
        "plain_calls": plain_calls, "share_plain_calls": _share(plain_calls, classified),
        "calls_by_tier": dict(zip(TIERS, [sum(s["tiers"][i] for s in summaries) for i in range(4)])),
        "method_calls": sum(s["method"] for s in summaries),
        "mutating_tasks": sum(bool(s["mutated"]) for s in summaries),
        "mutation_kinds": dict(sum((collections.Counter(s["mutation_kinds"]) for s in summaries),
                                   collections.Counter())),
        "self_mutating_tasks": sum(bool(s["self_mutated"]) for s in summaries),
        "module_state_tasks": sum(bool(s["module_state"]) for s in summaries),
        "raising_tasks": sum(bool(s["raised"]) for s in summaries),
        "generator_tasks": sum(bool(s["generator"]) for s in summaries),
        "mutation_unknown_calls": sum(s["mutation_unknown"] for s in summaries),
        "probe_errors": sum(s["probe_errors"] for s in summaries),
        "non_plain_calls_by_part": dict(where.most_common()),
        "top_reasons_by_tasks": reasons_tasks.most_common(20),
        "top_reasons_by_calls": reasons_calls.most_common(20),
        "reasons_by_calls": dict(reasons_calls.most_common()),
        "top_leaves_by_tasks": collections.Counter(l for s in summaries for l in s["leaves"]).most_common(20),
    }


def _table(rows: list[tuple[str, dict[str, Any]]]) -> str:
    """The stdout table: one row per set and one overall."""
    head = ["set", "tasks", "w/calls", "no calls", "run err", "tests !ok", "calls", "plain calls",
            "all core", "all plain", "<=state", "+proxies", "+repo state", "+any state",
            "fn plain", "method plain"]

    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.1f}%"

    lines = [head]
    for name, a in rows:
        v = a["verdicts"]
        lines.append([name, str(a["tasks"]), str(a["with_calls"]), str(v.get("no_calls", 0)),
                      str(v.get("run_failed", 0)), str(a["tests_not_ok"]), str(a["classified_calls"]),
                      pct(a["share_plain_calls"]), pct(a["share_all_core"]), pct(a["share_all_plain"]),
                      pct(a["share_at_most_state"]), pct(a["share_plain_with_proxies"]),
                      pct(a["share_plain_with_proxies_and_repo_state"]),
                      pct(a["share_plain_with_proxies_and_state"]), pct(a["share_all_plain_functions"]),
                      pct(a["share_all_plain_methods"])])
    widths = [max(len(r[i]) for r in lines) for i in range(len(head))]
    return "\n".join("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
                     for r in lines)


# -- round trip ---------------------------------------------------------------------------------

_RT_SOURCE = r'''
import importlib.util, json, os, statistics, sys, time
cfg = json.loads(sys.argv[1])
for name in cfg["preload"]:
    __import__(name)
spec = importlib.util.spec_from_file_location("_rt_codec", cfg["codec"])
codec = importlib.util.module_from_spec(spec); spec.loader.exec_module(codec)
N = cfg["n"]
def target(a, b):
    return [a + b, {"k": a}]
def median_us(xs):
    return round(statistics.median(xs) * 1e6, 1)
def low_us(xs):
    return round(sorted(xs)[len(xs) // 10] * 1e6, 1)
out = {}
# 1. a 1-byte ping-pong between two processes over two pipes
r1, w1 = os.pipe(); r2, w2 = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w1); os.close(r2)
    while True:
        b = os.read(r1, 1)
        if not b: os._exit(0)
        os.write(w2, b)
os.close(r1); os.close(w2)
times = []
for i in range(N + N // 10):
    t = time.perf_counter(); os.write(w1, b"x"); os.read(r2, 1); d = time.perf_counter() - t
    if i >= N // 10: times.append(d)
os.close(w1); os.waitpid(pid, 0); os.close(r2)
out["pipe_ping_us"] = median_us(times); out["pipe_ping_p10_us"] = low_us(times)
# 2. a call through the codec to a persistent candidate process: ("call", args, kwargs) ->
#    ("ok", value, changed_args), framed as the boundary tier frames them
r1, w1 = os.pipe(); r2, w2 = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(w1); os.close(r2)
    while True:
        frame = codec.read_frame(r1, 1 << 24)
        if frame is None: os._exit(0)
        _k, args, kwargs = codec.decode(frame)
        codec.write_frame(w2, codec.encode(("ok", target(*args, **kwargs), [])))
os.close(r1); os.close(w2)
times = []
for i in range(N + N // 10):
    t = time.perf_counter()
    codec.write_frame(w1, codec.encode(("call", [i, 2], {})))
    reply = codec.decode(codec.read_frame(r2, 1 << 24))
    d = time.perf_counter() - t
    if i >= N // 10: times.append(d)
    assert reply[1][0] == i + 2
os.close(w1); os.waitpid(pid, 0); os.close(r2)
out["codec_call_us"] = median_us(times); out["codec_call_p10_us"] = low_us(times)
# 3. a fresh process per call: fork, decode the call, answer through a pipe, exit; reaped
times = []
M = max(50, N // 20)
for i in range(M + M // 10):
    t = time.perf_counter()
    r, w = os.pipe()
    payload = codec.encode(("call", [i, 2], {}))
    pid = os.fork()
    if pid == 0:
        os.close(r)
        _k, args, kwargs = codec.decode(payload)
        codec.write_frame(w, codec.encode(("ok", target(*args, **kwargs), [])))
        os._exit(0)
    os.close(w)
    reply = codec.decode(codec.read_frame(r, 1 << 24)); os.close(r); os.waitpid(pid, 0)
    d = time.perf_counter() - t
    if i >= M // 10: times.append(d)
out["fork_per_call_us"] = median_us(times); out["fork_per_call_p10_us"] = low_us(times)
out["fork_calls"] = M
with open("/proc/self/status") as fh:
    out["rss_kb"] = int(next(l for l in fh if l.startswith("VmRSS")).split()[1])
print(json.dumps(out))
'''


def round_trip(n: int, python: str | None = None, preload: Iterable[str] = ()) -> dict[str, Any]:
    """Median microseconds of ``n`` calls crossing processes (module docstring; ``*_p10_us``: the
    10th percentile, closer to what the machine gives without other work), measured by a child
    interpreter (``python``, default this one) after importing ``preload``."""
    import subprocess

    codec = os.path.join(REPO, "core", "testenvmanager", "sandbox", "codec.py")
    cfg = json.dumps({"n": n, "codec": codec, "preload": list(preload)})
    out = subprocess.run([python or sys.executable, "-c", _RT_SOURCE, cfg], check=True, capture_output=True,
                         text=True, timeout=1800)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result.update(python=python or sys.executable, preload=list(preload), calls=n)
    return result


def main(argv: list[str] | None = None) -> int:
    import argparse
    import tempfile

    sys.path.insert(0, REPO)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _provenance import Provenance

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="*", help="set names (file stems: eli5, toolz, dataset-sqlite, ...)")
    parser.add_argument("--group", choices=("selection", "repo"), default="selection")
    parser.add_argument("--max-calls", type=int, default=200, help="calls classified per target and test node")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per pytest run")
    parser.add_argument("--limit", type=int, default=None, help="first N tasks of each set")
    parser.add_argument("--out", default=None, help="JSON report")
    parser.add_argument("--state", default=None, help="resume file (default <out>.runs.jsonl)")
    parser.add_argument("--fresh", action="store_true", help="forget the state file's finished runs")
    parser.add_argument("--round-trip", type=int, default=0, metavar="N",
                        help="measure N calls crossing processes instead (no tasks run)")
    parser.add_argument("--rt-python", default=None, help="interpreter of the round-trip measurement")
    parser.add_argument("--rt-preload", default="", help="comma-separated modules it imports first")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    provenance = Provenance()
    if args.round_trip:
        rt = round_trip(args.round_trip, args.rt_python, [m for m in args.rt_preload.split(",") if m])
        print(provenance.line())
        print(json.dumps(rt))
        if args.out:
            with open(args.out, "w", encoding="utf-8") as fh:
                json.dump({"provenance": provenance.line(), "round_trip": rt}, fh, indent=1)
        return 0
    shipped = shipped_sets()
    unknown = sorted(set(args.sets or ()) - {s.name for s in shipped})
    if unknown:
        parser.error(f"unknown set(s) {', '.join(unknown)}; shipped: {', '.join(s.name for s in shipped)}")
    sets = [s for s in shipped if not args.sets or s.name in args.sets]
    state = args.state or ((args.out + ".runs.jsonl") if args.out else os.path.join(tempfile.gettempdir(),
                                                                                   "plain_data_calls.runs.jsonl"))
    if args.fresh and os.path.exists(state):
        os.remove(state)
    done = load_state(state)
    results = []
    with tempfile.TemporaryDirectory(prefix="ianvs-plain-work-") as scratch, \
            open(state, "a", encoding="utf-8") as state_fh:
        for ts in sets:
            LOG.info("set %s", ts.name)
            results.append(measure_set(ts, args.group, args.max_calls, args.timeout, args.limit, done, state_fh,
                                       scratch))
    rows = [(r["set"], aggregate(r["tasks"])) for r in results if not r["skipped"]]
    everything = [s for r in results for s in r["tasks"]]
    overall = aggregate(everything)
    print(provenance.line())
    for r in results:
        if r["skipped"]:
            print(f"skipped {r['set']}: {r['skipped']}")
    print(_table([*rows, ("overall", overall)]))
    print("top reasons (tasks affected / calls):")
    calls_by = overall["reasons_by_calls"]
    for reason, n in overall["top_reasons_by_tasks"]:
        print(f"  {n:4d} tasks  {calls_by.get(reason, '?'):>6} calls  {reason}")
    print("non-plain calls by part: " + ", ".join(f"{k} {v}" for k, v in overall["non_plain_calls_by_part"].items()))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump({"provenance": provenance.line(), "options": vars(args), "tiers": TIERS,
                       "sets": {r["set"]: {**r, "summary": aggregate(r["tasks"]) if not r["skipped"] else None}
                                for r in results},
                       "overall": overall}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
