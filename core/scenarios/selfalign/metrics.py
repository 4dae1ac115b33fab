"""Metrics of the self-align loop, computed from the stored tries (no model runs).

:func:`selfalign` reads ``selfalign_tries.jsonl`` of the test case (:mod:`.store`) for the
records of the run and returns one row:

========================= =================================================================
``align@<k>``             share of tasks whose code passed all of its own tests within k tries
``align_rate``            the same within ``max_tries`` (whatever the loop was given)
``hidden_pass@1``         share of tasks whose final code passes the dataset's hidden tests
                          (boundary tier, the codegen grading path and its cache)
``hidden_pass@1_first``   the same for the first try's code: what the loop changed
``hidden_pass@1_plus``    the final code on the amplified hidden tests (``metadata.test_plus`` of
                          the records, :mod:`.amplify`), over the ``plus_tasks`` tasks that
                          have them
``false_alignment``       share of aligned tasks whose final code fails the hidden tests
``false_aligned``         their number; ``aligned`` the number of aligned tasks
``test_validity``         share of the final model-written tests that pass on the reference
                          solution (invalid tests count as not valid)
``invalid_tests``         share of all graded test units (every try) that were invalid
``parse_failures``        tries whose reply could not be read; ``tries`` all tries
``tries_per_task``, ``tokens_per_task``, ``sandbox_runs_per_task``, ``wall_s_per_task``
                          cost per task (tokens: prompt + completion; wall: model latency
                          plus sandbox time of the loop)
``tokens_per_aligned``, ``wall_s_per_aligned``   total cost divided by the aligned tasks
``mutation_score``        share of the reference solution's mutants (:mod:`.mutants`, at most
                          ``mutants`` per task) that the final model-written tests kill
                          (some test that passes on the reference does not pass on the
                          mutant; a test failing on the reference kills nothing); mutants that pass every
                          hidden test look equivalent and are left out, counted in
                          ``equivalent_mutants``; ``mutants`` counts the rest
``tasks``                 tasks with at least one stored try
``plain_tasks``           a row without the loop (the ``plain`` codegen or repo basemodel in
                          the same job): its tasks; such a row gets ``hidden_pass@1`` and
                          ``hidden_pass@1_plus`` of its samples (unbiased pass@1 over them) on
                          the same hidden and amplified tests, every loop column empty
``selection``             a selection baseline's row (``codet`` or ``examples``,
                          :mod:`.selection`), read from ``selfalign_selection.jsonl``; its
                          columns below, the loop's own (``align@k``, ``false_alignment``,
                          ``tries``, mutants) empty
``agreed``                selection rows: tasks where the selected program agreed (``codet``:
                          a consensus, its group passes some pooled unit; ``examples``: it
                          passes the prompt's examples)
``false_agreement``       share of those tasks whose selected program fails the hidden tests
                          (as ``false_alignment``); ``false_agreed`` their number
``fallbacks``             tasks whose choice fell back (no consensus; no example or none
                          passed; no program); ``no_examples`` (``examples`` rows) tasks whose
                          prompt states no usable example
``sample_pass@1``         selection rows: unbiased pass@1 of one of the K samples (the mean
                          over tasks of the share of samples passing the hidden tests): what
                          the selection is to beat; ``samples`` all samples
========================= =================================================================

For a selection row ``hidden_pass@1`` grades the selected program, ``hidden_pass@1_first``
the first sample's, ``hidden_pass@1_plus`` the selected one on the amplified tests,
``test_validity`` the distinct tests of all samples on the reference, ``invalid_tests`` every
sample's units, ``parse_failures`` the samples, and the cost columns all samples plus the
agreement runs.

Repository tasks (repo kind records, :mod:`.repo`) are graded by the repository's own tests
(the ``repo_tests`` machinery and cache file; ``sources`` and ``timeout`` as for that metric);
test validity runs the final tests against the original function and mutants are mutants of
it, each in a view of the repository; there are no amplified tests there (``plus_tasks`` 0).

Every program here (reference, mutants, model code) runs in the sandbox; the hidden tests of
the mutant filter run as one unit (the dataset's ``check`` called on the entry point).

It also writes ``selfalign_per_try.json`` (for t = 1..max tries: alignment, hidden pass@1 of
the code the loop would return when stopped after t tries, false alignment (``null`` when
nothing aligned), cumulative tokens and wall time per task, and under ``intervals`` the 95%
percentile bootstrap interval over tasks of the three shares at each t: ``align_95``,
``hidden_pass@1_95``, ``false_alignment_95``, each ``[low, high]``, ``null`` where undefined)
and ``selfalign_per_try.png`` (those against the try number), and
``selfalign_per_task.jsonl`` (one line per task). Tasks without a stored try (a generation or
sandbox failure left them for the next run) are left out and counted in ``unfinished``.
"""
from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from dataclasses import dataclass
from typing import Any

