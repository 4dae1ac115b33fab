"""The one plugin registry: a Sedna-compatible ``ClassFactory``.

Plugins written for upstream Ianvs register with::

    from sedna.common.class_factory import ClassFactory, ClassType

    @ClassFactory.register(ClassType.GENERAL, alias="gen")
    class BaseModel: ...

When KubeEdge Sedna is not installed, ``sedna.common.class_factory`` *is* this module (see
:mod:`core.compat.sedna_shim`), so such registrations land here directly.

Contract, and where it differs from Sedna:

* ``register``/``register_cls``/``register_from_package``/``is_exists``/``get_cls`` keep
  Sedna's names and signatures. ``get_cls`` raises :class:`RegistryError` (a ``ValueError``
  subclass, as Sedna raises ``ValueError``) with near-match suggestions.
* Every registration remembers the module that made it. Two plugin files may register the
  same alias (two ``basemodel.py`` files both using ``gen`` is common upstream); the loader
  resolves a module's alias *within the file named by its url* (:meth:`capture`). A url-less
  lookup of an alias registered by several files is an error naming those files.
* Registering a *different* object under an alias the *same* module already used is an
  error (a copy-paste slip); re-registering the same object (a re-import) is harmless.
"""
from __future__ import annotations

import contextlib
import importlib
import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

from core.common.errors import RegistryError, suggest

logger = logging.getLogger(__name__)

T = TypeVar("T")


class ClassType:
    """Registry group names (values as in Sedna, typo included)."""

    GENERAL = "general"
    HEM = "hard_example_mining"
    FL_AGG = "aggregation"
    MTL = "multi_task_learening"
    UTD = "unseen_task_detect"
    OF = "optical_flow"
    ALGORITHM = "algorithm"
    DATASET = "data_process"
    CALLBACK = "post_process_callback"
    UTP = "unseen_task_processing"
    KM = "knowledge_management"
    STP = "seen_task_processing"
    # Groups of this project (not in Sedna).
    SANDBOX = "sandbox"
    GENERATOR = "generator"


@dataclass(frozen=True)
class Registration:
    """One alias -> object entry and the module that registered it."""

    group: str
    alias: str
    obj: Any
    origin: str  # module name of the registering code ("" when unknown)


@dataclass(frozen=True)
class LazyTarget:
    """A ``"package.module:attribute"`` placeholder, imported on first lookup."""

    target: str

    def load(self) -> Any:
        module_name, _, attr = self.target.partition(":")
        return getattr(importlib.import_module(module_name), attr)


def _identity(obj: Any) -> tuple[str, str]:
    if isinstance(obj, LazyTarget):
        module_name, _, attr = obj.target.partition(":")
        return (module_name, attr)
    return (getattr(obj, "__module__", ""), getattr(obj, "__qualname__", repr(obj)))


@dataclass
class _Capture:
    entries: list[Registration] = field(default_factory=list)


