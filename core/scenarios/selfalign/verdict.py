"""Agreement as a verdict: how well a row's own agreement signal stands in for the hidden tests.

Seed 001's question is whether agreement between a model's code and its own tests can take the
place of human-written tests. A human test suite, used as a verdict, calls a program correct
exactly when it passes; this module measures how far each row's agreement signal is from that,
from the rows' ``selfalign_per_task.jsonl`` alone (no model, no sandbox)::

    python -m core.scenarios.selfalign.verdict <test case folder or per-task file> [...]

Per row, "agreed" is the row's own signal: the loop's alignment (``aligned_at`` set), CodeT's
consensus, the examples anchor (``agreed``); "passes" is the hidden verdict of the row's final
program (the loop's last try, the selection's selected sample). Printed per row, each with a
95% percentile bootstrap interval over tasks (fixed seed, so reruns print the same):

* ``precision``: share of the agreed tasks that pass (1 - false alignment);
* ``pass when not agreed``: share of the other tasks that pass anyway;
* ``recall``: share of the passing tasks that agreed (what a reader trusting only agreement keeps);
* ``kappa``: Cohen's kappa between the two verdicts (1: agreement is the hidden verdict; 0: no
  better than chance at their rates);
* ``first -> final``: the first program's hidden verdict (the loop's first try, the selection's
  sample 0) against the final one: tasks that went from fail to pass and from pass to fail,
  with the exact McNemar p of "the retries or the selection change nothing".

Given two or more rows, every pair of rows is also compared on the tasks both hold: tasks only
one row's final program passes and the exact McNemar p, and how often the two rows' first
programs got the same hidden verdict (the sampled loop's first try and a selection's sample 0
are the same request, so there this is a reproducibility check of the model). When both rows
are given as test case folders holding their records (a loop's ``selfalign_tries.jsonl``, a
selection's ``selfalign_selection.jsonl``), the pair line also counts the tasks whose first
replies are the same text (code and tests), the stronger form of that check.

A loop row given as a folder holding its ``selfalign_tries.jsonl`` also gets the **best-share
rule** line: the hidden verdicts had the loop, when nothing aligned, kept the try whose code
passed the largest share of its own tests (the earliest such try on ties; a try whose tests
did not run has share -1) instead of the last try, with the exact McNemar p of that rule
against the loop's own (read from the stored tries and their hidden verdicts: no model, no
sandbox).

Edge cases: a row with no agreed task prints ``-`` for precision (kappa is 0 when either
verdict is constant, as Cohen's formula gives); a task without a try (``hidden_pass`` empty)
counts as failing; a file that is not one of these rows' per-task file, or names a task twice,
is an error naming its line.
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.common.errors import ConfigError, IanvsError
from core.common.exact_tests import mcnemar_exact
from core.common.jsonl import iter_jsonl
from core.scenarios.agreement import bootstrap_interval, cohen_kappa

PER_TASK_FILE = "selfalign_per_task.jsonl"


@dataclass(frozen=True)
class TaskVerdict:
    """One task of one row: its own agreement signal and the hidden verdicts (``tries``: a
    loop task's hidden verdict per try, in order; empty for a selection's task)."""

    task_id: str
    agreed: bool
    passed: bool
    first_passed: bool
    tries: tuple[bool, ...] = ()


#: A first reply as text: its code (``None`` when the reply could not be read) and its tests.
Reply = tuple[str | None, tuple[str, ...]]


@dataclass(frozen=True)
class Row:
    """A row's per-task verdicts, in file order; ``kind`` is ``loop`` or the selection method.

    ``first_replies`` maps a task to its first reply (the loop's try 1, the selection's
    sample 0) when the row was loaded from a folder holding its records, else is ``None``.
    """

    name: str
    kind: str
    tasks: tuple[TaskVerdict, ...]
    first_replies: dict[str, Reply] | None = None
    best_share_passed: dict[str, bool] | None = None


def _task(line: dict[str, object], path: Path, number: int) -> tuple[str, TaskVerdict]:
    hidden = line.get("hidden_pass")
    if "task_id" not in line or not isinstance(hidden, list):
        raise ConfigError("not a self-align per-task line (needs task_id and hidden_pass)",
                          source=path, line=number,
                          hint=f"pass a test case folder holding {PER_TASK_FILE}")
    verdicts = [bool(v) for v in hidden]
    first = verdicts[0] if verdicts else False
    if "aligned_at" in line:
        return "loop", TaskVerdict(str(line["task_id"]), line["aligned_at"] is not None,
                                   verdicts[-1] if verdicts else False, first, tuple(verdicts))
    if "selected_pass" in line:
        return str(line.get("method") or "selection"), TaskVerdict(
            str(line["task_id"]), bool(line.get("agreed")), bool(line["selected_pass"]), first)
    raise ConfigError("neither a loop line (aligned_at) nor a selection line (selected_pass)",
                      source=path, line=number, hint="a plain row has no agreement signal")


def load_row(path: Path) -> Row:
    """The row in ``path`` (a test case folder or its ``selfalign_per_task.jsonl``)."""
    file = path / PER_TASK_FILE if path.is_dir() else path
    if not file.is_file():
        raise ConfigError("no such file", source=file, hint="give a self-align test case folder "
                          f"(one holding {PER_TASK_FILE}) or that file")
    kinds: set[str] = set()
    tasks: list[TaskVerdict] = []
    seen: set[str] = set()
    for number, line in iter_jsonl(file, what="self-align per-task file", finite=False):
        kind, task = _task(line, file, number)
        if task.task_id in seen:
            raise ConfigError(f"task {task.task_id} appears twice", source=file, line=number,
                              hint="a per-task file holds one line per task")
        seen.add(task.task_id)
        kinds.add(kind)
        tasks.append(task)
    if not tasks:
        raise ConfigError("no tasks", source=file, hint="the row has not been scored yet")
    if len(kinds) > 1:
        raise ConfigError(f"lines of several rows ({', '.join(sorted(kinds))})", source=file)
    kind = kinds.pop()
    replies = _first_replies(path) if path.is_dir() else None
    best = (_best_share(path, tasks)
            if kind == "loop" and path.is_dir() and (path / TRIES_FILE).is_file() else None)
    return Row(_label(file.parent), kind, tuple(tasks), replies, best)


TRIES_FILE = "selfalign_tries.jsonl"
SELECTION_FILE = "selfalign_selection.jsonl"


def _reply(code: object, tests: object) -> Reply:
    return (code if isinstance(code, str) else None,
            tuple(str(t) for t in tests) if isinstance(tests, list) else ())


def _first_replies(folder: Path) -> dict[str, Reply] | None:
    """Each task's first reply from the folder's records (the later line wins when a resumed
    run wrote a task twice); ``None`` when the folder holds neither records file."""
    replies: dict[str, Reply] = {}
    if (folder / TRIES_FILE).is_file():
        for _, line in iter_jsonl(folder / TRIES_FILE, what="self-align tries file", finite=False):
            if line.get("try") == 1 and "task_id" in line:
                replies[str(line["task_id"])] = _reply(line.get("code"), line.get("tests"))
        return replies
    if (folder / SELECTION_FILE).is_file():
        for number, line in iter_jsonl(folder / SELECTION_FILE, what="self-align selection file",
                                      finite=False):
            samples = line.get("samples")
            if "task_id" not in line or not isinstance(samples, list):
                raise ConfigError("not a selection line (needs task_id and samples)",
                                  source=folder / SELECTION_FILE, line=number)
            first = next((x for x in samples if isinstance(x, dict) and x.get("index") == 0), None)
            if first is not None:
                replies[str(line["task_id"])] = _reply(first.get("code"), first.get("tests"))
        return replies
    return None


def _own_share(units: object) -> float:
    """Share of a try's own tests that passed; -1 when none ran (unreadable reply, no tests)."""
    if not isinstance(units, list) or not units:
        return -1.0
    return sum(isinstance(u, dict) and u.get("outcome") == "passed" for u in units) / len(units)