from core.common.errors import ConfigError
from core.common.jsonl import write_jsonl
from core.scenarios.agreement import bootstrap_interval
from core.scenarios.selfalign.mutants import make_mutants
from core.scenarios.selfalign.sandbox import (INVALID, SandboxInfraError, SandboxSettings,
                                              UnitRunner)
from core.scenarios.selfalign.store import TRIES_FILE, TryRecord, TryStore
from core.scenarios.selfalign.selection import SELECTION_FILE, SelectionStore
from core.scenarios.repo.kind import answer_code
from core.scenarios.selfalign import repo
from core.scenarios.selfalign.loop import run_units, unit_checks
from core.scenarios.selfalign.units import check_unit
from core.scenarios.codegen.execution import iter_results
from core.testcasecontroller.metrics.per_task import PerTaskValues
from core.testenvmanager.sandbox.pool import SANDBOX_KEYS

logger = logging.getLogger(__name__)

VALIDITY_FILE = "selfalign_validity.jsonl"
VALIDITY_REPO_FILE = "selfalign_validity_repo.jsonl"
PER_TRY_FILE = "selfalign_per_try.json"
PER_TASK_FILE = "selfalign_per_task.jsonl"
COST_COLUMNS = ["tries_per_task", "tokens_per_task", "sandbox_runs_per_task", "wall_s_per_task",
                "tokens_per_aligned", "wall_s_per_aligned"]
#: the columns of a selection row only (:mod:`.selection`)
SELECTION_COLUMNS = ["agreed", "false_agreement", "false_agreed", "fallbacks", "no_examples",
                     "sample_pass@1", "samples"]


def _ks(k: int | Sequence[int]) -> list[int]:
    ks = [k] if isinstance(k, int) else list(k)
    if not ks or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in ks):
        raise ValueError(f"k must be a positive integer or a list of them, got {k!r}")
    return ks


def _share(num: float, den: float) -> float:
    return round(num / den, 4) if den else math.nan


def _code(t: TryRecord, record: Mapping[str, Any]) -> str:
    """The module graded for a try: its code, or the prompt's stub when it had none (for a
    repository task the function's header alone)."""
    if repo.is_repo_record(record):
        return t.code or repo.stub_code(record)
    return t.code or str(record["prompt"])


class _RepoGrading:
    """Grading of the repository-level set (:mod:`.repo`): hidden tests by the repo kind's
    machinery, units in views of the repository; the metric's ``sources`` name the sources."""

    def __init__(self, context: Any, sources: Mapping[str, str] | None, timeout: float) -> None:
        if not sources:
            raise ConfigError("the selfalign metric needs 'sources' for repository tasks",
                              hint="sources: {<repo name>: <archive>} as for repo_tests")
        sandbox = dict(getattr(context, "sandbox", None) or {})
        self.workspace = Path(context.workspace)
        self.timeout = float(timeout)
        self.workers = int(sandbox.get("workers", 2))
        self.runner = repo.RepoUnitRunner(
            repo.resolve_sources(sources, getattr(context, "config_dir", None)),
            self.workspace / VALIDITY_REPO_FILE, timeout=self.timeout,
            min_isolation=str(sandbox.get("min_isolation", "kernel")))

    def hidden(self, items: Sequence[tuple[Mapping[str, Any], str]]) -> list[bool]:
        try:
            return repo.grade_hidden(items, self.runner.sources, self.workspace, self.timeout,
                                     workers=self.workers, runner=self.runner)
        except SandboxInfraError as exc:
            raise ConfigError(f"sandbox failed while grading the hidden tests: {exc}",
                              hint="run again: results so far are cached") from exc


