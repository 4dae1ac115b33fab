"""The import graph of ``core/`` (and the ``sedna`` stand-in): no circles, lower layers never
import higher ones, and no part of the core names a task kind (docs/architecture.md).

Every import counts, at module level or inside a function (a function-level import is still a
dependency, only a later one), and so does ``importlib.import_module("literal")``; imports
under ``if TYPE_CHECKING:`` do not (they never run). The lazy ``"module:attribute"`` strings of
the one registry (:mod:`core.scenarios`) are names, not imports: that is how the core reaches a
kind without importing it.
"""
from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: lowest first, as docs/architecture.md draws them; a module belongs to the first group with a
#: prefix of its name, and may import its own layer or lower ones only
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("common", ("core.__version__", "core.common")),
    ("generation and compat", ("core.generation", "core.compat", "sedna")),
    # the rank step's contract types (imports only core.common): the test case controller
    # produces CaseResult rows, the story manager writes them
    ("testenvmanager", ("core.testenvmanager", "core.storymanager.rank.types")),
    ("testcasecontroller", ("core.testcasecontroller",)),
    ("scenarios", ("core.scenarios",)),
    ("storymanager and edge", ("core.storymanager", "core.edge")),
    ("cmd", ("core.cmd", "core")),
]

#: the homes under core/scenarios/ (a task kind, a family of kinds, or a scenario built on
#: kinds) and the homes each one builds on; nothing else may name a home's modules
HOMES: dict[str, set[str]] = {
    "codegen": set(),
    "comment": set(),
    "issue": set(),
    "repo": set(),
    # the trajectory kinds run the commit's tests through the repo kind's execution
    "trajectories": {"repo"},
    # self-alignment on function tasks (codegen's execution) and on repository tasks
    "selfalign": {"codegen", "repo"},
    # routers run the edge model's answer against its own tests (self-align's units)
    "cloudedge": {"codegen", "selfalign"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    """Every module of ``core`` and ``sedna``, by dotted name."""
    found = {}
    for top in ("core", "sedna"):
        for path in sorted((REPO / top).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, package: str) -> Iterator[str]:
    """Dotted names ``tree`` imports (``from x import y`` gives ``x.y`` and ``x``)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "import_module" and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node.args[0].value
        stack.extend(ast.iter_child_nodes(node))


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (not its own parent packages, which every
    import of a submodule initialises anyway)."""
    mods = modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for target in _imports(ast.parse(path.read_text(encoding="utf-8")), package):
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                edges.add(target)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def layer(module: str) -> int:
    for number, (_name, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return number
    raise AssertionError(f"{module} is in no layer: add it to LAYERS")


def home(module: str) -> str | None:
    """The home under core/scenarios/ ``module`` belongs to (None: not in one)."""
    parts = module.split(".")
    if len(parts) > 2 and parts[:2] == ["core", "scenarios"] and parts[2] in HOMES:
        return parts[2]
    if len(parts) > 2 and parts[:2] == ["core", "scenarios"]:
        folder = REPO / "core" / "scenarios" / parts[2]
        if folder.is_dir():
            raise AssertionError(f"core/scenarios/{parts[2]}/ is not in HOMES")
    return None


GRAPH = import_graph()


def test_the_graph_is_read() -> None:
    """A control for the checks below: the graph has the edges everyone knows of."""
    assert "core.scenarios.base" in GRAPH["core.scenarios.codegen"]
    assert "core.testenvmanager.sandbox.pool" in GRAPH["core.cmd.runner"]
    # a function-level import counts
    assert "core.scenarios.codegen.execution" in GRAPH["core.scenarios.codegen"]
    # importlib with a literal name counts
    assert "sedna.datasources" in GRAPH["core.testenvmanager.dataset.parsers"]


def test_the_checks_catch_a_circle_and_a_climb() -> None:
    """The cycle finder and the layer rule, on a made-up graph."""
    made_up = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(made_up) == [["a", "b", "c"]]
    assert layer("core.testenvmanager.sandbox.local") < layer("core.cmd.runner")
    assert layer("core.testcasecontroller.testcase") < layer("core.scenarios.codegen.execution")
    assert home("core.scenarios.trajectories.revise.builder") == "trajectories"
    assert home("core.scenarios.leak_views") is None


def test_no_import_circles() -> None:
    assert cycles(GRAPH) == []


def test_lower_layers_never_import_higher_ones() -> None:
    climbs = [f"{a} ({LAYERS[layer(a)][0]}) imports {b} ({LAYERS[layer(b)][0]})"
              for a, targets in sorted(GRAPH.items()) for b in sorted(targets)
              if layer(b) > layer(a)]
    assert climbs == []


@pytest.mark.parametrize("kind_home", sorted(HOMES))
def test_nothing_outside_a_home_names_it(kind_home: str) -> None:
    """Only the home itself and the homes that declare they build on it import its modules;
    the core reaches kinds through the registry's hooks."""
    allowed = {kind_home} | {h for h, needs in HOMES.items() if kind_home in needs}
    naming = sorted(f"{a} imports {b}" for a, targets in GRAPH.items() for b in targets
                    if home(b) == kind_home and home(a) not in allowed)
    assert naming == []


def test_the_sandbox_knows_no_scenario() -> None:
    sandbox = {a: t for a, t in GRAPH.items() if a.startswith("core.testenvmanager.sandbox")}
    assert sandbox
    assert not [f"{a} -> {b}" for a, targets in sandbox.items() for b in targets
                if b.startswith("core.scenarios")]
