"""Runtime half of the candidate-code policy (stdlib only; runs inside the sandboxed sample).

:mod:`.policy` compiles a candidate's code (an injected body, or the changed parts of a
whole-file answer) so that every attribute read goes through ``_getattr_``, every attribute
write through ``_write_``, the builtins ``getattr``/``setattr``/``delattr`` through
``_ianvs_getattr_``/``_ianvs_setattr_``/``_ianvs_delattr_``, every imported binding through
``_ianvs_checked_``, and every class the candidate defines is registered by ``_ianvs_own_``.
This module defines those guards; :func:`install` puts them into :mod:`builtins` (names that
start and end with ``_``, which the policy never lets candidate code name) before the runner
imports pytest. The repository's own code never calls them.

What the guards refuse (each with :class:`PolicyViolation`, a ``PermissionError``):

* attribute names: the dunders of :data:`DENIED_DUNDERS`, the frame/code/generator attributes of
  :data:`INSPECT_NAMES`, and :data:`DENIED_ATTRS` (``sys``, ``_exit``, ``settrace``...);
* values that lead to the grading machinery, whatever attribute or import produced them:
  a module of :data:`DENIED_MODULES` (``sys``, ``gc``, ``builtins``, ``inspect``, import
  machinery, ``pytest``/``_pytest``/``pluggy``, ``pickle``...), a function, method, class or
  instance that belongs to one, frames, tracebacks, code objects and ``types.CodeType``;
* writes (attribute, ``setattr``, or ``object.__setattr__``/``type.__setattr__`` and their bound
  forms, which are replaced by the guarded ``setattr``) to a module, to a class the candidate
  did not define, or to an object of a denied module.

``operator.attrgetter``/``methodcaller`` reached by the candidate are replaced by versions that
check their names. Everything else behaves as plain Python: item access, iteration, unpacking
and calls are not wrapped.

Contract: the names in :data:`GUARD_NAMES` are exactly what :mod:`.policy`'s output refers to.
"""

from __future__ import annotations

import builtins
import operator
import types
import weakref
from typing import Any

__all__ = ["install", "PolicyViolation", "VIOLATIONS", "DENIED_MODULES", "DENIED_ATTRS", "WRITE_DUNDERS",
           "INSPECT_NAMES", "GUARD_NAMES", "RESTRICTED_MEMBERS", "DENIED_DUNDERS", "DANGEROUS_BUILTINS", "STEERING",
           "RELAXATIONS", "test_module", "denied_module"]

#: modules (and their submodules) whose objects candidate code may not hold
DENIED_MODULES: frozenset[str] = frozenset({
    "sys", "builtins", "gc", "inspect", "importlib", "imp", "pkgutil", "zipimport", "runpy",
    "ctypes", "_ctypes", "cffi", "pytest", "_pytest", "pluggy", "py", "unittest.mock", "mock",
    "pickle", "_pickle", "copyreg", "marshal", "shelve", "dill", "cloudpickle",
    "code", "codeop", "pdb", "bdb", "trace", "pydoc", "site", "atexit", "faulthandler",
    "signal", "_signal", "logging.config", "_imp", "_frozen_importlib",
    "_frozen_importlib_external", "__main__",
})

#: modules of :data:`DENIED_MODULES` the candidate may hold, reading only these members
#: (``inspect.signature`` is everyday code; ``inspect.getmembers`` would read every dunder)
RESTRICTED_MEMBERS: dict[str, frozenset[str]] = {
    "inspect": frozenset({
        "signature", "Signature", "Parameter", "BoundArguments", "getfullargspec", "FullArgSpec",
        "isclass", "isfunction", "ismethod", "isbuiltin", "isroutine", "ismodule", "isgenerator",
        "isgeneratorfunction", "iscoroutinefunction", "iscoroutine", "isawaitable",
        "isasyncgenfunction", "isabstract", "ismethoddescriptor", "isdatadescriptor", "getdoc",
        "cleandoc", "unwrap", "getmro"}),
    "importlib": frozenset({"import_module"}),
    "importlib.machinery": frozenset({"ModuleSpec"}),
}

#: named relaxations a task gets when its own reference needs them (:mod:`.policy`):
#: ``module_namespace`` -- read a (not denied) module's ``__dict__`` and write to such a module
RELAXATIONS: tuple[str, ...] = ("module_namespace",)

#: attribute names never read or written, whatever the object (besides dunders)
DENIED_ATTRS: frozenset[str] = frozenset({
    "_exit", "_getframe", "_current_frames", "_current_exceptions", "settrace", "setprofile",
    "settrace_all_threads", "setprofile_all_threads", "currentframe", "_evaluate", "meta_path",
    "path_hooks", "__builtins__",
})

