"""Sandboxed execution of untrusted code (issues 3 and 8).

Public API::

    from core.testenvmanager.sandbox import ExecRequest, get_executor
    with get_executor("local", workers=2, min_isolation="kernel") as ex:
        for res in ex.run([ExecRequest(id="t0", program=src, test=tests, entry_point="f")]):
            print(res.id, res.outcome, res.isolation)

See ``docs/sandbox.md`` for the outcome taxonomy and what the isolation protects against.
"""

from .base import (BUILTIN_BACKENDS, Executor, check_backend_options, get_executor, known_backends,
                   register_backend)
from .calibrate import Calibration, calibrate_timeouts, calibrated_timeout, reference_key
from .types import (
    ExecMode,
    ExecRequest,
    ExecResult,
    ExecutorClosedError,
    GradingTier,
    IsolationLevel,
    IsolationUnavailableError,
    Outcome,
    SandboxError,
    UnknownBackendError,
)

__all__ = [
    "BUILTIN_BACKENDS", "Executor", "check_backend_options", "get_executor", "known_backends", "register_backend",
    "Calibration", "calibrate_timeouts", "calibrated_timeout", "reference_key",
    "ExecMode", "ExecRequest", "ExecResult", "ExecutorClosedError", "GradingTier", "IsolationLevel",
    "IsolationUnavailableError", "Outcome", "SandboxError", "UnknownBackendError",
]
