"""The grading policy's compile step (:mod:`core.scenarios.repo.policy`) and its guards
(:mod:`core.scenarios.repo.guards`), without a sandbox: what is refused before anything runs,
what honest code keeps (and means the same after the rewrite), and what the guards refuse at
run time. The same classes run in the sandbox in ``test_hostile_grading.py``."""

from __future__ import annotations

import builtins
import math
import textwrap
import types
from typing import Any

import pytest

from core.scenarios.repo import guards
from core.scenarios.repo.policy import (PolicyRefused, confine_body, confine_file, module_context,
                                        relaxations)

@pytest.fixture(autouse=True)
def _no_guards_left() -> Any:
    """Each test starts and ends without guards in this process's builtins."""
    yield
    guards.VIOLATIONS.clear()
    for name in guards.GUARD_NAMES:
        builtins.__dict__.pop(name, None)


ORIGINAL = textwrap.dedent('''\
    import os
    import math
    import sys as _sys
    from inspect import signature
    from collections import OrderedDict
    _frame = _sys._getframe
    ''')
CTX = module_context(ORIGINAL, packages={"json"})  # a package the test process can import

REFUSED = {
    "import pytest's reports": "import _pytest.reports\n_pytest.reports.BaseReport.passed = True",
    "import pytest": "import pytest\nreturn pytest",
    "import sys": "import sys\nreturn 1",
    "sys under another name": "return _sys.modules",
    "a name derived from sys": "return _frame(0)",
    "import gc": "import gc\nreturn gc.get_objects()",
    "import builtins": "import builtins\nbuiltins.len = None",
    "__builtins__": "__builtins__['len'] = None",
    "__import__": "return __import__('sys')",
    "eval": "return eval('1')",
    "exec": "exec('x = 1')",
    "compile": "return compile('1', 'f', 'eval')",
    "globals": "return globals()",
    "vars": "return vars(os)",
    "a class's namespace by dunder": "return type(a).__subclasses__()",
    "frame of a generator": "g = (x for x in [1])\nreturn g.gi_frame",
    "traceback frame": "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    return e.__traceback__.tb_frame",
    "os._exit": "os._exit(0)",
    "from os import _exit": "from os import _exit\n_exit(0)",
    "exit": "exit(0)",
    "global": "global math\nmath = None",
    "rebinding getattr": "getattr = lambda *a: 1",
    "a guard's name": "_getattr_ = 1",
    "a dunder write": "a.__class__ = int",
    "a string annotation that evaluates": "def f(x: '__import__(\"sys\")'):\n    pass",
    "a string annotation naming sys": "def f(x: 'os.sys.modules'):\n    pass",
    "unittest.mock": "from unittest import mock\nreturn mock",
    "importlib.util": "import importlib.util",
    "inspect beyond signature": "from inspect import getmembers",
    "except*": "try:\n    pass\nexcept* ValueError:\n    pass",
    "a module the original does not import": "import subprocess",
    "the repository's test helpers": "from json.tests.test_x import AlwaysEquals\nreturn AlwaysEquals()",
    "a relative import of tests": "from .tests import helpers\nreturn helpers",
    "a test module's name from a package": "from json import tests\nreturn tests",
    "an always-equal class": "class Same:\n    def __eq__(self, other):\n        return True\nreturn Same()",
    "an always-true class by assignment": "class T(int):\n    __bool__ = lambda self: True\nreturn T()",
}


@pytest.mark.parametrize("body", REFUSED.values(), ids=REFUSED.keys())
def test_refused_before_anything_runs(body: str) -> None:
    with pytest.raises(PolicyRefused):
        confine_body(body, CTX)


def test_refusals_name_the_line_of_the_body() -> None:
    with pytest.raises(PolicyRefused, match=r"Line 2: importing \"pytest\""):
        confine_body("x = 1\nimport pytest\n", CTX)


HONEST = '''\
total = 0
for x, y in pairs:
    total += x * y
self.count += 1
self._cache[key] = total
d = OrderedDict(a=1)
d["a"] += 1
params = list(signature(len).parameters)
import itertools
from json import decoder
first = next(itertools.chain([1], [2]))
name = f"{type(self).__name__}:{self._label!r}"
class Acc:
    __slots__ = ("n", "extra")
    def __init__(self):
        self.n = 0
    def add(self, v):
        self.n += v
        return self
acc = Acc().add(total)
acc.extra = 1 if hasattr(acc, "n") else 0
nums = {k: v for k, v in [(1, 2)]}
match total:
    case 0:
        kind = "zero"
    case _:
        kind = "other"
return (total, self.count, d["a"], params, first, name, acc.n, getattr(acc, "n"), kind,
        "{0}".format(total), math.floor(2.5), os.path.join("a", "b"), self.__p)
'''


