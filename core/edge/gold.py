"""The per-node gold check: a node grades nothing until it grades known answers right.

:data:`GOLD` holds small problems written for this project, each with a reference solution
that must come back ``passed`` and a broken one that must come back ``failed`` (a wrong
answer, not an error). :func:`gold_check` runs them through a node's executor and reports
whether the node graded all of them right and how long the references took there (the node's
speed, used to scale calibrated timeouts per node).

Edge cases: an executor that raises, or any result other than the expected outcome, fails the
check with a one-line reason naming the problem and what came back.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from core.testenvmanager.sandbox.base import Executor
from core.testenvmanager.sandbox.types import ExecRequest, Outcome

__all__ = ["GOLD", "GoldReport", "gold_requests", "gold_check"]

#: (name, entry point, reference program, broken program, test)
GOLD: tuple[tuple[str, str, str, str, str], ...] = (
    ("running_max", "running_max",
     "def running_max(xs):\n    out, best = [], None\n    for x in xs:\n"
     "        best = x if best is None or x > best else best\n        out.append(best)\n"
     "    return out\n",
     "def running_max(xs):\n    return sorted(xs)\n",
     "def check(f):\n    assert f([]) == []\n    assert f([3, 1, 4, 1, 5]) == [3, 3, 4, 4, 5]\n"
     "    assert f([-2, -5]) == [-2, -2]\n"),
    ("word_lengths", "word_lengths",
     "def word_lengths(text):\n    return {w: len(w) for w in text.split()}\n",
     "def word_lengths(text):\n    return {w: len(w) + 1 for w in text.split()}\n",
     "def check(f):\n    assert f('') == {}\n    assert f('edge node ok') == "
     "{'edge': 4, 'node': 4, 'ok': 2}\n"),
    ("digit_sum", "digit_sum",
     "def digit_sum(n):\n    return sum(int(c) for c in str(abs(n)))\n",
     "def digit_sum(n):\n    return sum(int(c) for c in str(abs(n))) % 10\n",
     "def check(f):\n    assert f(0) == 0\n    assert f(-907) == 16\n"
     "    assert f(99999) == 45\n"),
)


#: the speed probe: a fixed amount of pure-Python work (tens of ms), timed on the node
SPEED_PROGRAM = ("def spin(n):\n    acc = 0\n    for i in range(n):\n"
                 "        acc = (acc * 31 + i) % 1000003\n    return acc\n")
SPEED_TEST = "def check(f):\n    assert f(400000) == f(400000)\n"
SPEED_REPEATS = 3


@dataclass(frozen=True)
class GoldReport:
    """Result of one node's gold check. ``seconds`` is the median harness time of the speed
    probe on the node (its speed figure); ``detail`` says what went wrong when ``ok`` is
    False."""

    ok: bool
    seconds: float
    isolation: str
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "seconds": self.seconds, "isolation": self.isolation,
                "detail": self.detail}


def gold_requests(timeout: float = 10.0) -> list[tuple[ExecRequest, Outcome]]:
    """Every gold request with the outcome it must get."""
    out: list[tuple[ExecRequest, Outcome]] = []
    for rep in range(SPEED_REPEATS):
        out.append((ExecRequest(id=f"gold:speed:{rep}", program=SPEED_PROGRAM, test=SPEED_TEST,
                                entry_point="spin", timeout=timeout), Outcome.PASSED))
    for name, entry, good, bad, test in GOLD:
        out.append((ExecRequest(id=f"gold:{name}:reference", program=good, test=test,
                                entry_point=entry, timeout=timeout), Outcome.PASSED))
        out.append((ExecRequest(id=f"gold:{name}:broken", program=bad, test=test,
                                entry_point=entry, timeout=timeout), Outcome.FAILED))
    return out


def gold_check(executor: Executor, timeout: float = 10.0) -> GoldReport:
    """Run :data:`GOLD` through ``executor``; ``ok`` iff every outcome is the expected one."""
    cases = gold_requests(timeout)
    expected = {req.id: want for req, want in cases}
    start = time.perf_counter()
    try:
        results = list(executor.run([req for req, _ in cases]))
    except Exception as exc:  # noqa: BLE001 - any failure of the node's sandbox fails the check
        return GoldReport(False, time.perf_counter() - start, "", f"{type(exc).__name__}: {exc}")
    speed: list[float] = []
    wrong: list[str] = []
    for res in results:
        want = expected.pop(res.id, None)
        if want is None:
            wrong.append(f"{res.id}: unexpected result")
        elif res.outcome is not want:
            wrong.append(f"{res.id}: expected {want.value}, got {res.outcome.value} "
                         f"({res.detail[:120]})")
        elif res.id.startswith("gold:speed:"):
            speed.append(res.exec_time_s if res.exec_time_s is not None else res.duration_s)
    wrong += [f"{rid}: no result" for rid in expected]
    seconds = sorted(speed)[len(speed) // 2] if speed else 0.0
    return GoldReport(not wrong, seconds, str(executor.isolation), "; ".join(wrong))
