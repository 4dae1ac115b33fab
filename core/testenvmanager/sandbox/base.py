"""Executor interface and backend lookup.

Every backend (local fork server today; docker or edge nodes later) implements
:class:`Executor`. ``run`` takes any iterable of requests and yields one :class:`ExecResult` per
request *in completion order* (match them by ``result.id``). ``close`` is idempotent; executors are
context managers.

Backends are looked up by name with :func:`get_executor`. The mapping is a plain module-level dict
of ``name -> "module:attribute"`` (or a callable) so it can later be fed into the project's plugin
registry without importing heavy backends eagerly.
"""

from __future__ import annotations

import abc
import importlib
import logging
from typing import Callable, Iterable, Iterator, Union

from .types import ExecRequest, ExecResult, IsolationLevel, UnknownBackendError

__all__ = ["Executor", "BACKENDS", "register_backend", "get_executor", "known_backends"]

LOGGER = logging.getLogger(__name__)


class Executor(abc.ABC):
    """Runs batches of :class:`ExecRequest` and streams back :class:`ExecResult`."""

    #: registry name of the backend, copied into every result
    name: str = "abstract"

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


Factory = Callable[..., Executor]

#: backend name -> factory or "module:attribute" import path (resolved lazily)
BACKENDS: dict[str, Union[str, Factory]] = {
    "local": "core.testenvmanager.sandbox.local:LocalExecutor",
}


def register_backend(name: str, factory: Union[str, Factory]) -> None:
    """Register (or replace) a backend under ``name``."""
    if not name:
        raise ValueError("backend name must be non-empty")
    BACKENDS[name] = factory


def known_backends() -> list[str]:
    """Sorted names of the registered backends."""
    return sorted(BACKENDS)


def _resolve(entry: Union[str, Factory]) -> Factory:
    if callable(entry):
        return entry
    module_name, _, attr = entry.partition(":")
    return getattr(importlib.import_module(module_name), attr)


def get_executor(name: str, **options: object) -> Executor:
    """Build the backend registered as ``name`` with ``options``.

    Raises :class:`UnknownBackendError` naming the known backends when ``name`` is unknown, and
    whatever the backend raises for bad options (e.g. ``IsolationUnavailableError``).
    """
    try:
        entry = BACKENDS[name]
    except KeyError:
        raise UnknownBackendError(
            f"unknown executor backend {name!r}; known backends: {', '.join(known_backends())}"
        ) from None
    executor = _resolve(entry)(**options)
    LOGGER.debug("created executor %s (isolation=%s)", name, executor.isolation)
    return executor
