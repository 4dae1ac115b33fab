"""Hostile model-written units of the self-align loop, by the classes of issue 42 (run with
``pytest -k hostile``), in the real sandbox (``local``, a fresh judge per unit).

* What compiles alone but not in the judge (the judge's assert rewrite adds a block level) is an
  invalid unit, decided before anything runs; and whatever still breaks the judge at run time
  is attributed by trusted requests: the unit's fault (invalid), the program's (error) or the
  sandbox's (:class:`SandboxInfraError`, the only case that is not scored). Never a silent
  ``infra_error`` that a greedy model repeats every retry.
* A unit whose asserts never complete at run time (in a generator never iterated, a helper
  never called, swallowed) or that never calls the function is invalid, not a pass.
* Attribute access by computed names, private and interpreter-reaching names are refused, so a
  unit cannot reach the judge's verdict; one that reaches it anyway (given here as a judge test
  the static checks never saw) cannot turn it into an infrastructure failure.

Controls: good units are valid and pass; the dataset's hidden tests stay valid units."""
from __future__ import annotations

import ast
import json
from typing import Any

import pytest

from core.scenarios.selfalign.reply import invalid_text
from core.scenarios.selfalign.sandbox import (INVALID, TRUSTED_TEST, SandboxInfraError,
                                              SandboxSettings, UnitRunner)
from core.scenarios.selfalign.units import (INTERNAL_NAMES, VALID, UnitCheck, check_unit,
                                            judge_test)
from core.testenvmanager.sandbox import (ExecRequest, ExecResult, IsolationLevel, Outcome,
                                         get_executor)
from tests.scenarios.conftest import BENCH

PROMPT = "def inc(x: int) -> int:\n    \"\"\"x plus one\"\"\"\n"
GOOD = PROMPT + "    return x + 1\n"
WRONG = PROMPT + "    return x + 2\n"


def _loops(depth: int, body: str) -> str:
    """``body`` inside ``depth`` nested ``for`` loops."""
    lines = [("    " * i) + f"for _v{i} in [1]:" for i in range(depth)]
    return "\n".join([*lines, "    " * depth + body]) + "\n"


@pytest.fixture(scope="module")
def runner() -> Any:
    with UnitRunner(SandboxSettings(options={"min_isolation": "process", "workers": 2})) as r:
        yield r


def _run(runner: UnitRunner, program: str, units: list[str]) -> list[Any]:
    return runner.run(program, [check_unit(u, "inc", PROMPT) for u in units], "inc",
                      helpers=PROMPT)


def test_hostile_program_cannot_read_the_hidden_tests_it_would_feed_back(
        runner: UnitRunner) -> None:
    """Whatever a unit's run reports goes back to the model, so the run may not read the
    dataset: its executor is raised to kernel walls whatever the settings ask, and a program
    that opens the dataset file holding the hidden tests gets an error, not their text."""
    assert SandboxSettings(options={"min_isolation": "process"}).executor_options()[
        "min_isolation"] == "kernel"
    assert SandboxSettings(options={"min_isolation": "full"}).executor_options()[
        "min_isolation"] == "full"
    dataset = BENCH / "codegen" / "data" / "humaneval.jsonl"
    hidden = json.loads(dataset.read_text().splitlines()[0])["test"]
    spy = (PROMPT + "    try:\n"
           f"        with open({str(dataset)!r}) as fh:\n"
           "            found = fh.read(3000)\n"
           "    except OSError as exc:\n"
           "        found = type(exc).__name__\n"
           "    raise ValueError(found)\n")
    out, = _run(runner, spy, ["assert inc(1) == 2"])
    assert out.outcome == "error" and ("PermissionError" in out.detail
                                       or "FileNotFoundError" in out.detail), out
    assert "candidate(" not in out.detail + out.output
    assert not any(line.strip() and line.strip() in out.detail
                   for line in hidden.splitlines() if "assert" in line)
    # the control: without the kernel's walls the same program reads them
    with get_executor("local", workers=1, landlock=False, mountns=False) as bare:
        res, = bare.run_all([ExecRequest(id="spy", program=spy, entry_point="inc",
                                         test="def check(candidate):\n    candidate(1)\n")])
    assert "HumanEval/0" in res.detail and res.isolation < IsolationLevel.KERNEL


