"""Model-written tests as units the sandbox can grade one by one, checked without running them.

Each string of a reply's ``tests`` is one *unit* (one assert line, or with ``test_style: free``
any Python: helper definitions, ``def test_*`` functions, loops). Nothing of it runs in this
process: :func:`check_unit` only parses it (``ast``), compiles the program the judge will run
from it, and decides whether it can be run at all. A unit is **invalid**, and counted so, never
as a pass, when it

* does not parse (``syntax_error``), is empty (``empty``) or nests deeper than
  :data:`MAX_DEPTH` syntax levels (``too_deep``: a depth no test needs, and below which parsing
  and compiling succeed alike in every process, whatever its recursion state);
* names what the judge program reserves for itself (``reserved``: any name or text holding
  ``_selfalign`` or ``SelfAlign``);
* imports something outside the allow-list (``import:<module>``): the safe standard-library
  modules of :data:`core.scenarios.repo.written_tests.SAFE_STDLIB` and whatever the task
  prompt itself imports (the judge of the sandbox has no site-packages); for a repository
  task also the repository's own package, which its tests run beside;
* uses what the static filter of model-written repository tests refuses
  (``unsafe:<reason>``: ``exec``, ``open``, dunder attributes, ...; the same function,
  :func:`~core.scenarios.repo.written_tests.unsafe_reason`), or what reaches the interpreter's
  state from the judge's process (``unsafe:<reason>``, :func:`internals_reason`): a private
  attribute or import name, an attribute name that leads to a module of the interpreter
  (``typing.sys``, ``enum.bltns``), frames or code objects, an attribute reached by a name
  computed at run time (``getattr``, ``setattr``, ``operator.attrgetter`` ... with anything but
  a constant, harmless name, or passed around as a value), or a function that evaluates text
  (``typing.get_type_hints`` on string annotations);
* never calls the function under test (``no_call``): no call ``f(...)`` of the entry point by
  name and no call that passes it as an argument (``check(f)``), anywhere in the unit; for a
  method also ``obj.f(...)`` counts, and for a dunder method a call of its class;
* binds the function's name itself (``shadows``: ``def f``, ``f = ...``): its calls would test
  what it defined (not for a method, whose name a unit may use for a variable);
* checks nothing (``no_assert``): no ``assert`` statement anywhere in the unit;
* cannot be compiled as the judge compiles it (``compile:<message>``): the judge test
  (:func:`judge_test`) with its asserts rewritten exactly as the sandbox's judge rewrites them
  (:func:`core.testenvmanager.sandbox.boundary._rewrite_asserts`, which adds a ``try`` level
  around every assert: 19 nested loops compile alone and break CPython's limit of 20
  statically nested blocks in the judge).

Two more ways to be invalid are found when the unit runs (:mod:`.sandbox`, :mod:`.repo`): no
assert statement of it completed (``ran_no_assert``: an assert in a generator never iterated,
in a function never called, or one whose failure the unit swallowed), or, for a function
task, it never called the function (``ran_no_call``); and a unit whose run breaks the judge
(``harness:<detail>``) while a trusted test on the same program runs.

A valid unit becomes the ``test`` of one boundary-tier :class:`ExecRequest`
(:func:`judge_test`): ``def check(_selfalign_candidate)`` binding the entry point's name to a
wrapper that counts the calls and calls the candidate, then the unit's statements, each assert
followed by a count of completed asserts, then a call of each top-level ``test*`` function it
defines, then :data:`NOTHING_CHECKED` raised when no assert completed or the function was never
called. The counts live in ``check``'s own frame, under names the unit may not write
(``reserved``) and cannot reach otherwise (no ``globals``, ``locals``, ``vars``, frames:
``unsafe``). An ``assert a == b`` without a message gets ``"got " + repr(a)``, which is what a
failing test tells the next try. The rewrite is done on the syntax tree (``ast.unparse``), so
string literals keep their values.
The judge runs it; the model's code runs in the candidate process and only answers calls.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from core.scenarios.repo.written_tests import SAFE_STDLIB, unsafe_reason
from core.common import pyast

#: the status of a unit that passed :func:`check_unit`
VALID = "valid"
#: syntax levels a unit may nest (``too_deep`` beyond): far above what a test needs, far below
#: where parsing, the symbol table or the compiler recurse out, in this process or the judge's
MAX_DEPTH = 100
#: text no unit may hold: the judge program's own names start so (``reserved``)
RESERVED = ("_selfalign", "SelfAlign")
#: the judge program's parameter: the candidate (the sandbox's proxy of the program's function)
CANDIDATE = "_selfalign_candidate"
#: list in ``check``'s frame, one entry per assert statement of the unit that completed
ASSERTS = "_selfalign_asserts"
#: list in ``check``'s frame, one entry per call of the function under test
CALLS = "_selfalign_calls"
#: the exception ``check`` ends with when the unit checked nothing at run time; a unit outcome
#: whose detail names it is invalid (:func:`ran_nothing`)
NOTHING_CHECKED = "SelfAlignNothingChecked"
#: its messages, and the invalid reason each stands for
RAN_NO_ASSERT = "no assert statement of the test completed"
RAN_NO_CALL = "the function under test was never called"
_RAN_REASONS = {RAN_NO_ASSERT: "ran_no_assert", RAN_NO_CALL: "ran_no_call"}

#: attribute and imported names that lead from the judge's process to the interpreter's state:
#: modules other modules hold under these names (``typing.sys``, ``enum.bltns``,
#: ``dataclasses.inspect``, ``unittest.mock`` ...; private aliases such as ``random._os`` are
#: refused as private names), frames, code objects and closures, and functions that evaluate
#: text or reach attributes by a computed name
INTERNAL_NAMES = frozenset({
    "sys", "os", "posix", "builtins", "bltns", "inspect", "types", "io", "codecs", "signal",
    "weakref", "traceback", "warnings", "copyreg", "gc", "importlib", "ctypes", "subprocess",
    "marshal", "pickle", "threading", "socket", "shutil", "resource", "mmap", "pty", "runpy",
    "pkgutil", "atexit", "tracemalloc", "faulthandler", "linecache", "tempfile",
    "multiprocessing", "asyncio", "mock", "pathlib", "locale", "difflib",
    "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace", "gi_frame", "gi_code",
    "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code", "ag_await",
    "tb_frame", "tb_next", "cell_contents",
    "get_type_hints", "ForwardRef", "evaluate_forward_ref", "singledispatch",
    "singledispatchmethod", "get_field",
})
#: functions that reach an attribute by a name given as a string: a unit may call them with a
#: constant, allowed name only, and never hand them around as values
BY_NAME = frozenset({"getattr", "setattr", "delattr", "hasattr", "attrgetter", "methodcaller"})
#: builtins a unit may not call besides the repository filter's (they read files or stdin)
MORE_FORBIDDEN_CALLS = frozenset({"help"})


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


def shadows_entry_point(tree: ast.AST, entry_point: str) -> bool:
    """True when the unit binds the entry point's name itself (``def f``, ``class f``,
    ``f = ...``, ``for f in ...``): its calls then test what it defined, not the program."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node.name == entry_point:
            return True
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)) \
                and node.id == entry_point:
            return True
    return False