def _best_share(folder: Path, tasks: Sequence[TaskVerdict]) -> dict[str, bool]:
    """Each task's final hidden verdict under the best-share rule (module docstring).

    The tries file is read as the loop reads it: a line for try t replaces the task's stored
    tries t and later. An aligned task keeps its verdict; a try without a hidden verdict (the
    per-task line is shorter than the tries) counts as failing.
    """
    shares: dict[str, dict[int, float]] = {}
    for number, line in iter_jsonl(folder / TRIES_FILE, what="self-align tries file",
                                   finite=False):
        number_of_try = line.get("try")
        if "task_id" not in line or not isinstance(number_of_try, int) or number_of_try < 1:
            raise ConfigError("not a try line (needs task_id and try)",
                              source=folder / TRIES_FILE, line=number)
        stored = shares.setdefault(str(line["task_id"]), {})
        for later in [t for t in stored if t >= number_of_try]:
            del stored[later]
        stored[number_of_try] = _own_share(line.get("units"))
    final: dict[str, bool] = {}
    for task in tasks:
        stored = shares.get(task.task_id, {})
        if task.agreed or not stored:
            final[task.task_id] = task.passed
            continue
        best = max(sorted(stored), key=lambda t: stored[t])  # max keeps the earliest on ties
        final[task.task_id] = task.tries[best - 1] if best <= len(task.tries) else False
    return final


