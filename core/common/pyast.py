"""``ast.parse`` that threads may call: one process-wide lock around it.

CPython 3.11 keeps the recursion bookkeeping of its AST-to-object conversion in state shared
by every thread of an interpreter, so two threads parsing at once can fail with
``SystemError: AST constructor recursion depth mismatch`` (CPython issue gh-106905; seen here
when the repository builder blanked functions on a thread pool). Code that parses from worker
threads goes through :func:`parse`; parsing is a small part of what those threads do.
"""
from __future__ import annotations

import ast
import gc
import threading

_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)`` (a module) under the process-wide lock, with the garbage
    collector paused so no finalizer runs (and switches threads) in the middle of the
    conversion, which also protects it from parses this module does not see (the standard
    library's ``traceback`` parses source lines); same errors."""
    with _LOCK:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return ast.parse(source, filename)
        finally:
            if enabled:
                gc.enable()