class ClassFactory:
    """Process-global registry: group -> alias -> registrations (all class methods)."""

    __registry__: dict[str, dict[str, list[Registration]]] = {}
    _lock = threading.RLock()
    _captures: list[_Capture] = []

    @classmethod
    def register(cls, type_name: str = ClassType.GENERAL,
                 alias: str | None = None) -> Callable[[T], T]:
        """Decorator registering a class or function under ``alias`` (default: its name)."""

        def wrapper(obj: T) -> T:
            cls.register_cls(obj, type_name=type_name, alias=alias)
            return obj

        return wrapper

    @classmethod
    def register_cls(cls, t_cls: T, type_name: str = ClassType.GENERAL,
                     alias: str | None = None) -> T:
        """Register ``t_cls`` without the decorator syntax; returns it unchanged."""
        name = alias if alias is not None else getattr(t_cls, "__name__", None)
        if not name:
            raise RegistryError(f"cannot register {t_cls!r} in group {type_name!r}: it has "
                                "no __name__", hint="pass alias=...")
        origin = getattr(t_cls, "__module__", "") or ""
        entry = Registration(type_name, name, t_cls, origin)
        with cls._lock:
            group = cls.__registry__.setdefault(type_name, {})
            entries = group.setdefault(name, [])
            for i, old in enumerate(entries):
                if old.origin != origin:
                    continue
                if old.obj is t_cls or _identity(old.obj) == _identity(t_cls):
                    entries[i] = entry  # re-import of the same definition
                    break
                raise RegistryError(
                    f"alias {name!r} in group {type_name!r} is registered twice by module "
                    f"{origin!r} ({_identity(old.obj)[1]} and {_identity(t_cls)[1]})",
                    hint="give each class or function its own alias")
            else:
                entries.append(entry)
            for capture in cls._captures:
                capture.entries.append(entry)
        return t_cls

    @classmethod
    def register_lazy(cls, type_name: str, alias: str, target: str) -> None:
        """Register ``"module:attribute"`` under ``alias``; imported on first ``get_cls``.

        Keeps heavy optional backends (llama.cpp, container engines) out of start-up; the
        import error of a missing extra surfaces when the alias is used.
        """
        module_name = target.partition(":")[0]
        with cls._lock:
            entries = cls.__registry__.setdefault(type_name, {}).setdefault(alias, [])
            if not any(_identity(e.obj) == _identity(LazyTarget(target)) for e in entries):
                entries.append(Registration(type_name, alias, LazyTarget(target), module_name))

    @classmethod
    def register_from_package(cls, package: ModuleType,
                              type_name: str = ClassType.GENERAL) -> None:
        """Register every public class or function attribute of ``package`` by its name."""
        for attr_name in dir(package):
            if attr_name.startswith("_"):
                continue
            attr = getattr(package, attr_name)
            if isinstance(attr, type) or callable(attr):
                cls.register_cls(attr, type_name=type_name, alias=attr_name)

    @classmethod
    def is_exists(cls, type_name: str, cls_name: str | None = None) -> bool:
        """With no name: does the group exist? Otherwise: is ``cls_name`` in it?"""
        with cls._lock:
            group = cls.__registry__.get(type_name)
            if cls_name is None:
                return group is not None
            return bool(group and group.get(cls_name))

    @classmethod
    def get_cls(cls, type_name: str, t_cls_name: str | None = None) -> Any:
        """Return the object registered as ``t_cls_name`` in ``type_name``.

        Raises:
            RegistryError: unknown alias (with suggestions), or an alias registered by
                several modules (the error names them; give the module a url).
        """
        if t_cls_name is None:
            raise RegistryError(f"no class name given for class type {type_name!r}")
        with cls._lock:
            entries = cls.__registry__.get(type_name, {}).get(t_cls_name, [])
            if not entries:
                known = sorted(cls.__registry__.get(type_name, {}))
                hint = suggest(t_cls_name, known) or (
                    f"registered in this group: {', '.join(known)}" if known else
                    "nothing is registered in this group; check the module's url and its "
                    "@ClassFactory.register alias")
                raise RegistryError(f"can't find class type {type_name} class name "
                                    f"{t_cls_name} in class registry", hint=hint)
            distinct = {_identity(e.obj) for e in entries}
            if len(distinct) > 1:
                origins = ", ".join(sorted({e.origin for e in entries}))
                raise RegistryError(
                    f"alias {t_cls_name!r} in group {type_name!r} is registered by several "
                    f"modules ({origins})", hint="give the module a url so its own file decides")
            entry = entries[-1]
        if isinstance(entry.obj, LazyTarget):
            obj = entry.obj.load()  # may register obj itself (same identity): harmless
            with cls._lock:
                entries[:] = [Registration(type_name, t_cls_name, obj, entry.origin)]
            return obj
        return entry.obj

    @classmethod
    def aliases(cls, type_name: str) -> list[str]:
        """All aliases currently registered in a group, sorted."""
        with cls._lock:
            return sorted(a for a, e in cls.__registry__.get(type_name, {}).items() if e)

    @classmethod
    @contextlib.contextmanager
    def capture(cls) -> Iterator[list[Registration]]:
        """Collect the registrations made inside the ``with`` block (e.g. one import)."""
        cap = _Capture()
        with cls._lock:
            cls._captures.append(cap)
        try:
            yield cap.entries
        finally:
            with cls._lock:
                cls._captures.remove(cap)

    @classmethod
    def unregister(cls, type_name: str, alias: str) -> bool:
        """Drop every registration of ``alias`` in ``type_name`` (not in Sedna).

        Returns whether anything was removed. Meant for tests and for replacing a backend.
        """
        with cls._lock:
            return cls.__registry__.get(type_name, {}).pop(alias, None) is not None

    @classmethod
    def _clear(cls) -> None:
        """Forget every registration (tests only)."""
        with cls._lock:
            cls.__registry__.clear()
