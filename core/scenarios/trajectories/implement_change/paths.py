"""The paths an implement-change or revise answer names: one spelling per file, and the test side
no answer may write.

**One spelling** (:func:`canonical_path`). Every path a reply names (a whole-file block's name, a
file of a diff) is canonicalised once, where it is read: a single leading ``./`` is dropped, and
what is left must already be the canonical relative path (:func:`core.scenarios.repo.view.relpath_problem`:
no empty segment -- ``a//b``, a trailing ``/`` --, no ``.``/``..``, no backslash, NUL or control
character, not absolute) and must not enter ``.git``. Anything else is refused, never
normalised: the edits are keyed by the canonical path only, so ``tests/./test_core.py``,
``tests//test_core.py`` or ``tests/test_core.py/`` cannot reach the view's writer as another
name of a checked file.

**The test side** (:class:`TestSide`, issue 42). What decides a test-graded task is the task's
tests and everything pytest reads to configure, collect and import them; an answer may write none
of it (``bad_path``, the reason recorded in the result's detail). Refused whatever the task:

* the task's test files (``test_files`` and the files of its FAIL_TO_PASS / PASS_TO_PASS /
  deselected node ids) and every file under a directory holding one (except the repository's
  top folder, an import root, or a directory holding a file the task changes);
* test files and folders by name (:func:`core.scenarios.trajectories.history.is_test_path`:
  ``test_*.py``, ``*_test.py``, ``conftest.py``, ``tests/``, ``test/``, ``testing/`` ...), at any
  depth -- the builders never give a task such a file to change;
* pytest's and the interpreter's configuration and start-up files by name, at any depth:
  :data:`CONFIG_NAMES` (``conftest.py``, ``pytest.ini``, ``tox.ini``, ``setup.cfg``,
  ``pyproject.toml``, ``sitecustomize.py`` ...), ``*.pth``, bytecode and extension modules
  (:data:`NEVER_SUFFIXES`: an extension module beside a module takes its place on import),
  anything in ``__pycache__`` or ``.pytest_cache``, and distribution metadata (``*.dist-info/``,
  ``*.egg-info/``: the view is on ``sys.path``, and pytest loads the plugins their entry points
  name).

Refused unless the task's own change edits the file (its ``files``; ``reference_files`` for a
revise task): the project's ``setup.py``; the *modules the tests import* -- found statically:
every ``import``/``from ... import`` (relative ones too), ``pytest.importorskip``/
``importlib.import_module`` of a literal name and ``pytest_plugins`` of the test files and of the
``conftest.py`` files above them, resolved to existing files of the repository against the test's
folder, its first folder up without ``__init__.py`` (where pytest's default import mode puts
tests on ``sys.path``), the top folder and the task's import roots, every package ``__init__.py``
on the way included -- and the ``__init__.py`` files of the packages that hold the tests; a
package that would hide one of those modules (``pkg/utils/__init__.py`` beside ``pkg/utils.py``);
a new ``__init__.py`` in a folder above a test (pytest would import the tests under another name);
a new top-level module or package (``<root or import root>/<name>.py`` or
``<name>/__init__.py``: it would come before the environment's packages on ``sys.path``). Only
direct imports are followed: the code under test runs in the tests' interpreter anyway (the
``in_process_confined`` grading tier, docs/sandbox.md), so this keeps the files that *check* the code
fixed, not every file the code touches.

Case and Unicode normalisation do not open a way round: names are compared after NFC and case
folding. Names are compared as the reply gives them after canonicalisation; a symbolic link on
the way, or a path that puts a file where the tree has a folder (or the reverse), is refused by
the caller against the tree itself (:mod:`.answer`).

**Defence in depth.** :meth:`TestSide.pinned` lists the tree's files on the test side plus any
refused path of the edits; the grader passes them to the view writer
(:func:`core.scenarios.repo.view.make_view` ``pinned``), which writes them from the pinned tree
*after* the answer's edits (or removes them, when the tree has none), so the test side of the
view is the task's even if a check here missed a path.

**Builders.** A candidate whose own change writes the test side (:func:`gold_refusals`: a
revision that edits ``tox.ini`` along with the code, say) could never be passed by a reply, the
real change included: ``ianvs dataset implement-change`` drops it and ``ianvs dataset revise
--grade-tests`` grades it by similarity, both under the reason ``edits_test_side``.
"""
from __future__ import annotations

