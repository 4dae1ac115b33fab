"""Metrics of the code-generation scenario (execution-based).

Predictions are those of :class:`core.generation.codegen_model.CodegenModel`: per task
``{"task_id", "samples": [{"code", "raw_output", "latency_s", "completion_tokens", "error",
...}]}``. Example plugin files register these functions under their aliases.

* :func:`pass_at_k` -- unbiased pass@k for each k (columns ``pass@<k>``) over tasks with at
  least one scored sample, plus outcome counts over all samples (``passed``, ``failed``,
  ``error``, ``syntax_error``, ``timeout``, ``memory_exceeded``, ``sandbox_violation``,
  ``infra_error``, ``generation_error``) and ``unscored_tasks``. Infra and generation
  errors are reported apart and never count as failures. pass@k is NaN (with a warning)
  when a task has fewer scored samples than k. Two text columns say how the scores were
  obtained: ``grading`` (``boundary``: verdicts computed in a trusted judge process that
  the sample could not write to; ``in_process``: in the sample's own process; both joined
  by ``+`` when a test case mixes them) and ``isolation`` (the sandbox tier); ``executed_by``
  names the backend and, for backends that dispatch (``dask``), the nodes that graded the
  samples, e.g. ``dask:local[edge1,edge2]`` (``local`` when graded on this machine).
* :func:`exec_accuracy` -- share of scored samples that pass.

Both run each record's code, so they are marked with
:func:`~core.scenarios.codegen.records.executes_code`: a job using them has every
test record checked as executable before anything runs.
:func:`~core.testcasecontroller.metrics.edge_cost.edge_cost` (latency and throughput of the
generation) is every kind's, so it lives with the metric plumbing, not here.
"""
from __future__ import annotations

import json
import logging
import math
from array import array
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError
from core.scenarios.codegen.execution import GENERATION_ERROR, SampleResult, iter_results
from core.scenarios.codegen.records import executes_code
from core.testcasecontroller.metrics.passk import mean_pass_at_k
from core.testenvmanager.sandbox import Outcome

logger = logging.getLogger(__name__)

OUTCOME_COLUMNS = tuple(o.value for o in Outcome) + (GENERATION_ERROR,)


def _ks(k: int | Sequence[int]) -> list[int]:
    ks = [k] if isinstance(k, int) else list(k)
    if not ks or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in ks):
        raise ValueError(f"k must be a positive integer or a list of them, got {k!r}")
    return ks


def _results(y_pred: Sequence[Any], context: Any) -> Iterator[list[SampleResult]]:
    """Per record (dataset order), its samples' results, streamed (see :func:`iter_results`)."""
    if y_pred is None or isinstance(y_pred, (str, bytes, Mapping)):
        raise ConfigError(f"code metrics need one prediction per test record, got "
                          f"{type(y_pred).__name__}",
                          hint="the basemodel's predict must return a list aligned with its "
                               "inputs (a mapping or string is passed through as upstream "
                               "does, but cannot be executed)")
    return iter_results(context.records(), y_pred, context.sandbox, context.workspace,
                        context.show_progress, total=len(y_pred),
                        hooks=tuple(getattr(context, "code_hooks", ())))


@executes_code
def pass_at_k(y_true: Any, y_pred: Sequence[Any], context: Any = None,
              k: int | Sequence[int] = 1) -> dict[str, Any]:
    """pass@k columns and outcome counts (see the module docstring)."""
    ks = _ks(k)
    per_task = _results(y_pred, context)
    ns, cs = array("q"), array("q")  # per scored task: samples, correct (flat in memory)
    few: dict[int, str] = {}  # names of tasks with fewer samples than the largest k (warnings)
    top_k = max(ks)
    outcomes: Counter[str] = Counter()
    tiers: set[str] = set()
    isolation: set[str] = set()
    executed: dict[str, set[str]] = {}
    unscored = 0
    workspace = getattr(context, "workspace", None)
    with _TaskLog(Path(workspace) / PER_TASK_FILE if workspace else None) as log:
        for samples in per_task:
            outcomes.update(s.outcome for s in samples)
            tiers.update(s.grading for s in samples if s.grading)
            isolation.update(s.isolation for s in samples if s.isolation)
            for s in samples:
                if s.backend:
                    executed.setdefault(s.backend, set()).update([s.node] if s.node else [])
            scored = [s for s in samples if s.scored]
            log.write(samples, scored)
            if not scored:
                unscored += 1
                continue
            if len(scored) < top_k:
                few[len(ns)] = scored[0].task_id
            ns.append(len(scored))
            cs.append(sum(s.passed for s in scored))
    if unscored:
        logger.warning("%d task(s) have no scored sample (generation or infra errors); they "
                       "are left out of pass@k and counted in 'unscored_tasks'", unscored)
    values = mean_pass_at_k(ns, cs, ks, lambda i: few.get(i, f"#{i}"))
    row: dict[str, Any] = {f"pass@{kk}": round(values[kk], 4) if not math.isnan(values[kk])
                           else math.nan for kk in ks}
    row.update({name: outcomes.get(name, 0) for name in OUTCOME_COLUMNS})
    row["unscored_tasks"] = unscored
    row["grading"] = "+".join(sorted(tiers))
    row["isolation"] = "+".join(sorted(isolation))
    row["executed_by"] = "+".join(f"{b}[{','.join(sorted(n))}]" if n else b
                                  for b, n in sorted(executed.items()))
    return row


PER_TASK_FILE = "per_task.jsonl"


class _TaskLog:
    """``per_task.jsonl`` in the test case folder: one line per task (``task_id``, scored
    samples ``n``, passed ``c``, outcome counts), rewritten by every pass@k computation; the
    reports read it for confidence intervals and paired comparisons."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._fh: Any = None

    def __enter__(self) -> "_TaskLog":
        if self.path is not None:
            self._tmp = self.path.with_suffix(".tmp")
            self._fh = self._tmp.open("w", encoding="utf-8")
        return self

    def write(self, samples: list[SampleResult], scored: list[SampleResult]) -> None:
        if self._fh is None or not samples:
            return
        self._fh.write(json.dumps({
            "task_id": samples[0].task_id, "n": len(scored),
            "c": sum(s.passed for s in scored),
            "outcomes": dict(Counter(s.outcome for s in samples))}) + "\n")

    def __exit__(self, kind: Any, *_rest: Any) -> None:
        if self._fh is None:
            return
        self._fh.close()
        if kind is None and self.path is not None:
            self._tmp.replace(self.path)
        else:
            self._tmp.unlink(missing_ok=True)


pass_at_k.columns = lambda k=1: [f"pass@{kk}" for kk in _ks(k)] + list(OUTCOME_COLUMNS) + [  # type: ignore[attr-defined]
    "unscored_tasks", "grading", "isolation", "executed_by"]


@executes_code
def exec_accuracy(y_true: Any, y_pred: Sequence[Any], context: Any = None) -> float:
    """Share of scored samples that pass (NaN when nothing could be scored)."""
    scored = passed = 0
    for samples in _results(y_pred, context):
        for sample in samples:
            if sample.scored:
                scored += 1
                passed += sample.passed
    return round(passed / scored, 4) if scored else math.nan
