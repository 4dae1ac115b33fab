"""Execute code predictions in the sandbox, once per sample, with an on-disk cache.

Used by the code-scoring metrics (:mod:`core.testcasecontroller.metrics.codegen`). Given the
test records and predictions of one test case, every sample's ``code`` is run against its
record's ``test`` through an executor backend (``local`` by default) and classified in the
sandbox taxonomy. Results are appended to ``executions.jsonl`` in the test case folder keyed
by (program, test, entry point, limits, backend), so several metrics, a re-score or a
resumed run never execute the same sample twice. ``infra_error`` results are not cached
(they are retried next time) and, like samples the generator could not produce, never count
against the model.

Sandbox settings (testenv ``sandbox:``; all optional):

================== ===========================================================================
``backend``        executor backend name (default ``local``)
``timeout``        seconds per sample, or ``auto`` (default): ``max(timeout_floor,
                   timeout_factor * t_ref)`` where ``t_ref`` is the record's reference
                   solution timed on this node (cached in ``calibration.json``); a record's own
                   ``timeout`` field wins
``timeout_factor`` default 5; ``timeout_floor`` default 3 s; ``timeout_ceiling`` default 60 s
``memory_mb``      address-space limit per sample (default 1024)
anything else      backend options, e.g. ``workers``, ``min_isolation`` for ``local``
================== ===========================================================================
"""
from __future__ import annotations

import atexit
import hashlib
import json
import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError
from core.common.progress import progress_bar
from core.testenvmanager.testenv.testenv import SANDBOX_KEYS
from core.testenvmanager.sandbox import (ExecRequest, Executor, Outcome, calibrate_timeouts,
                                         get_executor, reference_key)

logger = logging.getLogger(__name__)

EXEC_CACHE = "executions.jsonl"
CALIBRATION_FILE = "calibration.json"
GENERATION_ERROR = "generation_error"
_GENERAL_KEYS = SANDBOX_KEYS  # read here; every other sandbox key is a backend option


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

    @property
    def scored(self) -> bool:
        return self.outcome not in (GENERATION_ERROR, Outcome.INFRA_ERROR.value)

    @property
    def passed(self) -> bool:
        return self.outcome == Outcome.PASSED.value


_executors: dict[str, Executor] = {}
_exec_lock = threading.Lock()


def _executor(backend: str, options: Mapping[str, Any]) -> Executor:
    """One warm executor per (backend, options) for the whole process."""
    key = json.dumps([backend, dict(options)], sort_keys=True, default=str)
    with _exec_lock:
        if key not in _executors:
            _executors[key] = get_executor(backend, **dict(options))
        return _executors[key]


@atexit.register
def close_executors() -> None:
    """Stop every executor this module started (also run at exit)."""
    with _exec_lock:
        for ex in _executors.values():
            ex.close()
        _executors.clear()


