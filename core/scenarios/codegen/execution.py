"""Execute code predictions in the sandbox, once per sample, with an on-disk cache.

Used by the code-scoring metrics (:mod:`core.scenarios.codegen.metrics`). Given the
test records and predictions of one test case, every sample's ``code`` is run against its
record's ``test`` through an executor backend (``local`` by default) and classified in the
sandbox taxonomy. Results are appended to ``executions.jsonl`` in the test case folder keyed
by (program, test, entry point, limits, backend), so several metrics, a re-score or a
resumed run never execute the same sample twice. ``infra_error`` results are not cached
(they are retried next time) and, like samples the generator could not produce, never count
against the model.

Memory stays flat in the size of the test set: records and predictions stream through in
batches of :data:`BATCH` records, the execution cache is an index of keys to file offsets,
calibration measurements are appended to ``calibration.jsonl``, and results are yielded per
record (:func:`iter_results`) for the metrics to aggregate. Calibration runs per batch, inside
the ``execute`` progress bar.

Sandbox settings (testenv ``sandbox:``; all optional):

================== ===========================================================================
``backend``        executor backend name (default ``local``)
``timeout``        seconds per sample, or ``auto`` (default): ``max(timeout_floor,
                   timeout_factor * t_ref)`` where ``t_ref`` is the record's reference
                   solution timed on this node (cached in ``calibration.jsonl``); a record's own
                   ``timeout`` field wins
``timeout_factor`` default 5; ``timeout_floor`` default 3 s; ``timeout_ceiling`` default 60 s
``memory_mb``      address-space limit per sample (default 1024)
anything else      backend options, e.g. ``workers``, ``min_isolation`` for ``local``; ``image``,
                   ``runtime``, ``fresh_container`` for ``docker``
================== ===========================================================================

Records may also carry eval-framework's execution fields (``run_env``, ``package_downloads``,
``test_code``, ``snippet_merge_fn``, ``output_parse_fn``, ``benchmark_timeout``): see
:mod:`core.scenarios.codegen.records`. They are checked per batch before anything
of the batch runs; ``run_env``/``package_downloads`` need the ``docker`` backend. A hook
field may only name the project's hooks or one the job trusts (testenv ``code_hooks:``, passed
here as ``hooks``): anything else is refused before anything is imported.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError
from core.common.jsonl import key_prefix, lines_with_offsets, open_append, read_json_at
from core.common.progress import progress_bar
from core.scenarios.codegen.records import (OUTPUT_PARSE, CodeTask, check_executable,
                                            code_task, parse_verdict)
from core.testenvmanager.sandbox import (ExecMode, ExecRequest, Executor, Outcome,
                                         calibrate_timeouts)
from core.testenvmanager.sandbox.pool import sandbox_settings as _settings
from core.testenvmanager.sandbox.pool import shared_executor as _executor

logger = logging.getLogger(__name__)

EXEC_CACHE = "executions.jsonl"
CALIBRATION_FILE = "calibration.jsonl"
#: records per streaming batch (requests in flight are bounded by this times the samples each)
BATCH = 512
GENERATION_ERROR = "generation_error"


@dataclass(frozen=True)
class SampleResult:
    """Outcome of one generated sample.

    ``outcome`` is a sandbox :class:`Outcome` value, or ``generation_error`` when the
    generator produced no code (server down, no recording). ``scored`` is False for those
    and for ``infra_error``: such samples are reported but left out of pass@k.
    """

    task_id: str
    sample_index: int
    outcome: str
    duration_s: float = 0.0
    timeout_s: float = 0.0
    backend: str = ""
    isolation: str = ""
    detail: str = ""
    grading: str = ""
    node: str = ""

    @property
    def scored(self) -> bool:
        return self.outcome not in (GENERATION_ERROR, Outcome.INFRA_ERROR.value)

    @property
    def passed(self) -> bool:
        return self.outcome == Outcome.PASSED.value


def _key(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class ExecCache:
    """``executions.jsonl`` as an index ``first 64 bits of key -> byte offset``; results are
    read on demand and their full key checked (a prefix collision is a miss)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.index: dict[int, int] = {}
        for _line, offset, raw in lines_with_offsets(path):
            if not raw.endswith(b"\n"):
                break  # a torn last line from a killed run
            try:
                self.index[key_prefix(str(json.loads(raw)["key"]))] = offset
            except (ValueError, KeyError, TypeError):
                continue

    def get(self, key: str) -> dict[str, Any] | None:
        offset = self.index.get(key_prefix(key))
        if offset is None:
            return None
        entry = read_json_at(self.path, offset)
        if entry.get("key") != key:
            return None
        result: dict[str, Any] = entry["result"]
        return result

    def add(self, handle: Any, key: str, result: SampleResult) -> None:
        """Append one result through ``handle`` (opened ``"ab"``), flushed."""
        offset = handle.seek(0, 2)
        handle.write(json.dumps({"key": key, "result": asdict(result)}).encode("utf-8") + b"\n")
        handle.flush()
        self.index[key_prefix(key)] = offset


