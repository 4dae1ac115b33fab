"""Compile a candidate's code under a policy before it is injected into a repository file.

Repository-level tasks (the ``repo``, ``implement_change`` and ``revise`` kinds) are graded in
the sample's own interpreter: the candidate's code runs in the same process as the repository's
pytest run (:mod:`.execute`). The kernel walls keep that process away from the network, the
host's files and other processes, but not away from pytest's own objects: a wrong body that
assigns one attribute of pytest's report class would pass. This module closes that class of
forgery at the source. Every piece of candidate code -- the body of a ``repo`` task's answer,
or each top-level statement of a whole-file answer that differs from the file it replaces -- is
parsed and rewritten by :class:`CandidatePolicy`, a subclass of RestrictedPython's
``RestrictingNodeTransformer``; what the policy refuses never runs and the sample is graded
``sandbox_violation`` (:class:`PolicyRefused`), never ``infra_error``.

The policy (grading tier ``in_process_confined``; threat model in docs/sandbox.md):

* **imports**: only modules the original file imports, the repository's own packages, relative
  imports, and :data:`SAFE_STDLIB`; never a test module (:func:`.guards.test_module`: the
  repository's tests hold helpers such as an always-equal class); never a module of :data:`.guards.DENIED_MODULES` (``sys``,
  ``gc``, ``builtins``, ``inspect``, import machinery, ``pytest``/``_pytest``/``pluggy``,
  ``pickle``, ``unittest.mock``...). Every bound import goes through ``_ianvs_checked_``.
* **names**: no ``exec``, ``eval``, ``compile``, ``__import__``, ``globals``, ``locals``,
  ``vars``, ``breakpoint``, ``input``, ``exit``, ``quit``, ``help``; no name the original module
  binds to a denied module (``import sys as _sys`` makes ``_sys`` refused); no name that starts
  and ends with ``_`` (the guards' names) unless a dunder allowed in place; ``getattr``,
  ``setattr`` and ``delattr`` become their guarded versions and cannot be rebound.
* **attributes**: reads go through ``_getattr_`` (:mod:`.guards`: refuses frames, code, the
  denied modules and anything of theirs; of ``inspect`` and ``importlib`` only the members of
  :data:`.guards.RESTRICTED_MEMBERS`); the dunders of :data:`.guards.DENIED_DUNDERS`
  (``__globals__``, ``__code__``, ``__subclasses__``, ``__getattribute__``...) are never read,
  and dunders are written only from :data:`.guards.WRITE_DUNDERS` (metadata such as
  ``__doc__``); frame, generator and code attributes
  (RestrictedPython's list) and :data:`.guards.DENIED_ATTRS` are refused outright. Writes go
  through ``_write_``: never to a module, nor to a class the candidate did not define (classes
  the candidate's code defines are registered by ``_ianvs_own_``; in a whole-file answer every
  class of the file is the answer's).
* **statements**: ``global`` only in a whole-file answer (a body may not rebind the module's
  names); a class a body defines may not define the comparison and truth methods of
  :data:`.guards.STEERING` (an always-equal return value), nor may ``type(name, bases, namespace)``
  called by that name in a body put them in a namespace (the call becomes ``_ianvs_type_``;
  ``type`` stays ``type`` everywhere else, ``isinstance(x, type)`` included); ``except*`` refused (RestrictedPython's review: an escape route); string annotations
  must themselves be plain names, attributes and subscripts that name no denied module
  (``typing.get_type_hints`` evaluates them without the guards).

Departures from RestrictedPython's defaults, each because honest repository code needs it:
single-underscore names and attributes are allowed (``self._cache``, module-private helpers),
``print``, ``async``, ``nonlocal``, ``match`` and augmented attribute/item assignment keep
their plain meaning, iteration, unpacking, item access and ``*args`` calls are not wrapped (those
guards protect Zope's security proxies, not a verdict), ``str.format`` is allowed (it can read
attributes into a string but not write them), and classes keep their metaclass.
"""

from __future__ import annotations

import ast
import copy
import functools
import os
import re
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from RestrictedPython.transformer import INSPECT_ATTRIBUTES, RestrictingNodeTransformer