def test_hostile_judge_only_compile_failures_are_invalid_units(runner: UnitRunner) -> None:
    """19 loops compile alone (CPython allows 20 nested blocks) but not with the judge's
    rewrite, which wraps each assert in a ``try``; 18 do. A nesting deeper than any test needs
    is refused before the recursion state of a process can matter."""
    assert compile(ast.parse(_loops(19, "assert inc(1) == 2")), "<unit>", "exec")
    deep, shallow = _loops(19, "assert inc(1) == 2"), _loops(18, "assert inc(1) == 2")
    paren = "assert " + "[" * 120 + "inc(1)" + "]" * 120 + " != 2"
    assert check_unit(deep, "inc", PROMPT).status == "compile:too many statically nested blocks"
    assert check_unit(paren, "inc", PROMPT).status == "too_deep"
    outs = _run(runner, GOOD, [deep, shallow, paren])
    assert [(o.outcome, o.ran) for o in outs] == [(INVALID, False), ("passed", True),
                                                   (INVALID, False)]
    assert invalid_text(outs[0].reason, "inc") == \
        "invalid: it cannot be compiled as a test (too many statically nested blocks)"


def test_hostile_unit_that_breaks_its_judge_is_invalid_never_infra(runner: UnitRunner) -> None:
    """Judge tests no static check saw (as if a route were unknown to the filter): one the
    judge cannot compile, one that rewrites the judge's status function so that its failure
    reads ``infra_error``. Both are invalid units of reason ``harness:...``; the good unit
    beside them is graded as usual, and a wrong program fails the same forging unit the same
    way (the unit is at fault whatever the program)."""
    nested = "def check(candidate):\n" + "".join(
        "    " * (i + 1) + f"for _v{i} in [1]:\n" for i in range(19)) + \
        "    " * 20 + "assert candidate(1) == 2\n"
    forge = ("def check(candidate):\n    import sys\n"
             "    sys._getframe(1).f_globals['_load_status'] = lambda exc: 'infra_error'\n"
             "    raise ValueError('forged by the unit')\n")
    units = [check_unit("assert inc(1) == 2", "inc", PROMPT), UnitCheck(VALID, nested),
             UnitCheck(VALID, forge)]
    for program in (GOOD, WRONG):
        outs = runner.run(program, units, "inc", helpers=PROMPT)
        assert outs[0].outcome == ("passed" if program == GOOD else "failed")
        assert outs[1].outcome == INVALID and outs[1].reason.startswith("harness:")
        assert "too many statically nested blocks" in outs[1].reason
        assert (outs[2].outcome, outs[2].reason) == (INVALID, "harness:ValueError: forged by the unit")
        assert all(o.ran for o in outs)


def test_hostile_sandbox_failure_is_still_raised_and_never_cached(tmp_path: Any) -> None:
    """The trusted request fails too (here: the task's own helper code does not compile, which
    is not the model's doing): the infrastructure's failure, raised, and nothing is cached."""
    cache = tmp_path / "units.jsonl"
    broken_prompt = "def inc(x:\n"
    with UnitRunner(SandboxSettings(options={"workers": 1}), cache) as r:
        with pytest.raises(SandboxInfraError):
            r.run(GOOD, [check_unit("assert inc(1) == 2", "inc", PROMPT)], "inc",
                  helpers=broken_prompt)
    assert not cache.exists() or cache.read_text() == ""


class _Scripted:
    """An executor answering by program: ``infra`` programs end ``infra_error`` with every test
    but the trusted one (:data:`TRUSTED_TEST`); any request of a ``forging`` test ends
    ``infra_error``."""

    def __init__(self, infra: set[str], forging: set[str]) -> None:
        self.infra, self.forging = infra, forging
        self.seen: list[tuple[str, str]] = []

    def run(self, requests: Any) -> Any:
        for req in requests:
            self.seen.append((req.program, req.test))
            bad = req.test in self.forging or (req.program in self.infra
                                               and req.test != TRUSTED_TEST)
            yield ExecResult(id=req.id, outcome=Outcome.INFRA_ERROR if bad else Outcome.PASSED,
                             exit_status=0, duration_s=0.0, detail="boom" if bad else "")

    def close(self) -> None:
        pass


def test_hostile_infra_error_is_pinned_on_the_unit_or_the_program() -> None:
    """The attribution's decisions, on a scripted executor: a unit failing against the trivial
    program too is invalid; a program failing only with real tests makes its units error (no
    pass); nothing raises, since the trusted control passes."""
    forging = check_unit("assert inc(2) == 3", "inc", PROMPT)
    plain = check_unit("assert inc(1) == 2", "inc", PROMPT)
    runner = UnitRunner(SandboxSettings())
    runner._executor = _Scripted(infra={"def inc(x): pass  # breaks calls\n"},  # type: ignore[assignment]
                                 forging={forging.test})
    outs = runner.run(GOOD, [plain, forging], "inc")
    assert [(o.outcome, o.reason) for o in outs] == [("passed", ""), (INVALID, "harness:boom")]
    outs = runner.run("def inc(x): pass  # breaks calls\n", [plain], "inc")
    assert outs[0].outcome == "error" and "broke the test harness" in outs[0].detail


