"""Model-written tests as units the sandbox can grade one by one, checked without running them.

Each string of a reply's ``tests`` is one *unit* (one assert line, or with ``test_style: free``
any Python: helper definitions, ``def test_*`` functions, loops). Nothing of it runs in this
process: :func:`check_unit` only parses it (``ast``) and decides whether it can be run at all.
A unit is **invalid**, and counted so, never as a pass, when it

* does not parse (``syntax_error``) or is empty (``empty``);
* imports something outside the allow-list (``import:<module>``): the safe standard-library
  modules of :data:`core.scenarios.repo.written_tests.SAFE_STDLIB` and whatever the task
  prompt itself imports (the judge of the sandbox has no site-packages); for a repository
  task also the repository's own package, which its tests run beside;
* uses what the static filter of model-written repository tests refuses
  (``unsafe:<reason>``: ``exec``, ``open``, dunder attributes, ...; the same function,
  :func:`~core.scenarios.repo.written_tests.unsafe_reason`);
* never calls the function under test (``no_call``): no call ``f(...)`` of the entry point by
  name and no call that passes it as an argument (``check(f)``), anywhere in the unit; for a
  method also ``obj.f(...)`` counts, and for a dunder method a call of its class;
* checks nothing (``no_assert``): no ``assert`` statement anywhere in the unit.

A valid unit becomes the ``test`` of one boundary-tier :class:`ExecRequest`
(:func:`judge_test`): ``def check(candidate)`` binding the entry point's name to the candidate,
then the unit's statements, then a call of each top-level ``test*`` function it defines; an
``assert a == b`` without a message gets ``"got " + repr(a)``, which is what a failing test
tells the next try. The rewrite is done on the syntax tree (``ast.unparse``), so string
literals keep their values.
The judge runs it; the model's code runs in the candidate process and only answers calls.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from core.scenarios.repo.written_tests import SAFE_STDLIB, unsafe_reason
from core.common import pyast

#: the status of a unit that passed :func:`check_unit`
VALID = "valid"


@dataclass(frozen=True)
class UnitCheck:
    """The static verdict on one unit: ``status`` is :data:`VALID` or the invalid reason."""

    status: str
    test: str = ""

    @property
    def valid(self) -> bool:
        return self.status == VALID


def prompt_imports(prompt: str) -> frozenset[str]:
    """Top-level module names the task prompt imports (empty if it does not parse)."""
    try:
        tree = pyast.parse(prompt)
    except (SyntaxError, ValueError):
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return frozenset(names)


def calls_entry_point(tree: ast.AST, entry_point: str, owner: str | None = None) -> bool:
    """True when some call in ``tree`` is ``entry_point(...)`` or passes ``entry_point``. For a
    method (``owner``: the name of its class) also a call of the attribute
    (``<anything>.entry_point(...)``), and for a dunder method (``__init__``, ``__len__``, ...,
    which tests reach through the class and builtins, never by name) a call of the class."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Name) and node.func.id == entry_point:
            return True
        if owner is not None:
            if isinstance(node.func, ast.Attribute) and node.func.attr == entry_point:
                return True
            dunder = entry_point.startswith("__") and entry_point.endswith("__")
            if dunder and isinstance(node.func, ast.Name) and node.func.id == owner.split(".")[0]:
                return True
        values = [*node.args, *(k.value for k in node.keywords)]
        if any(isinstance(v, ast.Name) and v.id == entry_point for v in values):
            return True
    return False


class _Explain(ast.NodeTransformer):
    """Give each message-less ``assert <left> <op> <right>`` the message ``got <left>!r``, so a
    failing test tells the model what its function returned. The judge evaluates a message only
    when its assert fails, answering candidate calls in it from the replies it already has."""

    def visit_Assert(self, node: ast.Assert) -> ast.Assert:
        if node.msg is None and isinstance(node.test, ast.Compare) and len(node.test.ops) == 1:
            left = node.test.left
            node.msg = ast.BinOp(ast.Constant("got "), ast.Add(),
                                 ast.Call(ast.Name("repr", ast.Load()), [left], []))
        return node


def judge_test(tree: ast.Module, entry_point: str) -> str:
    """The ``check(candidate)`` test of a parsed unit (see the module docstring)."""
    tree = _Explain().visit(tree)
    body: list[ast.stmt] = [ast.Assign(targets=[ast.Name(entry_point, ast.Store())],
                                       value=ast.Name("candidate", ast.Load()), lineno=1)]
    body.extend(tree.body)
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.name.startswith("test") and not node.args.args:
            body.append(ast.Expr(ast.Call(ast.Name(node.name, ast.Load()), [], [])))
    check = ast.FunctionDef(
        name="check", args=ast.arguments(posonlyargs=[], args=[ast.arg("candidate")], vararg=None,
                                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=body, decorator_list=[], returns=None, type_comment=None, lineno=1)
    module = ast.fix_missing_locations(ast.Module(body=[check], type_ignores=[]))
    return ast.unparse(module) + "\n"


def check_unit(unit: str, entry_point: str, prompt: str = "", owner: str | None = None,
               modules: frozenset[str] = frozenset()) -> UnitCheck:
    """Decide statically whether ``unit`` can be run (module docstring); never runs it.
    ``owner``: the class when the entry point is a method (:func:`calls_entry_point`);
    ``modules``: top-level modules a unit may import besides the allow-list (a repository
    task's own package)."""
    if not unit.strip():
        return UnitCheck("empty")
    try:
        tree = pyast.parse(unit)
        compile(tree, "<unit>", "exec", dont_inherit=True)  # compile only: 'return' outside def
    except (SyntaxError, ValueError, RecursionError):
        return UnitCheck("syntax_error")
    allowed = SAFE_STDLIB | prompt_imports(prompt) | modules
    reason = unsafe_reason(unit, allowed)
    if reason is not None:
        if reason.startswith("imports"):
            return UnitCheck("import:" + reason.split()[-1])
        return UnitCheck("unsafe:" + reason)
    if not calls_entry_point(tree, entry_point, owner):
        return UnitCheck("no_call")
    if not any(isinstance(node, ast.Assert) for node in ast.walk(tree)):
        return UnitCheck("no_assert")
    try:
        test = judge_test(tree, entry_point)
        compile(test, "<test>", "exec", dont_inherit=True)  # compile only, never executed here
    except (SyntaxError, ValueError, RecursionError):  # e.g. 'return' or 'yield' at top level
        return UnitCheck("syntax_error")
    return UnitCheck(VALID, test)
