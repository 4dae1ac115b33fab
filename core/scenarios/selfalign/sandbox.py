"""Run model-written test units against a program in the sandbox, one request per unit.

:class:`UnitRunner` grades each valid unit (:mod:`.units`) as its own boundary-tier
:class:`~core.testenvmanager.sandbox.ExecRequest`: the program (the model's code, the
reference solution or a mutant) runs in the candidate process and only answers calls; the
unit, rewritten as ``check(candidate)``, runs in the judge with the task prompt as
``helpers``. Invalid units are not run; their outcome is ``invalid`` with the reason.

Model-written tests are hostile code, and in the boundary tier the test is the judge's part.
The judge is walled like a sample (kernel walls, its own uid at ``full``), so a unit cannot
reach the machine; to keep one unit from changing the judge for the next (patching an
imported module), the ``local`` backend gets ``judge_requests: 1``: a fresh judge per unit.
This executor is never the one that grades the dataset's hidden tests.

Results are cached in a JSONL file keyed by (program, test, helpers, entry point, limits), so a
re-score or a resumed run never runs a unit twice. ``infra_error`` results are not cached and
raise :class:`SandboxInfraError` for the caller to retry later (never scored).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.common.errors import IanvsError
from core.common.jsonl import open_append
from core.scenarios.selfalign.units import UnitCheck
from core.testenvmanager.sandbox import ExecRequest, Executor, Outcome, get_executor

logger = logging.getLogger(__name__)

INVALID = "invalid"
#: characters of a failing unit's detail and output kept in records
DETAIL_CHARS = 500


class SandboxInfraError(IanvsError):
    """The sandbox failed (``infra_error``): the try is not recorded and is redone later."""


@dataclass(frozen=True)
class UnitOutcome:
    """How one unit fared: ``outcome`` is a sandbox outcome value or ``invalid`` (with
    ``reason``); ``ran`` says whether a sandbox request was made (False for invalid units and
    cache hits)."""

    index: int
    outcome: str
    reason: str = ""
    detail: str = ""
    output: str = ""
    ran: bool = False
    duration_s: float = 0.0

    @property
    def passed(self) -> bool:
        return self.outcome == Outcome.PASSED.value

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "outcome": self.outcome, "reason": self.reason,
                "detail": self.detail, "output": self.output, "ran": self.ran,
                "duration_s": round(self.duration_s, 4)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "UnitOutcome":
        return cls(int(data["index"]), str(data["outcome"]), str(data.get("reason", "")),
                   str(data.get("detail", "")), str(data.get("output", "")),
                   bool(data.get("ran", False)), float(data.get("duration_s", 0.0)))


@dataclass(frozen=True)
class SandboxSettings:
    """Where and how units run: backend name, its options, per-unit timeout and memory."""

    backend: str = "local"
    options: Mapping[str, Any] | None = None
    timeout: float = 3.0
    memory_mb: int = 1024

    def executor_options(self) -> dict[str, Any]:
        opts = dict(self.options or {})
        if self.backend == "local":
            opts.setdefault("judge_requests", 1)
        return opts


class UnitRunner:
    """Grades units in the sandbox with an on-disk cache (module docstring). Thread-unsafe
    callers share it through an internal lock; ``close`` stops the executor it started."""

    def __init__(self, settings: SandboxSettings, cache_path: Path | None = None) -> None:
        self.settings = settings
        self.cache_path = cache_path
        self._executor: Executor | None = None
        self._cache: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self.runs = 0
        if cache_path is not None and cache_path.exists():
            with cache_path.open(encoding="utf-8") as fh:
                for line in fh:
                    try:
                        row = json.loads(line)
                        self._cache[row["key"]] = row
                    except (json.JSONDecodeError, KeyError, TypeError):
                        continue  # a line cut by a kill: that unit runs again

    def _key(self, program: str, test: str, helpers: str, entry_point: str) -> str:
        doc = [program, test, helpers, entry_point, self.settings.backend,
               self.settings.timeout, self.settings.memory_mb]
        return hashlib.sha256(json.dumps(doc).encode("utf-8")).hexdigest()

    def _exec(self) -> Executor:
        if self._executor is None:
            self._executor = get_executor(self.settings.backend,
                                          **self.settings.executor_options())
        return self._executor

    def run(self, program: str, units: Sequence[UnitCheck], entry_point: str,
            helpers: str = "") -> list[UnitOutcome]:
        """The outcome of every unit (in order) against ``program``.

        Raises:
            SandboxInfraError: a request ended ``infra_error`` (nothing of it is cached).
        """
        out: list[UnitOutcome | None] = [None] * len(units)
        todo: dict[str, tuple[ExecRequest, list[int]]] = {}
        with self._lock:
            for i, unit in enumerate(units):
                if not unit.valid:
                    out[i] = UnitOutcome(i, INVALID, reason=unit.status)
                    continue
                if not program.strip():
                    out[i] = UnitOutcome(i, Outcome.SYNTAX_ERROR.value, detail="no code")
                    continue
                key = self._key(program, unit.test, helpers, entry_point)
                hit = self._cache.get(key)
                if hit is not None:
                    out[i] = UnitOutcome(i, hit["outcome"], detail=hit["detail"],
                                         output=hit["output"], duration_s=hit["duration_s"])
                elif key in todo:
                    todo[key][1].append(i)
                else:
                    req = ExecRequest(id=key, program=program, test=unit.test,
                                      entry_point=entry_point, helpers=helpers,
                                      timeout=self.settings.timeout,
                                      memory_mb=self.settings.memory_mb)
                    todo[key] = (req, [i])
            if todo:
                results = self._exec().run([req for req, _ in todo.values()])
                rows = []
                for res in results:
                    if res.outcome is Outcome.INFRA_ERROR:
                        raise SandboxInfraError(f"sandbox infra_error: {res.detail[:200]}")
                    row = {"key": res.id, "outcome": res.outcome.value,
                           "detail": res.detail[:DETAIL_CHARS],
                           "output": (res.stdout + res.stderr)[:DETAIL_CHARS],
                           "duration_s": res.duration_s}
                    self._cache[res.id] = row
                    rows.append(row)
                    self.runs += 1
                    for i in todo[res.id][1]:
                        out[i] = UnitOutcome(i, row["outcome"], detail=row["detail"],
                                             output=row["output"], ran=True,
                                             duration_s=res.duration_s)
                self._append(rows)
        return [o for o in out if o is not None]

    def _append(self, rows: list[dict[str, Any]]) -> None:
        if self.cache_path is None or not rows:
            return
        self.cache_path.parent.mkdir(parents=True, exist_ok=True)
        with open_append(self.cache_path) as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def close(self) -> None:
        if self._executor is not None:
            self._executor.close()
            self._executor = None

    def __enter__(self) -> "UnitRunner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
