"""The ``implement_tests`` metric: apply every sample's change to its task root, run the task's tests.

testenv.yaml::

    metrics:
      - name: implement_tests
        url: ./metrics.py
        sources_dir: ../data/implement_change-sources   # the tasks' root archives (repo.source)
        timeout: 300                                    # seconds per sample (all of its tests)
        periods: ["2024-06-01"]                         # optional: columns per commit-date period

Per sample, the reply is parsed (:func:`.answer.parse_change`: whole files or a unified diff,
applied outside the sandbox to a scratch copy by ``git apply``, never executed). A reply that
gives no usable change is scored 0 under its failure kind (``malformed_diff``,
``diff_does_not_apply``, ``no_change``, ``bad_path``) without running anything; an answer that
writes the task's *test side* (its tests and what pytest reads to configure, collect and import
them, :mod:`.paths`) is ``bad_path``, the reason in the result's detail. Otherwise its edits are
written into a private hard-link view of the task root, then the test side is written there again
from the task root (``Sample.pinned``: whatever the edits did, the tests are the task's), and the
task's FAIL_TO_PASS and PASS_TO_PASS tests run in the sandbox with the one pinned environment --
the repo kind's machinery (:func:`core.scenarios.repo.execute.run_samples`, the environments of
:func:`core.scenarios.repo.env.ensure_env`, the source cache and content-hash check of
:func:`core.scenarios.repo.scoring.source_root`). Grading tier: ``in_process_confined``, as for repo
tasks.

Resume: every finished sample is appended to ``implement_executions.jsonl`` in the test case
folder under a key of task, sample, reply and grading version; a rerun runs only what is missing.

Columns: ``pass@1`` (share of tasks whose sample passed every test; k=1, one sample per task is
scored -- the first), ``f2p_share``, ``p2p_share``, the sandbox outcome counts, one count per
parse failure kind, ``form_files`` / ``form_diff`` (how replies were given),
``generation_error``, ``grading``, ``isolation``; with ``periods``, ``pass@1[<period>]`` and
``samples[<period>]``.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Iterator

from core.common.errors import ConfigError
from core.common.jsonl import open_append, write_jsonl
from core.common.progress import progress_bar
from core.scenarios.repo.policy import GRADING as POLICY_GRADING
from core.scenarios.repo.policy import check_min_grading
from core.scenarios.trajectories.implement_change.answer import FAILURE_KINDS, ParsedChange, parse_change
from core.scenarios.trajectories.implement_change.paths import TestSide
from core.scenarios.repo.env import record_env
from core.scenarios.repo.execute import Sample, SampleResult, default_views_dir, run_samples
from core.scenarios.repo.metrics import OUTCOMES, summarise
from core.scenarios.repo.scoring import load_executions, source_root
from core.scenarios.trajectories.periods import commit_time, period_labels, period_of
from core.scenarios.scoring import record_per_task, record_periods

__all__ = ["implement_tests", "EXECUTIONS_FILE", "grade", "grade_iter", "grade_logged", "parse_for_task", "sample_key",
           "task_sample"]

LOG = logging.getLogger(__name__)

EXECUTIONS_FILE = "implement_executions.jsonl"
#: per scored sample, its period and scores (:func:`score_rows`), for ``period_compare``
PER_SAMPLE_FILE = "implement_scores.jsonl"
#: bumped whenever how a sample is graded changes (a resumed run never reuses older verdicts)
GRADING_VERSION = 4  # 2: a single unnamed block is the task's one file; 3: the test side is refused and pinned;
#                     4: Python files compiled under the grading policy (core/scenarios/repo/policy.py)


def parse_for_task(reply: str, rec: Mapping[str, Any], root: Path, side: TestSide | None = None) -> ParsedChange:
    """``reply`` read as a change to the task's root (:func:`.answer.parse_change`): the task's
    test side (``side``, default :meth:`.paths.TestSide.for_task`) is off limits, and a task
    that changes one file takes a single unnamed code block as that file."""
    only = rec["files"][0] if len(rec["files"]) == 1 else None
    return parse_change(reply, root, side or TestSide.for_task(rec, root), default_path=only)


def task_sample(sample_id: str, rec: dict[str, Any], reply: str, root: Path) -> tuple[Sample | SampleResult, str]:
    """What to run for ``reply`` to task ``rec`` (root ``root``): a :class:`Sample` with its
    edits and the task's test side pinned in its view, or -- when the reply gives no usable
    change -- its result (the parse failure, nothing run); and the reply's form."""
    side = TestSide.for_task(rec, root)
    parsed = parse_for_task(reply, rec, root, side)
    if parsed.failure:
        return SampleResult(sample_id, rec["id"], parsed.failure, {}, parsed.detail, 0.0), parsed.form
    return Sample(sample_id, rec, None, edits=parsed.edits, pinned=side.pinned(parsed.edits)), parsed.form