def _settings(sandbox: Mapping[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    general = {k: sandbox[k] for k in _GENERAL_KEYS if k in sandbox}
    options = {k: v for k, v in sandbox.items() if k not in _GENERAL_KEYS}
    timeout = general.get("timeout", "auto")
    if timeout != "auto" and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                              or timeout <= 0):
        raise ConfigError(f"sandbox.timeout must be 'auto' or a positive number, got {timeout!r}")
    return str(general.get("backend", "local")), general, options


def _key(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _load_jsonl(path: Path) -> dict[str, dict[str, Any]]:
    cache: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
                cache[entry["key"]] = entry
            except (ValueError, KeyError, TypeError):
                continue  # a torn last line from a killed run
    return cache


def _reference_program(record: Mapping[str, Any]) -> str | None:
    solution = record.get("canonical_solution")
    return str(record["prompt"]) + str(solution) if solution else None


def _grading(record: Mapping[str, Any]) -> tuple[str, str]:
    """The record's grading tier and the trusted helper code its test may need.

    The tier is ``in_process`` when the record asks for it (its test needs objects the sample
    defines), otherwise ``boundary``; then the helpers are the record's prompt (HumanEval's
    tests call helpers it defines, e.g. ``poly``), run in the judge before the test, when the
    prompt compiles on its own. Call once per record: it compiles the prompt.
    """
    if record.get("grading") == "in_process":
        return "in_process", ""
    prompt = str(record.get("prompt") or "")
    try:
        compile(prompt, "<prompt>", "exec")
    except (SyntaxError, ValueError):
        return "boundary", ""
    return "boundary", prompt


def _request(key: str, program: str, record: Mapping[str, Any], timeout: float,
             memory_mb: int, grading: tuple[str, str]) -> ExecRequest:
    return ExecRequest(id=key, program=program, test=str(record["test"]),
                       entry_point=str(record["entry_point"]), timeout=timeout,
                       memory_mb=memory_mb, metadata={"task_id": str(record["task_id"])},
                       grading=grading[0], helpers=grading[1])


def _timeouts(records: list[Mapping[str, Any]], general: Mapping[str, Any], executor: Executor,
              memory_mb: int, workspace: Path, show_progress: bool = True) -> list[float]:
    """Per-record timeout (dataset order): the record's field, the fixed setting, or calibrated
    against the record's reference solution (:func:`calibrate_timeouts`; identical references
    are measured once, measurements persist in ``calibration.json``)."""
    setting = general.get("timeout", "auto")
    floor = float(general.get("timeout_floor", 3.0))
    factor = float(general.get("timeout_factor", 5.0))
    ceiling = float(general.get("timeout_ceiling", 60.0))
    out: list[float] = []
    probes: list[ExecRequest] = []
    references: dict[str, str] = {}
    for ri, rec in enumerate(records):
        ref = _reference_program(rec)
        if rec.get("timeout"):
            out.append(float(rec["timeout"]))
        elif setting != "auto":
            out.append(float(setting))
        else:
            out.append(ceiling)  # replaced below when the reference passes
            if ref is not None:
                probes.append(_request(str(ri), ref, rec, ceiling, memory_mb, _grading(rec)))
                references[str(ri)] = ref
    if not probes:
        return out
    cal_path = workspace / CALIBRATION_FILE
    try:
        known = {str(k): float(v) for k, v in json.loads(cal_path.read_text()).items()}
    except (OSError, ValueError, AttributeError, TypeError):
        known = {}
    todo = {reference_key(executor.name, r, references[r.id]) for r in probes} - set(known)
    with progress_bar(total=len(todo), desc="calibrate timeouts", unit="probe",
                      enabled=show_progress) as bar:
        cal = calibrate_timeouts(executor, probes, references, factor=factor, floor=floor,
                                 ceiling=ceiling, probe_timeout=ceiling, known=known,
                                 on_probe=lambda: bar.update(1))
    if set(cal.measured) - set(known):
        tmp = cal_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({**known, **cal.measured}))
        tmp.replace(cal_path)
    for req in cal.requests:
        ri = int(req.id)
        if req.id in cal.t_ref:
            out[ri] = req.timeout
        else:
            logger.warning("reference solution of %s did not pass (%s); using the ceiling %.0fs",
                           records[ri]["task_id"], cal.problems.get(req.id, "?"), ceiling)
    return out


def execute_predictions(records: Iterable[Mapping[str, Any]], predictions: list[Any],
                        sandbox: Mapping[str, Any], workspace: Path,
                        show_progress: bool = True) -> list[list[SampleResult]]:
    """Execute every sample; returns per record (dataset order) its samples' results."""
    records = list(records)
    if len(records) != len(predictions):
        raise ConfigError(f"{len(predictions)} predictions for {len(records)} records")
    backend, general, options = _settings(sandbox)
    memory_mb = int(general.get("memory_mb", 1024))
    cache_path = workspace / EXEC_CACHE
    cache = _load_jsonl(cache_path)
    results: list[list[SampleResult | None]] = []
    todo: dict[str, tuple[ExecRequest, list[tuple[int, int]]]] = {}
    executor: Executor | None = None
    timeouts: list[float] | None = None
    for ri, (rec, pred) in enumerate(zip(records, predictions)):
        samples = pred.get("samples", []) if isinstance(pred, Mapping) else []
        row: list[SampleResult | None] = []
        grading: tuple[str, str] | None = None  # per record, on its first executable sample
        for si, sample in enumerate(samples):
            tid = str(rec["task_id"])
            if sample.get("error") or not sample.get("code"):
                row.append(SampleResult(tid, si, GENERATION_ERROR,
                                        detail=str(sample.get("error") or "no code")))
                continue
            row.append(None)
            if executor is None:
                executor = _executor(backend, options)
                timeouts = _timeouts(records, general, executor, memory_mb, workspace,
                                     show_progress)
            assert timeouts is not None
            if grading is None:
                grading = _grading(rec)
            key = _key(backend, sample["code"], rec["test"], rec["entry_point"],
                       timeouts[ri], memory_mb, *grading)
            if key in cache:
                row[si] = replace(SampleResult(**cache[key]["result"]), task_id=tid,
                                  sample_index=si)
            elif key in todo:  # identical code (e.g. greedy samples): run it once
                todo[key][1].append((ri, si))
            else:
                todo[key] = (_request(key, str(sample["code"]), rec, timeouts[ri], memory_mb,
                                      grading), [(ri, si)])
        results.append(row)
    if todo:
        assert executor is not None
        logger.info("executing %d sample(s) with the %s backend (%d cached)", len(todo),
                    backend, sum(r is not None for row in results for r in row))
        with progress_bar(total=len(todo), desc="execute", unit="sample",
                          enabled=show_progress) as bar, \
                cache_path.open("a", encoding="utf-8") as out:
            for res in executor.run([req for req, _ in todo.values()]):
                req, places = todo[res.id]
                result = SampleResult(str(req.metadata["task_id"]), places[0][1],
                                      res.outcome.value, res.duration_s, res.timeout_s,
                                      res.backend, str(res.isolation), res.detail[:500],
                                      res.grading.value)
                for ri, si in places:
                    results[ri][si] = replace(result, sample_index=si)
                if res.outcome is not Outcome.INFRA_ERROR:
                    out.write(json.dumps({"key": res.id, "result": asdict(result)}) + "\n")
                    out.flush()
                bar.update(1)
    return [[r for r in row if r is not None] for row in results]
