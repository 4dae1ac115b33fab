"""Timeout calibration: measure reference solutions on the executing node.

``calibrated_timeout(t_ref, factor, floor) = max(floor, factor * t_ref)`` (capped by ``ceiling``).
:func:`calibrate_timeouts` runs each request's *reference* program through the executor
``repeats`` times, takes the slowest harness-measured time (``exec_time_s``; wall duration if the
harness did not report) and returns copies of the requests with the calibrated ``timeout``.
Results of the later real run record the limit used in ``ExecResult.timeout_s``.

Edge cases: a reference that does not pass is an error in the dataset, not a slow machine; it
keeps its original timeout and is listed in the returned ``problems`` mapping.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Mapping, Sequence

from .base import Executor
from .types import ExecRequest, Outcome

__all__ = ["calibrated_timeout", "calibrate_timeouts", "Calibration"]

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


@dataclasses.dataclass(frozen=True)
class Calibration:
    """Calibrated requests plus what was measured (``t_ref`` per id) and what went wrong."""

    requests: list[ExecRequest]
    t_ref: dict[str, float]
    problems: dict[str, str]


def calibrate_timeouts(
    executor: Executor,
    requests: Sequence[ExecRequest],
    references: Mapping[str, str],
    factor: float = 5.0,
    floor: float = 1.0,
    ceiling: float | None = 60.0,
    repeats: int = 1,
    probe_timeout: float = 30.0,
) -> Calibration:
    """Return ``requests`` with timeouts calibrated from their reference programs.

    ``references`` maps request id -> reference program (e.g. prompt + canonical solution).
    Requests without a reference keep their timeout.
    """
    probes = []
    for rep in range(max(1, repeats)):
        for req in requests:
            if req.id in references:
                probes.append(dataclasses.replace(req, id=f"{req.id}\x00{rep}",
                                                  program=references[req.id], timeout=probe_timeout))
    t_ref: dict[str, float] = {}
    problems: dict[str, str] = {}
    for res in executor.run(probes):
        rid = res.id.split("\x00", 1)[0]
        if res.outcome is not Outcome.PASSED:
            problems[rid] = f"reference {res.outcome.value}: {res.detail}"
            continue
        measured = res.exec_time_s if res.exec_time_s is not None else res.duration_s
        t_ref[rid] = max(t_ref.get(rid, 0.0), measured)
    out = []
    for req in requests:
        if req.id in t_ref and req.id not in problems:
            out.append(dataclasses.replace(req, timeout=calibrated_timeout(t_ref[req.id], factor, floor, ceiling)))
        else:
            out.append(req)
    if problems:
        LOGGER.warning("timeout calibration: %d reference(s) did not pass", len(problems))
    return Calibration(out, {k: v for k, v in t_ref.items() if k not in problems}, problems)