def _validity_runner(context: Any) -> UnitRunner:
    sandbox = dict(getattr(context, "sandbox", None) or {})
    timeout = sandbox.get("timeout", "auto")
    return UnitRunner(SandboxSettings(
        backend=str(sandbox.get("backend", "local")),
        options={k: v for k, v in sandbox.items() if k not in SANDBOX_KEYS},
        timeout=float(timeout) if isinstance(timeout, (int, float)) else 3.0,
        memory_mb=int(sandbox.get("memory_mb", 1024))), Path(context.workspace) / VALIDITY_FILE)


def selfalign(y_true: Any, y_pred: Sequence[Any], context: Any = None,
              k: int | Sequence[int] = (1, 5), mutants: int = 10,
              sources: Mapping[str, str] | None = None, timeout: float = 120.0) -> dict[str, Any]:
    """The self-align row (module docstring); ``mutants: 0`` skips the mutation score.
    ``sources`` and ``timeout`` (seconds per run of a repository's tests) are for the
    repository-level set, as for the ``repo_tests`` metric."""
    ks = _ks(k)
    per_task = _per_task_values(context)
    if isinstance(mutants, bool) or not isinstance(mutants, int) or mutants < 0:
        raise ConfigError(f"mutants must be an integer >= 0, got {mutants!r}")
    if context is None:
        raise ConfigError("the selfalign metric needs the framework's context",
                          hint="run it through 'ianvs -f'")
    workspace = Path(context.workspace)
    store = TryStore(workspace / TRIES_FILE)
    records = [r for r in context.records()]
    done = [(r, store.tries(str(r["task_id"]))) for r in records]
    repo_grading = _RepoGrading(context, sources, timeout) \
        if records and repo.is_repo_record(records[0]) else None
    if not any(tries for _, tries in done):
        choices = SelectionStore(workspace / SELECTION_FILE)
        if repo_grading is None and any(choices.get(str(r["task_id"])) for r in records):
            return _selection_row(records, choices, context, ks)
        if _plain_predictions(y_pred, len(records)):
            return _plain_row(records, list(y_pred), context, ks, repo_grading)
    unfinished = sum(1 for _, tries in done if not tries)
    done = [(r, tries) for r, tries in done if tries]
    depth = max((len(t) for _, t in done), default=0)
    hidden: list[list[bool]] = []
    if repo_grading is not None:  # the repository's own tests, every try's code (cached)
        flat = repo_grading.hidden([(r, _code(t, r)) for r, tries in done for t in tries])
        for _, tries in done:
            hidden.append(flat[:len(tries)])
            flat = flat[len(tries):]
    else:  # hidden tests: every try's code, graded once (cached) by the codegen grading path
        preds = [{"task_id": r["task_id"], "samples": [
            {"task_id": r["task_id"], "sample_index": i, "code": _code(t, r)}
            for i, t in enumerate(tries)]} for r, tries in done]
        for results in iter_results([r for r, _ in done], preds,
                                    getattr(context, "sandbox", {}) or {}, workspace,
                                    getattr(context, "show_progress", False), total=len(done)):
            hidden.append([s.passed for s in results])
    # amplified hidden tests (metadata.test_plus, see .amplify): final code of the tasks having them
    plus_records = [(i, {**r, "test": r["metadata"]["test_plus"]["test"]})
                    for i, (r, _) in enumerate(done)
                    if isinstance((r.get("metadata") or {}).get("test_plus"), Mapping)]
    plus_preds = [{"task_id": r["task_id"], "samples": [
        {"task_id": r["task_id"], "sample_index": 0, "code": _code(done[i][1][-1], r)}]}
        for i, r in plus_records]
    plus_pass = [results[0].passed for results in iter_results(
        [r for _, r in plus_records], plus_preds, getattr(context, "sandbox", {}) or {},
        workspace, False, total=len(plus_records))] if plus_records else []
    # test validity: the final tests against the reference solution
    valid = total_final = 0
    mutation = {"killed": 0, "mutants": 0, "equivalent": 0}
    with (repo_grading.runner if repo_grading is not None else _validity_runner(context)) \
            as runner:
        for r, tries in done:
            final = tries[-1]
            checks = unit_checks(r, final.tests, final.extra.get("control") is not None)
            total_final += len(checks)
            reference = repo.reference_code(r) if repo_grading is not None else \
                str(r["prompt"]) + str(r.get("canonical_solution", ""))
            before = (mutation["killed"], mutation["mutants"])
            try:
                outs = run_units(runner, r, reference, checks)
                valid += sum(o.passed for o in outs)
                # only a unit that holds on the reference may kill a mutant: a wrong test
                # fails on every program and would otherwise "kill" them all
                sound = [c for c, o in zip(checks, outs) if o.passed]
                if mutants and repo_grading is not None:
                    _repo_mutation(repo_grading, r, reference, sound, mutants, mutation)
                elif mutants:
                    assert isinstance(runner, UnitRunner)
                    _mutation(runner, r, reference, sound, mutants, mutation)
            except SandboxInfraError as exc:
                raise ConfigError(f"sandbox failed while checking the model-written tests: "
                                  f"{exc}", hint="run again: results so far are cached") from exc
            task = str(r["task_id"])
            for o in outs:  # pooled over the final tests and over the mutants: per sample
                per_task.add("test_validity", task, float(o.passed), "samples")
            killed = mutation["killed"] - before[0]
            for i in range(mutation["mutants"] - before[1]):
                per_task.add("mutation_score", task, float(i < killed), "samples")
    n = len(done)
    aligned_at = [next((t.try_ for t in tries if t.aligned), None) for _, tries in done]
    aligned = sum(a is not None for a in aligned_at)
    final_pass = [h[-1] for h in hidden]
    false_aligned = sum(1 for a, p in zip(aligned_at, final_pass) if a is not None and not p)
    for (r, _), at, h in zip(done, aligned_at, hidden):
        task = str(r["task_id"])
        for kk in ks:
            per_task.add(f"align@{kk}", task, float(at is not None and at <= kk), "tasks")
        per_task.add("align_rate", task, float(at is not None), "tasks")
        per_task.add("hidden_pass@1", task, float(h[-1]), "tasks")
        per_task.add("hidden_pass@1_first", task, float(h[0]), "tasks")
        if at is not None:
            per_task.add("false_alignment", task, float(not h[-1]), "tasks")
    for (i, _), ok in zip(plus_records, plus_pass):
        per_task.add("hidden_pass@1_plus", str(done[i][0]["task_id"]), float(ok), "tasks")
    for r, tries in done:  # the cost columns are means over tasks too
        task = str(r["task_id"])
        per_task.add("tries_per_task", task, float(len(tries)), "tasks")
        per_task.add("tokens_per_task", task, float(sum(t.tokens for t in tries)), "tasks")
        per_task.add("sandbox_runs_per_task", task, float(sum(t.sandbox_runs for t in tries)),
                     "tasks")
        per_task.add("wall_s_per_task", task, sum(t.latency_s + t.sandbox_s for t in tries),
                     "tasks")
        for t in tries:
            for u in t.units:
                per_task.add("invalid_tests", task, float(u["outcome"] == "invalid"), "samples")
    all_tries = [t for _, tries in done for t in tries]
    units = [u for t in all_tries for u in t.units]
    tokens = sum(t.tokens for t in all_tries)
    wall = sum(t.latency_s + t.sandbox_s for t in all_tries)
    row: dict[str, Any] = {f"align@{kk}": _share(sum(a is not None and a <= kk
                                                     for a in aligned_at), n) for kk in ks}
    row.update({
        "align_rate": _share(aligned, n), "hidden_pass@1": _share(sum(final_pass), n),
        "hidden_pass@1_first": _share(sum(h[0] for h in hidden), n),
        "hidden_pass@1_plus": _share(sum(plus_pass), len(plus_pass)), "plus_tasks": len(plus_pass),
        "false_alignment": _share(false_aligned, aligned), "false_aligned": false_aligned,
        "aligned": aligned, "test_validity": _share(valid, total_final),
        "invalid_tests": _share(sum(u["outcome"] == "invalid" for u in units), len(units)),
        "parse_failures": sum(t.parse_error is not None for t in all_tries),
        "tries": len(all_tries),
        "tries_per_task": _share(len(all_tries), n), "tokens_per_task": _share(tokens, n),
        "sandbox_runs_per_task": _share(sum(t.sandbox_runs for t in all_tries), n),
        "wall_s_per_task": _share(wall, n), "tokens_per_aligned": _share(tokens, aligned),
        "wall_s_per_aligned": _share(wall, aligned),
        "mutation_score": _share(mutation["killed"], mutation["mutants"]),
        "mutants": mutation["mutants"], "equivalent_mutants": mutation["equivalent"],
        "tasks": n, "plain_tasks": 0, "unfinished": unfinished})
    row.update({name: math.nan for name in SELECTION_COLUMNS})
    _per_try(workspace, done, hidden, aligned_at, depth)
    return row