class _Thing:
    def __init__(self) -> None:
        self.count = 0
        self._cache: dict[str, int] = {}
        self._label = "t"
        self._Thing__p = "private"


def _run(body: str, ctx: Any = CTX, class_name: str | None = "_Thing", **names: Any) -> Any:
    """Exec the confined body as a function of ``names`` with the guards installed (the
    sandbox's runner does the same before pytest imports anything)."""
    guards.install()
    code = "def _f(" + ", ".join(names) + "):\n" + textwrap.indent(
        confine_body(body, ctx, class_name=class_name), "    ")
    namespace: dict[str, Any] = {"os": __import__("os"), "math": math,
                                 "OrderedDict": __import__("collections").OrderedDict,
                                 "signature": __import__("inspect").signature}
    exec(compile(code, "<candidate>", "exec"), namespace)
    return namespace["_f"](**names)


def test_honest_code_compiles_and_means_the_same() -> None:
    got = _run(HONEST, self=_Thing(), pairs=[(1, 2), (3, 4)], key="k")
    assert got == (14, 1, 2, ["obj"], 1, "_Thing:'t'", 14, 14, "other", "14", 2, "a/b", "private")


RUNTIME = {
    "computed dunder read": ("return getattr(type(a), '__subcl' + 'asses__')()", {"a": 1}),
    "write to a module": ("math.floor = None", {}),
    "write to a class the candidate did not define": ("a.flag = True", {"a": _Thing}),
    "setattr on a module": ("setattr(os, 'sep', '!')", {}),
    "a denied module reached by attribute": ("return os.sys", {}),
    "a module namespace": ("return os.__dict__", {}),
    "attrgetter of a dunder": ("import operator\nreturn operator.attrgetter('__globals__')(a)", {"a": _run}),
    "object.__setattr__ on a module": ("object.__setattr__(math, 'pi', 3)", {}),
    "type.__setattr__ on a foreign class": ("type(a).__setattr__(a, 'x', 1)", {"a": _Thing}),
    "a module's bound __setattr__": ("math.__setattr__('pi', 3)", {}),
    "builtins' eval through a module value": ("return a.eval('1')", {"a": builtins}),
    "builtins' namespace": ("return a.__dict__", {"a": builtins}),
    "pytest's patch through a mock module": ("return a.patch", {"a": __import__("unittest.mock").mock}),
    "a builtin of sys reached through a value": ("return a.exit", {"a": types.SimpleNamespace(exit=__import__("sys").exit)}),
}


@pytest.mark.parametrize(("body", "names"), RUNTIME.values(), ids=RUNTIME.keys())
def test_refused_at_run_time_and_remembered(body: str, names: dict[str, Any]) -> None:
    with pytest.raises(guards.PolicyViolation):
        _run(body, **names)
    assert guards.VIOLATIONS, "a refusal the code could catch is still recorded"
    assert math.floor(2.5) == 2 and __import__("os").sep == "/"


def test_a_caught_refusal_is_still_recorded() -> None:
    assert _run("try:\n    math.pi = 3\nexcept Exception:\n    pass\nreturn 5") == 5
    assert guards.VIOLATIONS and "math" in guards.VIOLATIONS[0]


def test_what_tests_hand_to_the_code_under_test_stays_usable() -> None:
    """Mocks and sentinels from ``unittest.mock``, a builtin read off the builtins module
    (``import_module`` resolving a dotted name), and ``getattr`` taken from there, which
    becomes the guarded one."""
    from unittest import mock

    holder = types.SimpleNamespace(m=mock.MagicMock(), s=mock.sentinel.value)
    assert _run("a.m.write('x')\nreturn a.s", a=holder) is mock.sentinel.value
    holder.m.write.assert_called_once_with("x")
    assert _run("return a.max(1, 2)", a=builtins) == 2
    with pytest.raises(guards.PolicyViolation):
        _run("g = a.getattr\nreturn g(g(1, '__class__'), '__subcl' + 'asses__')", a=builtins)


def test_type_builds_no_always_equal_class_in_a_body() -> None:
    with pytest.raises(guards.PolicyViolation):
        _run("S = type('S', (), {'__eq__': lambda s, o: True})\nreturn S()")
    assert _run("return type(a).__name__ + type('K', (), {'x': 1})().__class__.__name__", a=1) == "intK"
    assert _run("return isinstance(a, type), isinstance(type(a), type)", a=1) == (False, True)
    ok = "class P:\n    def __eq__(self, other):\n        return other is self\n"
    confine_file("import math\n" + ok, "import math\n", module_context("import math\n", file_mode=True))


