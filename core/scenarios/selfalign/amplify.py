"""Stronger hidden tests: the dataset's tests amplified with new inputs (EvalPlus's method, the
project's code).

HumanEval's own tests are weak (many wrong solutions pass them), which would hide false
alignment. For one record:

1. **Given inputs** (:func:`given_inputs`): the argument tuples of every ``candidate(...)`` call
   in the record's test whose arguments are all literals.
2. **New inputs** (:func:`mutate`): type-aware mutations of a given input, one argument at a
   time (``int``: +-1, x2, 0, negated; ``float``: +0.5, x1.5, negated; ``str``: a character
   dropped, doubled or swapped with its neighbour, case flipped; ``list``/``tuple``: an element
   dropped, doubled or mutated, reversed, emptied; ``bool``: flipped), seeded, deduplicated,
   and kept only when they satisfy the task's **precondition** (:class:`InputContract`),
   derived from the given inputs the way EvalPlus's per-task contracts restrict inputs to a
   function's documented domain: per argument position (and for the elements of list and
   tuple arguments), a property every given value has is required of a new value too: its
   type, being >= 0 or > 0, being non-empty, being in ascending order (when some given
   sequence has two or more elements), and using only characters the given strings there use.
   A new input violating it is dropped and counted by reason (:data:`REASONS`), never sent to
   the reference; mutation goes on until ``per_task`` inputs keep it or the attempts run out.
   The contract is conservative: it keeps new inputs inside the domain the given tests
   exercise, so a correct solution allowed to assume a documented precondition is not failed
   on an input outside it; the price is fewer, less daring inputs.
3. **Expected outputs** (:func:`reference_outputs`): the reference solution runs on each new
   input **in the sandbox** (boundary tier; its return value comes back as the message of an
   assert that cannot hold). Inputs on which it raises or times out are dropped, as are values
   whose text does not read back (too long, not a literal).
4. **The amplified test** (:func:`plus_test`): the record's own ``check``, then one assert per
   kept input (floats compared with a relative tolerance of 1e-6).

:func:`amplify_record` stores it in ``metadata.test_plus`` with how it was made (``method``,
``seed``, counts of given, new, kept and dropped inputs; ``dropped_contract`` the inputs the
precondition dropped, by reason). Run it with
``python -m core.scenarios.selfalign.amplify IN.jsonl -o OUT.jsonl [--per-task 10] [--seed 0]
[--no-contracts] [--check]``; ``--check`` then runs :func:`check_controls` and logs the
counts (:func:`summary`).
"""
from __future__ import annotations

import argparse
import ast
import json
import logging
import random
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.common import pyast
from core.common.progress import progress_bar
from core.generation.reference import BROKEN_BODIES
from core.scenarios.selfalign.sandbox import SandboxSettings, UnitRunner
from core.scenarios.selfalign.units import VALID, UnitCheck

logger = logging.getLogger(__name__)

METHOD = "type-aware mutation of the given inputs; outputs of the reference run in the sandbox"
CONTRACT_METHOD = ("inputs outside the precondition derived from the given inputs dropped "
                   "(type, sign, emptiness, order, alphabet per argument)")


def given_inputs(test: str) -> list[tuple[Any, ...]]:
    """Literal argument tuples of the ``candidate(...)`` calls in ``test``, in order, unique."""
    try:
        tree = pyast.parse(test)
    except (SyntaxError, ValueError):
        return []
    found: list[tuple[Any, ...]] = []
    seen: set[str] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "candidate") or node.keywords:
            continue
        try:
            args = tuple(pyast.literal_eval(a) for a in node.args)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        key = repr(args)
        if key not in seen:
            seen.add(key)
            found.append(args)
    return found


