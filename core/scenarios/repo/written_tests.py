"""Static checks of model-written test modules, before anything runs them.

A candidate test module (the code a model wrote for one task) goes through:

1. :func:`parse_candidate` -- it must parse (else ``syntax_error``) and define at least one test
   pytest collects by default: a top-level ``def test_*`` or a ``test_*`` method of a top-level
   ``class Test*`` (else ``no_tests``). Node ids are ``<file>::test_x`` / ``<file>::TestX::test_y``.
2. :func:`unsafe_reason` -- a filter (the wall is the sandbox the tests later run in, see
   :mod:`.authoring`): imports only from an allow-list (safe standard-library modules,
   ``pytest``, the repository's own top-level packages and the packages installed in its
   environment minus build/test tooling); no ``exec``/``eval``/``compile``/``__import__``/
   ``open``/``globals``/``breakpoint`` and no call of ``input``/``vars``/``locals``/``exit``...; no dunder attribute other than a few
   harmless ones (``__name__``, ``__doc__``...) and no ``getattr``/``setattr`` with a dunder string.
   A module that fails is dropped as ``unsafe`` with the reason.
3. :func:`prune` -- drop the tests that failed validation, by AST line range (decorators
   included); a ``Test*`` class left without tests is removed whole.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path
from core.common import pyast

__all__ = ["Candidate", "parse_candidate", "unsafe_reason", "prune", "allowed_imports", "SAFE_STDLIB"]

#: Standard-library modules a unit test may import (no process, file-system, network or
#: interpreter-internals access).
SAFE_STDLIB = frozenset({
    "abc", "array", "bisect", "calendar", "cmath", "collections", "contextlib", "copy", "dataclasses",
    "datetime", "decimal", "enum", "fractions", "functools", "heapq", "itertools", "json", "keyword",
    "math", "numbers", "operator", "pprint", "random", "re", "statistics", "string", "textwrap",
    "typing", "unittest", "__future__",
})

#: Installed packages a written test must not import even though they are in the environment.
TOOLING = frozenset({"pip", "setuptools", "pkg_resources", "_distutils_hack", "coverage", "pytest_cov",
                     "_pytest", "py", "pluggy", "iniconfig", "packaging", "wheel", "distutils"})

#: Builtins a written test may not name at all.
FORBIDDEN_NAMES = frozenset({"exec", "eval", "compile", "__import__", "open", "globals", "breakpoint",
                             "__builtins__"})
#: Builtins it may not call (their names are common variable names: ``input = [1, 2]`` is fine).
FORBIDDEN_CALLS = frozenset({"input", "vars", "locals", "exit", "quit", "memoryview"})

ALLOWED_DUNDERS = frozenset({"__name__", "__qualname__", "__doc__", "__module__", "__wrapped__",
                             "__init__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__",
                             "__hash__", "__repr__", "__str__", "__len__", "__iter__", "__next__",
                             "__call__", "__getitem__", "__contains__", "__enter__", "__exit__"})


@dataclass(frozen=True)
class Candidate:
    """A parsed candidate: its code and the node ids (relative to the file) of its tests,
    each with the 1-based line range it occupies (decorators included)."""

    code: str
    tests: dict[str, tuple[int, int]]
    classes: dict[str, tuple[int, int]]


def _span(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> tuple[int, int]:
    start = min([node.lineno, *[d.lineno for d in node.decorator_list]])
    return start, node.end_lineno or node.lineno


def parse_candidate(code: str) -> Candidate | str:
    """The :class:`Candidate`, or the drop reason ``syntax_error`` / ``no_tests``."""
    try:
        tree = pyast.parse(code)
    except (SyntaxError, ValueError):
        return "syntax_error"
    tests: dict[str, tuple[int, int]] = {}
    classes: dict[str, tuple[int, int]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            tests[node.name] = _span(node)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            methods = {f"{node.name}::{m.name}": _span(m) for m in node.body
                       if isinstance(m, ast.FunctionDef) and m.name.startswith("test")}
            if methods:
                tests.update(methods)
                classes[node.name] = _span(node)
    if not tests:
        return "no_tests"
    return Candidate(code, tests, classes)


def allowed_imports(repo_root: Path, site_packages: str | None) -> frozenset[str]:
    """Top-level module names a written test may import: :data:`SAFE_STDLIB`, ``pytest``, the
    repository's top-level packages/modules and the environment's installed ones (minus
    :data:`TOOLING`)."""
    names = set(SAFE_STDLIB) | {"pytest"}
    for base in [str(repo_root), *([site_packages] if site_packages else [])]:
        try:
            entries = os.listdir(base)
        except OSError:
            continue
        for entry in entries:
            path = Path(base, entry)
            if path.suffix == ".py":
                names.add(path.stem)
            elif path.is_dir() and entry.isidentifier() and (path / "__init__.py").exists():
                names.add(entry)
    names -= {"setup", "conftest", "versioneer"}
    return frozenset(names - TOOLING)


def unsafe_reason(code: str, allowed: frozenset[str]) -> str | None:
    """``None`` when ``code`` passes the static filter, else a one-line reason (first offence)."""
    tree = pyast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in allowed:
                    return f"imports {alias.name}"
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                return "relative import"
            if (node.module or "").split(".")[0] not in allowed:
                return f"imports from {node.module}"
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
            return f"uses {node.id}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in FORBIDDEN_CALLS:
            return f"calls {node.func.id}"
        elif isinstance(node, ast.Attribute) and node.attr.startswith("__") and node.attr not in ALLOWED_DUNDERS:
            return f"accesses attribute {node.attr}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("getattr", "setattr", "delattr", "hasattr"):
            if any(isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("__")
                   for a in node.args[1:2]):
                return f"{node.func.id} with a dunder name"
    return None


def prune(cand: Candidate, keep: set[str]) -> str:
    """``cand.code`` without the tests not in ``keep`` (names relative to the file); a ``Test*``
    class none of whose tests is kept is removed whole."""
    drop: list[tuple[int, int]] = []
    for name, span in cand.tests.items():
        cls = name.split("::")[0] if "::" in name else None
        if name in keep or (cls is not None and not any(k.startswith(f"{cls}::") for k in keep)):
            continue
        drop.append(span)
    for cls, span in cand.classes.items():
        if not any(k.startswith(f"{cls}::") for k in keep):
            drop.append(span)
    lines = cand.code.splitlines(keepends=True)
    gone = {ln for start, end in drop for ln in range(start, end + 1)}
    return "".join(line for n, line in enumerate(lines, 1) if n not in gone)