def grade_iter(samples: list[tuple[str, dict[str, Any], str]], sources_dir: Path, workers: int = 2,
               timeout: float = 300.0, min_isolation: str = "kernel") -> Iterator[tuple[str, SampleResult, str]]:
    """``(sample_id, result, form)`` for ``(sample_id, task record, reply)`` triples, each as soon
    as it is known: parse each reply against its task root (``form``: ``files``, ``diff`` or
    ``""``; a parse failure is its result, nothing run), run the parsed ones in the sandbox (one
    executor per task root)."""
    by_root: dict[str, list[tuple[str, dict[str, Any], str]]] = defaultdict(list)
    for item in samples:
        by_root[item[1]["repo"]["content_hash"]].append(item)
    for want, items in by_root.items():
        task = items[0][1]
        root = source_root(sources_dir / task["repo"]["source"], want)
        env = record_env(task)
        runnable: list[Sample] = []
        forms: dict[str, str] = {}
        for sample_id, rec, reply in items:
            prepared, form = task_sample(sample_id, rec, reply, root)
            if isinstance(prepared, SampleResult):
                yield sample_id, prepared, form
                continue
            runnable.append(prepared)
            forms[sample_id] = form
        for res in run_samples(runnable, root, env, default_views_dir(), workers=workers, timeout=timeout,
                               min_isolation=min_isolation):
            yield res.sample_id, res, forms[res.sample_id]


def grade(samples: list[tuple[str, dict[str, Any], str]], sources_dir: Path, workers: int = 2,
          timeout: float = 300.0, min_isolation: str = "kernel") -> dict[str, tuple[SampleResult, str]]:
    """``sample_id -> (result, form)``: :func:`grade_iter`, collected."""
    return {sid: (res, form) for sid, res, form in grade_iter(samples, sources_dir, workers, timeout, min_isolation)}


def sample_key(rec: Mapping[str, Any], index: int, reply: str, kind: str = "implement_change") -> str:
    """A graded sample's key in an executions log: its task, index and reply, the task's tests
    and root, the grading version (and the kind, for any kind but this one)."""
    what = [rec["id"], index, reply, rec["tests"], rec["repo"]["content_hash"], GRADING_VERSION,
            *([kind] if kind != "implement_change" else [])]
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:24]


def grade_logged(todo: list[tuple[str, dict[str, Any], str]], keys: Mapping[str, str], log_path: Path | None,
                 sources_dir: Path, settings: Mapping[str, Any], timeout: float, label: str,
                 show_progress: bool = True) -> dict[str, tuple[SampleResult, str]]:
    """:func:`grade` with a resume log: ``keys`` maps each sample id of ``todo`` to its
    :func:`sample_key`; samples whose key ``log_path`` already holds are not run again (their
    logged result is returned), and every result is appended to the log as soon as it is known,
    so a killed run loses only the samples that were running. Lines of the log that do not
    parse (a line cut by the kill) are ignored, and the next result starts a line of its own
    (:func:`core.common.jsonl.open_append`). ``log_path`` None: no log (a call outside a job)."""
    check_min_grading(settings, label)
    logged = load_executions(log_path) if log_path is not None else {}
    done = {key: (res, str(line.get("form", ""))) for key, (res, line) in logged.items()}
    out = {sid: done[keys[sid]] for sid, _rec, _reply in todo if keys[sid] in done}
    rest = [item for item in todo if item[0] not in out]
    with (open_append(log_path) if log_path is not None else open(os.devnull, "a")) as log, \
            progress_bar(len(rest), label, "sample", show_progress) as bar:
        for sid, res, form in grade_iter(rest, sources_dir, workers=int(settings.get("workers", 2)),
                                         timeout=timeout, min_isolation=str(settings.get("min_isolation", "kernel"))):
            log.write(json.dumps({"key": keys[sid], "form": form, **res.__dict__}) + "\n")
            log.flush()
            out[sid] = (res, form)
            bar.update(1)
    return out


def implement_tests(y_true: Any, y_pred: Sequence[Any], context: Any = None, sources_dir: str = "",
                    timeout: float = 300.0, periods: Sequence[str] | None = None) -> dict[str, Any]:
    """The kind's columns (module docstring)."""
    from core.scenarios import get_kind

    if context is None:
        raise ConfigError("implement_tests needs the framework's context", hint="run it through 'ianvs -f'")
    if not sources_dir:
        raise ConfigError("implement_tests needs 'sources_dir': the folder of the tasks' root archives",
                          hint="add 'sources_dir: ../data/<tasks>-sources' to its testenv entry")
    if y_pred is None or isinstance(y_pred, (str, bytes, Mapping)):
        raise ConfigError("implement_tests needs one prediction per test record",
                          hint="use the kind's basemodel (core.scenarios.model.TaskKindModel)")
    kind = get_kind("implement_change")
    settings = getattr(context, "sandbox", {}) or {}
    if str(settings.get("backend", "local")) != "local":
        raise ConfigError("implement_change tasks run on the 'local' sandbox backend",
                          hint="set sandbox.backend: local")
    base = Path(getattr(context, "config_dir", None) or ".")
    workspace = Path(context.workspace)
    tasks: dict[str, dict[str, Any]] = {}
    todo: list[tuple[str, dict[str, Any], str]] = []
    keys: dict[str, str] = {}
    generation_errors = 0
    for record, pred in zip(context.records(), y_pred):
        rec = kind.validate(record)
        tasks[rec["id"]] = rec
        samples = (pred or {}).get("samples", []) if isinstance(pred, Mapping) else []
        for sample in samples[:1]:
            if sample.get("error"):
                generation_errors += 1
                continue
            sid = f"{rec['id']}#0"
            reply = str(sample.get("raw_output") or "")
            keys[sid] = sample_key(rec, 0, reply)
            todo.append((sid, rec, reply))
    graded = grade_logged(todo, keys, workspace / EXECUTIONS_FILE, (base / sources_dir).resolve(), settings,
                          float(timeout), "implement tests", getattr(context, "show_progress", True))
    results = list(graded.values())
    rows = score_rows([r for r, _form in results], tasks, periods)
    write_jsonl(Path(workspace, PER_SAMPLE_FILE), rows)
    _record_per_task(context, rows, periods)
    return _row(results, tasks, generation_errors, periods)