#: frame, traceback, code, generator and coroutine attributes that reach frames or code
INSPECT_NAMES: frozenset[str] = frozenset({
    "tb_frame", "tb_next", "f_back", "f_builtins", "f_code", "f_generator", "f_globals",
    "f_locals", "f_trace", "co_code", "gi_frame", "gi_code", "gi_yieldfrom", "cr_await",
    "cr_frame", "cr_code", "cr_origin", "ag_await", "ag_frame", "ag_code",
})

#: the dunder attributes candidate code may write (metadata; the object is still checked)
WRITE_DUNDERS: frozenset[str] = frozenset({
    "__doc__", "__name__", "__qualname__", "__module__", "__wrapped__", "__signature__",
    "__annotations__", "__package__", "__file__",
})

#: the dunder attributes candidate code may not read: they reach a function's globals, builtins,
#: code or closure, every class, attribute lookup that bypasses the guards, pickling's
#: callables and the import system (any other dunder reads as usual: library protocols such as
#: ``__sklearn_tags__`` or ``__array__`` differ by package; ``__dict__``, ``__self__`` and
#: ``__traceback__`` are checked at run time)
DENIED_DUNDERS: frozenset[str] = frozenset({
    "__globals__", "__builtins__", "__code__", "__closure__", "__subclasses__", "__getattribute__",
    "__reduce__", "__reduce_ex__", "__loader__", "__import__",
})

#: every name the policy's output refers to (installed into builtins by :func:`install`)
GUARD_NAMES: tuple[str, ...] = ("_getattr_", "_write_", "_ianvs_getattr_", "_ianvs_setattr_",
                                "_ianvs_delattr_", "_ianvs_checked_", "_ianvs_own_", "_ianvs_type_")

#: the special methods through which a value answers a test's comparison or truth test: a class a
#: *body* defines may not define them (``class Same: __eq__ = lambda s, o: True`` / ``return
#: Same()`` would pass any ``assert f(x) == y``): the policy refuses them in a body's class
#: statements, :func:`_type` in ``type(name, bases, namespace)``; none of the 458 shipped
#: references defines a class in its body at all
STEERING: frozenset[str] = frozenset({"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
                                      "__hash__", "__bool__", "__len__", "__contains__",
                                      "__instancecheck__", "__subclasscheck__"})

_FORBIDDEN_TYPES = (types.FrameType, types.TracebackType, types.CodeType)
#: functions and methods of every kind (their module is where the function lives)
_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.MethodWrapperType,
              types.WrapperDescriptorType, types.MethodDescriptorType, types.ClassMethodDescriptorType)
#: what is judged by itself, not by its type: classes and functions
_CALLABLES = (type, *_FUNCTIONS)
#: the one constructor refused as a value: code objects from bytes are arbitrary bytecode
#: (``FunctionType`` or ``ModuleType`` are harmless without one: ``__code__`` and ``compile`` are refused)
_FORBIDDEN_VALUES = (types.CodeType,)
_MISSING = object()
_OWN: "weakref.WeakSet[type]" = weakref.WeakSet()


class PolicyViolation(PermissionError):
    """Candidate code reached something the policy refuses (graded ``sandbox_violation``)."""


def denied_module(name: object, owner: bool = False) -> bool:
    """Whether the module called ``name`` is, or lies under, one of :data:`DENIED_MODULES`.
    ``owner``: ``name`` is where an object's type or function lives, not a module the
    candidate holds; ``builtins`` then is fine (every ``list`` and ``len`` lives there)."""
    if type(name) is not str or (owner and name == "builtins") or name in RESTRICTED_MEMBERS:
        return False
    if name in DENIED_MODULES:
        return True
    parts = name.split(".")
    return any(".".join(parts[:n]) in DENIED_MODULES for n in range(1, len(parts)))


def test_module(name: object) -> bool:
    """Whether the module called ``name`` is a test module or package (``tests``, ``test``,
    ``conftest``, ``test_*``, ``*_test``): the repository's own tests hold helpers such as an
    always-equal class, which candidate code may not import (:mod:`.policy`). Not refused at
    run time: toolz's ``curry.__reduce__`` resolves curried functions of test modules through
    ``import_module`` to pickle them."""
    if type(name) is not str:
        return False
    return any(p in ("tests", "test", "conftest") or p.startswith("test_") or p.endswith("_test")
               for p in name.split("."))