from core.common import pyast
from core.common.errors import ConfigError
from core.scenarios.repo.guards import (DANGEROUS_BUILTINS, DENIED_ATTRS, DENIED_DUNDERS, INSPECT_NAMES,
                                        RESTRICTED_MEMBERS, STEERING, WRITE_DUNDERS, denied_module, test_module)

__all__ = ["PolicyRefused", "ModuleContext", "module_context", "confine_body", "confine_file", "relaxations",
           "SAFE_STDLIB", "GRADING", "GRADING_ORDER", "check_min_grading", "repository_imports", "own_packages"]

#: the grading tier of rows whose candidate code ran under this policy
GRADING = "in_process_confined"
#: grading tiers from weakest to strongest (``min_grading`` names one): ``in_process`` (sample
#: and tests share a process, nothing more), ``in_process_confined`` (this policy, its guards
#: and the runner's tripwire), ``boundary`` (the verdict is computed where the sample's code
#: never runs; codegen's function tasks)
GRADING_ORDER: tuple[str, ...] = ("in_process", GRADING, "boundary")


def check_min_grading(settings: Mapping[str, Any], kind: str) -> None:
    """Refuse (:class:`ConfigError`) a testenv ``sandbox.min_grading`` that the repository
    kinds cannot give (they grade ``in_process_confined``) or that names no tier."""
    want = settings.get("min_grading")
    if want is None:
        return
    if want not in GRADING_ORDER:
        raise ConfigError(f"sandbox.min_grading must be one of {', '.join(GRADING_ORDER)}, got {want!r}",
                          hint="in_process_confined is what repository tasks give")
    if GRADING_ORDER.index(want) > GRADING_ORDER.index(GRADING):
        raise ConfigError(f"{kind} tasks are graded {GRADING} (the candidate's code runs in the process of the "
                          f"repository's tests, compiled under a policy), not {want}",
                          hint=f"lower sandbox.min_grading to {GRADING}, or use a kind with boundary grading "
                               "(codegen function tasks); docs/sandbox.md explains the tiers")

#: standard-library modules any candidate may import (reviewed: none reaches frames, the import
#: system, the interpreter's state or object serialisation by itself)
SAFE_STDLIB: frozenset[str] = frozenset({
    "abc", "array", "base64", "binascii", "bisect", "calendar", "cmath", "collections",
    "colorsys", "contextlib", "copy", "csv", "dataclasses", "datetime", "decimal", "difflib",
    "enum", "errno", "fnmatch", "fractions", "functools", "graphlib", "hashlib", "heapq", "hmac",
    "html", "io", "ipaddress", "itertools", "json", "keyword", "math", "numbers", "operator",
    "os", "pathlib", "posixpath", "pprint", "random", "re", "reprlib", "secrets", "shlex",
    "statistics", "string", "struct", "textwrap", "time", "typing", "unicodedata", "urllib",
    "uuid", "warnings", "zlib", "zoneinfo", "__future__",
})

#: builtins candidate code may not name at all
DENIED_NAMES: frozenset[str] = frozenset(DANGEROUS_BUILTINS) | frozenset({
    "exit", "quit", "help", "__builtins__", "__loader__", "__spec__",
})
#: builtins replaced by their guarded versions (:mod:`.guards`)
RENAMED: dict[str, str] = {"getattr": "_ianvs_getattr_", "setattr": "_ianvs_setattr_",
                           "delattr": "_ianvs_delattr_"}
#: dunder names candidate code may read as plain names
READ_NAMES: frozenset[str] = frozenset({"__name__", "__file__", "__doc__", "__class__", "__debug__",
                                        "__all__", "__version__"})
#: dunder names a whole-file answer may bind at module level
MODULE_NAMES: frozenset[str] = frozenset({"__all__", "__version__", "__author__", "__doc__",
                                          "__license__", "__copyright__", "__email__", "__title__",
                                          "__getattr__", "__dir__", "__path__"})
#: dunder names never bound, even in a class body
CLASS_DENIED: frozenset[str] = frozenset({"__class__", "__dict__", "__builtins__", "__globals__",
                                          "__code__", "__closure__", "__import__"})
