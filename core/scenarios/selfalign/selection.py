"""Selection baselines beside the self-align loop: sample K replies, pick one program without a
second model call (issue 48).

Both methods draw the same K replies per task: the loop's first-try messages and reply schema
(:mod:`.reply`: code and ``tests_per_task`` tests), sample ``k`` seeded ``seed + k``
(:meth:`.loop.GeneratorResponder.reply`), so a rerun draws the same samples. Each sample is a
:class:`~.store.TryRecord` (try 1, ``extra.sample`` = k) with its own tests run against its own
code, appended and fsynced to ``selfalign_samples.jsonl`` in the job's shared folder
(:data:`SHARED_DIR`, beside the test cases, keyed by content: model identity, decoding, sample
index, messages, schema), so a killed run resumes without drawing a finished sample again and
the ``codet`` and ``examples`` rows of one job share one set of samples. Every program and
unit runs in the loop's sandbox (:class:`.sandbox.UnitRunner`, kernel isolation at least, a
fresh judge per unit), whose cache is in the same shared folder; nothing a model wrote runs
in this process.

``codet`` (CodeT's dual execution agreement, Chen et al. 2022)
    The valid model-written tests of all K samples are pooled (static checks, :mod:`.units`;
    the same text counted once). Every sampled program runs against every pooled unit. The
    programs are grouped by the exact set of units they pass; a group scores (number of
    programs in it) x (number of units they pass). The selected program is the earliest
    sample of the best group; ties between groups go to the one with more programs, then to
    the one holding the earlier sample. A task has a **consensus** when the best score is
    above 0 (its programs pass some unit). Without one (no valid unit, or no program passes
    any) the choice falls back to the first sample that has code (``fallback:
    no_consensus``).
``examples`` (an anchor on the prompt's examples, as AlphaCodium's public tests)
    The examples the task's prompt states (:func:`core.scenarios.codegen.examples.prompt_examples`)
    become one unit (:func:`~core.scenarios.codegen.examples.examples_unit`); the selected
    program is the earliest sample whose program passes it (an **anchor**). When the prompt
    has no usable example (``fallback: no_examples``) or no program passes
    (``no_example_passed``), the choice is ``anchor_fallback``'s: ``codet`` (the CodeT choice
    above, default) or ``first`` (the first sample with code).

A sample without readable code is no candidate; when no sample has code the selected program
is the prompt's stub (``fallback: no_program``), graded as a failure. The per-task outcome is
a line of ``selfalign_selection.jsonl`` in the test case folder (:class:`SelectionStore`,
fields in :func:`select_task`), which holds everything the metric grades (every sample's
program, the agreement matrix, the choice), so a re-score never needs the shared folder.
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.generation.cache_key import canonical_json
from core.common.jsonl import append_durably
from core.scenarios.codegen.examples import examples_unit, prompt_examples
from core.scenarios.selfalign.loop import (LoopSettings, Responder, _one_try, run_units, shown,
                                           unit_checks)
from core.scenarios.selfalign.reply import messages, reply_schema
from core.scenarios.selfalign.sandbox import GRADING, UnitRunner
from core.scenarios.selfalign.store import TryRecord, read_stored
from core.scenarios.selfalign.units import check_unit

logger = logging.getLogger(__name__)

#: the selection methods (``selection`` hyperparameter; ``loop`` is the loop itself)
METHODS = ("codet", "examples")
#: what the examples anchor falls back to
FALLBACKS = ("codet", "first")
#: the job's shared folder (beside the test cases) holding the samples and the units' cache
SHARED_DIR = "selfalign-shared"
SAMPLES_FILE = "selfalign_samples.jsonl"
SHARED_UNITS_FILE = "selfalign_units.jsonl"
#: the per-task choice, in the test case folder
SELECTION_FILE = "selfalign_selection.jsonl"


@dataclass(frozen=True)
class SelectionSettings:
    """``method`` (:data:`METHODS`), ``samples`` (K) and the examples anchor's fallback."""

    method: str
    samples: int = 5
    anchor_fallback: str = "codet"

    def describe(self) -> dict[str, Any]:
        return {"method": self.method, "samples": self.samples,
                "anchor_fallback": self.anchor_fallback if self.method == "examples" else None}


def shared_dir(case_dir: Path) -> Path:
    """The job's shared folder of a test case folder (``<job>/<algorithm>/<case>``)."""
    return Path(case_dir).parent.parent / SHARED_DIR


