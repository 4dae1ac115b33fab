"""Executor interface and backend lookup.

Every backend (local fork server today; docker or edge nodes later) implements
:class:`Executor`. ``run`` takes any iterable of requests and yields one :class:`ExecResult` per
request *in completion order* (match them by ``result.id``). ``close`` is idempotent; executors are
context managers.

Backends live in the project's one plugin registry, :class:`core.common.class_factory.ClassFactory`,
group ``ClassType.SANDBOX`` ("sandbox"). Built-in backends are registered lazily as
``"module:attribute"`` so importing this package never imports a backend (or its dependencies);
:func:`get_executor` builds one by name.
"""

from __future__ import annotations

import abc
import logging
import os
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence, Union

from core.common.class_factory import ClassFactory, ClassType
from core.common.errors import suggest

from .types import ExecRequest, ExecResult, IsolationLevel, UnknownBackendError

__all__ = ["Executor", "BUILTIN_BACKENDS", "register_backend", "get_executor", "known_backends",
           "check_backend_options", "under_any", "check_read_paths"]

LOGGER = logging.getLogger(__name__)


class Executor(abc.ABC):
    """Runs batches of :class:`ExecRequest` and streams back :class:`ExecResult`."""

    #: registry name of the backend, copied into every result
    name: str = "abstract"
    #: True when ``run`` yields each result as soon as its request finishes; a backend that
    #: grades in batches (``dask``) yields a batch's results when the batch returns, still in
    #: completion order between batches
    streams_each_result: bool = True

    @property
    @abc.abstractmethod
    def isolation(self) -> IsolationLevel:
        """Isolation level this executor achieved (the same for every result it returns)."""

    @abc.abstractmethod
    def run(self, requests: Iterable[ExecRequest]) -> Iterator[ExecResult]:
        """Execute ``requests``; yield exactly one result per request as each one finishes.

        Request ids must be unique within one call (``ValueError`` otherwise). Harness failures
        are reported as ``infra_error`` results, not raised, unless the executor is unusable
        (then :class:`~.types.ExecutorClosedError`).
        """

    def run_all(self, requests: Iterable[ExecRequest]) -> list[ExecResult]:
        """Convenience: run and return results in the order of ``requests``."""
        reqs = list(requests)
        by_id = {res.id: res for res in self.run(reqs)}
        return [by_id[r.id] for r in reqs]

    @abc.abstractmethod
    def close(self) -> None:
        """Release every resource (processes, directories). Idempotent."""

    def __enter__(self) -> "Executor":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def under_any(path: str, roots: Sequence[str]) -> str | None:
    """The first of ``roots`` that ``path`` equals or lies beneath, or None. Lexical: both are
    normalised (``..`` and duplicate slashes resolved), symlinks are not followed."""
    norm = os.path.normpath(path)
    for root in roots:
        base = os.path.normpath(root)
        if norm == base or norm.startswith(base.rstrip("/") + "/"):
            return root
    return None


def check_read_paths(request: ExecRequest, roots: Sequence[str], backend: str) -> None:
    """The caller-side check of :attr:`ExecRequest.read_paths` against an executor's
    ``request_read_roots``: every path must be one of ``roots`` or lie beneath one.

    Raises ``ValueError`` naming the request, the path and the roots otherwise (the fork server
    checks again, symlinks resolved, and refuses such a request as ``infra_error``).
    """
    for path in request.read_paths:
        if under_any(path, roots) is None:
            where = ", ".join(roots) if roots else "none: the executor has no request_read_roots"
            raise ValueError(f"request {request.id!r}: read path {path!r} is not under a request read "
                             f"root of the {backend} executor ({where})")


Factory = Callable[..., Executor]

#: built-in backends: registry alias -> "module:attribute" (imported on first use)
BUILTIN_BACKENDS: dict[str, str] = {
    "local": "core.testenvmanager.sandbox.local:LocalExecutor",
    "dask": "core.edge.executor:DaskExecutor",
    "docker": "core.testenvmanager.sandbox.container:DockerExecutor",
}