selfalign.columns = lambda k=(1, 5), mutants=10, sources=None, timeout=120.0: [  # type: ignore[attr-defined]
    *[f"align@{kk}" for kk in _ks(k)],
    "align_rate", "hidden_pass@1", "hidden_pass@1_first", "hidden_pass@1_plus", "plus_tasks",
    "false_alignment", "false_aligned", "aligned", "test_validity", "invalid_tests", "parse_failures", "tries", *COST_COLUMNS,
    "mutation_score", "mutants", "equivalent_mutants", "tasks", "plain_tasks", "unfinished",
    *SELECTION_COLUMNS]


def _per_task_values(context: Any) -> PerTaskValues:
    """The test case's per-task values (the report's intervals and paired tests); outside a
    job (a context without them) a recorder nobody reads."""
    found = getattr(context, "per_task", None)
    return found if found is not None else PerTaskValues()


def _plain_predictions(y_pred: Any, n: int) -> bool:
    """True when ``y_pred`` are predictions of a row without the loop (the ``plain`` codegen
    basemodel): one per record, none a self-align prediction, and some sample with code and
    no generation error (a loop row whose every task failed has errors, not code)."""
    if not isinstance(y_pred, Sequence) or isinstance(y_pred, (str, bytes)) or len(y_pred) != n:
        return False
    if not all(isinstance(p, Mapping) and "selfalign" not in p for p in y_pred):
        return False
    return any(isinstance(s, Mapping) and (s.get("code") or s.get("raw_output"))
               and not s.get("error")
               for p in y_pred for s in p.get("samples") or [])


