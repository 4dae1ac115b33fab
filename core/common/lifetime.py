"""Child processes that do not outlive the thread that started them."""
from __future__ import annotations

import ctypes
import signal
from collections.abc import Callable

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A ``preexec_fn`` for :class:`subprocess.Popen`: the child gets ``sig`` from the kernel
    when the thread that started it dies (``PR_SET_PDEATHSIG``), SIGKILL of the parent included,
    so a killed harness leaves no server behind. The setting survives ``exec`` (not of a setuid
    program). libc is loaded here, in the parent; between fork and exec the child only calls it.
    Start such children from a thread that lives as long as they should (the main thread)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def _child() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    return _child