for _name, _target in BUILTIN_BACKENDS.items():
    ClassFactory.register_lazy(ClassType.SANDBOX, _name, _target)


def register_backend(name: str, factory: Union[str, Factory]) -> None:
    """Register (or replace) a backend under ``name`` in the ``sandbox`` registry group.

    ``factory`` is an :class:`Executor` subclass, any callable returning one, or a
    ``"module:attribute"`` path imported on first use. Plugins may equally use
    ``@ClassFactory.register(ClassType.SANDBOX, alias=name)`` on their executor class.
    """
    if not name:
        raise ValueError("backend name must be non-empty")
    ClassFactory.unregister(ClassType.SANDBOX, name)
    if isinstance(factory, str):
        ClassFactory.register_lazy(ClassType.SANDBOX, name, factory)
    else:
        ClassFactory.register_cls(factory, type_name=ClassType.SANDBOX, alias=name)


def known_backends() -> list[str]:
    """Sorted names of the registered backends."""
    return ClassFactory.aliases(ClassType.SANDBOX)


def _unknown_backend(name: str) -> UnknownBackendError:
    known = known_backends()
    near = suggest(name, known)
    return UnknownBackendError(f"unknown executor backend {name!r}; known backends: {', '.join(known)}"
                               + (f" ({near})" if near else ""))


def check_backend_options(name: str, options: dict[str, object],
                          base_dir: "Path | None" = None) -> dict[str, object]:
    """Check, without starting anything, that backend ``name`` exists and takes ``options``.

    Raises :class:`UnknownBackendError` for an unknown backend, ``TypeError`` naming an option
    its constructor does not accept (with a near match), ``ValueError`` for a ``min_isolation``
    that is not a level. A backend class with a ``check_options(options, base_dir)`` classmethod
    also checks the values itself (``ValueError``, with a ``key`` attribute naming the option
    when it can) and returns them normalised (e.g. file paths resolved against ``base_dir``, the
    YAML's folder); the normalised options are returned.
    """
    if not ClassFactory.is_exists(ClassType.SANDBOX, name):
        raise _unknown_backend(name)
    from core.common.signatures import keyword_parameters

    params = keyword_parameters(ClassFactory.get_cls(ClassType.SANDBOX, name))
    if not params.takes_any:
        for key in options:
            if key not in params.accepted:
                near = suggest(str(key), list(params.accepted))
                raise TypeError(f"backend {name!r} has no option {key!r}"
                                + (f" ({near})" if near else
                                   f"; its options: {', '.join(params.accepted)}"))
    if "min_isolation" in options:
        IsolationLevel.parse(options["min_isolation"])  # type: ignore[arg-type]
    from core.common.signatures import annotation_problem

    for key, value in options.items():
        problem = annotation_problem(ClassFactory.get_cls(ClassType.SANDBOX, name), key, value)
        if problem:  # e.g. workers: "x", which the backend would only trip over mid-run
            error = ValueError(problem)
            error.key = key  # type: ignore[attr-defined]
            raise error
    check = getattr(ClassFactory.get_cls(ClassType.SANDBOX, name), "check_options", None)
    if check is not None:
        return dict(check(options, base_dir))
    return dict(options)


def get_executor(name: str, **options: object) -> Executor:
    """Build the backend registered as ``name`` with ``options``.

    Raises :class:`UnknownBackendError` naming the known backends (and a near match) when
    ``name`` is unknown, and whatever the backend raises for bad options (e.g.
    ``IsolationUnavailableError``).
    """
    if not ClassFactory.is_exists(ClassType.SANDBOX, name):
        raise _unknown_backend(name)
    factory: Factory = ClassFactory.get_cls(ClassType.SANDBOX, name)
    executor = factory(**options)
    LOGGER.debug("created executor %s (isolation=%s)", name, executor.isolation)
    return executor