_ATTRS_REFUSED = frozenset(INSPECT_ATTRIBUTES) | INSPECT_NAMES | DENIED_ATTRS


class PolicyRefused(Exception):
    """The candidate's code uses something the policy refuses; ``str()`` lists what (the
    sample is graded ``sandbox_violation`` with that text)."""


@dataclass(frozen=True)
class ModuleContext:
    """What the policy allows a piece of code in one file: ``imports`` (top-level module names
    the original file, or the repository, imports), ``packages`` (the repository's own
    top-level packages), ``denied`` (module-level names of the original bound to a denied
    module, or computed from one), ``file_mode`` (a whole-file answer: ``global`` and
    module-level dunders allowed)."""
    imports: frozenset[str] = frozenset()
    packages: frozenset[str] = frozenset()
    denied: frozenset[str] = frozenset()
    file_mode: bool = False


def _import_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(top-level names of absolutely imported modules, names bound to a denied module by
    every import that binds them: ``try: from inspect import getfullargspec / except
    ImportError: from inspect import getargspec as getfullargspec`` leaves the name allowed)."""
    mods: set[str] = set()
    denied: set[str] = set()
    allowed: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                mods.add(alias.name.split(".")[0])
                bound = alias.asname or alias.name.split(".")[0]
                if denied_module(alias.name) or denied_module(alias.name.split(".")[0]):
                    denied.add(bound)
                else:
                    allowed.add(bound)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            mods.add(node.module.split(".")[0])
            for alias in node.names:
                members = RESTRICTED_MEMBERS.get(node.module)
                full = f"{node.module}.{alias.name}"
                if members is not None and (alias.name in members or full in RESTRICTED_MEMBERS):
                    allowed.add(alias.asname or alias.name)
                elif members is not None or denied_module(node.module) or denied_module(full):
                    denied.add(alias.asname or alias.name)
                else:
                    allowed.add(alias.asname or alias.name)
    return mods, denied - allowed


def _rooted(expr: ast.expr, names: set[str]) -> bool:
    """Whether ``expr`` is a name of ``names``, an attribute or item chain from one
    (``sys._getframe``, ``sys.modules["x"]``), or ``getattr`` of one: a value that may *be*
    a denied object (``sys.version_info[0] > 2`` is a bool, not one)."""
    while isinstance(expr, (ast.Attribute, ast.Subscript)):
        expr = expr.value
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "getattr" and expr.args:
        return _rooted(expr.args[0], names)
    return isinstance(expr, ast.Name) and expr.id in names


def _derived(tree: ast.Module, denied: set[str]) -> set[str]:
    """Module-level names assigned a value rooted at a denied binding (``_frame =
    sys._getframe``; :func:`_rooted`), to a fixpoint."""
    out = set(denied)
    changed = True
    while changed:
        changed = False
        for node in tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
                if any(_rooted(v, out) for v in values):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for t in targets:
                        for n in ast.walk(t):
                            if isinstance(n, ast.Name) and n.id not in out:
                                out.add(n.id)
                                changed = True
    return out


def module_context(original: str | None, packages: Iterable[str] = (), extra_imports: Iterable[str] = (),
                   file_mode: bool = False) -> ModuleContext:
    """The :class:`ModuleContext` of code placed in a file whose original text is ``original``
    (``None``: a new file). A file that does not parse contributes nothing."""
    mods, denied = set(extra_imports), set()
    if original is not None:
        try:
            tree = pyast.parse(original)
        except SyntaxError:
            tree = ast.Module(body=[], type_ignores=[])
        found, bound = _import_names(tree)
        mods |= found
        denied = _derived(tree, bound)
    return ModuleContext(frozenset(mods), frozenset(packages), frozenset(denied), file_mode)


@functools.lru_cache(maxsize=16)
def _repository_imports(root: str) -> frozenset[str]:
    mods: set[str] = set()
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.endswith(".py"):
                try:
                    mods |= _import_names(pyast.parse(Path(dirpath, name).read_bytes()))[0]
                except (SyntaxError, ValueError, OSError):
                    continue
    return frozenset(m for m in mods if not denied_module(m))


def repository_imports(root: Path) -> frozenset[str]:
    """Top-level names of every module some Python file of ``root`` imports (denied modules
    excluded): what a whole-file answer may import besides :data:`SAFE_STDLIB`."""
    return _repository_imports(str(Path(root).resolve()))


def own_packages(root: Path, import_roots: Iterable[str] = (".",)) -> frozenset[str]:
    """Top-level importable names of the repository: packages (directories with
    ``__init__.py``) and modules directly under ``root`` or one of its import roots."""
    names: set[str] = set()
    for r in {*import_roots, "."}:
        base = Path(root) / r
        if not base.is_dir():
            continue
        for p in base.iterdir():
            if p.is_dir() and (p / "__init__.py").is_file():
                names.add(p.name)
            elif p.suffix == ".py" and p.stem.isidentifier():
                names.add(p.stem)
    return frozenset(n for n in names if not denied_module(n))


def _dunder(name: str) -> bool:
    return len(name) > 4 and name[:2] == "__" and name[-2:] == "__"


def _reserved(name: str) -> bool:
    """The guards' names and anything shaped like them (``_x_``), never a plain ``_``/dunder."""
    return name.startswith("_ianvs") or (len(name) > 2 and name[0] == "_" and name[-1] == "_"
                                         and not _dunder(name) and name.strip("_") != "")