def _refused_name(name: object) -> str | None:
    if type(name) is not str:
        return "an attribute name that is not a string"
    if name in DENIED_DUNDERS or name in INSPECT_NAMES or name in DENIED_ATTRS:
        return f"the attribute {name!r}"
    return None


def _owner_module(value: object) -> object:
    """The module a function, method, class or other object belongs to (by its type for
    plain instances; never calls the object's own ``__getattr__``)."""
    if isinstance(value, type):
        return type.__dict__["__module__"].__get__(value)
    if isinstance(value, _FUNCTIONS):
        func = value.__func__ if isinstance(value, types.MethodType) else value
        self_ = getattr(func, "__self__", None)
        if isinstance(self_, types.ModuleType):
            return self_.__name__
        if self_ is not None and not isinstance(func, types.FunctionType):
            return _owner_module(type(self_))
        return getattr(func, "__module__", None)
    return type.__dict__["__module__"].__get__(type(value))


#: types judged by their type alone and found fine (every instance of one is)
_PLAIN_TYPES: dict[type, bool] = {}
#: modules of :data:`DENIED_MODULES` whose *instances* may be held (tests hand mocks and
#: sentinels to the code under test), never their functions, classes or ``patch`` objects
INSTANCES_ONLY: frozenset[str] = frozenset({"unittest.mock", "mock"})
#: instances of denied modules' classes that may be held: ``(module, class)`` (pytest's
#: ``tmpdir`` paths; a module's ``__spec__``, for its ``origin`` -- its ``loader`` is refused)
SAFE_INSTANCES: frozenset[tuple[str, str]] = frozenset({("_pytest._py.path", "LocalPath"),
                                                        ("py._path.local", "LocalPath"),
                                                        ("_frozen_importlib", "ModuleSpec")})
#: builtins that run code or expose namespaces: the policy refuses their names, the guards
#: the objects however they are reached (``import_module("builtins")``); ``getattr``,
#: ``setattr`` and ``delattr`` become the guards instead
DANGEROUS_BUILTINS: tuple[str, ...] = ("eval", "exec", "compile", "__import__", "globals", "locals", "vars",
                                       "breakpoint", "input")
_DANGEROUS_BUILTINS = tuple(getattr(builtins, n) for n in DANGEROUS_BUILTINS)


def _instance_allowed(value: object, owner: str) -> bool:
    if isinstance(value, _CALLABLES):
        return False
    name = type.__dict__["__qualname__"].__get__(type(value))
    if any(owner == m or owner.startswith(m + ".") for m in INSTANCES_ONLY):
        return not name.startswith("_patch")
    return (owner, name) in SAFE_INSTANCES


def _refused_value(value: object) -> str | None:
    kind = type(value)
    if _PLAIN_TYPES.get(kind):  # an instance of a type already seen to be fine
        return None
    if isinstance(value, types.ModuleType):
        return f"the module {value.__name__!r}" if denied_module(value.__name__) else None
    if isinstance(value, _FORBIDDEN_TYPES):
        return f"a {type(value).__name__} object"
    if any(value is t for t in _FORBIDDEN_VALUES):
        return f"the type {value.__name__!r}"  # type: ignore[attr-defined]
    if any(value is b for b in _DANGEROUS_BUILTINS):
        return f"the builtin {value.__name__!r}"  # type: ignore[attr-defined]
    try:
        owner = _owner_module(value)
    except Exception:  # noqa: BLE001 - a hostile object: refuse rather than guess
        return "an object whose module cannot be read"
    if denied_module(owner, owner=True) and not _instance_allowed(value, str(owner)):
        return f"an object of the module {owner!r}"
    if not isinstance(value, _CALLABLES):
        _PLAIN_TYPES[kind] = True  # judged by its type alone: the same for every instance
    return None


#: every refusal of this process, in order (the runner reads it when pytest returns: a refusal
#: the candidate's code caught is still a violation)
VIOLATIONS: list[str] = []


def _refuse(what: str) -> None:
    message = f"ianvs policy: candidate code may not reach {what}"
    VIOLATIONS.append(message)
    raise PolicyViolation(message)


_RELAXED: set[str] = set()