@dataclass(frozen=True)
class _Passed:
    passed: bool


def _pass_share(results: Sequence[Sequence[Any]]) -> float:
    """Unbiased pass@1 over tasks (mean over tasks of passed samples / samples); a task
    without samples counts as 0."""
    per_task = [sum(r.passed for r in rs) / len(rs) if rs else 0.0 for rs in results]
    return _share(sum(per_task), len(per_task))


def _plain_row(records: list[Mapping[str, Any]], y_pred: list[Any], context: Any,
               ks: list[int], repo_grading: _RepoGrading | None = None) -> dict[str, Any]:
    """The row of a test case without the loop (a ``plain`` row): its samples graded on the
    hidden tests and on the amplified ones, so it compares with the loop's ``hidden_pass@1``
    and ``hidden_pass@1_plus`` on the same tests; the loop's own columns stay empty (NaN).
    A repository task's sample is read from its ``raw_output`` by the repo kind and graded by
    the repository's own tests (no amplified tests there)."""
    sandbox = getattr(context, "sandbox", {}) or {}
    workspace = Path(context.workspace)
    if repo_grading is not None:
        items = [(r, answer_code(str(s.get("raw_output") or ""), r))
                 for r, p in zip(records, y_pred) for s in p.get("samples") or []
                 if not s.get("error")]
        flat = repo_grading.hidden(items)
        base: list[Sequence[Any]] = []
        for p in y_pred:
            n = sum(1 for s in p.get("samples") or [] if not s.get("error"))
            base.append([_Passed(v) for v in flat[:n]])
            flat = flat[n:]
    else:
        base = list(iter_results(records, y_pred, sandbox, workspace,
                                 getattr(context, "show_progress", False), total=len(records)))
    plus_idx = [i for i, r in enumerate(records)
                if isinstance((r.get("metadata") or {}).get("test_plus"), Mapping)]
    plus = list(iter_results([{**records[i], "test": records[i]["metadata"]["test_plus"]["test"]}
                              for i in plus_idx], [y_pred[i] for i in plus_idx], sandbox,
                             workspace, False, total=len(plus_idx))) if plus_idx else []
    per_task = _per_task_values(context)
    for record, results in zip(records, base):  # as _pass_share: no sample counts as 0
        per_task.add("hidden_pass@1", str(record["task_id"]),
                     sum(r.passed for r in results) / len(results) if results else 0.0, "tasks")
    for i, results in zip(plus_idx, plus):
        per_task.add("hidden_pass@1_plus", str(records[i]["task_id"]),
                     sum(r.passed for r in results) / len(results) if results else 0.0, "tasks")
    columns = selfalign.columns(k=ks)  # type: ignore[attr-defined]
    row: dict[str, Any] = {name: math.nan for name in columns}
    row.update({"hidden_pass@1": _pass_share(base), "hidden_pass@1_plus": _pass_share(plus),
                "plus_tasks": len(plus_idx), "tasks": 0, "plain_tasks": len(records),
                "unfinished": 0, "tries": 0, "parse_failures": 0})
    return row


