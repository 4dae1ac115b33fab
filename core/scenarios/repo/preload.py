"""Which modules a repository's sandbox server imports once, so every sample forks with them loaded.

A repo sample is a fresh pytest run: most of its time is importing pytest and the repository's
third-party dependencies (ELI5: scikit-learn, pandas, scipy; about 2 s of a 2.7 s sample). The
fork server can import them once before it forks (``LocalExecutor(preload=..., sys_path=...)``).

:func:`dependency_modules` lists them statically, without importing anything: every absolute
import at module level (also inside a top-level ``try``/``if``) of the repository's ``.py`` files,
as the dotted module names written (``from sklearn.linear_model import Ridge`` gives
``sklearn.linear_model``; ``from sklearn import tree`` also ``sklearn.tree`` when that is a
module), kept only when the module's file is in the environment's site-packages. Never preloaded:
the repository's own packages (samples edit them: each sample must import its own view's copy),
anything not installed in the environment, the test tools' coverage machinery. ``pytest`` always
is. The server imports these as trusted code: they are the dataset's pinned dependencies, never
the sample's code; a module that fails to import is skipped (noted in the executor's facts).
"""

from __future__ import annotations

import ast
import logging
import warnings
from pathlib import Path
from typing import Iterable, Iterator
from core.common import pyast

__all__ = ["dependency_modules"]

LOG = logging.getLogger(__name__)

#: imported for every repository: the runner calls pytest.main
ALWAYS = ("pytest",)
#: top-level names never preloaded (the coverage plugin must start with the run it measures)
NEVER = frozenset({"coverage", "pytest_cov", "pip", "setuptools", "pkg_resources", "_pytest"})
#: bound on the list (a pathological repository cannot make the server import thousands)
MAX_MODULES = 400


def _module_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """Statements run at import time: the module body and the bodies of its top-level
    ``try``/``if`` blocks (recursively), not functions or classes."""
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop(0)
        yield node
        if isinstance(node, ast.Try):
            todo.extend([*node.body, *node.orelse, *node.finalbody,
                         *(s for h in node.handlers for s in h.body)])
        elif isinstance(node, ast.If):
            todo.extend([*node.body, *node.orelse])


def _imported(tree: ast.Module) -> Iterator[str]:
    for node in _module_level(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*")


def _installed(site: Path, name: str) -> bool:
    base = site.joinpath(*name.split("."))
    if (base / "__init__.py").is_file() or base.with_suffix(".py").is_file():
        return True
    return base.parent.is_dir() and any(base.parent.glob(base.name + ".*.so"))


def own_packages(root: Path) -> set[str]:
    """Top-level names the repository itself provides (at its root or under ``src/``)."""
    names: set[str] = set()
    for base in (root, root / "src"):
        if not base.is_dir():
            continue
        for entry in base.iterdir():
            if entry.is_dir() and (entry / "__init__.py").is_file():
                names.add(entry.name)
            elif entry.suffix == ".py":
                names.add(entry.stem)
    return names


def dependency_modules(root: Path, site: str | Path, files: Iterable[Path] | None = None) -> list[str]:
    """Modules to preload for the repository at ``root`` whose environment's site-packages is
    ``site`` (sorted, ``pytest`` first; at most :data:`MAX_MODULES`). ``files`` defaults to
    every ``.py`` file under ``root``; a file that does not parse is skipped."""
    site = Path(site)
    own = own_packages(root)
    found: set[str] = set()
    for path in sorted(files if files is not None else root.rglob("*.py")):
        try:
            with warnings.catch_warnings():  # the repository's invalid escapes are not ours to report
                warnings.simplefilter("ignore")
                tree = pyast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError, OSError):
            continue
        for name in _imported(tree):
            top = name.split(".", 1)[0]
            if top in own or top in NEVER or name in found:
                continue
            if _installed(site, name):
                found.add(name)
    out = [*ALWAYS, *sorted(found - set(ALWAYS))]
    if len(out) > MAX_MODULES:
        LOG.info("preloading the first %d of %d dependency modules", MAX_MODULES, len(out))
    return out[:MAX_MODULES]
