"""One warm executor per sandbox configuration for the whole process.

Every kind that runs code through the testenv's ``sandbox:`` settings takes its executor from
here, so test cases and metrics of one job share it, a backend that must answer before any
generation starts (``connect_early``, e.g. ``dask``) is started by the runner before the model
loads, and everything is stopped at exit. Nothing here knows a task kind.
"""
from __future__ import annotations

import atexit
import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError
from core.testenvmanager.sandbox.base import Executor, get_executor

#: testenv ``sandbox:`` keys the code-running metrics read themselves (time and memory
#: limits, the backend's name); every other key is an option of the backend
SANDBOX_KEYS = ("backend", "timeout", "timeout_factor", "timeout_floor", "timeout_ceiling",
                "memory_mb")

_executors: dict[str, Executor] = {}
#: executors that could not start (a ``SandboxError``, e.g. no edge node joined within
#: ``node_timeout``), by key: later metrics and test cases get the same error at once instead
#: of waiting again; cleared by :func:`close_executors`
_failed: dict[str, Exception] = {}
_exec_lock = threading.Lock()


def shared_executor(backend: str, options: Mapping[str, Any]) -> Executor:
    """One warm executor per (backend, options) for the whole process. A configuration whose
    executor failed to start with a ``SandboxError`` raises that error again at once."""
    from core.testenvmanager.sandbox import SandboxError

    key = json.dumps([backend, dict(options)], sort_keys=True, default=str)
    with _exec_lock:
        if key in _failed:
            raise _failed[key]
        if key not in _executors:
            try:
                _executors[key] = get_executor(backend, **dict(options))
            except SandboxError as exc:
                _failed[key] = exc
                raise
        return _executors[key]


@atexit.register
def close_executors() -> None:
    """Stop every executor this module started (also run at exit) and forget failed starts."""
    with _exec_lock:
        for ex in _executors.values():
            ex.close()
        _executors.clear()
        _failed.clear()


def connect_early(sandbox: Mapping[str, Any], source: Path | None = None) -> Executor | None:
    """Start the configured executor now when its backend asks for it (``connect_early``, e.g.
    ``dask``: the scheduler must answer before any generation starts). The executor is the one
    the metrics will use. Raises :class:`ConfigError` (one line, naming ``source``) when it
    cannot start; returns None for backends that start on first use."""
    from core.common.class_factory import ClassFactory, ClassType
    from core.testenvmanager.sandbox import SandboxError

    backend, _general, options = sandbox_settings(sandbox)
    if not ClassFactory.is_exists(ClassType.SANDBOX, backend):
        return None
    if not getattr(ClassFactory.get_cls(ClassType.SANDBOX, backend), "connect_early", False):
        return None
    try:
        return shared_executor(backend, options)
    except (SandboxError, ValueError, OSError) as exc:
        raise ConfigError(f"sandbox backend {backend!r}: {exc}", source=source) from None


def sandbox_settings(sandbox: Mapping[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    general = {k: sandbox[k] for k in SANDBOX_KEYS if k in sandbox}
    options = {k: v for k, v in sandbox.items() if k not in SANDBOX_KEYS}
    timeout = general.get("timeout", "auto")
    if timeout != "auto" and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                              or timeout <= 0):
        raise ConfigError(f"sandbox.timeout must be 'auto' or a positive number, got {timeout!r}")
    return str(general.get("backend", "local")), general, options