def _unplain_attr(attr: str) -> bool:
    """Whether a type expression evaluated without the guards may not read ``attr``."""
    return _dunder(attr) or attr in _ATTRS_REFUSED or denied_module(attr)


def _call(name: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=ast.Name(name, ast.Load()), args=list(args), keywords=[])


_ANNOTATION_NODES = (ast.Expression, ast.Name, ast.Attribute, ast.Subscript, ast.Tuple, ast.List,
                     ast.BinOp, ast.BitOr, ast.Constant, ast.Load, ast.Slice)


class CandidatePolicy(RestrictingNodeTransformer):
    """RestrictedPython's transformer with the policy of the module docstring.

    Errors are collected in ``errors`` (RestrictedPython's list, ``Line N: ...``); the caller
    refuses the code when there is any. ``depth`` is the number of enclosing function or class
    scopes of the code being visited (1 for a function body)."""

    def __init__(self, ctx: ModuleContext, depth: int = 0, class_name: str | None = None) -> None:
        super().__init__()
        self.ctx = ctx
        self.depth = depth
        self.class_body = False
        #: the innermost enclosing class (private names ``__x`` are mangled with it)
        self.classes: list[str] = [class_name] if class_name else []

    def _mangled(self, attr: str) -> str:
        """``attr`` as Python's compiler would spell it in this class (``__x`` ->
        ``_Cls__x``): a read becomes a string argument, which the compiler never mangles."""
        if attr[:2] == "__" and attr[-2:] != "__" and self.classes and self.classes[-1].lstrip("_"):
            return f"_{self.classes[-1].lstrip('_')}{attr}"
        return attr

    # names ---------------------------------------------------------------------------------
    def _check_plain(self, node: ast.AST, name: str | None) -> None:
        if name is None:
            return
        if name in DENIED_NAMES:
            self.error(node, f'"{name}" is not available to candidate code.')
        elif name in self.ctx.denied:
            self.error(node, f'"{name}" names a module candidate code may not use.')
        elif _reserved(name):
            self.error(node, f'"{name}" is a reserved name.')
        elif _dunder(name) and name not in READ_NAMES:
            self.error(node, f'"{name}" is a dunder name candidate code may not use here.')

    def _check_binding(self, node: ast.AST, name: str | None) -> None:
        """A name the code binds (argument, handler, import alias, pattern capture)."""
        if name in RENAMED:
            self.error(node, f'"{name}" may not be rebound.')
        else:
            self._check_plain(node, name)

    def check_name(self, node: Any, name: str | None, allow_magic_methods: bool = False) -> None:
        self._check_binding(node, name)

    def check_function_argument_names(self, node: Any) -> None:
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                self._check_binding(node, arg.arg)

    def visit_Name(self, node: ast.Name) -> Any:
        name = node.id
        if name in RENAMED:
            if isinstance(node.ctx, ast.Load):
                return ast.copy_location(ast.Name(RENAMED[name], ast.Load()), node)
            self.error(node, f'"{name}" may not be rebound.')
            return node
        if _dunder(name) and not isinstance(node.ctx, ast.Load):
            module_level = self.depth == 0 and self.ctx.file_mode and name in MODULE_NAMES
            if not (module_level or (self.class_body and name not in CLASS_DENIED)):
                self.error(node, f'"{name}" may not be bound by candidate code.')
            return node
        self._check_plain(node, name)
        return node

    # attributes ----------------------------------------------------------------------------
    def visit_Attribute(self, node: ast.Attribute) -> Any:
        attr = node.attr
        load = isinstance(node.ctx, ast.Load)
        if _dunder(attr) and (attr in DENIED_DUNDERS if load else attr not in WRITE_DUNDERS):
            self.error(node, f'"{attr}" is a dunder attribute candidate code may not '
                             f'{"read" if load else "write"}.')
        elif attr in _ATTRS_REFUSED:
            self.error(node, f'"{attr}" is an attribute candidate code may not use.')
        node = self.node_contents_visit(node)
        if load:
            return ast.copy_location(_call("_getattr_", node.value, ast.Constant(self._mangled(attr))), node)
        node.value = ast.copy_location(_call("_write_", node.value), node.value)
        return node

    # plain Python where RestrictedPython wraps for Zope's proxies ---------------------------
    def visit_Call(self, node: ast.Call) -> Any:
        node = self.node_contents_visit(node)
        if (not self.ctx.file_mode and isinstance(node.func, ast.Name) and node.func.id == "type"
                and len(node.args) + len(node.keywords) > 1):
            # type(name, bases, namespace) builds a class without a class statement
            node.func = ast.copy_location(ast.Name("_ianvs_type_", ast.Load()), node.func)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        return self.node_contents_visit(node)

    def guard_iter(self, node: Any) -> Any:
        return self.node_contents_visit(node)

    def visit_Assign(self, node: ast.Assign) -> Any:
        return self.node_contents_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        return self.node_contents_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> Any:
        annotation = self._annotation(node.annotation)
        node.annotation = ast.Constant(None)
        node = self.node_contents_visit(node)
        node.annotation = annotation
        return node

    def visit_With(self, node: ast.With) -> Any:
        return self.node_contents_visit(node)

    def visit_ListComp(self, node: ast.ListComp) -> Any:
        return self.node_contents_visit(node)

    visit_SetComp = visit_GeneratorExp = visit_DictComp = visit_ListComp  # type: ignore[assignment]

    def visit_Module(self, node: ast.Module) -> Any:
        return self.node_contents_visit(node)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> Any:
        self._check_binding(node, node.name)
        return self.node_contents_visit(node)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> Any:
        return node

    def visit_Global(self, node: ast.Global) -> Any:
        if not self.ctx.file_mode:
            self.error(node, "global statements are not allowed in a function body (no writes "
                             "to the module's names).")
        return node

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> Any:
        return self.visit_FunctionDef(node)  # type: ignore[arg-type]

    def visit_Await(self, node: ast.Await) -> Any:
        return self.node_contents_visit(node)

    visit_AsyncFor = visit_AsyncWith = visit_Await  # type: ignore[assignment]

    def _plain(self, node: ast.AST) -> Any:
        for name in ("name", "rest"):
            if isinstance(getattr(node, name, None), str):
                self._check_binding(node, getattr(node, name))
        return self.node_contents_visit(node)

    visit_Match = visit_match_case = visit_MatchValue = visit_MatchSingleton = _plain
    visit_MatchSequence = visit_MatchMapping = visit_MatchClass = visit_MatchStar = _plain
    visit_MatchAs = visit_MatchOr = _plain

    # definitions ---------------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> Any:
        if _dunder(node.name):
            at_module = self.depth == 0 and self.ctx.file_mode and node.name in MODULE_NAMES
            if not (self.class_body or at_module) or node.name in CLASS_DENIED:
                self.error(node, f'"{node.name}" may not be defined here.')
        else:
            self._check_binding(node, node.name)
        self.check_function_argument_names(node)
        args = [a for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs,
                            node.args.vararg, node.args.kwarg] if a is not None]
        annotations = [self._annotation(a.annotation) if a.annotation is not None else None for a in args]
        returns = self._annotation(node.returns) if node.returns is not None else None
        for a in args:  # visited above; the rest of the definition as usual
            a.annotation = None
        node.returns = None
        outer = self.class_body
        self.depth, self.class_body = self.depth + 1, False
        try:
            node = self.node_contents_visit(node)
        finally:
            self.depth, self.class_body = self.depth - 1, outer
        for a, annotation in zip(args, annotations):
            a.annotation = annotation
        node.returns = returns
        return node

    def visit_Lambda(self, node: ast.Lambda) -> Any:
        self.check_function_argument_names(node)
        outer = self.class_body
        self.depth, self.class_body = self.depth + 1, False
        try:
            return self.node_contents_visit(node)
        finally:
            self.depth, self.class_body = self.depth - 1, outer

    def visit_ClassDef(self, node: ast.ClassDef) -> Any:
        self._check_binding(node, node.name)
        if not self.ctx.file_mode:
            defined = {s.name for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))} | {
                t.id for s in node.body if isinstance(s, (ast.Assign, ast.AnnAssign))
                for t in (s.targets if isinstance(s, ast.Assign) else [s.target]) if isinstance(t, ast.Name)}
            steering = sorted(defined & STEERING)
            if steering:
                self.error(node, f'a class defined in a function body may not define {", ".join(steering)} '
                                 '(a value that compares equal to anything would pass any test).')
        outer = self.class_body
        self.depth, self.class_body = self.depth + 1, True
        self.classes.append(node.name)
        try:
            body = [self.visit(s) for s in node.body]
            node.body = [s for part in body for s in (part if isinstance(part, list) else [part])]
        finally:
            self.depth, self.class_body = self.depth - 1, outer
            self.classes.pop()
        node.bases = [self.visit(b) for b in node.bases]
        node.keywords = [self.visit(k) for k in node.keywords]
        node.decorator_list = [ast.Name("_ianvs_own_", ast.Load()),
                               *[self.visit(d) for d in node.decorator_list],
                               ast.Name("_ianvs_own_", ast.Load())]
        return node

    # imports -------------------------------------------------------------------------------
    def _module_allowed(self, node: ast.AST, module: str) -> None:
        top = module.split(".")[0]
        if test_module(module):
            self.error(node, f'importing "{module}" is not allowed (a test module: its helpers are the '
                             'tests\' own).')
        elif denied_module(module):
            self.error(node, f'importing "{module}" is not allowed.')
        elif top not in self.ctx.imports | self.ctx.packages | SAFE_STDLIB:
            self.error(node, f'importing "{module}" is not allowed (only what the original module '
                             'imports, the repository\'s own packages and a reviewed part of the '
                             'standard library).')

    def _checked_bindings(self, node: ast.Import | ast.ImportFrom, names: list[tuple[str, str | None]]
                          ) -> list[ast.stmt]:
        """``node`` followed by ``name = _ianvs_checked_(name[, module, member])`` per binding."""
        out: list[ast.stmt] = [node]
        module = node.module if isinstance(node, ast.ImportFrom) and not node.level else None
        for name, member in names:
            extra = [ast.Constant(module), ast.Constant(member)] if module and member else []
            assign = ast.Assign(targets=[ast.Name(name, ast.Store())],
                                value=_call("_ianvs_checked_", ast.Name(name, ast.Load()), *extra))
            out.append(ast.copy_location(assign, node))
        return out

    def visit_Import(self, node: ast.Import) -> Any:
        names: list[tuple[str, str | None]] = []
        for alias in node.names:
            self._module_allowed(node, alias.name)
            bound = alias.asname or alias.name.split(".")[0]
            self._check_binding(node, bound)
            names.append((bound, None))
        return self._checked_bindings(node, names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> Any:
        module = node.module or ""
        if module == "__future__":
            return node
        if not node.level:
            self._module_allowed(node, module)
        elif test_module(module):
            self.error(node, f'importing from "{"." * node.level}{module}" is not allowed (a test module).')
        names: list[tuple[str, str | None]] = []
        for alias in node.names:
            if alias.name == "*":
                self.error(node, '"*" imports are not allowed.')
                continue
            full = f"{module}.{alias.name}" if module else alias.name
            members = RESTRICTED_MEMBERS.get(module) if not node.level else None
            member_ok = members is not None and (alias.name in members or full in RESTRICTED_MEMBERS)
            if (alias.name in _ATTRS_REFUSED or _dunder(alias.name) or test_module(full)
                    or (not member_ok and (members is not None or denied_module(full)))):
                self.error(node, f'importing "{alias.name}" from "{module or "."}" is not allowed.')
            bound = alias.asname or alias.name
            self._check_binding(node, bound)
            names.append((bound, alias.name))
        return self._checked_bindings(node, names)

    # annotations ---------------------------------------------------------------------------
    def _annotation(self, node: ast.expr) -> ast.expr:
        """An annotation as it will be kept: a plain type expression (names, attributes,
        subscripts, ``|``, constants; nothing refused in it) stays as written, so what
        ``dataclasses`` and ``typing`` read of it (``typing.ClassVar`` under ``from __future__
        import annotations``) is unchanged; anything else is rewritten like other code."""
        self._check_annotation(node)
        plain = all(isinstance(n, _ANNOTATION_NODES) for n in ast.walk(node)) and not any(
            (isinstance(n, ast.Name) and (n.id in RENAMED or self._unplain_name(n.id)))
            or (isinstance(n, ast.Attribute) and _unplain_attr(n.attr)) for n in ast.walk(node))
        return node if plain else self.visit(node)

    def _unplain_name(self, name: str) -> bool:
        """Whether a type expression evaluated without the guards may not name ``name``."""
        return (_dunder(name) or name in DENIED_NAMES or name in self.ctx.denied or _reserved(name)
                or denied_module(name))

    def _check_annotation(self, node: ast.AST) -> None:
        """String annotations are evaluated later without the guards (``get_type_hints``):
        each must be a plain expression of names, attributes and subscripts that passes."""
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                try:
                    expr = pyast.parse_expression(sub.value.strip())
                except SyntaxError:
                    continue
                for part in ast.walk(expr):
                    if not isinstance(part, _ANNOTATION_NODES):
                        self.error(node, f"the string annotation {sub.value[:60]!r} is not a plain "
                                         "type expression.")
                        return
                    if isinstance(part, ast.Name) and self._unplain_name(part.id):
                        self.error(node, f"the string annotation {sub.value[:60]!r} names {part.id!r}.")
                    if isinstance(part, ast.Attribute) and _unplain_attr(part.attr):
                        self.error(node, f"the string annotation {sub.value[:60]!r} reads {part.attr!r}.")
                    if isinstance(part, ast.Constant) and isinstance(part.value, str) and part is not expr.body:
                        self._check_annotation(part)


def relaxations(reference: str) -> tuple[str, ...]:
    """The relaxations (:data:`.guards.RELAXATIONS`) a task's candidates get because the task's
    own reference (a body or a file's text) needs them: ``module_namespace`` when it reads a
    ``__dict__`` (the guards still refuse a denied module's). Text that does not parse
    needs none."""
    try:
        tree = pyast.parse(textwrap.dedent(reference))
    except SyntaxError:
        try:
            tree = pyast.parse("def _f():\n" + textwrap.indent(textwrap.dedent(reference), "    "))
        except SyntaxError:
            return ()
    reads = any(isinstance(n, ast.Attribute) and n.attr == "__dict__" for n in ast.walk(tree))
    return ("module_namespace",) if reads else ()


def _refuse(errors: list[str]) -> None:
    if errors:
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise PolicyRefused("; ".join(errors[:3]) + more)


def confine_body(chunk: str, ctx: ModuleContext, is_async: bool = False,
                 class_name: str | None = None) -> str:
    """The statements of a function body (dedented text, as :func:`.functions.inject` places
    them), rewritten under the policy; ``class_name``: the class of a method (private names
    are mangled with it). Raises :class:`PolicyRefused`, or ``SyntaxError`` when the text is
    not a body."""
    head = "async def _ianvs_body_():\n" if is_async else "def _ianvs_body_():\n"
    tree = pyast.parse(head + "".join("    " + line if line.strip() else line
                                    for line in chunk.splitlines(keepends=True)))
    fn = tree.body[0]
    assert isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
    policy = CandidatePolicy(ctx, depth=1, class_name=class_name)
    body: list[ast.stmt] = []
    for stmt in fn.body:
        out = policy.visit(stmt)
        body.extend(out if isinstance(out, list) else [out] if out is not None else [])
    _refuse([re.sub(r"^Line (\d+):", lambda m: f"Line {int(m.group(1)) - 1}:", e) for e in policy.errors])
    fn.body = body
    ast.fix_missing_locations(tree)
    return "\n".join(ast.unparse(s) for s in body) + "\n"


def _span(stmt: ast.stmt) -> tuple[int, int]:
    decorators = getattr(stmt, "decorator_list", [])
    start = min([stmt.lineno, *[d.lineno for d in decorators]])
    return start, stmt.end_lineno or stmt.lineno


def _same_shape(stmt: ast.stmt) -> str:
    return ast.dump(stmt, annotate_fields=True, include_attributes=False)


def confine_file(new_text: str, old_text: str | None, ctx: ModuleContext) -> str:
    """A whole-file answer with each top-level statement that is not in ``old_text`` (same AST,
    positions aside) rewritten under the policy (``ctx.file_mode`` should be true), every
    top-level class registered as the answer's own, and every other line kept as written.
    A text that does not parse is returned unchanged (it fails to import on its own). Raises
    :class:`PolicyRefused`."""
    try:
        tree = pyast.parse(new_text)
    except (SyntaxError, ValueError):
        return new_text
    old: Counter[str] = Counter()
    if old_text is not None:
        try:
            old = Counter(_same_shape(s) for s in pyast.parse(old_text).body)
        except (SyntaxError, ValueError):
            pass
    extra_denied = _derived(tree, _import_names(tree)[1])
    ctx = ModuleContext(ctx.imports, ctx.packages, ctx.denied | frozenset(extra_denied), True)
    policy = CandidatePolicy(ctx)
    lines = new_text.splitlines(keepends=True)
    spans = [_span(s) for s in tree.body]
    shared = any(b[0] <= a[1] for a, b in zip(spans, spans[1:]))
    out: list[str] = []
    pos = 0
    new_body: list[ast.stmt] = []
    for stmt, (start, end) in zip(tree.body, spans):
        if old[_same_shape(stmt)] > 0:
            old[_same_shape(stmt)] -= 1
            kept: ast.stmt | list[ast.stmt] = stmt
            text = "".join(lines[start - 1:end])
        else:
            visited = policy.visit(copy.deepcopy(stmt))
            kept = visited
            parts = visited if isinstance(visited, list) else [visited]
            for p in parts:
                ast.fix_missing_locations(p)
            text = "\n".join(ast.unparse(p) for p in parts) + "\n"
        if isinstance(stmt, ast.ClassDef) and not isinstance(kept, list) and kept is stmt:
            text = "@_ianvs_own_\n" + text
        new_body.extend(kept if isinstance(kept, list) else [kept])
        out.append("".join(lines[pos:start - 1]))
        out.append(text)
        pos = end
    _refuse(policy.errors)
    if shared:  # statements share lines (``import a; import b``): no line-faithful splice
        for stmt in new_body:
            if isinstance(stmt, ast.ClassDef) and not any(
                    isinstance(d, ast.Name) and d.id == "_ianvs_own_" for d in stmt.decorator_list):
                stmt.decorator_list.insert(0, ast.Name("_ianvs_own_", ast.Load()))
        module = ast.Module(body=new_body, type_ignores=[])
        ast.fix_missing_locations(module)
        return ast.unparse(module) + "\n"
    out.append("".join(lines[pos:]))
    return "".join(out)