def test_a_class_the_candidate_defines_is_its_own() -> None:
    assert _run("class A:\n    pass\nA.x = 3\nsetattr(A, 'y', 4)\nreturn A.x + A.y") == 7
    frozen = "class F:\n    def __init__(self):\n        object.__setattr__(self, 'v', 5)\nreturn F().v"
    assert _run(frozen) == 5  # the frozen-dataclass idiom on the candidate's own instance


def test_module_namespace_is_a_relaxation_a_reference_earns() -> None:
    body = "return sorted(k for k in m.__dict__ if k == 'floor')"
    assert relaxations(body) == ("module_namespace",) and relaxations("return 1") == ()
    guards.VIOLATIONS.clear()
    with pytest.raises(guards.PolicyViolation):
        _run(body, m=math)
    guards.install(relaxations(body))
    try:
        code = "def _f(m):\n" + textwrap.indent(confine_body(body, CTX), "    ")
        ns: dict[str, Any] = {}
        exec(compile(code, "<candidate>", "exec"), ns)
        assert ns["_f"](math) == ["floor"]
        with pytest.raises(guards.PolicyViolation):  # never a denied module's
            ns["_f"](__import__("sys"))
        with pytest.raises(guards.PolicyViolation):
            ns["_f"](builtins)
    finally:
        guards.install()
        guards.VIOLATIONS.clear()


OLD_FILE = "import math\n\n\ndef add(a, b):\n    return a + b\n\n\nclass Box:\n    def get(self):\n        return 1\n"


def test_a_whole_file_keeps_what_it_does_not_change_and_confines_the_rest() -> None:
    new = OLD_FILE.replace("return a + b", "return a - b") + "\n\ndef extra(x):\n    return x.real\n"
    out = confine_file(new, OLD_FILE, module_context(OLD_FILE, file_mode=True))
    assert "import math\n" in out and "return _getattr_(x, 'real')" in out
    assert "@_ianvs_own_\nclass Box:\n    def get(self):\n        return 1\n" in out
    assert "def add(a, b):\n    return a - b" in out  # changed, no attribute: same text once unparsed


@pytest.mark.parametrize("statement", ["import _pytest.reports\n_pytest.reports.BaseReport.passed = True\n",
                                       "import sys\nsys.modules.clear()\n", "import builtins\n",
                                       "__builtins__ = {}\n", "import gc\n"])
def test_a_module_level_statement_of_a_whole_file_is_confined(statement: str) -> None:
    with pytest.raises(PolicyRefused):
        confine_file(OLD_FILE + "\n" + statement, OLD_FILE, module_context(OLD_FILE, file_mode=True))


def test_a_whole_file_may_bind_module_metadata_and_use_global() -> None:
    new = OLD_FILE + "\n__all__ = ['add']\n_N = 0\n\n\ndef bump():\n    global _N\n    _N += 1\n"
    confine_file(new, OLD_FILE, module_context(OLD_FILE, file_mode=True))


def test_min_grading_can_demand_the_confined_tier_and_no_more() -> None:
    from core.common.errors import ConfigError
    from core.scenarios.repo.policy import GRADING, check_min_grading
    from core.scenarios.repo.scoring import _sandbox_options

    for ok in ({}, {"min_grading": "in_process"}, {"min_grading": GRADING}):
        check_min_grading(ok, "repo")
        _sandbox_options(ok)
    with pytest.raises(ConfigError, match="graded in_process_confined") as exc:
        _sandbox_options({"min_grading": "boundary"})
    assert "lower sandbox.min_grading" in exc.value.render()
    with pytest.raises(ConfigError, match="must be one of"):
        check_min_grading({"min_grading": "strict"}, "revise")


def test_plain_annotations_stay_as_written() -> None:
    """``dataclasses`` reads ``typing.ClassVar`` from the annotation's text under
    ``from __future__ import annotations``: a plain annotation is not rewritten; one that is
    not plain is guarded like other code."""
    ctx = module_context("import typing\nimport os\n")
    out = confine_body("z: typing.ClassVar[int] = 1\ndef f(x: 'os.PathLike') -> typing.Any:\n    pass\n"
                       "def g(x: os.sys):\n    pass\nreturn z\n", ctx)
    assert "z: typing.ClassVar[int] = 1" in out and "-> typing.Any" in out
    assert "def g(x: _getattr_(os, 'sys'))" in out