def _label(folder: Path) -> str:
    """The row's name: its configuration from the test case's ``case.json`` (generator,
    temperature, selection), else the folder's name."""
    try:
        case = json.loads((folder / "case.json").read_text(encoding="utf-8"))
        hyper = case["modules"]["basemodel"]["hyperparameters"]
    except (OSError, ValueError, KeyError, TypeError):
        return folder.name
    parts = [f"{k}={hyper[k]}" for k in ("generator", "selection", "temperature") if k in hyper]
    return f"{case.get('algorithm', folder.name)}[{', '.join(parts)}]"


def _share(items: Sequence[TaskVerdict], num: str, given: str | None,
           given_value: bool = True) -> float:
    pool = [t for t in items if given is None or getattr(t, given) is given_value]
    return sum(getattr(t, num) for t in pool) / len(pool) if pool else math.nan


def _kappa(items: Sequence[TaskVerdict]) -> float:
    return cohen_kappa([t.agreed for t in items], [t.passed for t in items])


def _fmt(value: float, low: float, high: float) -> str:
    if math.isnan(value):
        return "-"
    if math.isnan(low):
        return f"{value:.3f}"
    return f"{value:.3f} ({low:.3f}-{high:.3f})"


def row_lines(row: Row) -> list[str]:
    """The printed summary of one row (module docstring)."""
    t = list(row.tasks)
    agreed = [x for x in t if x.agreed]
    passing = [x for x in t if x.passed]
    up = sum(x.passed and not x.first_passed for x in t)
    down = sum(x.first_passed and not x.passed for x in t)
    stats = {
        "precision (agreed that pass)": bootstrap_interval(
            t, lambda s: _share(s, "passed", "agreed")),
        "pass when not agreed": bootstrap_interval(
            t, lambda s: _share(s, "passed", "agreed", False)),
        "recall (passing that agreed)": bootstrap_interval(
            t, lambda s: _share(s, "agreed", "passed")),
        "kappa (agreed vs passes)": bootstrap_interval(t, _kappa),
    }
    lines = [f"{row.name} ({row.kind}): {len(t)} tasks, {len(passing)} pass the hidden tests, "
             f"{len(agreed)} agreed ({sum(x.passed for x in agreed)} of them pass)"]
    lines += [f"  {label}: {_fmt(*value)}" for label, value in stats.items()]
    lines.append(f"  first -> final: {up} fail -> pass, {down} pass -> fail, "
                 f"McNemar p = {mcnemar_exact(up, down):.3g} "
                 f"({sum(x.first_passed for x in t)} -> {len(passing)} passing)")
    if row.best_share_passed is not None:
        best = row.best_share_passed
        gain = sum(best[x.task_id] and not x.passed for x in t)
        loss = sum(x.passed and not best[x.task_id] for x in t)
        lines.append(f"  best-share rule (when nothing aligns, keep the try passing most of its "
                     f"own tests): {sum(best.values())} pass (last try kept: {len(passing)}); "
                     f"{gain} fail -> pass, {loss} pass -> fail, "
                     f"McNemar p = {mcnemar_exact(gain, loss):.3g}")
    return lines


def pair_lines(a: Row, b: Row) -> list[str]:
    """Two rows on the tasks both hold: final verdicts' discordance, first verdicts' match."""
    other = {x.task_id: x for x in b.tasks}
    both = [(x, other[x.task_id]) for x in a.tasks if x.task_id in other]
    only_a = sum(x.passed and not y.passed for x, y in both)
    only_b = sum(y.passed and not x.passed for x, y in both)
    same_first = sum(x.first_passed == y.first_passed for x, y in both)
    line = (f"{a.name} vs {b.name}: {len(both)} shared tasks; final program passes only in "
            f"{a.name}: {only_a}, only in {b.name}: {only_b}, McNemar p = "
            f"{mcnemar_exact(only_a, only_b):.3g}; first programs' verdicts equal on "
            f"{same_first} of {len(both)}")
    if a.first_replies is not None and b.first_replies is not None:
        ra, rb = a.first_replies, b.first_replies
        held = [x.task_id for x, _ in both if x.task_id in ra and x.task_id in rb]
        same = sum(ra[t] == rb[t] for t in held)
        line += f"; first replies identical (code and tests) on {same} of {len(held)}"
    return [line]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m core.scenarios.selfalign.verdict",
        description="How well each self-align row's agreement stands in for the hidden tests.")
    parser.add_argument("rows", nargs="+", type=Path,
                        help=f"test case folders (or their {PER_TASK_FILE})")
    args = parser.parse_args(argv)
    try:
        rows = [load_row(p) for p in args.rows]
    except IanvsError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    for row in rows:
        sys.stdout.write("\n".join(row_lines(row)) + "\n")
    for a, b in itertools.combinations(rows, 2):
        sys.stdout.write("\n".join(pair_lines(a, b)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
