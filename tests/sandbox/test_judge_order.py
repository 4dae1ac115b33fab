"""The boundary judge makes the same calls whatever the candidate's answers were.

A test's ``assert`` statements are rewritten (``boundary._rewrite_asserts``): a failed one is
recorded and the test goes on; the verdict, decided at the end, is the first failure. These tests
run real requests through the ``local`` fork server: the candidate prints every call it receives
(its stdout comes back in ``ExecResult.stdout``), so a wrong or raising candidate must see exactly
the calls a right one sees, and still be graded by its FIRST failure. The reference verdict
("what the judge gave before") comes from the same test with its asserts inside a ``with`` block,
which the rewrite leaves alone (a context manager may swallow what they raise).
"""

from __future__ import annotations

import ast
import contextlib
import json
import textwrap
from pathlib import Path

import pytest

from core.testenvmanager.sandbox import ExecRequest, Outcome
from core.testenvmanager.sandbox import boundary

# ------------------------------------------------------------------------------------ programs


def _program(body: str) -> str:
    """A ``solve(x)`` that prints each call on one line, then answers with ``body``."""
    return ("import sys\n"
            "def solve(*args, **kwargs):\n"
            "    print('call', repr(args), repr(kwargs), flush=True)\n"
            + textwrap.indent(textwrap.dedent(body), "    "))


#: is x even? (a boolean-valued task: the kind colluding samples attacked)
RIGHT = _program("return args[0] % 2 == 0\n")
#: wrong for 3 and 6 only
WRONG_SOME = _program("x = args[0]\nreturn (x % 2 == 0) != (x in (3, 6))\n")
#: wrong for every argument
WRONG_ALL = _program("return args[0] % 2 == 1\n")
#: raises for 4, right otherwise
RAISES_ON_4 = _program("if args[0] == 4:\n    raise ValueError('four')\nreturn args[0] % 2 == 0\n")

#: six asserts, each with its own message (the detail names the one that failed)
FLAT_TEST = "".join(["def check(candidate):\n"] + [
    f"    assert candidate({x}) is {x % 2 == 0}, 'case {x}'\n" for x in (1, 2, 3, 4, 5, 6)])


def _calls(res) -> list[str]:
    return [line for line in res.stdout.splitlines() if line.startswith("call ")]


def _run(executor, program: str, test: str, **extra):
    (res,) = list(executor.run([ExecRequest(id="r", program=program, test=test, entry_point="solve",
                                            timeout=extra.pop("timeout", 10.0), **extra)]))
    return res


def _unrewritten(test: str) -> str:
    """``test`` with check's body inside a ``with`` block: its asserts keep their original
    semantics (the first failure ends the test), the reference for verdicts."""
    head, _, body = test.partition("def check(candidate):\n")
    return (head + "import contextlib\ndef check(candidate):\n    with contextlib.nullcontext():\n"
            + textwrap.indent(body, "    "))


# ------------------------------------------------------------------- through the fork server


def test_wrong_answers_receive_the_same_calls_as_right_ones(executor) -> None:
    right = _run(executor, RIGHT, FLAT_TEST)
    some = _run(executor, WRONG_SOME, FLAT_TEST)
    every = _run(executor, WRONG_ALL, FLAT_TEST)
    assert right.outcome is Outcome.PASSED, right.detail
    expected = [f"call ({x},) {{}}" for x in (1, 2, 3, 4, 5, 6)]
    assert _calls(right) == _calls(some) == _calls(every) == expected
    assert some.outcome is Outcome.FAILED and some.detail == "AssertionError: case 3"
    assert every.outcome is Outcome.FAILED and every.detail == "AssertionError: case 1"
    # the same verdicts as the judge gives with the asserts left as they are (and fewer calls)
    for program, res in ((WRONG_SOME, some), (WRONG_ALL, every)):
        before = _run(executor, program, _unrewritten(FLAT_TEST))
        assert (before.outcome, before.detail) == (res.outcome, res.detail)
        assert len(_calls(before)) < len(expected)


def test_a_raising_call_is_recorded_and_every_later_call_is_made(executor) -> None:
    raised = _run(executor, RAISES_ON_4, FLAT_TEST)
    assert _calls(raised) == [f"call ({x},) {{}}" for x in (1, 2, 3, 4, 5, 6)]
    assert raised.outcome is Outcome.ERROR and raised.detail == "ValueError: four"
    # an earlier wrong answer is the first failure: failed, although a call raised later
    wrong_then_raise = _program("if args[0] == 4:\n    raise ValueError('four')\n"
                                "return args[0] % 2 == 1\n")
    res = _run(executor, wrong_then_raise, FLAT_TEST)
    assert len(_calls(res)) == 6
    assert res.outcome is Outcome.FAILED and res.detail == "AssertionError: case 1"
    # SystemExit crosses as CandidateAborted (not swallowed by a test's except Exception)
    aborts = _program("if args[0] == 2:\n    raise SystemExit(7)\nreturn args[0] % 2 == 0\n")
    res = _run(executor, aborts, FLAT_TEST)
    assert len(_calls(res)) == 6 and res.outcome is Outcome.ERROR
    assert res.detail == "CandidateAborted: candidate raised SystemExit: 7"