def depth(tree: ast.AST) -> int:
    """How many syntax levels ``tree`` nests (iteratively: any depth is measured)."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _name_reason(name: str, entry_point: str, private_ok: bool = False) -> str | None:
    """Why an attribute or imported ``name`` reaches the interpreter's state, else None
    (dunders are the repository filter's: :func:`unsafe_reason`)."""
    if name in INTERNAL_NAMES or name.startswith("co_"):
        return f"reaches {name}"
    if name.startswith("_") and not _dunder(name) and name != entry_point and not private_ok:
        return f"uses the private name {name}"
    return None


def _constant_names(call: ast.Call, name: str) -> list[ast.expr]:
    """The arguments of a call of ``name`` (one of :data:`BY_NAME`) that name attributes."""
    if name == "attrgetter":
        return [*call.args]
    if name == "methodcaller":
        return call.args[:1]
    return call.args[1:2]


def internals_reason(tree: ast.AST, entry_point: str,
                     own: frozenset[str] = frozenset()) -> str | None:
    """Why the unit ``tree`` could reach the judge's state (see the module docstring), else
    None. ``own``: top-level packages whose private modules and names a unit may import (a
    repository's package: its code is what the tests are about)."""
    callees = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            reason = _name_reason(node.attr, entry_point)
            if reason is not None:
                return reason
            if node.attr in BY_NAME and id(node) not in callees:
                return f"passes {node.attr} around"
        elif isinstance(node, ast.Name):
            if node.id in BY_NAME and id(node) not in callees:
                return f"passes {node.id} around"
            if _dunder(node.id) and node.id != "__name__":
                return f"uses the name {node.id}"
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names]
            for module in modules:  # a repository's own modules may be named as they are
                if module.split(".")[0] in own:
                    continue
                for part in module.split(".")[1:]:
                    reason = _name_reason(part, entry_point)
                    if reason is not None:
                        return reason
            if isinstance(node, ast.ImportFrom):
                mine = (node.module or "").split(".")[0] in own
                for alias in node.names:
                    reason = _name_reason(alias.name, entry_point, private_ok=mine)
                    if reason is not None:
                        return reason
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else \
                func.attr if isinstance(func, ast.Attribute) else ""
            if name in MORE_FORBIDDEN_CALLS:
                return f"calls {name}"
            if name in BY_NAME:
                if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
                    return f"calls {name} with computed arguments"
                for arg in _constant_names(node, name):
                    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                        return f"calls {name} with a computed name"
                    for part in arg.value.split("."):
                        reason = _name_reason(part, entry_point) or \
                            (f"{name} with a dunder name" if _dunder(part) else None)
                        if reason is not None:
                            return reason
    return None


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