def _mutate_value(value: Any, rng: random.Random, depth: int = 0) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice([value + 1, value - 1, value * 2, 0, -value])
    if isinstance(value, float):
        return rng.choice([value + 0.5, value * 1.5, -value])
    if isinstance(value, str):
        if not value:
            return rng.choice(["a", " ", "0"])
        i = rng.randrange(len(value))
        choice = rng.randrange(4)
        if choice == 0:
            return value[:i] + value[i + 1:]
        if choice == 1:
            return value[:i] + value[i] + value[i:]
        if choice == 2 and len(value) > 1:
            j = min(i + 1, len(value) - 1)
            chars = list(value)
            chars[i], chars[j] = chars[j], chars[i]
            return "".join(chars)
        return value.swapcase()
    if isinstance(value, (list, tuple)):
        items = list(value)
        choice = rng.randrange(5)
        if items and choice == 0:
            del items[rng.randrange(len(items))]
        elif items and choice == 1:
            i = rng.randrange(len(items))
            items.insert(i, items[i])
        elif items and choice == 2 and depth < 2:
            i = rng.randrange(len(items))
            items[i] = _mutate_value(items[i], rng, depth + 1)
        elif choice == 3:
            items.reverse()
        else:
            items = []
        return type(value)(items)
    return value


@dataclass(frozen=True)
class ValueContract:
    """What every given value at one place (an argument, or the elements of list arguments)
    had in common; a new value must have it too. ``None`` fields constrain nothing."""

    types: frozenset[str]
    min_value: float | None = None       # 0: never negative; None: no bound seen
    positive: bool = False               # every given number > 0
    nonempty: bool = False               # every given str/list/tuple non-empty
    sorted_: bool = False                # every given list/tuple in ascending order
    alphabet: frozenset[str] | None = None   # every character of every given string
    elements: "ValueContract | None" = None  # the contract of list/tuple elements

    def violation(self, value: Any) -> str | None:
        """``None`` when ``value`` keeps the contract, else the reason (a :data:`REASONS` key)."""
        if _type_name(value) not in self.types:
            return "type"
        if _is_number(value):
            if self.positive and value <= 0:
                return "sign"
            if self.min_value is not None and value < self.min_value:
                return "sign"
        if isinstance(value, (str, list, tuple)) and self.nonempty and not value:
            return "empty"
        if isinstance(value, str) and self.alphabet is not None \
                and not set(value) <= self.alphabet:
            return "alphabet"
        if isinstance(value, (list, tuple)):
            if self.sorted_ and not _ascending(value):
                return "sorted"
            if self.elements is not None:
                for item in value:
                    reason = self.elements.violation(item)
                    if reason is not None:
                        return reason
        return None


#: why a new input was dropped before the reference ran on it (:meth:`ValueContract.violation`)
REASONS = {
    "type": "a value of a type no given input has at that place",
    "sign": "a negative number (zero included) where every given one is >= 0 (> 0)",
    "empty": "an empty string, list or tuple where every given one is non-empty",
    "sorted": "a list or tuple out of ascending order where every given one is sorted",
    "alphabet": "a string with a character no given string at that place has",
}


def _type_name(value: Any) -> str:
    return type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _ascending(items: Sequence[Any]) -> bool:
    try:
        return all(a <= b for a, b in zip(items, items[1:]))
    except TypeError:
        return False


def derive_contract(values: Sequence[Any], depth: int = 0) -> ValueContract:
    """The contract of one place from the values the given tests pass there (class docstring):
    a property is required when every given value has it (sortedness only when some given
    sequence has two or more elements, so that it was ever exercised)."""
    numbers = [v for v in values if _is_number(v)]
    texts = [v for v in values if isinstance(v, str)]
    seqs = [v for v in values if isinstance(v, (list, tuple))]
    sized = [v for v in values if isinstance(v, (str, list, tuple))]
    items = [item for seq in seqs for item in seq]
    return ValueContract(
        types=frozenset(_type_name(v) for v in values),
        min_value=0 if numbers and all(v >= 0 for v in numbers) else None,
        positive=bool(numbers) and all(v > 0 for v in numbers),
        nonempty=bool(sized) and all(len(v) > 0 for v in sized),
        sorted_=bool(seqs) and any(len(s) > 1 for s in seqs) and all(_ascending(s) for s in seqs),
        alphabet=frozenset("".join(texts)) if texts else None,
        elements=derive_contract(items, depth + 1) if items and depth < 2 else None)


