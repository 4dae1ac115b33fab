"""Amplified hidden tests: inputs from the given tests, type-aware mutations, outputs of the
reference solution computed in the sandbox; a wrong solution the base tests miss is caught."""
from __future__ import annotations

from typing import Any

import pytest

from core.scenarios.selfalign.amplify import (amplify_record, given_inputs, mutate,
                                              reference_outputs)
from core.scenarios.selfalign.sandbox import SandboxSettings, UnitRunner
from core.scenarios.selfalign.units import VALID, UnitCheck

RECORD = {"task_id": "toy/half", "entry_point": "half",
          "prompt": "def half(xs: list, k: int) -> list:\n    \"\"\"every element divided by k\"\"\"\n",
          "canonical_solution": "    return [x // k for x in xs]\n",
          "test": "def check(candidate):\n    assert candidate([4, 6], 2) == [2, 3]\n"
                  "    assert candidate([], 3) == []\n    n = 5\n    candidate([n], 1)\n"}


@pytest.fixture(scope="module")
def runner() -> Any:
    with UnitRunner(SandboxSettings(options={"min_isolation": "process"})) as r:
        yield r


def test_given_inputs_are_the_literal_calls() -> None:
    assert given_inputs(RECORD["test"]) == [([4, 6], 2), ([], 3)]   # [n] is not a literal
    assert given_inputs("def check(") == []


def test_mutations_are_typed_new_and_deterministic() -> None:
    given = [([4, 6], 2), ("ab",), (1.5, True)]
    first = mutate(given, 12, seed=3)
    assert first == mutate(given, 12, seed=3) and first != mutate(given, 12, seed=4)
    assert len(first) == len({repr(x) for x in first}) == 12
    assert not {repr(x) for x in first} & {repr(x) for x in given}
    for new in first:   # one argument changed, types kept
        base = next(g for g in given if len(g) == len(new)
                    and sum(repr(a) != repr(b) for a, b in zip(g, new)) == 1)
        assert [type(a) for a in base] == [type(b) for b in new]


def test_outputs_come_from_the_reference_in_the_sandbox(runner: UnitRunner) -> None:
    inputs = [([4, 6], 2), ([1], 0), (["a"], 2)]     # // 0 and str // int raise: dropped
    kept, raised, unreadable = reference_outputs(RECORD, inputs, runner)
    assert kept == [(([4, 6], 2), [2, 3])] and (raised, unreadable) == (2, 0)


def test_amplified_test_catches_what_the_base_test_misses(runner: UnitRunner) -> None:
    out = amplify_record(RECORD, runner, per_task=10, seed=0)
    plus = out["metadata"]["test_plus"]
    assert plus["given_inputs"] == 2 and plus["kept"] >= 3
    assert plus["kept"] + plus["dropped_raise_or_timeout"] + plus["dropped_unreadable"] \
        == plus["new_inputs"]
    assert out["test"] == RECORD["test"] and out["prompt"] == RECORD["prompt"]
    # hard-codes the two base cases: passes the base test, fails the amplified one
    cheat = RECORD["prompt"] + "    return [2, 3] if xs == [4, 6] else [] if not xs else xs\n"
    entry, prompt = "half", RECORD["prompt"]
    base = runner.run(cheat, [UnitCheck(VALID, RECORD["test"])], entry, helpers=prompt)
    amplified = runner.run(cheat, [UnitCheck(VALID, plus["test"])], entry, helpers=prompt)
    assert base[0].passed and not amplified[0].passed
    gold = runner.run(RECORD["prompt"] + RECORD["canonical_solution"],
                      [UnitCheck(VALID, plus["test"])], entry, helpers=prompt)
    assert gold[0].passed