class _Lines:
    """An append-only JSONL file of dicts kept by a key field; a later line replaces an
    earlier one with the same key; unreadable lines (cut by a kill) are skipped. Safe to share
    between threads."""

    def __init__(self, path: Path, field: str) -> None:
        self.path, self.field = path, field
        self._lock = threading.Lock()
        self._rows: dict[str, dict[str, Any]] = dict(
            read_stored(path, lambda row: (str(row[field]), row)))  # a later line wins

    def get(self, key: str) -> dict[str, Any] | None:
        return self._rows.get(key)

    def add(self, row: dict[str, Any]) -> None:
        """Append ``row`` durably (flush + fsync) and keep it."""
        line = json.dumps(row, ensure_ascii=False) + "\n"
        with self._lock:
            append_durably(self.path, line)
            self._rows[str(row[self.field])] = row


class SampleStore(_Lines):
    """The samples, by key (``selfalign_samples.jsonl``; lines are :class:`TryRecord`\\ s)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, "key")

    def sample(self, key: str) -> TryRecord | None:
        row = self.get(key)
        return None if row is None else TryRecord.from_dict(row)

    def put(self, record: TryRecord) -> None:
        self.add(record.to_dict())


class SelectionStore(_Lines):
    """The per-task choices of one test case, by task (``selfalign_selection.jsonl``)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, "task_id")


def sample_key(model: Mapping[str, Any], task_id: str, index: int,
               msgs: Sequence[Mapping[str, str]], schema: Mapping[str, Any],
               settings: LoopSettings) -> str:
    """What determines sample ``index`` of a task (the number of samples does not: K = 10
    reuses the samples of K = 5)."""
    doc = {"v": 1, "sample": index, "model": dict(model), "task_id": task_id,
           "messages": list(msgs), "schema": dict(schema),
           "tests": {"tests_per_task": settings.tests_per_task,
                     "test_style": settings.test_style}}
    return hashlib.sha256(canonical_json(doc).encode("utf-8")).hexdigest()


def draw_samples(record: Mapping[str, Any], responder: Responder, runner: UnitRunner,
                 store: SampleStore, settings: LoopSettings, k: int) -> list[TryRecord]:
    """The task's K samples, drawn or reused from ``store`` (each stored once its own tests
    ran against its code).

    Raises:
        GenerationFailed, SandboxInfraError: as :func:`.loop.run_task`; samples finished so far
            are stored.
    """
    task_id = str(record["task_id"])
    prompt, entry_point = shown(record)
    msgs = messages(prompt, entry_point, 1, "both", "none", settings.tests_per_task,
                    settings.test_style)
    schema = reply_schema(True, True, settings.tests_per_task, settings.test_style)
    model = responder.describe()
    keys = [sample_key(model, task_id, index, msgs, schema, settings) for index in range(k)]
    found = {i: rec for i, key in enumerate(keys) if (rec := store.sample(key)) is not None}
    missing = [i for i in range(k) if i not in found]
    # asked for together (a backend answering several at once does), each stored as it comes
    for index, reply in (responder.sample_replies(record, msgs, schema, missing)
                         if missing else ()):
        found[index] = _one_try(record, responder, runner, 1, msgs, schema, keys[index], None,
                                True, True, sample=index, given=reply)
        store.put(found[index])
    return [found[i] for i in range(k)]


def codet_groups(passes: Sequence[frozenset[int] | None]) -> list[dict[str, Any]]:
    """CodeT's groups, best first (module docstring): per distinct set of passed units, its
    programs' sample indices (``members``), the units (``passed``, sorted) and the score
    (members x units). ``passes[i]`` is None for a sample without a program."""
    by_set: dict[frozenset[int], list[int]] = {}
    for index, passed in enumerate(passes):
        if passed is not None:
            by_set.setdefault(passed, []).append(index)
    ranked = sorted(by_set.items(), key=lambda item: (-len(item[1]) * len(item[0]),
                                                      -len(item[1]), item[1][0]))
    return [{"members": members, "passed": sorted(units), "score": len(members) * len(units)}
            for units, members in ranked]


def codet_choice(passes: Sequence[frozenset[int] | None]) -> tuple[int | None, bool]:
    """``(selected sample, consensus)``: the earliest member of the best group when its score
    is above 0, else the first sample with a program and no consensus; ``(None, False)``
    when no sample has one."""
    groups = codet_groups(passes)
    if groups and groups[0]["score"] > 0:
        return groups[0]["members"][0], True
    return first_program(passes), False


def first_program(passes: Sequence[Any]) -> int | None:
    """The first sample with a program (``passes[i]`` not None), or None."""
    return next((i for i, p in enumerate(passes) if p is not None), None)


def anchor_choice(example_pass: Sequence[bool | None]) -> int | None:
    """The earliest sample whose program passes the prompt's examples, or None."""
    return next((i for i, ok in enumerate(example_pass) if ok), None)