@dataclass(frozen=True)
class InputContract:
    """The precondition of a task derived from its given inputs: one :class:`ValueContract`
    per argument position, for the given inputs of each arity."""

    places: Mapping[int, tuple[ValueContract, ...]]

    @classmethod
    def derive(cls, inputs: Sequence[tuple[Any, ...]]) -> "InputContract":
        by_arity: dict[int, list[tuple[Any, ...]]] = {}
        for args in inputs:
            by_arity.setdefault(len(args), []).append(args)
        return cls({n: tuple(derive_contract([a[i] for a in group]) for i in range(n))
                    for n, group in by_arity.items()})

    def violation(self, args: tuple[Any, ...]) -> str | None:
        """``None`` when ``args`` keeps the contract, else the first reason."""
        places = self.places.get(len(args))
        if places is None:
            return "type"
        for contract, value in zip(places, args):
            reason = contract.violation(value)
            if reason is not None:
                return reason
        return None


def mutate(inputs: Sequence[tuple[Any, ...]], count: int, seed: int = 0,
           contract: InputContract | None = None,
           dropped: Counter[str] | None = None) -> list[tuple[Any, ...]]:
    """Up to ``count`` new argument tuples, each one given input with one argument mutated;
    none equal to a given input or to each other, and, with a ``contract``, none violating it
    (those are counted by reason in ``dropped``). Deterministic for a seed."""
    rng = random.Random(seed)
    seen = {repr(i) for i in inputs}
    out: list[tuple[Any, ...]] = []
    candidates = [i for i in inputs if i]
    for _ in range(count * 20):
        if len(out) >= count or not candidates:
            break
        base = list(rng.choice(candidates))
        pos = rng.randrange(len(base))
        base[pos] = _mutate_value(base[pos], rng)
        new = tuple(base)
        key = repr(new)
        if key in seen:
            continue
        seen.add(key)
        reason = contract.violation(new) if contract is not None else None
        if reason is not None:
            if dropped is not None:
                dropped[reason] += 1
            continue
        out.append(new)
    return out


def _probe(args: tuple[Any, ...]) -> str:
    call = f"candidate(*{args!r})"
    return f"def check(candidate):\n    assert {call} is NotImplemented, repr({call})\n"


def reference_outputs(record: Mapping[str, Any], inputs: Sequence[tuple[Any, ...]],
                      runner: UnitRunner) -> tuple[list[tuple[tuple[Any, ...], Any]], int, int]:
    """``(kept (args, output) pairs, dropped because the reference raised or timed out,
    dropped because the output did not read back)``; every call runs in the sandbox."""
    entry, prompt = str(record["entry_point"]), str(record["prompt"])
    reference = prompt + str(record["canonical_solution"])
    units = [UnitCheck(VALID, _probe(args)) for args in inputs]
    kept: list[tuple[tuple[Any, ...], Any]] = []
    raised = unreadable = 0
    for args, out in zip(inputs, runner.run(reference, units, entry, helpers=prompt)):
        if out.outcome != "failed" or not out.detail.startswith("AssertionError: "):
            raised += 1
            continue
        try:
            value = pyast.literal_eval(out.detail[len("AssertionError: "):])
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            unreadable += 1
            continue
        kept.append((args, value))
    return kept, raised, unreadable


def plus_test(test: str, pairs: Sequence[tuple[tuple[Any, ...], Any]]) -> str:
    """The record's test with its ``check`` renamed ``_check_base``, and a ``check`` calling it
    and then asserting every (args, output) pair."""
    lines = [test.replace("def check(", "def _check_base(", 1).rstrip(), "", "",
             "def _same(got, want):",
             "    if isinstance(want, float) and isinstance(got, (int, float)):",
             "        return abs(got - want) <= 1e-6 * max(1.0, abs(want))",
             "    return got == want", "", "",
             "def check(candidate):", "    _check_base(candidate)"]
    for args, value in pairs:
        lines.append(f"    assert _same(candidate(*{args!r}), {value!r})")
    return "\n".join(lines) + "\n"