LOOP_TEST = """
def check(candidate):
    cases = [(x, x % 2 == 0) for x in range(1, 9)]
    for x, want in cases:
        assert candidate(x) is want, f"case {x}: wanted {want}"
    assert candidate(x=10) is True, 'keyword'
"""


def test_assert_inside_a_loop(executor) -> None:
    first = "(args or tuple(kwargs.values()))[0]"  # candidate(x=10) too
    right = _run(executor, RIGHT.replace("args[0]", first), LOOP_TEST)
    wrong = _run(executor, WRONG_SOME.replace("args[0]", first), LOOP_TEST)
    assert right.outcome is Outcome.PASSED, right.detail
    assert _calls(right) == _calls(wrong) and len(_calls(right)) == 9
    # the message sees the loop's values at the failure (3), not at the end of the test (8)
    assert (wrong.outcome, wrong.detail) == (Outcome.FAILED, "AssertionError: case 3: wanted False")


NESTED_TEST = """
def helper(candidate, x):
    assert candidate(x) is (x % 2 == 0), f"helper {x}"


def check(candidate):
    def inner(x):
        def deeper(y):
            assert candidate(y) is (y % 2 == 0), f"deeper {y}"
        assert candidate(x) is (x % 2 == 0), f"inner {x}"
        deeper(x + 1)

    class Case:
        x = 6
        assert candidate(x) is True, f"class {x}"

    inner(2)
    helper(candidate, 4)
    assert (got := candidate(8)) is True, 'walrus'
    assert got is True
    return Case
"""


def test_asserts_in_nested_functions_and_class_bodies(executor) -> None:
    right = _run(executor, RIGHT, NESTED_TEST)
    assert right.outcome is Outcome.PASSED, right.detail
    calls = [f"call ({x},) {{}}" for x in (6, 2, 3, 4, 8)]
    assert _calls(right) == calls
    wrong_3 = _program("return (args[0] % 2 == 0) != (args[0] == 3)\n")
    for program, detail in ((wrong_3, "AssertionError: deeper 3"),
                            (WRONG_SOME, "AssertionError: class 6")):
        res = _run(executor, program, NESTED_TEST)
        assert _calls(res) == calls
        assert (res.outcome, res.detail) == (Outcome.FAILED, detail)


MESSAGE_TEST = """
ran = []


def noted(text):
    ran.append(text)
    return text


def check(candidate):
    assert candidate(2) is True, noted('two')
    assert candidate(3) is False, noted('three')
    assert candidate(4) is True, 'four: ' + str(candidate(4)) + ' ' + str(candidate(40))
    assert not ran, 'a message ran while the test ran: ' + repr(ran)
"""


def test_a_message_is_evaluated_only_for_the_first_failure_after_the_test(executor) -> None:
    right = _run(executor, RIGHT, MESSAGE_TEST)
    assert right.outcome is Outcome.PASSED, right.detail  # no message ran on success
    calls = [f"call ({x},) {{}}" for x in (2, 3, 4)]
    assert _calls(right) == calls
    wrong = _run(executor, WRONG_SOME, MESSAGE_TEST)
    # neither message ran during the test (the last assert held), the first one ran at the end
    assert _calls(wrong) == calls
    assert (wrong.outcome, wrong.detail) == (Outcome.FAILED, "AssertionError: three")
    # a message's candidate calls are answered from the recorded replies, never by the
    # candidate: same arguments as a call of the test -> its reply; others -> not evaluated
    wrong4 = _run(executor, _program("return args[0] % 2 == 0 and args[0] != 4\n"), MESSAGE_TEST)
    assert _calls(wrong4) == calls and wrong4.outcome is Outcome.FAILED
    assert wrong4.detail.startswith("AssertionError: <not evaluated: the message calls the "
                                    "candidate")
    replayed = MESSAGE_TEST.replace(" + ' ' + str(candidate(40))", "")
    res = _run(executor, _program("return args[0] % 2 == 0 and args[0] != 4\n"), replayed)
    assert _calls(res) == calls and (res.outcome, res.detail) == (Outcome.FAILED,
                                                                  "AssertionError: four: False")