import ast
import os
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from importlib.machinery import BYTECODE_SUFFIXES, EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

from core.common import pyast
from core.scenarios.repo.view import relpath_problem
from core.scenarios.trajectories.history import is_test_path

__all__ = ["canonical_path", "TestSide", "gold_refusals", "CONFIG_NAMES", "TASK_ONLY_NAMES", "NEVER_SEGMENTS",
           "NEVER_SUFFIXES", "METADATA_SUFFIXES"]

#: files pytest or the interpreter reads to configure a run, at any depth
CONFIG_NAMES = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini",
                          "setup.cfg", "pyproject.toml", "sitecustomize.py", "usercustomize.py"})
#: files an answer may write only when the task's own change does
TASK_ONLY_NAMES = frozenset({"setup.py"})
#: folders no answer writes into
NEVER_SEGMENTS = frozenset({".git", "__pycache__", ".pytest_cache"})
#: bytecode, extension modules and path-configuration files: never written by an answer
NEVER_SUFFIXES = tuple(sorted({".pth", ".pyc", ".pyo", ".pyd", ".so", ".egg-link", *BYTECODE_SUFFIXES,
                               *EXTENSION_SUFFIXES}))
#: distribution metadata folders: on ``sys.path`` (the view is) their ``entry_points.txt`` is how
#: pytest finds plugins to load (``pytest11``)
METADATA_SUFFIXES = (".dist-info", ".egg-info")
_IMPORTERS = frozenset({"importorskip", "import_module", "__import__"})


def _fold(path: str) -> str:
    return unicodedata.normalize("NFC", path).casefold()


def canonical_path(raw: str) -> tuple[str, str]:
    """``(path, "")`` with ``path`` the canonical form of ``raw`` (a leading ``./`` dropped), or
    ``("", why)`` when ``raw`` has no canonical form (module docstring)."""
    path = raw.removeprefix("./")
    why = relpath_problem(path)
    if why:
        return "", f"{raw!r}: {why}"
    if ".git" in _fold(path).split("/"):
        return "", f"{raw!r}: inside .git"
    return path, ""


def _dir(path: str) -> str:
    return path.rpartition("/")[0]


def _ancestors(path: str) -> Iterator[str]:
    """The folders holding ``path``, innermost first, ending with the top folder ``""``."""
    d = _dir(path)
    while d:
        yield d
        d = _dir(d)
    yield ""


def _join(base: str, rel: str) -> str:
    return f"{base}/{rel}" if base else rel


def _under(path: str, folder: str) -> bool:
    return not folder or path.startswith(folder + "/")


def _literal_names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _imports(text: str) -> Iterator[tuple[int, str]]:
    """``(level, dotted name)`` of every module a file imports by name (module docstring)."""
    try:
        tree = pyast.parse(text)
    except (SyntaxError, ValueError):
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield 0, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if base:
                yield node.level, base
            for alias in node.names:  # ``from pkg import mod`` imports pkg/mod.py when there is one
                if alias.name != "*":
                    yield node.level, f"{base}.{alias.name}" if base else alias.name
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in _IMPORTERS:
                for mod in _literal_names(node.args[0]):
                    yield 0, mod
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytest_plugins"
                                                  for t in node.targets):
            for mod in _literal_names(node.value):
                yield 0, mod