def amplify_record(record: Mapping[str, Any], runner: UnitRunner, per_task: int = 10,
                   seed: int = 0, contracts: bool = True) -> dict[str, Any]:
    """The record with ``metadata.test_plus`` (module docstring); ``contracts=False`` keeps
    inputs outside the derived precondition (the earlier, contract-free method)."""
    given = given_inputs(str(record["test"]))
    contract = InputContract.derive(given) if contracts else None
    dropped: Counter[str] = Counter()
    new = mutate(given, per_task, seed, contract, dropped)
    pairs, raised, unreadable = reference_outputs(record, new, runner) if new else ([], 0, 0)
    out = dict(record)
    metadata = dict(out.get("metadata") or {})
    metadata["test_plus"] = {
        "test": plus_test(str(record["test"]), pairs),
        "method": METHOD + (f"; {CONTRACT_METHOD}" if contracts else ""), "seed": seed,
        "given_inputs": len(given), "new_inputs": len(new), "kept": len(pairs),
        "dropped_raise_or_timeout": raised, "dropped_unreadable": unreadable,
        "dropped_contract": {reason: dropped[reason] for reason in REASONS if dropped[reason]}}
    out["metadata"] = metadata
    return out


def check_controls(records: Sequence[Mapping[str, Any]],
                   runner: UnitRunner) -> tuple[list[str], list[str]]:
    """The gold control of amplified tests, every program in the sandbox: ``(task ids whose
    reference solution fails its amplified test, task ids whose broken body -- one that
    raises -- passes it)``; both lists are empty for a sound file. Records without
    ``metadata.test_plus`` are skipped."""
    reference_fails: list[str] = []
    broken_passes: list[str] = []
    for record in records:
        plus = (record.get("metadata") or {}).get("test_plus")
        if not isinstance(plus, Mapping):
            continue
        entry, prompt = str(record["entry_point"]), str(record["prompt"])
        unit = [UnitCheck(VALID, str(plus["test"]))]
        reference = prompt + str(record["canonical_solution"])
        if not runner.run(reference, unit, entry, helpers=prompt)[0].passed:
            reference_fails.append(str(record["task_id"]))
        if runner.run(prompt + BROKEN_BODIES["raise"], unit, entry, helpers=prompt)[0].passed:
            broken_passes.append(str(record["task_id"]))
    return reference_fails, broken_passes


def summary(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Totals over the records' ``metadata.test_plus`` counts (what the scenario doc reports):
    given, new, kept inputs, the drops by reason, and tasks without a kept input."""
    plus = [r["metadata"]["test_plus"] for r in records
            if isinstance((r.get("metadata") or {}).get("test_plus"), Mapping)]
    contract: Counter[str] = Counter()
    for p in plus:
        contract.update(p.get("dropped_contract") or {})
    return {"tasks": len(plus), **{k: sum(int(p.get(k, 0)) for p in plus) for k in (
        "given_inputs", "new_inputs", "kept", "dropped_raise_or_timeout", "dropped_unreadable")},
        "dropped_contract": dict(sorted(contract.items())),
        "tasks_without_kept_input": sum(1 for p in plus if not p.get("kept"))}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Amplify a codegen dataset's tests "
                                                 "(metadata.test_plus).")
    parser.add_argument("data", type=Path)
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--per-task", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-contracts", action="store_true",
                        help="keep inputs outside the precondition derived from the given inputs")
    parser.add_argument("--check", action="store_true",
                        help="then run the gold control: the reference must pass every amplified "
                             "test and a broken body none (exit status 1 otherwise)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    records = [json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines()
               if line.strip()]
    with UnitRunner(SandboxSettings(options={"min_isolation": "process"})) as runner, \
            args.output.open("w", encoding="utf-8") as out, \
            progress_bar(total=len(records), desc="amplify", unit="task") as bar:
        written: list[dict[str, Any]] = []
        for record in records:
            written.append(amplify_record(record, runner, args.per_task, args.seed,
                                          not args.no_contracts))
            out.write(json.dumps(written[-1]) + "\n")
            bar.update(1)
        logger.info("wrote %d records to %s", len(records), args.output)
        logger.info("counts: %s", json.dumps(summary(written)))
        if args.check:
            fails, passes = check_controls(written, runner)
            logger.info("gold control: the reference fails its amplified test on %d task(s)%s; "
                        "the broken body passes it on %d%s", len(fails),
                        f" ({', '.join(fails)})" if fails else "", len(passes),
                        f" ({', '.join(passes)})" if passes else "")
            if fails or passes:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