DIES_TEST = "".join(["def check(candidate):\n"] + [
    f"    assert candidate({x}) is {x % 2 == 0}, 'case {x}'\n" for x in (1, 2, 3, 4)])


@pytest.mark.parametrize("program, calls", [
    # dies on the 2nd call, every earlier answer right: the death ends the test
    (_program("import os\nif args[0] == 2:\n    os._exit(3)\nreturn args[0] % 2 == 0\n"), 2),
    # an earlier wrong answer: that is the first failure, the death after it changes nothing
    (_program("import os\nif args[0] == 3:\n    os._exit(3)\nreturn args[0] % 2 == 1\n"), 3),
    # SIGKILL of itself mid-test
    (_program("import os, signal\nif args[0] == 2:\n    os.kill(os.getpid(), signal.SIGKILL)\n"
              "return args[0] % 2 == 0\n"), 2),
], ids=["exit_after_right_answers", "exit_after_a_wrong_answer", "sigkill"])
def test_candidate_death_ends_the_test_with_the_outcome_it_had(executor, program: str,
                                                                calls: int) -> None:
    res = _run(executor, program, DIES_TEST)
    before = _run(executor, program, _unrewritten(DIES_TEST))
    assert len(_calls(res)) == calls
    assert (res.outcome, res.detail) == (before.outcome, before.detail)
    assert res.outcome in (Outcome.ERROR, Outcome.FAILED), res


GUARDED_TEST = """
def expect_value_error(candidate, x):
    assert candidate(x) is None, 'must raise'


def check(candidate):
    try:
        assert candidate(-1) is None, 'must raise'
    except ValueError:
        pass
    try:
        expect_value_error(candidate, -2)
    except ValueError:
        pass
    assert candidate(2) is True
"""


def test_asserts_the_test_itself_may_catch_keep_their_meaning(executor) -> None:
    program = _program("if args[0] < 0:\n    raise ValueError('negative')\n"
                       "return args[0] % 2 == 0\n")
    res = _run(executor, program, GUARDED_TEST)
    assert res.outcome is Outcome.PASSED, res.detail
    assert len(_calls(res)) == 3


def test_a_top_level_assert_of_the_test_is_infra_error(executor) -> None:
    res = _run(executor, RIGHT, "assert 1 == 2, 'broken test'\n" + FLAT_TEST)
    assert res.outcome is Outcome.INFRA_ERROR
    assert res.detail.endswith("AssertionError: broken test")


def test_outcome_of_slow_candidates_after_a_failed_assert_is_still_not_passing(executor) -> None:
    # the test keeps calling a slow candidate after its first wrong answer: it may run out of
    # time, which is not passing either (documented in docs/sandbox.md)
    slow = _program("import time\nif args[0] > 1:\n    time.sleep(5)\nreturn args[0] % 2 == 1\n")
    res = _run(executor, slow, FLAT_TEST, timeout=1.5)
    assert res.outcome is Outcome.TIMEOUT and not res.passed


# ------------------------------------------------------------------------- the rewrite itself


def _run_in_process(test: str, candidate) -> tuple[BaseException | None, boundary._AssertLog]:
    """Rewrite and run ``test`` here with a plain function as the candidate."""
    code, sites = boundary._rewrite_asserts(test, "<test>")
    namespace: dict = {"contextlib": contextlib}
    log = namespace[boundary._LOG] = boundary._AssertLog(sites)
    exec(code, namespace)
    try:
        namespace["check"](candidate)
    except BaseException as exc:  # noqa: BLE001
        return exc, log
    return None, log


def test_recorded_exceptions_keep_their_source_line() -> None:
    test = "def check(candidate):\n    x = 1\n    assert candidate(x) == {}[x]\n    assert True\n"
    ended, log = _run_in_process(test, lambda x: x)
    assert ended is None and log.failures == 1
    failure = log.first({})
    assert isinstance(failure, KeyError)
    tb = failure.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_lineno == 3 and tb.tb_frame.f_code.co_filename == "<test>"
    assert boundary._compiled(test, "<test>", rewrite=True)[1] == ((3, None), (4, None))


def test_candidate_died_and_generator_exit_still_end_the_test() -> None:
    def dies(x):
        raise boundary.CandidateDied("gone")

    ended, log = _run_in_process("def check(candidate):\n    assert candidate(1)\n"
                                 "    assert candidate(2)\n", dies)
    assert isinstance(ended, boundary.CandidateDied) and log.failures == 0
    test = ("def check(candidate):\n    def gen():\n        assert (yield 1), (yield 2)\n"
            "    g = gen()\n    next(g)\n    g.close()\n    assert candidate(1)\n")
    ended, log = _run_in_process(test, lambda x: True)
    assert ended is None and log.failures == 0