def _checked(value: Any, module: str | None = None, name: str | None = None) -> Any:
    """``value`` when the candidate may hold it (the safe stand-in for a few callables);
    ``module``/``name``: where an import took it from (a member of
    :data:`RESTRICTED_MEMBERS` is held as it is)."""
    if module is not None and name in RESTRICTED_MEMBERS.get(module, ()):
        return value
    if value is operator.attrgetter:
        return _attrgetter
    if value is builtins.getattr:
        return _getattr
    if value is object.__setattr__ or value is type.__setattr__ or value is builtins.setattr:
        return _setattr
    if value is object.__delattr__ or value is type.__delattr__ or value is builtins.delattr:
        return _delattr
    if isinstance(value, types.MethodWrapperType) and value.__name__ in ("__setattr__", "__delattr__"):
        _write(value.__self__)  # bound to a module or a foreign class: refused there
    if value is operator.methodcaller:
        return _methodcaller
    why = _refused_value(value)
    if why is not None:
        _refuse(why)
    return value


def _getattr(obj: Any, name: str, default: Any = _MISSING) -> Any:
    why = _refused_name(name)
    if why is not None:
        _refuse(why)
    if isinstance(obj, types.ModuleType):
        members = RESTRICTED_MEMBERS.get(obj.__name__)
        if members is not None:
            if name not in members and name not in WRITE_DUNDERS:
                _refuse(f"{obj.__name__}.{name}")
            return getattr(obj, name) if default is _MISSING else getattr(obj, name, default)
        if denied_module(obj.__name__) and name not in WRITE_DUNDERS and obj is not builtins:
            _refuse(f"the module {obj.__name__!r}")  # its name, file, doc (text) and builtins' members pass
        if name == "__dict__" and ("module_namespace" not in _RELAXED or denied_module(obj.__name__)):
            _refuse(f"the namespace of the module {obj.__name__!r}")
    elif name == "__dict__":
        why = _refused_value(obj)
        if why is not None:
            _refuse("the namespace of " + why)
    if default is _MISSING:
        return _checked(getattr(obj, name))
    return _checked(getattr(obj, name, default))


def _write(obj: Any) -> Any:
    if isinstance(obj, types.ModuleType) and ("module_namespace" not in _RELAXED or denied_module(obj.__name__)
                                               or obj.__name__ in RESTRICTED_MEMBERS):
        _refuse(f"a write to the module {obj.__name__!r}")
    if isinstance(obj, type) and obj not in _OWN:
        _refuse(f"a write to the class {type.__dict__['__qualname__'].__get__(obj)!r}, "
                "which the candidate did not define")
    why = _refused_value(obj)
    if why is not None:
        _refuse("a write to " + why)
    return obj


def _writable(name: object) -> str | None:
    why = _refused_name(name)
    if why is None and str(name)[:2] == "__" and str(name)[-2:] == "__" and name not in WRITE_DUNDERS:
        why = f"a write to the attribute {name!r}"
    return why


def _setattr(obj: Any, name: str, value: Any) -> None:
    why = _writable(name)
    if why is not None:
        _refuse(why)
    setattr(_write(obj), name, value)


def _delattr(obj: Any, name: str) -> None:
    why = _writable(name)
    if why is not None:
        _refuse(why)
    delattr(_write(obj), name)


def _own(cls: Any) -> Any:
    if isinstance(cls, type):
        _OWN.add(cls)
    return cls


def _attrgetter(*names: str) -> Any:
    for name in names:
        for part in str(name).split("."):
            why = _refused_name(part)
            if why is not None:
                _refuse(why)
    getter = operator.attrgetter(*names)
    return lambda obj: _checked(getter(obj)) if len(names) == 1 else tuple(
        _checked(v) for v in getter(obj))


def _methodcaller(name: str, /, *args: Any, **kwargs: Any) -> Any:
    why = _refused_name(name)
    if why is not None:
        _refuse(why)
    return operator.methodcaller(name, *args, **kwargs)


def _type(*args: Any, **kwargs: Any) -> Any:
    """``type`` for a body: the one-argument form as usual; the class-building form refused when
    its namespace defines one of :data:`STEERING`."""
    if len(args) == 3 and isinstance(args[2], dict):
        steering = sorted(STEERING.intersection(args[2]))
        if steering:
            _refuse(f"a class built with type() that defines {', '.join(steering)}")
    return type(*args, **kwargs)


def install(relax: "tuple[str, ...] | list[str]" = ()) -> None:
    """Put the guards into :mod:`builtins` under :data:`GUARD_NAMES` (idempotent), with the
    task's ``relax`` ations (names of :data:`RELAXATIONS`; others are ignored)."""
    _RELAXED.clear()
    _RELAXED.update(r for r in relax if r in RELAXATIONS)
    for name, fn in zip(GUARD_NAMES, (_getattr, _write, _getattr, _setattr, _delattr, _checked, _own, _type)):
        setattr(builtins, name, fn)
