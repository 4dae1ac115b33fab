"""Stronger hidden tests: the dataset's tests amplified with new inputs (EvalPlus's method, the
project's code).

HumanEval's own tests are weak (many wrong solutions pass them), which would hide false
alignment. For one record:

1. **Given inputs** (:func:`given_inputs`): the argument tuples of every ``candidate(...)`` call
   in the record's test whose arguments are all literals.
2. **New inputs** (:func:`mutate`): type-aware mutations of a given input, one argument at a
   time (``int``: +-1, x2, 0, negated; ``float``: +0.5, x1.5, negated; ``str``: a character
   dropped, doubled or swapped with its neighbour, case flipped; ``list``/``tuple``: an element
   dropped, doubled or mutated, reversed, emptied; ``bool``: flipped), seeded, deduplicated.
3. **Expected outputs** (:func:`reference_outputs`): the reference solution runs on each new
   input **in the sandbox** (boundary tier; its return value comes back as the message of an
   assert that cannot hold). Inputs on which it raises or times out are dropped, as are values
   whose text does not read back (too long, not a literal).
4. **The amplified test** (:func:`plus_test`): the record's own ``check``, then one assert per
   kept input (floats compared with a relative tolerance of 1e-6).

:func:`amplify_record` stores it in ``metadata.test_plus`` with how it was made (``method``,
``seed``, counts of given, new, kept and dropped inputs). Run it with
``python -m core.scenarios.selfalign.amplify IN.jsonl -o OUT.jsonl [--per-task 10] [--seed 0]``.
"""
from __future__ import annotations

import argparse
import ast
import json
import logging
import random
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core.common.progress import progress_bar
from core.scenarios.selfalign.sandbox import SandboxSettings, UnitRunner
from core.scenarios.selfalign.units import VALID, UnitCheck
from core.common import pyast

logger = logging.getLogger(__name__)

METHOD = "type-aware mutation of the given inputs; outputs of the reference run in the sandbox"


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
            args = tuple(ast.literal_eval(a) for a in node.args)
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


def mutate(inputs: Sequence[tuple[Any, ...]], count: int, seed: int = 0) -> list[tuple[Any, ...]]:
    """Up to ``count`` new argument tuples, each one given input with one argument mutated;
    none equal to a given input or to each other. Deterministic for a seed."""
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
        if key not in seen:
            seen.add(key)
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
            value = ast.literal_eval(out.detail[len("AssertionError: "):])
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
                   seed: int = 0) -> dict[str, Any]:
    """The record with ``metadata.test_plus`` (module docstring)."""
    given = given_inputs(str(record["test"]))
    new = mutate(given, per_task, seed)
    pairs, raised, unreadable = reference_outputs(record, new, runner) if new else ([], 0, 0)
    out = dict(record)
    metadata = dict(out.get("metadata") or {})
    metadata["test_plus"] = {
        "test": plus_test(str(record["test"]), pairs), "method": METHOD, "seed": seed,
        "given_inputs": len(given), "new_inputs": len(new), "kept": len(pairs),
        "dropped_raise_or_timeout": raised, "dropped_unreadable": unreadable}
    out["metadata"] = metadata
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Amplify a codegen dataset's tests "
                                                 "(metadata.test_plus).")
    parser.add_argument("data", type=Path)
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--per-task", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    records = [json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines()
               if line.strip()]
    with UnitRunner(SandboxSettings(options={"min_isolation": "process"})) as runner, \
            args.output.open("w", encoding="utf-8") as out, \
            progress_bar(total=len(records), desc="amplify", unit="task") as bar:
        for record in records:
            out.write(json.dumps(amplify_record(record, runner, args.per_task, args.seed)) + "\n")
            bar.update(1)
    logger.info("wrote %d records to %s", len(records), args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
