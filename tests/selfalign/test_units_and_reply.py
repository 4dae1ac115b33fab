"""Static pieces of the self-align loop: reply schema and parsing, unit checks, try store.

Nothing here runs model-written code: the unit checks are static by contract, and these tests
check that they classify units without executing them."""
from __future__ import annotations

import ast
import json
from pathlib import Path

from core.scenarios.selfalign.reply import (messages, parse_reply, reply_schema,
                                            response_format, wanted)
from core.scenarios.selfalign.store import TryRecord, TryStore
from core.scenarios.selfalign.units import VALID, check_unit


def test_first_try_asks_for_both_then_what_generate_says() -> None:
    assert wanted("code", 1) == (True, True)
    assert wanted("code", 2) == (True, False)
    assert wanted("tests", 3) == (False, True)
    assert wanted("both", 5) == (True, True)


def test_schema_has_only_the_wanted_fields_and_the_assert_pattern() -> None:
    schema = reply_schema(True, False, 3)
    assert schema["required"] == ["code"] and "tests" not in schema["properties"]
    tests = reply_schema(False, True, 4)["properties"]["tests"]
    assert tests["minItems"] == tests["maxItems"] == 4
    assert tests["items"]["pattern"].startswith("^assert ")
    assert "pattern" not in reply_schema(True, True, 2, test_style="free")["properties"]["tests"]["items"]
    fmt = response_format(schema)
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"] == schema


def test_parse_reply_reads_fields_and_names_each_failure() -> None:
    ok = parse_reply('{"code": "def f(): pass", "tests": ["assert f() is None"]}', True, True)
    assert ok.error is None and ok.code == "def f(): pass" and ok.tests == ("assert f() is None",)
    wrapped = parse_reply('Sure!\n```json\n{"tests": ["assert f(1)"]}\n```', False, True)
    assert wrapped.error is None and wrapped.tests == ("assert f(1)",)
    assert parse_reply("def f(): pass", True, True).error == "not_json"
    assert parse_reply('{"code": "x"', True, True).error == "not_json"   # cut by max_tokens
    assert parse_reply("[1, 2]", True, True).error == "not_object"
    assert parse_reply('{"tests": []}', True, True).error == "missing:code"
    assert parse_reply('{"code": "x"}', True, True).error == "missing:tests"
    assert parse_reply('{"code": 3, "tests": []}', True, True).error == "type:code"
    assert parse_reply('{"code": "x", "tests": [1]}', True, True).error == "type:tests"


def test_messages_never_contain_the_hidden_tests_and_carry_feedback() -> None:
    from core.scenarios.selfalign.reply import Feedback

    first = messages("def f(x):\n    pass\n", "f", 1, "both", "failures", 3, "assert")
    assert "def f(x)" in first[1]["content"] and "previous" not in first[1]["content"]
    assert "Complete the function `f`" in first[1]["content"]
    later = messages("def f(x):\n    pass\n", "f", 2, "code", "failures", 3, "assert",
                     "def f(x):\n    return 1\n", ["assert f(2) == 2"],
                     [Feedback(0, "assert f(2) == 2", "failed", "AssertionError: got 1")])
    text = later[1]["content"]
    assert "got 1" in text and "Keep the tests" in text and "return 1" in text
    silent = messages("def f(x):\n    pass\n", "f", 2, "both", "none", 3, "assert", "c", ["t"],
                      [Feedback(0, "t", "failed", "AssertionError: got 1")])
    assert "got 1" not in silent[1]["content"]


def test_invalid_reasons_read_as_sentences() -> None:
    from core.scenarios.selfalign.reply import invalid_text

    assert invalid_text("no_call", "f") == "invalid: it never calls f"
    assert invalid_text("import:numpy", "f") == "invalid: it imports numpy, which is not available"
    assert invalid_text("unsafe:calls exit", "f") == "invalid: it calls exit"


def test_units_invalid_for_each_documented_reason() -> None:
    prompt = "from typing import List\n\ndef f(xs: List[int]) -> int:\n    pass\n"
    assert check_unit("", "f", prompt).status == "empty"
    assert check_unit("assert f(1) ==", "f", prompt).status == "syntax_error"
    assert check_unit("import numpy\nassert f([1]) == 1", "f", prompt).status == "import:numpy"
    assert check_unit("from solution import f\nassert f([1]) == 1", "f", prompt).status \
        == "import:solution"
    assert check_unit("assert open('x') and f([1])", "f", prompt).status.startswith("unsafe:")
    assert check_unit("assert 1 + 1 == 2", "f", prompt).status == "no_call"
    assert check_unit("g = f\nassert True", "f", prompt).status == "no_call"
    assert check_unit("return f([1])", "f", prompt).status == "syntax_error"  # outside a function
    assert check_unit("f([1])", "f", prompt).status == "no_assert"
    # valid: a plain assert, the prompt's own imports, test functions, passing f to a checker
    for unit in ("assert f([1]) == 1", "from typing import List\nassert f([]) == 0",
                 "import math\ndef test_a():\n    assert math.isclose(f([2]), 2)\n",
                 "def check(candidate):\n    assert candidate([3]) == 3\ncheck(f)\n"):
        assert check_unit(unit, "f", prompt).status == VALID, unit


def test_judge_test_binds_the_entry_point_and_calls_test_functions() -> None:
    unit = check_unit('def test_a():\n    s = """x\ny"""\n    assert f(s) == 2\n', "f")
    tree = ast.parse(unit.test)
    check = tree.body[-1]
    assert isinstance(check, ast.FunctionDef) and check.name == "check"
    assert [a.arg for a in check.args.args] == ["_selfalign_candidate"]
    # f is a wrapper counting its calls, then the candidate (tests/selfalign/test_run_checks.py)
    binding = next(n for n in check.body if isinstance(n, ast.FunctionDef) and n.name == "f")
    assert ast.unparse(binding.body[-1]) == "return _selfalign_candidate(*args, **kwargs)"
    assert "test_a()" in [ast.unparse(n) for n in check.body]
    assert "'x\\ny'" in unit.test            # the string literal kept its value
    assert "'got ' + repr(f(s))" in unit.test  # a failing assert says what f returned


def _record(task: str, n: int, aligned: bool = False) -> TryRecord:
    return TryRecord(task_id=task, try_=n, key=f"k{n}", messages=[], structured=True,
                     raw_output="{}", parse_error=None, asked={"code": True, "tests": True},
                     code="", tests=[], units=[], aligned=aligned)


def test_store_survives_a_cut_last_line(tmp_path: Path) -> None:
    path = tmp_path / "tries.jsonl"
    store = TryStore(path)
    store.add(_record("A", 1))
    store.add(_record("A", 2))
    store.add(_record("B", 1, aligned=True))
    with path.open("a") as fh:   # a kill -9 in the middle of writing try 3
        fh.write(json.dumps(_record("A", 3).to_dict())[:40])
    again = TryStore(path)
    assert [r.try_ for r in again.tries("A")] == [1, 2]
    assert again.tries("B")[0].aligned and again.tries("C") == []