def load_calibration(path: Path) -> dict[str, float]:
    """Reference times measured on this node, by reference key (``calibration.jsonl``)."""
    known: dict[str, float] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
                known[str(entry["key"])] = float(entry["t_ref"])
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line
    return known


def _reference_program(record: Mapping[str, Any]) -> str | None:
    solution = record.get("canonical_solution")
    return str(record["prompt"]) + str(solution) if solution else None


def _grading(record: Mapping[str, Any]) -> tuple[str, str]:
    """The record's grading tier and the trusted helper code its test may need.

    The tier is ``in_process`` when the record asks for it (its test needs objects the sample
    defines) or runs ``test_code`` merged with the sample (eval-framework style), otherwise
    ``boundary``; then the helpers are the record's prompt (HumanEval's tests call helpers it
    defines, e.g. ``poly``), run in the judge before the test, when the prompt compiles on its
    own. Call once per record: it compiles the prompt.
    """
    if record.get("grading") == "in_process" or record.get("test_code") is not None:
        return "in_process", ""
    prompt = str(record.get("prompt") or "")
    return "boundary", prompt if _compiles(prompt) else ""


@functools.lru_cache(maxsize=4096)
def _compiles(source: str) -> bool:
    """Whether ``source`` compiles (cached: a test set repeats prompts, and every metric pass
    and calibration asks again)."""
    try:
        compile(source, "<prompt>", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def _request(key: str, program: str, record: Mapping[str, Any], timeout: float,
             memory_mb: int, grading: tuple[str, str], task: CodeTask) -> ExecRequest:
    meta = {"task_id": str(record["task_id"]), "run_env": task.run_env,
            "packages": dict(task.packages)}
    if task.test_code is not None:  # eval-framework: one merged script, passed iff it completes
        return ExecRequest(id=key, program=task.program(program), mode=ExecMode.SCRIPT,
                           timeout=timeout, memory_mb=memory_mb, metadata=meta,
                           grading="in_process")
    return ExecRequest(id=key, program=program, test=str(record["test"]),
                       entry_point=str(record["entry_point"]), timeout=timeout,
                       memory_mb=memory_mb, metadata=meta, grading=grading[0],
                       helpers=grading[1])


Env = tuple[str | None, tuple[tuple[str, str], ...]]


def _prepare_envs(envs: Mapping[Env, Any], executor: Executor, backend: str) -> None:
    """Make sure ``executor`` can run every ``(run_env, packages)`` (building task images);
    ``ConfigError`` naming the first record (the mapping's value) that it cannot."""
    from core.testenvmanager.sandbox.images import ImageError

    prepare = getattr(executor, "prepare", None)
    if prepare is None:
        first = next(iter(envs.values()))
        raise ConfigError(f"record {first!r} names run_env/package_downloads, which the "
                          f"{backend!r} sandbox backend cannot provide; set "
                          "'sandbox: {backend: docker}' in testenv.yaml")
    for (run_env, packages), task_id in envs.items():
        try:
            prepare([(run_env, dict(packages))])
        except ImageError as exc:
            raise ConfigError(f"record {task_id!r}: {exc}") from None


def check_records(records: Iterable[tuple[int, Mapping[str, Any]]], source: Path,
                  sandbox: Mapping[str, Any], hooks: Sequence[str] = (),
                  prepare: bool = True, executable: bool = False) -> int:
    """Check every record's execution fields (:func:`code_task`; ``hooks`` are the functions
    the job trusts, testenv ``code_hooks:``) and, when some need container environments and
    ``prepare`` is true, build them with the configured backend: run once before any test
    case, so a bad record is one error naming the file and line before anything runs.
    ``records`` are ``(line, record)`` pairs. A string ``task_id`` must be unique in the file
    (results are keyed by it). With ``executable`` (a metric of the job runs the records'
    code), every record must also pass :func:`check_executable`. Returns the number of
    environments needed.

    Raises:
        ConfigError: the first bad record (naming ``source`` and its line; a duplicate
            ``task_id`` also the line of the first), or an image/package/backend problem.
    """
    envs: dict[Env, str] = {}
    seen: dict[str, int] = {}
    for line, record in records:
        try:
            if executable:
                check_executable(record)
            task = code_task(record, hooks)
        except ConfigError as exc:
            raise ConfigError(exc.message, source=source, line=line, hint=exc.hint) from None
        task_id = record.get("task_id")
        if isinstance(task_id, str):
            if task_id in seen:
                raise ConfigError(f"duplicate task_id {task_id!r} (first on line "
                                  f"{seen[task_id]})", source=source, line=line,
                                  hint="every record needs its own task_id: results, counts "
                                       "and the report are keyed by it")
            seen[task_id] = line
        if task.needs_container:
            envs.setdefault((task.run_env, tuple(sorted(task.packages.items()))),
                            str(record.get("task_id")))
    if envs and prepare:
        backend, _general, options = _settings(sandbox)
        _prepare_envs(envs, _executor(backend, options), backend)
    return len(envs)


def _tasks(batch: list[tuple[Mapping[str, Any], Any]], executor: Executor | None,
           backend: str, hooks: Sequence[str]) -> list[CodeTask]:
    """Every record's :class:`CodeTask`, checked before anything of the batch runs: a bad
    field, an unknown function, image or package is one ``ConfigError`` naming the record
    (:func:`check_records` has normally found it before the job started)."""
    tasks = [code_task(rec, hooks) for rec, _ in batch]
    envs = {(t.run_env, tuple(sorted(t.packages.items()))): rec["task_id"]
            for t, (rec, _) in zip(tasks, batch) if t.needs_container}
    if envs and executor is not None:
        _prepare_envs(envs, executor, backend)
    return tasks


def _timeouts(records: list[Mapping[str, Any]], tasks: list[CodeTask], general: Mapping[str, Any],
              executor: Executor, memory_mb: int, workspace: Path,
              known: dict[str, float]) -> list[float]:
    """Per-record timeout (order of ``records``, whose checked ``tasks`` are given): the
    record's field, the fixed setting, or calibrated against the record's reference solution
    (:func:`calibrate_timeouts`; identical references are measured once; ``known`` holds this
    node's measurements by reference key, is updated, and new ones are appended to
    ``calibration.jsonl``)."""
    setting = general.get("timeout", "auto")
    floor = float(general.get("timeout_floor", 3.0))
    factor = float(general.get("timeout_factor", 5.0))
    ceiling = float(general.get("timeout_ceiling", 60.0))
    out: list[float] = []
    probes: list[ExecRequest] = []
    references: dict[str, str] = {}
    for ri, rec in enumerate(records):
        ref = _reference_program(rec)
        if rec.get("timeout") or rec.get("benchmark_timeout"):
            out.append(float(rec.get("timeout") or rec["benchmark_timeout"]))
        elif setting != "auto":
            out.append(float(setting))
        else:
            out.append(ceiling)  # replaced below when the reference passes
            if ref is not None:
                probes.append(_request(str(ri), ref, rec, ceiling, memory_mb, _grading(rec),
                                       tasks[ri]))
                references[str(ri)] = ref
    if not probes:
        return out
    cal = calibrate_timeouts(executor, probes, references, factor=factor, floor=floor,
                             ceiling=ceiling, probe_timeout=ceiling, known=known)
    new = {k: v for k, v in cal.measured.items() if k not in known}
    if new:
        with open_append(workspace / CALIBRATION_FILE) as fh:
            fh.writelines(json.dumps({"key": k, "t_ref": v}) + "\n" for k, v in new.items())
        known.update(new)
    for req in cal.requests:
        ri = int(req.id)
        if req.id in cal.t_ref:
            out[ri] = req.timeout
        else:
            logger.warning("reference solution of %s did not pass (%s); using the ceiling %.0fs",
                           records[ri]["task_id"], cal.problems.get(req.id, "?"), ceiling)
    return out


def iter_results(records: Iterable[Mapping[str, Any]], predictions: Iterable[Any],
                 sandbox: Mapping[str, Any], workspace: Path, show_progress: bool = True,
                 total: int | None = None,
                 hooks: Sequence[str] = ()) -> Iterator[list[SampleResult]]:
    """Execute every sample; yields per record (dataset order) its samples' results.

    ``hooks`` are the functions the job trusts (testenv ``code_hooks:``) besides the project's
    own; a record naming any other hook is a :class:`ConfigError` before its batch runs.

    ``records`` and ``predictions`` are consumed together, :data:`BATCH` records at a time;
    they must have the same length (``ConfigError`` otherwise, raised when one runs out).
    ``total`` (number of records) only sizes the progress bar.
    """
    backend, general, options = _settings(sandbox)
    memory_mb = int(general.get("memory_mb", 1024))
    cache_path = workspace / EXEC_CACHE
    cache = ExecCache(cache_path)
    known = load_calibration(workspace / CALIBRATION_FILE)
    executor: Executor | None = None
    rec_iter, pred_iter = iter(records), iter(predictions)
    end = object()
    counted = 0
    with progress_bar(total=total or 0, desc="execute", unit="task",
                      enabled=show_progress and bool(total)) as bar, \
            open_append(cache_path, binary=True) as out:
        while True:
            batch: list[tuple[Mapping[str, Any], Any]] = []
            for rec in rec_iter:
                pred = next(pred_iter, end)
                if pred is end:
                    raise ConfigError(f"fewer predictions than records ({counted + len(batch)})")
                batch.append((rec, pred))
                if len(batch) == BATCH:
                    break
            if not batch:
                if next(pred_iter, end) is not end:
                    raise ConfigError(f"more predictions than records ({counted})")
                return
            if executor is None and any(_samples(pred) for _, pred in batch):
                executor = _executor(backend, options)
            rows = _run_batch(batch, executor, backend, general, memory_mb, workspace, known,
                              cache, out, tuple(hooks))
            counted += len(batch)
            bar.update(len(batch))
            yield from rows


def _samples(pred: Any) -> list[Any]:
    return list(pred.get("samples", [])) if isinstance(pred, Mapping) else []


def _run_batch(batch: list[tuple[Mapping[str, Any], Any]], executor: Executor | None,
               backend: str, general: Mapping[str, Any], memory_mb: int, workspace: Path,
               known: dict[str, float], cache: ExecCache, out: Any,
               hooks: Sequence[str] = ()) -> list[list[SampleResult]]:
    results: list[list[SampleResult | None]] = []
    todo: dict[str, tuple[ExecRequest, list[tuple[int, int]]]] = {}
    timeouts: list[float] | None = None
    tasks = _tasks(batch, executor, backend, hooks)
    for ri, (rec, pred) in enumerate(batch):
        row: list[SampleResult | None] = []
        grading: tuple[str, str] | None = None  # per record, on its first executable sample
        tid = str(rec["task_id"])
        for si, sample in enumerate(_samples(pred)):
            if sample.get("error") or not sample.get("code"):
                row.append(SampleResult(tid, si, GENERATION_ERROR,
                                        detail=str(sample.get("error") or "no code")))
                continue
            row.append(None)
            assert executor is not None
            if timeouts is None:
                timeouts = _timeouts([r for r, _ in batch], tasks, general, executor,
                                     memory_mb, workspace, known)
            if grading is None:
                grading = _grading(rec)
            key = _key(backend, sample["code"], rec.get("test"), rec.get("entry_point"),
                       timeouts[ri], memory_mb, *grading, *tasks[ri].cache_key())
            hit = cache.get(key)
            if hit is not None:
                row[si] = replace(SampleResult(**hit), task_id=tid, sample_index=si)
            elif key in todo:  # identical code (e.g. greedy samples): run it once
                todo[key][1].append((ri, si))
            else:
                todo[key] = (_request(key, str(sample["code"]), rec, timeouts[ri], memory_mb,
                                      grading, tasks[ri]), [(ri, si)])
        results.append(row)
    if todo:
        assert executor is not None
        logger.debug("executing %d sample(s) with the %s backend", len(todo), backend)
        for res in executor.run([req for req, _ in todo.values()]):
            req, places = todo[res.id]
            outcome, grading_tier, detail = res.outcome.value, res.grading.value, res.detail
            task = tasks[places[0][0]]
            if task.parse_fn:
                outcome, parsed = parse_verdict(task, outcome, res.stdout, res.stderr)
                if parsed:
                    grading_tier, detail = OUTPUT_PARSE, f"{parsed}; {detail}".rstrip("; ")
            result = SampleResult(str(req.metadata["task_id"]), places[0][1],
                                  outcome, res.duration_s, res.timeout_s,
                                  res.backend, res.isolation_label, detail[:500], grading_tier,
                                  res.node)
            for ri, si in places:
                results[ri][si] = replace(result, task_id=str(batch[ri][0]["task_id"]),
                                          sample_index=si)
            if res.outcome is not Outcome.INFRA_ERROR:
                cache.add(out, res.id, result)
    return [[r for r in row if r is not None] for row in results]