def score_rows(results: Sequence[SampleResult], tasks: Mapping[str, Mapping[str, Any]],
               periods: Sequence[str] | None) -> list[dict[str, Any]]:
    """One row per scored sample, in task order: ``task_id``, ``period`` (null without
    ``periods``), ``pass@1`` (1.0 when every test passed), ``f2p_share`` (share of its
    FAIL_TO_PASS tests that passed; 0.0 for a reply that ran nothing; the task's tests
    always hold some) and ``outcome``. An
    ``infra_error`` is not scored, as in ``pass@1``; these are the lines of
    :data:`PER_SAMPLE_FILE` that :mod:`core.scenarios.trajectories.period_compare` reads."""
    order = {task_id: pos for pos, task_id in enumerate(tasks)}
    rows = []
    for r in sorted(results, key=lambda res: order.get(res.task_id, len(order))):
        if r.outcome == "infra_error" or r.task_id not in tasks:
            continue
        f2p = tasks[r.task_id]["tests"]["fail_to_pass"]
        passed = sum(r.tests.get(test) == "passed" for test in f2p)
        rows.append({"task_id": r.task_id,
                     "period": period_of(commit_time(tasks[r.task_id]["committed_at"]), periods),
                     "pass@1": float(r.outcome == "passed"),
                     "f2p_share": round(passed / len(f2p), 4) if f2p else 0.0,
                     "outcome": r.outcome})
    return rows


def _record_per_task(context: Any, rows: list[dict[str, Any]], periods: Sequence[str] | None) -> None:
    """Each scored task's pass (1/0) for ``pass@1`` and its period's column: the report's
    intervals and paired tests."""
    record_per_task(context, rows, ["pass@1"], weighting="tasks")
    record_periods(context, rows, ["pass@1"], period_labels(periods), weighting="tasks")


def _row(pairs: list[tuple[SampleResult, str]], tasks: dict[str, dict[str, Any]], generation_errors: int,
         periods: Sequence[str] | None) -> dict[str, Any]:
    results = [r for r, _form in pairs]
    ran = [r for r in results if r.outcome not in FAILURE_KINDS]
    row: dict[str, Any] = dict(summarise(results, tasks, [1]))  # a parse failure: no test passed
    passed = {r.task_id for r in results if r.outcome == "passed"}
    scored = {r.task_id for r in results if r.outcome != "infra_error"}
    row["pass@1"] = round(len(passed & scored) / len(scored), 4) if scored else float("nan")
    for kind in FAILURE_KINDS:
        row[kind] = sum(r.outcome == kind for r in results)
    row["form_files"] = sum(form == "files" for _r, form in pairs)
    row["form_diff"] = sum(form == "diff" for _r, form in pairs)
    for label in period_labels(periods):
        mine = {t for t, rec in tasks.items() if period_of(commit_time(rec["committed_at"]), periods) == label}
        got = scored & mine
        row[f"pass@1[{label}]"] = round(len(passed & got) / len(got), 4) if got else float("nan")
        row[f"samples[{label}]"] = len(got)
    for col in ("f2p_share", "p2p_share"):
        if isinstance(row.get(col), float):
            row[col] = round(row[col], 4)
    row["generation_error"] = generation_errors
    row["grading"] = POLICY_GRADING if ran else ""
    row["isolation"] = "+".join(sorted({r.isolation for r in ran if r.isolation}))
    return row


def _columns(sources_dir: str = "", timeout: float = 300.0, periods: Sequence[str] | None = None) -> list[str]:
    cols = ["pass@1", "f2p_share", "p2p_share", "samples", *OUTCOMES, *FAILURE_KINDS, "form_files", "form_diff",
            "generation_error", "grading", "isolation"]
    for label in period_labels(periods):
        cols += [f"pass@1[{label}]", f"samples[{label}]"]
    return cols


implement_tests.columns = _columns  # type: ignore[attr-defined]