def _selection_row(records: list[Mapping[str, Any]], choices: SelectionStore, context: Any,
                   ks: list[int]) -> dict[str, Any]:
    """The row of a selection baseline (module docstring), graded from the stored choices:
    every sample's program on the hidden tests (codegen grading path and cache), the selected
    one also on the amplified tests, the distinct sampled tests on the reference."""
    sandbox = getattr(context, "sandbox", {}) or {}
    workspace = Path(context.workspace)
    done = [(r, c) for r in records if (c := choices.get(str(r["task_id"]))) is not None]
    unfinished = len(records) - len(done)
    stub = [str(r["prompt"]) for r, _ in done]
    codes = [[s["code"] or p for s in c["samples"]] or [p] for (_, c), p in zip(done, stub)]
    chosen = [c["selected"] if c["selected"] is not None else 0 for _, c in done]
    preds = [{"task_id": r["task_id"], "samples": [
        {"task_id": r["task_id"], "sample_index": i, "code": code}
        for i, code in enumerate(cs)]} for (r, _), cs in zip(done, codes)]
    hidden = [[s.passed for s in results] for results in iter_results(
        [r for r, _ in done], preds, sandbox, workspace,
        getattr(context, "show_progress", False), total=len(done))]
    plus_idx = [i for i, (r, _) in enumerate(done)
                if isinstance((r.get("metadata") or {}).get("test_plus"), Mapping)]
    plus_pass = [results[0].passed for results in iter_results(
        [{**done[i][0], "test": done[i][0]["metadata"]["test_plus"]["test"]} for i in plus_idx],
        [{"task_id": done[i][0]["task_id"], "samples": [
            {"task_id": done[i][0]["task_id"], "sample_index": 0,
             "code": codes[i][chosen[i]]}]} for i in plus_idx],
        sandbox, workspace, False, total=len(plus_idx))] if plus_idx else []
    per_task = _per_task_values(context)
    valid = distinct = 0
    with _validity_runner(context) as runner:
        for r, c in done:
            tests = list(dict.fromkeys(t.strip() for s in c["samples"] for t in s["tests"]))
            checks = unit_checks(r, tests)
            reference = str(r["prompt"]) + str(r.get("canonical_solution", ""))
            try:
                outs = run_units(runner, r, reference, checks)
            except SandboxInfraError as exc:
                raise ConfigError(f"sandbox failed while checking the model-written tests: "
                                  f"{exc}", hint="run again: results so far are cached") from exc
            valid += sum(o.passed for o in outs)
            distinct += len(outs)
            for o in outs:
                per_task.add("test_validity", str(r["task_id"]), float(o.passed), "samples")
    n = len(done)
    selected_pass = [h[i] for h, i in zip(hidden, chosen)]
    agreed = [bool(c["agreed"]) for _, c in done]
    false_agreed = sum(a and not p for a, p in zip(agreed, selected_pass))
    samples = [s for _, c in done for s in c["samples"]]
    tokens = sum(s["tokens"] for s in samples)
    runs = sum(s["sandbox_runs"] for s in samples) + sum(c["sandbox_runs"] for _, c in done)
    wall = sum(s["latency_s"] + s["sandbox_s"] for s in samples) \
        + sum(c["sandbox_s"] for _, c in done)
    units = sum(s["units"] for s in samples)
    for (r, c), h, ok, a in zip(done, hidden, selected_pass, agreed):
        task = str(r["task_id"])
        per_task.add("hidden_pass@1", task, float(ok), "tasks")
        per_task.add("hidden_pass@1_first", task, float(h[0]), "tasks")
        per_task.add("sample_pass@1", task, sum(h) / len(h), "tasks")
        if a:
            per_task.add("false_agreement", task, float(not ok), "tasks")
        per_task.add("tokens_per_task", task, float(sum(s["tokens"] for s in c["samples"])),
                     "tasks")
        per_task.add("sandbox_runs_per_task", task, float(
            sum(s["sandbox_runs"] for s in c["samples"]) + c["sandbox_runs"]), "tasks")
        per_task.add("wall_s_per_task", task, sum(s["latency_s"] + s["sandbox_s"]
                                                  for s in c["samples"]) + c["sandbox_s"],
                     "tasks")
        for s in c["samples"]:
            for i in range(s["units"]):
                per_task.add("invalid_tests", task, float(i < s["invalid_units"]), "samples")
    for i, ok in zip(plus_idx, plus_pass):
        per_task.add("hidden_pass@1_plus", str(done[i][0]["task_id"]), float(ok), "tasks")
    columns = selfalign.columns(k=ks)  # type: ignore[attr-defined]
    row: dict[str, Any] = {name: math.nan for name in columns}
    row.update({
        "hidden_pass@1": _share(sum(selected_pass), n),
        "hidden_pass@1_first": _share(sum(h[0] for h in hidden), n),
        "hidden_pass@1_plus": _share(sum(plus_pass), len(plus_pass)), "plus_tasks": len(plus_pass),
        "sample_pass@1": _share(sum(sum(h) / len(h) for h in hidden), n),
        "agreed": sum(agreed), "false_agreed": false_agreed,
        "false_agreement": _share(false_agreed, sum(agreed)),
        "fallbacks": sum(c["fallback"] is not None for _, c in done),
        "no_examples": sum(c["fallback"] == "no_examples" for _, c in done)
        if any(c["method"] == "examples" for _, c in done) else math.nan,
        "test_validity": _share(valid, distinct),
        "invalid_tests": _share(sum(s["invalid_units"] for s in samples), units),
        "parse_failures": sum(s["parse_error"] is not None for s in samples),
        "samples": len(samples), "tokens_per_task": _share(tokens, n),
        "sandbox_runs_per_task": _share(runs, n), "wall_s_per_task": _share(wall, n),
        "tasks": n, "plain_tasks": 0, "unfinished": unfinished})
    try:
        write_jsonl(workspace / PER_TASK_FILE, (
            {"task_id": r["task_id"], "method": c["method"], "selected": c["selected"],
             "agreed": c["agreed"], "fallback": c["fallback"], "hidden_pass": h,
             "selected_pass": ok, "groups": c["groups"][:3]}
            for (r, c), h, ok in zip(done, hidden, selected_pass)))
    except OSError as exc:
        logger.warning("could not write %s in %s: %s", PER_TASK_FILE, workspace, exc)
    return row


