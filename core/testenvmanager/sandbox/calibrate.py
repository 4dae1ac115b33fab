"""Timeout calibration: measure reference solutions on the executing node (the one implementation).

``calibrated_timeout(t_ref, factor, floor) = max(floor, factor * t_ref)`` (capped by ``ceiling``).
:func:`calibrate_timeouts` runs each request's *reference* program through the executor
``repeats`` times, takes the slowest harness-measured time (``exec_time_s``; wall duration if the
harness did not report) and returns copies of the requests with the calibrated ``timeout``.
Results of the later real run record the limit used in ``ExecResult.timeout_s``.

Repeated work is measured once: requests whose reference program, test, entry point, grading
tier, helpers and memory limit are identical (the same problem under several task ids, or
several samples of one task) share one *reference key* and one probe. ``known`` passes
measurements of earlier runs by reference key (the code metrics keep them in
``calibration.json``), and :attr:`Calibration.measured` returns every measurement by key.

Edge cases: a reference that does not pass is an error in the dataset, not a slow machine; it
keeps its original timeout and is listed in the returned ``problems`` mapping.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence

from .base import Executor
from .types import ExecRequest, Outcome

__all__ = ["calibrated_timeout", "calibrate_timeouts", "reference_key", "Calibration"]

LOGGER = logging.getLogger(__name__)


def calibrated_timeout(t_ref: float, factor: float = 5.0, floor: float = 1.0,
                       ceiling: float | None = None) -> float:
    """``max(floor, factor * t_ref)``, optionally capped at ``ceiling`` (never below ``floor``)."""
    if t_ref < 0 or factor <= 0 or floor <= 0:
        raise ValueError("t_ref must be >= 0, factor and floor > 0")
    value = max(floor, factor * t_ref)
    if ceiling is not None:
        value = max(floor, min(value, ceiling))
    return value


def reference_key(backend: str, request: ExecRequest, reference: str) -> str:
    """Content key of the probe that measures ``reference`` for ``request`` on ``backend``."""
    text = json.dumps([backend, reference, request.test, request.entry_point, request.mode,
                       request.tier.value, request.helpers, request.memory_mb], default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


@dataclasses.dataclass(frozen=True)
class Calibration:
    """Calibrated requests plus what was measured and what went wrong.

    ``t_ref`` and ``problems`` are keyed by request id; ``measured`` by :func:`reference_key`
    (known measurements that were used, and new ones).
    """

    requests: list[ExecRequest]
    t_ref: dict[str, float]
    problems: dict[str, str]
    measured: dict[str, float] = dataclasses.field(default_factory=dict)


def calibrate_timeouts(
    executor: Executor,
    requests: Sequence[ExecRequest],
    references: Mapping[str, str],
    factor: float = 5.0,
    floor: float = 1.0,
    ceiling: float | None = 60.0,
    repeats: int = 1,
    probe_timeout: float = 30.0,
    known: Mapping[str, float] | None = None,
) -> Calibration:
    """Return ``requests`` with timeouts calibrated from their reference programs.

    ``references`` maps request id -> reference program (e.g. prompt + canonical solution).
    Requests without a reference keep their timeout. ``known`` maps reference keys to
    measurements already made on this node (not measured again). Request ids must be unique.
    """
    known = known or {}
    backend = getattr(executor, "name", type(executor).__name__)
    key_of: dict[str, str] = {}
    probes: dict[str, ExecRequest] = {}
    for req in requests:
        if req.id not in references:
            continue
        key = key_of[req.id] = reference_key(backend, req, references[req.id])
        if key not in known and key not in probes:
            probes[key] = dataclasses.replace(req, id=key, program=references[req.id],
                                              timeout=probe_timeout)
    runs = [dataclasses.replace(p, id=f"{key}\x00{rep}") for rep in range(max(1, repeats))
            for key, p in probes.items()]
    measured: dict[str, float] = {}
    failed: dict[str, str] = {}
    for res in executor.run(runs):
        key = res.id.split("\x00", 1)[0]
        if res.outcome is not Outcome.PASSED:
            failed[key] = f"reference {res.outcome.value}: {res.detail}"
            continue
        value = res.exec_time_s if res.exec_time_s is not None else res.duration_s
        measured[key] = max(measured.get(key, 0.0), value)
    for key in failed:
        measured.pop(key, None)
    measured.update({k: v for k, v in known.items() if k in key_of.values()})
    out: list[ExecRequest] = []
    t_ref: dict[str, float] = {}
    problems: dict[str, str] = {}
    for req in requests:
        ref_key = key_of.get(req.id)
        if ref_key is not None and ref_key in measured:
            t_ref[req.id] = measured[ref_key]
            req = dataclasses.replace(req, timeout=calibrated_timeout(measured[ref_key], factor,
                                                                      floor, ceiling))
        elif ref_key is not None:
            problems[req.id] = failed.get(ref_key, "reference was not measured")
        out.append(req)
    if problems:
        LOGGER.warning("timeout calibration: %d reference(s) did not pass", len(problems))
    return Calibration(out, t_ref, problems, measured)
