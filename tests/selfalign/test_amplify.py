"""Amplified hidden tests: inputs from the given tests, type-aware mutations, outputs of the
reference solution computed in the sandbox; a wrong solution the base tests miss is caught."""
from __future__ import annotations

from typing import Any

import pytest

from collections import Counter

from core.scenarios.selfalign.amplify import (REASONS, InputContract, amplify_record,
                                              check_controls, given_inputs, mutate,
                                              reference_outputs, summary)
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


def test_the_precondition_is_what_every_given_input_has() -> None:
    # positive ints, sorted non-empty lists of non-negative ints, lower-case strings
    given = [(3, [1, 2, 5], "abc"), (1, [0, 4], "cab")]
    contract = InputContract.derive(given)
    assert contract.violation((2, [0, 1, 1], "aab")) is None
    assert contract.violation((0, [1, 2], "a")) == "sign"          # 0 where all were > 0
    assert contract.violation((2, [], "a")) == "empty"
    assert contract.violation((2, [2, 1], "a")) == "sorted"
    assert contract.violation((2, [-1, 1], "a")) == "sign"          # an element
    assert contract.violation((2, [1, 2], "aB")) == "alphabet"
    assert contract.violation((2.5, [1, 2], "a")) == "type"
    assert contract.violation((2, [1])) == "type"                   # no given input of arity 2
    # what the given inputs do not all share is not required
    loose = InputContract.derive([(-1, [3, -1], ""), (2, [], "XyZ")])
    assert loose.violation((0, [9, -9], "")) is None
    assert set(REASONS) == {"type", "sign", "empty", "sorted", "alphabet"}


def test_mutation_under_a_contract_counts_what_it_drops() -> None:
    given = [([1, 2, 3], 2), ([4, 8], 1)]
    contract = InputContract.derive(given)
    dropped: Counter[str] = Counter()
    new = mutate(given, 10, seed=0, contract=contract, dropped=dropped)
    assert new and all(contract.violation(args) is None for args in new)
    assert sum(dropped.values()) > 0 and set(dropped) <= set(REASONS)
    assert new == mutate(given, 10, seed=0, contract=contract)   # deterministic
    free = mutate(given, 10, seed=0)
    assert any(contract.violation(args) is not None for args in free)


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
    # k = 0 and negative k are outside the given inputs' domain (k > 0): never asked
    assert plus["dropped_contract"].get("sign", 0) > 0
    assert "candidate(*([4, 6], 0))" not in plus["test"]
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
    assert check_controls([out], runner) == ([], [])
    totals = summary([out])
    assert totals["kept"] == plus["kept"] and totals["tasks"] == 1
    assert totals["dropped_contract"] == plus["dropped_contract"]