def test_message_of_a_yielding_assert_is_evaluated_in_place() -> None:
    test = ("def check(candidate):\n    def gen():\n        assert candidate(0), (yield 'msg')\n"
            "    g = gen()\n    assert next(g) == 'msg'\n    try:\n        g.send('sent')\n"
            "    except StopIteration:\n        pass\n")
    ended, log = _run_in_process(test, lambda x: x)
    assert ended is None and log.failures == 1
    assert str(log.first({})) == "sent"


def test_a_raising_message_is_the_failure() -> None:
    ended, log = _run_in_process("def check(candidate):\n    assert candidate(0), undefined_name\n"
                                 "    assert candidate(0), 1 / 0\n", lambda x: x)
    assert ended is None and log.failures == 2  # the name is read at the failure: NameError
    assert isinstance(log.first({}), NameError)
    ended, log = _run_in_process("def check(candidate):\n    assert candidate(0), 1 / 0\n",
                                 lambda x: x)
    assert isinstance(log.first({"__builtins__": __builtins__}), ZeroDivisionError)


# ------------------------------------------------- HumanEval: what still depends on results
HUMANEVAL = (Path(__file__).resolve().parents[2] / "examples" / "smart_coding"
             / "smart_coding_learning_bench" / "codegen" / "data" / "humaneval.jsonl")


def _binding(node: ast.AST) -> tuple[list[ast.expr], ast.expr | None]:
    """(targets, value) of a statement or expression that binds names, else ([], None)."""
    if isinstance(node, ast.Assign):
        return node.targets, node.value
    if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
        return [node.target], node.value
    if isinstance(node, (ast.For, ast.comprehension)):
        return [node.target], node.iter
    return [], None


def _result_dependence(test: str) -> dict[str, int]:
    """Where ``test``'s control flow can depend on the candidate's results besides its assert
    statements (docs/sandbox.md, "Cross-sample grading"). Names bound from an expression that
    calls the candidate are *results* (flow-insensitive). Counts per kind:

    ``branch``     ``if``/``while``/ternary/``and``/``or``/``for``/comprehension filter on a result
                   outside assert statements
    ``consumed``   a statement outside asserts that uses a result beyond binding a call's value
                   to a name (an exception there ends the test)
    ``short``      a short circuit on a result inside an assert (``and``/``or``/ternary whose
                   later operand calls it, ``all``/``any`` over results)
    ``guarded``    asserts left as they are (a ``try``/``with`` of the test can catch them)
    ``outside``    candidate calls outside assert statements (only the candidate's own exception
                   can end the test there)
    ``message``    asserts whose message calls the candidate
    ``unreplayed`` message calls whose arguments no call of the same assert's test has
    """
    tree = ast.parse(test)
    candidates = {"candidate"} | {node.args.args[0].arg for node in ast.walk(tree)
                                  if isinstance(node, ast.FunctionDef) and node.name == "check"
                                  and node.args.args}
    results: set[str] = set()

    def is_call(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in candidates

    def calls(expr: ast.AST) -> list[ast.Call]:
        return [n for n in ast.walk(expr) if is_call(n)]

    def uses(expr: ast.AST) -> bool:
        return bool(calls(expr)) or any(isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                                        and n.id in results for n in ast.walk(expr))

    grown = True
    while grown:  # names bound from results are results
        grown = False
        for node in ast.walk(tree):
            targets, value = _binding(node)
            if value is not None and uses(value):
                names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
                grown = grown or not names <= results
                results |= names
    asserts = [n for n in ast.walk(tree) if isinstance(n, ast.Assert)]
    inside = {id(m) for a in asserts for m in ast.walk(a)}
    count = dict.fromkeys(("branch", "consumed", "short", "guarded", "outside", "message",
                           "unreplayed"), 0)
    for node in ast.walk(tree):
        if id(node) in inside:
            continue
        if isinstance(node, (ast.If, ast.While, ast.IfExp)) and uses(node.test) \
                or isinstance(node, (ast.For, ast.comprehension)) and uses(node.iter) \
                or isinstance(node, ast.comprehension) and any(uses(c) for c in node.ifs) \
                or isinstance(node, ast.BoolOp) and any(uses(v) for v in node.values[:-1]):
            count["branch"] += 1
        if is_call(node):
            count["outside"] += 1
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Return)):
            value = node.value
            plain = value is not None and is_call(value) and not any(
                uses(a) for a in [*value.args, *(k.value for k in value.keywords)])
            if value is not None and uses(value) and (isinstance(node, ast.AugAssign) or not plain):
                count["consumed"] += 1
    for node in asserts:
        for sub in ast.walk(node.test):
            if isinstance(sub, ast.BoolOp) and any(uses(v) for v in sub.values[1:]) \
                    or isinstance(sub, ast.IfExp) and (uses(sub.body) or uses(sub.orelse)) \
                    or isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) \
                    and sub.func.id in ("all", "any") and uses(sub):
                count["short"] += 1
        if node.msg is not None and calls(node.msg):
            count["message"] += 1
            made = {ast.dump(c) for c in calls(node.test)}
            count["unreplayed"] += sum(ast.dump(c) not in made for c in calls(node.msg))
    count["guarded"] = len(boundary._guarded_asserts(tree))
    return count