@pytest.mark.parametrize("unit, reason", [
    ("def gen():\n    assert inc(1) == 2\n    yield\ngen()\n", "ran_no_assert"),
    ("def helper():\n    assert inc(1) == 2\nx = inc(1)\n", "ran_no_assert"),
    ("try:\n    assert inc(1) == 5\nexcept AssertionError:\n    pass\n", "ran_no_assert"),
    ("checks = (inc(v) == v + 1 for v in range(3))\nif False:\n    assert all(checks)\n",
     "ran_no_assert"),
    ("if False:\n    inc(1)\nassert 2 == 2\n", "ran_no_call"),
    ("assert True or inc(1) == 2", "ran_no_call"),
])
def test_hostile_unit_that_checks_nothing_at_run_time_is_invalid(
        runner: UnitRunner, unit: str, reason: str) -> None:
    """Valid to the static checks (an assert and a call are there), invalid once run: against
    the right and the wrong program alike, so it is never a pass."""
    assert check_unit(unit, "inc", PROMPT).valid
    for program in (GOOD, WRONG):
        out, = _run(runner, program, [unit])
        assert (out.outcome, out.reason, out.ran) == (INVALID, reason, True), out


def test_hostile_unit_testing_its_own_function_is_invalid() -> None:
    """A unit that defines (or assigns) the function's name tests what it wrote, not the
    program: invalid before it runs; a helper taking the function as a parameter is fine."""
    for unit in ["def inc(x):\n    return x + 1\nassert inc(1) == 2",
                 "inc = lambda x: x + 1\nassert inc(1) == 2",
                 "class inc:\n    def __init__(self, x):\n        pass\nassert inc(1)",
                 "for inc in [abs]:\n    assert inc(-1) == 1"]:
        assert check_unit(unit, "inc", PROMPT).status == "shadows", unit
    assert invalid_text("shadows", "inc") == \
        "invalid: it defines its own inc instead of testing the given one"
    assert check_unit("def twice(inc, x):\n    return inc(inc(x))\nassert twice(inc, 1) == 3",
                      "inc", PROMPT).valid


def test_hostile_counts_are_out_of_the_units_reach() -> None:
    """The judge program's names are reserved, and the routes to them (the frame, ``locals``)
    are refused."""
    for unit in ["_selfalign_asserts.append(1)\nassert inc(1) == 2",
                 "assert inc(1) == 2, 'SelfAlignNothingChecked'",
                 "def f(_selfalign_candidate):\n    pass\nassert inc(1) == 2"]:
        assert check_unit(unit, "inc", PROMPT).status == "reserved", unit
    assert check_unit("locals()['x'] = 1\nassert inc(1) == 2", "inc", PROMPT).status \
        == "unsafe:calls locals"


@pytest.mark.parametrize("unit", [
    "assert getattr(inc, '__glo' + 'bals__') is not None and inc(1) == 2",
    "name = '_' * 2 + 'closure' + '_' * 2\nassert getattr(inc, name) and inc(1) == 2",
    "import functools\nassert functools.reduce(getattr, ['x'], inc) and inc(1) == 2",
    "import operator\nassert operator.attrgetter('__code__.co_consts')(inc) and inc(1) == 2",
    "import operator\nassert operator.methodcaller('_' + 'x')(inc) and inc(1) == 2",
    "import operator\nget = operator.attrgetter\nassert get('x') and inc(1) == 2",
    "import typing\nassert typing.sys.modules and inc(1) == 2",
    "import enum\nassert enum.bltns.eval('1') and inc(1) == 2",
    "from dataclasses import inspect\nassert inspect and inc(1) == 2",
    "import random\nassert random._os and inc(1) == 2",
    "import unittest.mock\nassert inc(1) == 2",
    "import string\nassert string.Formatter().get_field('0', [inc], {}) and inc(1) == 2",
    "import typing\ndef g(x: 'inc(1)'): pass\nassert typing.get_type_hints(g) and inc(1) == 2",
    "g = (x for x in [1])\nassert g.gi_frame.f_back and inc(1) == 2",
    "assert setattr(inc, 'y', 1) is None and inc(1) == 2 and __loader__",
])
def test_hostile_computed_and_internal_attribute_routes_are_refused(unit: str) -> None:
    status = check_unit(unit, "inc", PROMPT).status
    assert status.startswith("unsafe:"), (unit, status)


