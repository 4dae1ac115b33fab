"""Mutants of a reference solution, for the adequacy of model-written tests (mutation score).

:func:`make_mutants` applies one operator at one place of the entry point's body (the project's
own AST operators; no mutation library):

========= =====================================================================
``AOR``   arithmetic operator: ``+`` <-> ``-``, ``*`` -> ``+``, ``/`` -> ``*``, ``//`` -> ``/``,
          ``%`` -> ``//``, ``**`` -> ``*``
``ROR``   comparison: ``<`` <-> ``<=``, ``>`` <-> ``>=``, ``==`` <-> ``!=``, ``in`` <-> ``not
          in``, ``is`` <-> ``is not``
``LCR``   ``and`` <-> ``or``
``NEG``   the condition of an ``if``/``while``/conditional expression negated
``CRP``   an integer constant ``c`` -> ``c + 1`` (``True``/``False`` left alone)
``RET``   ``return <value>`` -> ``return None``
========= =====================================================================

Sites are numbered in the order :func:`ast.walk` meets them; with more sites than ``limit``,
``limit`` of them evenly spread are used, so the set is deterministic. Mutants are plain
source text: they are graded in the sandbox (:mod:`.metrics`), never run here. A mutant that
does not differ from the reference when unparsed is dropped.
"""
from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from dataclasses import dataclass
from core.common import pyast

_BIN: dict[type, type] = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add,
                          ast.Div: ast.Mult, ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv,
                          ast.Pow: ast.Mult}
_CMP: dict[type, type] = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
                          ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn,
                          ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}


@dataclass(frozen=True)
class Mutant:
    """One mutant: its operator, the line it changed (in the reference module) and its source."""

    index: int
    operator: str
    line: int
    code: str


def _sites(node: ast.AST) -> list[tuple[str, Callable[[ast.AST], None]]]:
    """The mutations applicable at ``node``: (operator, function mutating a copy in place)."""
    out: list[tuple[str, Callable[[ast.AST], None]]] = []
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        out.append(("AOR", lambda n: setattr(n, "op", _BIN[type(n.op)]())))  # type: ignore[attr-defined]
    elif isinstance(node, ast.AugAssign) and type(node.op) in _BIN:
        out.append(("AOR", lambda n: setattr(n, "op", _BIN[type(n.op)]())))  # type: ignore[attr-defined]
    elif isinstance(node, ast.Compare) and type(node.ops[0]) in _CMP:
        out.append(("ROR", lambda n: n.ops.__setitem__(0, _CMP[type(n.ops[0])]())))  # type: ignore[attr-defined]
    elif isinstance(node, ast.BoolOp):
        out.append(("LCR", lambda n: setattr(n, "op", ast.Or() if isinstance(n.op, ast.And)  # type: ignore[attr-defined]
                                             else ast.And())))
    elif isinstance(node, (ast.If, ast.While, ast.IfExp)):
        out.append(("NEG", lambda n: setattr(n, "test", ast.UnaryOp(ast.Not(), n.test))))  # type: ignore[attr-defined]
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        out.append(("CRP", lambda n: setattr(n, "value", n.value + 1)))  # type: ignore[attr-defined]
    elif isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None):
        out.append(("RET", lambda n: setattr(n, "value", ast.Constant(None))))
    return out


def make_mutants(module: str, entry_point: str, limit: int = 10) -> list[Mutant]:
    """Up to ``limit`` mutants of function ``entry_point`` in ``module`` (module docstring);
    ``[]`` when the module does not parse or does not define it at top level."""
    try:
        tree = pyast.parse(module)
    except (SyntaxError, ValueError, RecursionError):
        return []
    target = next((i for i, n in enumerate(tree.body) if isinstance(n, ast.FunctionDef)
                   and n.name == entry_point), None)
    if target is None or limit < 1:
        return []
    func = tree.body[target]
    assert isinstance(func, ast.FunctionDef)
    docstring = ast.get_docstring(func, clean=False) is not None
    body_nodes = func.body[1:] if docstring else func.body
    places: list[tuple[int, str]] = []  # (position in the walk, operator)
    walk = [n for stmt in body_nodes for n in ast.walk(stmt)]
    for pos, node in enumerate(walk):
        for operator, _ in _sites(node):
            places.append((pos, operator))
    if len(places) > limit:
        step = len(places) / limit
        places = [places[int(i * step)] for i in range(limit)]
    original = ast.unparse(tree)
    mutants: list[Mutant] = []
    for pos, operator in places:
        copy_tree = copy.deepcopy(tree)
        copy_func = copy_tree.body[target]
        assert isinstance(copy_func, ast.FunctionDef)
        copy_nodes = copy_func.body[1:] if docstring else copy_func.body
        node = [n for stmt in copy_nodes for n in ast.walk(stmt)][pos]
        line = getattr(node, "lineno", func.lineno)
        mutate = next(fn for op, fn in _sites(node) if op == operator)
        mutate(node)
        code = ast.unparse(ast.fix_missing_locations(copy_tree))
        if code != original:
            mutants.append(Mutant(len(mutants), operator, int(line), code + "\n"))
    return mutants