def test_result_dependence_census_sees_what_it_counts() -> None:
    test = ("def check(candidate):\n    if candidate(1) == 2:\n        pass\n    r = candidate(3)\n"
            "    first = r[0]\n    assert candidate(4) == 1 and candidate(5) == 2\n"
            "    assert all(candidate(i) for i in range(3)), str(candidate(9))\n"
            "    with ctx():\n        assert candidate(6)\n")
    assert _result_dependence(test) == {"branch": 1, "consumed": 1, "short": 2, "guarded": 1,
                                        "outside": 2, "message": 1, "unreplayed": 1}


#: appended to a HumanEval solution: its answer to the second distinct argument list is None
#: (deterministic per arguments, so a message's replayed call gives what a new call would)
WRONG_ON_SECOND = """
_seen = {{}}
_solution = {entry}


def {entry}(*args, **kwargs):
    key = repr((args, sorted(kwargs.items())))
    _seen.setdefault(key, len(_seen))
    answer = _solution(*args, **kwargs)
    return None if _seen[key] == 1 else answer
"""


def test_humaneval_verdicts_are_those_of_the_tests_left_as_they_are(executor) -> None:
    """Every HumanEval test, rewritten, gives a wrong program the outcome and detail it gives
    with its asserts left as they are (first failure at the first assert, and later)."""
    records = [json.loads(line) for line in HUMANEVAL.read_text(encoding="utf-8").splitlines()]
    programs = {"none": lambda r: r["prompt"] + "    return None\n",
                "second": lambda r: r["prompt"] + r["canonical_solution"]
                + WRONG_ON_SECOND.format(entry=r["entry_point"])}
    requests = [ExecRequest(id=f"{r['task_id']}|{kind}|{form}", program=make(r), test=test,
                            entry_point=r["entry_point"], helpers=r["prompt"], timeout=10.0)
                for r in records for kind, make in programs.items()
                for form, test in (("rewritten", r["test"]), ("as_is", _unrewritten(r["test"])))]
    got = {res.id: res for res in executor.run(requests)}
    differ = [(key, got[f"{key}|rewritten"].detail, got[f"{key}|as_is"].detail)
              for key in {rid.rpartition("|")[0] for rid in got}
              if (got[f"{key}|rewritten"].outcome, got[f"{key}|rewritten"].detail)
              != (got[f"{key}|as_is"].outcome, got[f"{key}|as_is"].detail)]
    assert not differ, differ
    # 34 makes one call; the second answer of 52 must be falsy (`assert not`), of 162 None
    passed = sorted(rid for rid, res in got.items() if res.passed)
    assert passed == [f"HumanEval/{n}|second|{form}" for n in (162, 34, 52)
                      for form in ("as_is", "rewritten")], passed


def test_humaneval_census_matches_the_documented_numbers() -> None:
    """The numbers docs/sandbox.md ("Cross-sample grading") gives for HumanEval's 164 tests."""
    totals: dict[str, list[str]] = {}
    asserts = 0
    for line in HUMANEVAL.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        asserts += sum(isinstance(n, ast.Assert) for n in ast.walk(ast.parse(record["test"])))
        for kind, count in _result_dependence(record["test"]).items():
            totals.setdefault(kind, [])
            if count:
                totals[kind].append(f"{record['task_id']}:{count}")
    assert asserts == 1181
    assert totals == {
        "branch": [], "consumed": [], "short": [], "guarded": [],
        "outside": ["HumanEval/32:1"],
        "message": ["HumanEval/77:8", "HumanEval/78:6", "HumanEval/95:7", "HumanEval/97:8",
                    "HumanEval/117:7", "HumanEval/148:4"],
        "unreplayed": ["HumanEval/77:1"],
    }, totals