def _repo_mutation(grading: _RepoGrading, record: Mapping[str, Any], reference: str,
                   checks: list[Any], limit: int, counts: dict[str, int]) -> None:
    """:func:`_mutation` for a repository task: a mutant of the original function is
    equivalent-looking when it passes the repository's own tests; the others are killed when
    some unit of ``checks`` (those passing on the original function) does not pass on them
    (units run in a view, :mod:`.repo`)."""
    found = make_mutants(reference, str(record["name"]), limit)
    survives = grading.hidden([(record, m.code) for m in found])
    for mutant, passes in zip(found, survives):
        if passes:
            counts["equivalent"] += 1
            continue
        counts["mutants"] += 1
        if checks:
            outs = grading.runner.run(mutant.code, checks, record)
            counts["killed"] += any(o.outcome != INVALID and not o.passed for o in outs)


def _mutation(runner: UnitRunner, record: Mapping[str, Any], reference: str,
              checks: list[Any], limit: int, counts: dict[str, int]) -> None:
    """Add one task's mutants to ``counts`` (killed, mutants, equivalent; docstring).
    ``checks`` are the units that pass on the reference: only they may kill."""
    entry, prompt = str(record["entry_point"]), str(record["prompt"])
    hidden = check_unit(f"{record['test']}\n\ncheck({entry})\n", entry, prompt)
    if not hidden.valid:
        logger.warning("%s: the hidden test cannot be a unit (%s); no mutants for this task",
                       record["task_id"], hidden.status)
        return
    for mutant in make_mutants(reference, entry, limit):
        if runner.run(mutant.code, [hidden], entry, helpers=prompt)[0].passed:
            counts["equivalent"] += 1
            continue
        counts["mutants"] += 1
        if checks:
            outs = runner.run(mutant.code, checks, entry, helpers=prompt)
            counts["killed"] += any(o.outcome != INVALID and not o.passed for o in outs)


