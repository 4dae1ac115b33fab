"""``ast.parse`` that threads may call: one process-wide lock around it.

CPython 3.11 keeps the recursion bookkeeping of its AST-to-object conversion in state shared
by every thread of an interpreter, so two threads parsing at once can fail with
``SystemError: AST constructor recursion depth mismatch`` (CPython issue gh-106905; seen here
when the repository builder blanked functions on a thread pool). Code that parses from worker
threads goes through :func:`parse`, :func:`parse_expression` or :func:`literal_eval`; parsing
is a small part of what those threads do. ``tests/suite/test_one_parser_lock.py`` holds every
module under ``core/`` to it (the sandbox's own boundary code, which runs in the sample's
process, excepted).
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
    tree = _locked(source, filename, "exec")
    assert isinstance(tree, ast.Module)
    return tree


def parse_expression(source: str | bytes) -> ast.Expression:
    """``ast.parse(source, mode="eval")`` under the same lock; same errors."""
    tree = _locked(source, "<unknown>", "eval")
    assert isinstance(tree, ast.Expression)
    return tree


def literal_eval(value: str | ast.AST) -> object:
    """``ast.literal_eval(value)``: a string is parsed under the same lock (a node needs no
    parse); same errors."""
    if isinstance(value, ast.AST):
        return ast.literal_eval(value)
    return ast.literal_eval(parse_expression(value.lstrip(" \t")))


def _locked(source: str | bytes, filename: str, mode: str) -> ast.AST:
    with _LOCK:
        enabled = gc.isenabled()
        gc.disable()
        try:
            return ast.parse(source, filename, mode)
        finally:
            if enabled:
                gc.enable()