class _CountAsserts(ast.NodeTransformer):
    """Follow every assert statement with ``ASSERTS.append(None)``: reached once the assert is
    over (held, or failed and recorded by the judge, which lets the test go on), never when its
    failure raised past it."""

    def visit_Assert(self, node: ast.Assert) -> list[ast.stmt]:
        count = ast.Expr(ast.Call(ast.Attribute(ast.Name(ASSERTS, ast.Load()), "append",
                                                ast.Load()), [ast.Constant(None)], []))
        return [node, ast.copy_location(count, node)]


def _stmts(source: str) -> list[ast.stmt]:
    return pyast.parse(source).body


def judge_test(tree: ast.Module, entry_point: str, count_calls: bool = True) -> str:
    """The ``check(candidate)`` test of a parsed unit (see the module docstring).
    ``count_calls``: bind the entry point to a wrapper counting its calls, and require one
    (off for repository tasks, whose units reach the function through its class or its module
    too, so a count through the name alone would miss calls)."""
    tree = _CountAsserts().visit(_Explain().visit(tree))
    if count_calls:
        bind = (f"{CALLS} = []\n"
                f"def {entry_point}(*args, **kwargs):\n"
                f"    {CALLS}.append(None)\n"
                f"    return {CANDIDATE}(*args, **kwargs)\n")
        last = f"if not {CALLS}:\n    raise {NOTHING_CHECKED}({RAN_NO_CALL!r})\n"
    else:
        bind, last = f"{entry_point} = {CANDIDATE}\n", ""
    body: list[ast.stmt] = [*_stmts(f"{ASSERTS} = []\n" + bind), *tree.body]
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.name.startswith("test") and not node.args.args:
            body.append(ast.Expr(ast.Call(ast.Name(node.name, ast.Load()), [], [])))
    body += _stmts(f"if not {ASSERTS}:\n    raise {NOTHING_CHECKED}({RAN_NO_ASSERT!r})\n" + last)
    check = ast.FunctionDef(
        name="check", args=ast.arguments(posonlyargs=[], args=[ast.arg(CANDIDATE)], vararg=None,
                                         kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=body, decorator_list=[], returns=None, type_comment=None, lineno=1)
    module = ast.Module(body=[*_stmts(f"class {NOTHING_CHECKED}(Exception):\n    pass\n"),
                              check], type_ignores=[])
    return ast.unparse(ast.fix_missing_locations(module)) + "\n"


def judge_compile_error(test: str) -> str | None:
    """None when the judge can compile ``test`` (a :func:`judge_test`) as it will: the
    sandbox's own rewrite of the asserts, then ``compile``; else the error's message."""
    from core.testenvmanager.sandbox.boundary import _rewrite_asserts  # the judge's own code

    try:
        _rewrite_asserts(test, "<test>")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as exc:
        return (getattr(exc, "msg", None) or str(exc) or type(exc).__name__)[:200]
    return None


def ran_nothing(outcome: str, detail: str) -> str | None:
    """The invalid reason of a unit whose run ended with :data:`NOTHING_CHECKED` (``outcome``
    ``error`` in the judge, ``failed`` in a repository's pytest run, whose ``detail`` may name
    the exception by its module), else None. Only the judge program raises it: a unit naming it
    is ``reserved``, and a candidate's exception reaches the judge as a builtin or as
    ``CandidateError``."""
    if outcome not in ("error", "failed"):
        return None
    for line in detail.splitlines():
        head, sep, message = line.strip().partition(": ")
        if sep and head.rpartition(".")[2] == NOTHING_CHECKED:
            return _RAN_REASONS.get(message.strip().strip("'\""))
    return None


def check_unit(unit: str, entry_point: str, prompt: str = "", owner: str | None = None,
               modules: frozenset[str] = frozenset(), count_calls: bool = True) -> UnitCheck:
    """Decide statically whether ``unit`` can be run (module docstring); never runs it.
    ``owner``: the class when the entry point is a method (:func:`calls_entry_point`);
    ``modules``: top-level modules a unit may import besides the allow-list (a repository
    task's own package); ``count_calls``: see :func:`judge_test`."""
    if not unit.strip():
        return UnitCheck("empty")
    try:
        tree = pyast.parse(unit)
        if depth(tree) > MAX_DEPTH:
            return UnitCheck("too_deep")
        compile(tree, "<unit>", "exec", dont_inherit=True)  # compile only: 'return' outside def
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return UnitCheck("syntax_error")
    if any(word in unit for word in RESERVED):
        return UnitCheck("reserved")
    allowed = SAFE_STDLIB | prompt_imports(prompt) | modules
    reason = unsafe_reason(unit, allowed) or internals_reason(tree, entry_point, modules)
    if reason is not None:
        if reason.startswith("imports"):
            return UnitCheck("import:" + reason.split()[-1])
        return UnitCheck("unsafe:" + reason)
    if not calls_entry_point(tree, entry_point, owner):
        return UnitCheck("no_call")
    if owner is None and shadows_entry_point(tree, entry_point):  # a method's name is free
        return UnitCheck("shadows")
    if not any(isinstance(node, ast.Assert) for node in ast.walk(tree)):
        return UnitCheck("no_assert")
    try:
        test = judge_test(tree, entry_point, count_calls)
    except (SyntaxError, ValueError, RecursionError):  # unparse of an unusual tree
        return UnitCheck("syntax_error")
    error = judge_compile_error(test)
    if error is not None:  # e.g. 'return' or 'yield' at top level, blocks nested too deep
        return UnitCheck("compile:" + error)
    return UnitCheck(VALID, test)