def _per_try(workspace: Path, done: list[tuple[Mapping[str, Any], list[TryRecord]]],
             hidden: list[list[bool]], aligned_at: list[int | None], depth: int) -> None:
    """``selfalign_per_try.json``, ``selfalign_per_task.jsonl`` and the plot (docstring)."""
    n = len(done)
    curves: dict[str, list[float]] = {"align": [], "hidden_pass@1": [], "false_alignment": [],
                                      "tokens_per_task": [], "wall_s_per_task": []}
    intervals: dict[str, list[list[float | None]]] = {
        "align": [], "hidden_pass@1": [], "false_alignment": []}
    for t in range(1, depth + 1):
        stop = [min(t, len(tries)) for _, tries in done]
        passed = [h[s - 1] for h, s in zip(hidden, stop)]
        al = [a is not None and a <= t for a in aligned_at]
        curves["align"].append(_share(sum(al), n))
        curves["hidden_pass@1"].append(_share(sum(passed), n))
        curves["false_alignment"].append(_share(sum(a and not p for a, p in zip(al, passed)),
                                                sum(al)))
        pairs = list(zip(al, passed))
        for name, statistic in (
                ("align", lambda xs: _share(sum(a for a, _ in xs), len(xs))),
                ("hidden_pass@1", lambda xs: _share(sum(p for _, p in xs), len(xs))),
                ("false_alignment", lambda xs: _share(sum(a and not p for a, p in xs),
                                                      sum(a for a, _ in xs)))):
            _value, low, high = bootstrap_interval(pairs, statistic)
            intervals[name].append([None if math.isnan(low) else round(low, 4),
                                    None if math.isnan(high) else round(high, 4)])
        used = [tries[:s] for (_, tries), s in zip(done, stop)]
        curves["tokens_per_task"].append(_share(sum(x.tokens for u in used for x in u), n))
        curves["wall_s_per_task"].append(_share(sum(x.latency_s + x.sandbox_s
                                                    for u in used for x in u), n))
    try:
        plain = {name: [None if math.isnan(v) else v for v in values]  # JSON has no NaN
                 for name, values in curves.items()}
        (workspace / PER_TRY_FILE).write_text(json.dumps(
            {"tries": list(range(1, depth + 1)), **plain,
             "intervals": {f"{name}_95": values for name, values in intervals.items()}},
            indent=1))
        write_jsonl(workspace / PER_TASK_FILE, (
            {"task_id": r["task_id"], "aligned_at": a, "tries": len(tries), "hidden_pass": h,
             "parse_failures": sum(x.parse_error is not None for x in tries),
             "tokens": sum(x.tokens for x in tries)}
            for (r, tries), h, a in zip(done, hidden, aligned_at)))
    except OSError as exc:
        logger.warning("could not write the per-try files in %s: %s", workspace, exc)
        return
    _plot(workspace / "selfalign_per_try.png", curves, depth)


def _plot(path: Path, curves: Mapping[str, list[float]], depth: int) -> None:
    try:
        import matplotlib  # noqa: PLC0415 - optional, as for the report
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError:
        logger.info("matplotlib not installed: no %s", path.name)
        return
    if depth == 0:
        return
    xs = list(range(1, depth + 1))
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    for name in ("align", "hidden_pass@1", "false_alignment"):
        left.plot(xs, curves[name], marker="o", label=name)
    left.set_xlabel("tries")
    left.set_ylim(-0.02, 1.02)
    left.set_xticks(xs)
    left.legend(fontsize=8)
    right.plot(xs, curves["tokens_per_task"], marker="o", label="tokens per task")
    right.set_xlabel("tries")
    right.set_xticks(xs)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
