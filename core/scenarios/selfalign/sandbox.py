"""Run model-written test units against a program in the sandbox, one request per unit.

:class:`UnitRunner` grades each valid unit (:mod:`.units`) as its own boundary-tier
:class:`~core.testenvmanager.sandbox.ExecRequest`: the program (the model's code, the
reference solution or a mutant) runs in the candidate process and only answers calls; the
unit, rewritten as ``check(candidate)``, runs in the judge with the task prompt as
``helpers``. Invalid units are not run; their outcome is ``invalid`` with the reason.

Model-written tests are hostile code, and in the boundary tier the test is the judge's part.
The judge is walled like a sample, so a unit cannot reach the machine; to keep one unit from
changing the judge for the next (patching an imported module), the ``local`` backend gets
``judge_requests: 1``: a fresh judge per unit. This executor is never the one that grades the
dataset's hidden tests, and it runs at isolation ``kernel`` at least whatever the settings ask
(:data:`MIN_ISOLATION`): what a unit's run reports (its outcome's detail, its output) goes back
to the model as feedback, so neither the model's code nor its test may read anything but the
system's and the interpreter's files -- not the dataset holding the hidden tests.

What a unit writes is never an infrastructure failure. A request that ends ``infra_error`` is
checked against trusted requests (:meth:`UnitRunner._attribute`): when a trivial program with a
trivial test also fails, the sandbox is at fault (:class:`SandboxInfraError`, nothing cached,
the caller retries later); when the same request passes on a second try, that result counts;
when the unit fails against the trivial program too, the unit is at fault: ``invalid``, reason
``harness:<detail>`` (its judge could not compile or load it, or it forged the judge's verdict
record); otherwise the program is (that unit's outcome: ``error``, no pass). A unit whose run ended with the judge
program's ``SelfAlignNothingChecked`` is ``invalid`` too (``ran_no_assert``, ``ran_no_call``:
:func:`.units.ran_nothing`).

Results are cached in a JSONL file keyed by (program, test, helpers, entry point, limits, the
grading version :data:`GRADING`), so a re-score or a resumed run never runs a unit twice;
``infra_error`` results are not cached.
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.common.errors import IanvsError
from core.common.jsonl import append_durably
from core.scenarios.selfalign.units import UnitCheck, ran_nothing
from core.testenvmanager.sandbox import (ExecRequest, ExecResult, Executor, IsolationLevel,
                                         Outcome, get_executor)

logger = logging.getLogger(__name__)

INVALID = "invalid"
#: characters of a failing unit's detail and output kept in records
DETAIL_CHARS = 500
#: the least isolation a unit runs at: kernel walls (Landlock reads only system and interpreter
#: directories), so no run whose report reaches the model can read the hidden tests
MIN_ISOLATION = IsolationLevel.KERNEL
#: part of every cache key: bumped when how a unit is graded changes (2: kernel walls at least,
#: run-time checks of asserts and calls, infra_error attributed by trusted requests)
GRADING = 2
#: the trusted test of :meth:`UnitRunner._attribute` (calls nothing, asserts nothing)
TRUSTED_TEST = "def check(candidate):\n    pass\n"


class SandboxInfraError(IanvsError):
    """The sandbox failed (``infra_error``): the try is not recorded and is redone later."""


@dataclass(frozen=True)
class UnitOutcome:
    """How one unit fared: ``outcome`` is a sandbox outcome value or ``invalid`` (with
    ``reason``); ``ran`` says whether a sandbox request was made (False for units invalid
    before running and for cache hits)."""

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
        """The executor's options: these settings' own, with a fresh judge per unit on
        ``local`` and ``min_isolation`` raised to :data:`MIN_ISOLATION` (module docstring)."""
        opts = dict(self.options or {})
        if self.backend == "local":
            opts.setdefault("judge_requests", 1)
        asked = IsolationLevel.parse(opts.get("min_isolation", IsolationLevel.NONE))
        opts["min_isolation"] = str(max(asked, MIN_ISOLATION))
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
               self.settings.timeout, self.settings.memory_mb, GRADING]
        return hashlib.sha256(json.dumps(doc).encode("utf-8")).hexdigest()

    def _exec(self) -> Executor:
        if self._executor is None:
            self._executor = get_executor(self.settings.backend,
                                          **self.settings.executor_options())
        return self._executor

    def _request(self, key: str, program: str, test: str, entry_point: str,
                 helpers: str) -> ExecRequest:
        return ExecRequest(id=key, program=program, test=test, entry_point=entry_point,
                           helpers=helpers, timeout=self.settings.timeout,
                           memory_mb=self.settings.memory_mb)

    def run(self, program: str, units: Sequence[UnitCheck], entry_point: str,
            helpers: str = "") -> list[UnitOutcome]:
        """The outcome of every unit (in order) against ``program``.

        Raises:
            SandboxInfraError: the sandbox itself failed (a trusted request failed too;
                nothing of it is cached).
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
                    out[i] = UnitOutcome(i, hit["outcome"], reason=hit.get("reason", ""),
                                         detail=hit["detail"], output=hit["output"],
                                         duration_s=hit["duration_s"])
                elif key in todo:
                    todo[key][1].append(i)
                else:
                    todo[key] = (self._request(key, program, unit.test, entry_point, helpers), [i])
            if todo:
                done: dict[str, dict[str, Any]] = {}
                suspects = []
                for res in self._exec().run([req for req, _ in todo.values()]):
                    if res.outcome is Outcome.INFRA_ERROR:
                        suspects.append(todo[res.id][0])
                    else:
                        done[res.id] = _row(res)
                if suspects:
                    done.update(self._attribute(program, entry_point, helpers, suspects))
                rows = []
                for key, (_req, indices) in todo.items():
                    row = done[key]
                    self._cache[key] = row
                    rows.append(row)
                    self.runs += 1
                    for i in indices:
                        out[i] = UnitOutcome(i, row["outcome"], reason=row.get("reason", ""),
                                             detail=row["detail"], output=row["output"],
                                             ran=True, duration_s=row["duration_s"])
                self._append(rows)
        return [o for o in out if o is not None]

    def _attribute(self, program: str, entry_point: str, helpers: str,
                   suspects: list[ExecRequest]) -> dict[str, dict[str, Any]]:
        """The cache rows of requests that ended ``infra_error`` (module docstring): whose
        fault it was, found with trusted requests on the same executor.

        Raises:
            SandboxInfraError: a trivial program with a trivial test fails too.
        """
        trivial = f"def {entry_point}(*args, **kwargs):\n    return None\n"
        control = self._request("trusted-control", trivial, TRUSTED_TEST, entry_point, helpers)
        again = {res.id: res for res in self._exec().run([control, *suspects])}
        if again[control.id].outcome is Outcome.INFRA_ERROR:
            raise SandboxInfraError(f"sandbox infra_error: {again[control.id].detail[:200]}")
        rows = {req.id: _row(again[req.id]) for req in suspects
                if again[req.id].outcome is not Outcome.INFRA_ERROR}
        left = [req for req in suspects if req.id not in rows]
        if not left:
            return rows
        alone = {res.id: res for res in self._exec().run([
            self._request(req.id, trivial, req.test, entry_point, helpers) for req in left])}
        for req in left:
            detail = again[req.id].detail[:DETAIL_CHARS]
            if alone[req.id].outcome is Outcome.INFRA_ERROR:
                # the unit breaks its judge whatever the program: it could not be loaded, or it
                # wrote its own verdict record
                rows[req.id] = {"key": req.id, "outcome": INVALID,
                                "reason": "harness:" + _one_line(detail),
                                "detail": detail, "output": "", "duration_s": 0.0}
            else:  # only with this program: the program is at fault, which is no pass
                logger.warning("a program broke the sandbox's harness: %s", detail[:200])
                rows[req.id] = {"key": req.id, "outcome": Outcome.ERROR.value, "reason": "",
                                "detail": f"the program broke the test harness: {detail}"
                                          [:DETAIL_CHARS], "output": "", "duration_s": 0.0}
        return rows

    def _append(self, rows: list[dict[str, Any]]) -> None:
        if self.cache_path is None or not rows:
            return
        append_durably(self.cache_path, "".join(json.dumps(row) + "\n" for row in rows))

    def close(self) -> None:
        if self._executor is not None:
            self._executor.close()
            self._executor = None

    def __enter__(self) -> "UnitRunner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _one_line(text: str, limit: int = 120) -> str:
    return " ".join(text.split())[:limit]


def _row(res: ExecResult) -> dict[str, Any]:
    """The cache row of a unit's result; a run that ended with the judge program's
    ``SelfAlignNothingChecked`` is an invalid unit (:func:`.units.ran_nothing`)."""
    row = {"key": res.id, "outcome": res.outcome.value, "reason": "",
           "detail": res.detail[:DETAIL_CHARS],
           "output": (res.stdout + res.stderr)[:DETAIL_CHARS], "duration_s": res.duration_s}
    nothing = ran_nothing(res.outcome.value, res.detail)
    if nothing is not None:
        row.update(outcome=INVALID, reason=nothing)
    return row