def test_every_module_alias_of_the_allowed_modules_is_refused() -> None:
    """Every attribute of an importable module (transitively, within the allow-list's families)
    whose value is a module outside the allow-list has a name the filter refuses: a private
    one or one of :data:`INTERNAL_NAMES`. Kept so on other Python versions."""
    import importlib
    import types

    from core.scenarios.repo.written_tests import SAFE_STDLIB

    family = set(SAFE_STDLIB)
    todo = [importlib.import_module(name) for name in sorted(family)]
    seen: set[str] = set()
    leaks = []
    harmless = {"time"}  # clocks and sleep; also the name of datetime's class
    while todo:
        module = todo.pop()
        if module.__name__ in seen:
            continue
        seen.add(module.__name__)
        for name, value in vars(module).items():
            if not isinstance(value, types.ModuleType):
                continue
            if value.__name__.split(".")[0] in family:
                todo.append(value)
            elif not name.startswith("_") and name not in INTERNAL_NAMES | harmless:
                leaks.append(f"{module.__name__}.{name}")
    assert not leaks


def _hidden_units(name: str, plus: bool) -> list[tuple[dict[str, Any], UnitCheck]]:
    """Each record's hidden test (and amplified test) as a unit, as the gold control and the
    mutation filter make it."""
    rows = []
    for line in (BENCH / name).read_text().splitlines():
        record = json.loads(line)
        tests = [record["test"]]
        if plus:
            tests.append((record.get("metadata") or {}).get("test_plus", {}).get("test"))
        for test in filter(None, tests):
            rows.append((record, check_unit(f"{test}\n\ncheck({record['entry_point']})\n",
                                            record["entry_point"], record["prompt"])))
    return rows


def test_good_units_and_the_hidden_tests_stay_valid_and_pass(runner: UnitRunner) -> None:
    """Controls: ordinary units (plain asserts, helpers, test functions, ``check(f)``, allowed
    imports and attribute names, ``getattr`` with a constant name) are valid and pass on the
    right program and fail on the wrong one; the hidden tests of the shipped subset are valid
    units, and some of them pass on the reference solution."""
    good = ["assert inc(1) == 2",
            "def test_a():\n    for v in range(3):\n        assert inc(v) == v + 1\n",
            "def check(candidate):\n    assert candidate(3) == 4\ncheck(inc)\n",
            "import math\nassert math.isclose(inc(0.5), 1.5)",
            "import operator\nassert operator.attrgetter('real')(inc(1)) == 2",
            "assert getattr(inc(1), 'real') == 2",
            "from collections import Counter\nassert Counter([inc(1), inc(1)])[2] == 2",
            _loops(10, "assert inc(1) == 2")]
    assert [check_unit(u, "inc", PROMPT).status for u in good] == [VALID] * len(good)
    assert [o.outcome for o in _run(runner, GOOD, good)] == ["passed"] * len(good)
    assert [o.outcome for o in _run(runner, WRONG, good)] == ["failed"] * len(good)
    rows = _hidden_units("codegen/data/humaneval_subset.jsonl", plus=False)
    assert {unit.status for _, unit in rows} == {VALID}
    for record, unit in rows[::6]:
        out, = runner.run(record["prompt"] + record["canonical_solution"], [unit],
                          record["entry_point"], helpers=record["prompt"])
        assert out.outcome == "passed", (record["task_id"], out)


@pytest.mark.slow
def test_every_shipped_hidden_and_amplified_test_is_a_valid_unit() -> None:
    """All 164 HumanEval tasks, hidden and amplified tests: the stricter checks refuse none."""
    rows = _hidden_units("selfalign/data/humaneval_plus.jsonl", plus=True)
    assert len(rows) == 328 and {unit.status for _, unit in rows} == {VALID}


def test_judge_program_shape() -> None:
    """What the judge runs for a unit: the counts first, each assert followed by its count,
    the nothing-checked raise last; and without call counting (repository units) the entry
    point is the candidate itself."""
    tree = ast.parse("assert inc(1) == 2\n")
    text = judge_test(tree, "inc")
    assert text.index("_selfalign_asserts = []") < text.index("assert inc(1) == 2")
    assert text.index("assert inc(1) == 2") < text.index("_selfalign_asserts.append(None)")
    assert text.rstrip().endswith("raise SelfAlignNothingChecked('the function under test was never called')")
    bare = judge_test(ast.parse("assert inc(1) == 2\n"), "inc", count_calls=False)
    assert "inc = _selfalign_candidate" in bare and "_selfalign_calls" not in bare