@dataclass(frozen=True)
class TestSide:
    """The test side of one task over its tree ``root`` (module docstring). Build it with
    :meth:`for_task` or :meth:`for_tests`; :meth:`refusal` says why an answer may not write a
    path; ``guarded=False`` (:meth:`unguarded`) refuses nothing (similarity-graded revise
    tasks: nothing runs, and their real revisions edit tests and configuration)."""

    __test__ = False  # not a pytest test class

    root: Path
    tests: frozenset[str] = frozenset()
    test_dirs: frozenset[str] = frozenset()
    test_ancestors: frozenset[str] = frozenset()
    imported: frozenset[str] = frozenset()
    task_files: frozenset[str] = frozenset()
    import_roots: tuple[str, ...] = ("",)
    guarded: bool = True

    @classmethod
    def unguarded(cls, root: Path) -> TestSide:
        return cls(root, guarded=False)

    @classmethod
    def for_task(cls, rec: Mapping[str, Any], root: Path) -> TestSide:
        """The test side of a task record (implement-change, or a test-graded revise task): its
        ``test_files``, the files of its node ids, its changed ``files`` (+ ``reference_files``)
        and ``env.import_roots``."""
        tests = list(rec.get("test_files") or [])
        spec = rec.get("tests") or {}
        for key in ("fail_to_pass", "pass_to_pass", "deselect"):
            tests += [str(t).split("::", 1)[0] for t in spec.get(key) or []]
        files = [*(rec.get("files") or []), *(rec.get("reference_files") or {})]
        roots = (rec.get("env") or {}).get("import_roots") or []
        return cls.for_tests(root, tests, files, roots)

    @classmethod
    def for_tests(cls, root: Path, tests: Iterable[str], task_files: Iterable[str] = (),
                  import_roots: Iterable[str] = ()) -> TestSide:
        """The test side of ``tests`` (paths of test files) in ``root``; ``task_files``: what
        the task's own change edits."""
        test_set = frozenset(p for p in (canonical_path(t)[0] for t in tests) if p)
        files = frozenset(p for p in (canonical_path(f)[0] for f in task_files) if p)
        roots = ("", *sorted({p for p in (canonical_path(r)[0] for r in import_roots) if p}))
        dirs = frozenset(_dir(t) for t in test_set
                         if _dir(t) not in roots and not any(_under(f, _dir(t)) for f in files))
        above = frozenset(a for t in test_set for a in _ancestors(t))
        side = cls(root, test_set, dirs, above, frozenset(), files, roots)
        return cls(root, test_set, dirs, above, frozenset(side._imported_files()), files, roots)

    @cached_property
    def _folded(self) -> dict[str, frozenset[str]]:
        return {key: frozenset(_fold(p) for p in getattr(self, key))
                for key in ("tests", "test_dirs", "test_ancestors", "imported")}

    # ------------------------------------------------------------------ what the tests import
    def _is_file(self, rel: str) -> bool:
        path = self.root / rel
        return path.is_file() and not path.is_symlink()

    def _readers(self) -> Iterator[str]:
        """The test files and the ``conftest.py`` files pytest loads for them."""
        yield from sorted(self.tests)
        for folder in sorted(self.test_ancestors):
            conftest = _join(folder, "conftest.py")
            if self._is_file(conftest):
                yield conftest

    def _package_base(self, folder: str) -> str:
        """The first folder up from ``folder`` that is not a package: where pytest's default
        import mode puts a test of ``folder`` on ``sys.path``."""
        while folder and self._is_file(_join(folder, "__init__.py")):
            folder = _dir(folder)
        return folder

    def _module_files(self, base: str, dotted: str) -> Iterator[str]:
        parts = [p for p in dotted.split(".") if p]
        for i in range(1, len(parts) + 1):
            stem = _join(base, "/".join(parts[:i]))
            for candidate in (f"{stem}/__init__.py", f"{stem}.py"):
                if self._is_file(candidate):
                    yield candidate

    def _imported_files(self) -> Iterator[str]:
        for reader in self._readers():
            folder = _dir(reader)
            # the packages that hold a test are imported with it
            d = folder
            while d and self._is_file(_join(d, "__init__.py")):
                yield _join(d, "__init__.py")
                d = _dir(d)
            try:
                text = (self.root / reader).read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            bases = list(dict.fromkeys([folder, self._package_base(folder), *self.import_roots]))
            for level, dotted in _imports(text):
                if level:
                    base = folder
                    for _ in range(level - 1):
                        base = _dir(base)
                    yield from self._module_files(base, dotted)
                else:
                    for base in bases:
                        yield from self._module_files(base, dotted)

    # ------------------------------------------------------------------ the verdicts
    def refusal(self, path: str) -> str | None:
        """Why an answer may not write the canonical ``path``, or None."""
        if not self.guarded:
            return None
        fold = _fold(path)
        parts = fold.split("/")
        name = parts[-1]
        folded = self._folded
        if fold in folded["tests"]:
            return f"{path}: a test file of the task"
        folder = next((d for d in sorted(self.test_dirs) if d and _under(fold, _fold(d))), None)
        if folder is not None:
            return f"{path}: inside {folder}/, a folder of the task's tests"
        if is_test_path(fold):
            return f"{path}: a test file or test folder by name (the test side is the task's)"
        if name in CONFIG_NAMES:
            return f"{path}: pytest or the interpreter reads it to configure the run"
        if NEVER_SEGMENTS & set(parts[:-1]) or name.endswith(NEVER_SUFFIXES):
            return f"{path}: a cache, bytecode, extension module or .pth file"
        if any(p.endswith(METADATA_SUFFIXES) for p in parts[:-1]):
            return f"{path}: distribution metadata (pytest loads the plugins its entry points name)"
        if path in self.task_files:
            return None
        if name in TASK_ONLY_NAMES:
            return f"{path}: the project's setup script (the task's change does not edit it)"
        if fold in folded["imported"]:
            return f"{path}: a module the task's tests import (the task's change does not edit it)"
        if name == "__init__.py":  # a package ``pkg/m/`` is imported before a module ``pkg/m.py``
            hidden = next((m for m in sorted(self.imported - self.task_files)
                           if m.endswith(".py") and not m.endswith("/__init__.py") and _fold(m[:-3]) == _dir(fold)),
                          None)
            if hidden is not None:
                return f"{path}: the package would hide {hidden}, a module the task's tests import"
        if (self.root / path).exists():
            return None
        if name == "__init__.py" and _dir(fold) in folded["test_ancestors"]:
            return f"{path}: a new package above the task's tests (pytest would import them under another name)"
        for base in self.import_roots:
            if base and not path.startswith(base + "/"):
                continue
            top = (path[len(base) + 1:] if base else path).split("/")
            if (len(top) == 1 and name.endswith(".py")) or (len(top) == 2 and top[1] == "__init__.py"):
                return f"{path}: a new top-level module (it would come before the environment's packages on sys.path)"
        return None

    def pinned(self, edits: Iterable[str] = ()) -> frozenset[str]:
        """The tree's files on the test side and the refused paths among ``edits``: what the
        view writer restores from the tree after the edits (module docstring)."""
        if not self.guarded:
            return frozenset()
        found = set()
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if d not in (".git", "__pycache__")]
            rel = os.path.relpath(dirpath, self.root)
            for fname in filenames:
                path = fname if rel == "." else f"{rel}/{fname}"
                if not os.path.islink(os.path.join(dirpath, fname)) and self.refusal(path):
                    found.add(path)
        return frozenset(found | {p for p in edits if self.refusal(p)})


def gold_refusals(rec: Mapping[str, Any], root: Path) -> list[str]:
    """Why a reply giving the task's own change (its ``files`` and ``reference_files``) would be
    refused on the task root ``root``; empty for a task a reply can pass (module docstring)."""
    side = TestSide.for_task(rec, root)
    paths = sorted({*(rec.get("files") or []), *(rec.get("reference_files") or {})})
    return [why for why in (side.refusal(p) for p in paths) if why]