def anchor_unit(record: Mapping[str, Any]) -> tuple[int, Any]:
    """``(number of usable examples, their unit's static check or None)`` of a record."""
    prompt, entry_point = shown(record)
    found = prompt_examples(prompt, entry_point)
    if not found:
        return 0, None
    unit = check_unit(examples_unit(found), entry_point, prompt)
    if not unit.valid:  # the prompt's own text: never seen on HumanEval (all 115 are valid)
        logger.warning("%s: the prompt's examples are not a runnable unit (%s)",
                       record["task_id"], unit.status)
        return len(found), None
    return len(found), unit


def selection_key(settings: SelectionSettings, samples: Sequence[TryRecord]) -> str:
    doc = {"v": 1, "selection": settings.describe(), "samples": [s.key for s in samples],
           "grading": GRADING}
    return hashlib.sha256(canonical_json(doc).encode("utf-8")).hexdigest()


def select_task(record: Mapping[str, Any], samples: Sequence[TryRecord], runner: UnitRunner,
                settings: SelectionSettings, store: SelectionStore) -> dict[str, Any]:
    """The task's choice among ``samples`` (module docstring), stored in ``store`` (reused
    when its key matches). The line's fields:

    ``task_id``, ``key``, ``method``; ``samples``: per sample ``index``, ``key``, ``code`` (the
    module graded, ``""`` without one), ``parse_error``, ``tests``, ``aligned`` (passes its own
    tests), ``tokens``, ``latency_s``, ``sandbox_runs``, ``sandbox_s``, ``invalid_units``,
    ``units``; ``units``: the pooled valid units; ``matrix``: per sample the outcome of every
    pooled unit (None for a sample without a program); ``groups`` (:func:`codet_groups`);
    ``examples``: usable examples in the prompt; ``example_pass``: per sample (None when not
    run); ``selected``: the sample index or None; ``agreed``: consensus (``codet``) or anchor
    (``examples``); ``fallback``: None or ``no_consensus``, ``no_examples``,
    ``no_example_passed``, ``no_program``; ``sandbox_runs``, ``sandbox_s``: this step's.

    Raises:
        SandboxInfraError: the sandbox failed (nothing stored; redone by the next run).
    """
    key = selection_key(settings, samples)
    stored = store.get(str(record["task_id"]))
    if stored is not None and stored.get("key") == key:
        return stored
    runs_before, started = runner.runs, time.perf_counter()
    pool: list[str] = []
    pool_checks: list[Any] = []
    for s in samples:  # the valid units of every sample, the same text once
        checks = unit_checks(record, s.tests, s.extra.get("control") is not None)
        for test, check in zip(s.tests, checks):
            if check.valid and test.strip() not in {p.strip() for p in pool}:
                pool.append(test)
                pool_checks.append(check)
    programs = [s.code if s.code.strip() else None for s in samples]
    matrix: list[list[str] | None] = []
    need_matrix = settings.method == "codet" or settings.anchor_fallback == "codet"
    for code in programs:
        if code is None or not need_matrix:
            matrix.append(None)
        else:
            matrix.append([o.outcome for o in run_units(runner, record, code, pool_checks)])
    passes: list[frozenset[int] | None] = [
        None if code is None else frozenset(i for i, o in enumerate(row or []) if o == "passed")
        for code, row in zip(programs, matrix)]
    groups = codet_groups(passes) if need_matrix else []
    n_examples, anchor = (anchor_unit(record) if settings.method == "examples"
                          else (0, None))
    example_pass: list[bool | None] = [None] * len(samples)
    if anchor is not None:
        example_pass = [None if code is None else
                        run_units(runner, record, code, [anchor])[0].passed
                        for code in programs]
    fallback: str | None = None
    if settings.method == "codet":
        selected, agreed = codet_choice(passes)
        if not agreed:
            fallback = "no_consensus"
    else:
        selected = anchor_choice(example_pass)
        agreed = selected is not None
        if not agreed:
            fallback = "no_examples" if anchor is None else "no_example_passed"
            selected = codet_choice(passes)[0] if settings.anchor_fallback == "codet" \
                else first_program(passes)
    if selected is None:
        fallback = "no_program"
    row = {
        "task_id": str(record["task_id"]), "key": key, "method": settings.method,
        "samples": [{"index": i, "key": s.key, "code": s.code, "parse_error": s.parse_error,
                     "tests": list(s.tests), "aligned": s.aligned, "tokens": s.tokens,
                     "latency_s": s.latency_s, "sandbox_runs": s.sandbox_runs,
                     "sandbox_s": s.sandbox_s,
                     "units": len(s.units),
                     "invalid_units": sum(u["outcome"] == "invalid" for u in s.units)}
                    for i, s in enumerate(samples)],
        "units": pool, "matrix": matrix, "groups": groups, "examples": n_examples,
        "example_pass": example_pass, "selected": selected, "agreed": agreed,
        "fallback": fallback, "sandbox_runs": runner.runs - runs_before,
        "sandbox_s": round(time.perf_counter() - started, 4)}
    store.add(row)
    return row
