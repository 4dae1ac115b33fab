"""``benchmarks/walls_check.py``, the one-command check of a machine's walls: it runs on this
machine with every check as expected, its verdict never takes ``passed`` for a stopped attack,
its survivor check sees a process left behind, and it reports a missing memory wall as FAIL."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from core.testenvmanager.sandbox.types import Outcome

from .conftest import walls_check

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "walls_check.py"


WC = walls_check()


@pytest.mark.skipif(os.geteuid() != 0, reason="the memory walls need root (per-slot memory groups)")
def test_every_wall_holds_on_this_machine() -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT)], cwd=ROOT, capture_output=True, text=True,
                          timeout=240)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr[-3000:]
    for check in WC.CHECKS:
        for tier in WC.TIERS:
            assert re.search(rf"^{check.name} +{tier} +\S+ +\S+ +OK ", out, re.M), (check.name, tier, out)
    assert re.search(r"^doctor \(ianvs sandbox doctor, exit status 0\):\n +isolation: \w+$", out, re.M), out
    lines = out.splitlines()
    assert lines[-2].startswith("provenance: date="), out
    rows = len(WC.CHECKS) * len(WC.TIERS)
    assert lines[-1].startswith(f"walls_check: {rows}/{rows} as expected isolation="), lines[-1]
    assert lines[-1].endswith(" doctor=ok all_ok=true"), lines[-1]


def _check(kind: str, expected: set[Outcome]) -> object:
    return WC.Check("c", kind, "def _hold():\n    return 1\n", 1, "", frozenset(expected))


def test_passed_is_always_a_fail_for_an_attack_that_reports_what_it_got() -> None:
    hold = _check(WC.HOLD, {Outcome.PASSED, Outcome.MEMORY_EXCEEDED})
    assert not WC.verdict(hold, Outcome.PASSED, [])
    assert WC.verdict(hold, Outcome.MEMORY_EXCEEDED, [])
    assert not WC.verdict(hold, Outcome.ERROR, [])  # stopped, but not by the expected wall
    assert not WC.verdict(hold, Outcome.MEMORY_EXCEEDED, [1234])  # something survived
    control = _check(WC.CONTROL, {Outcome.PASSED})
    assert WC.verdict(control, Outcome.PASSED, [])
    assert not WC.verdict(control, Outcome.INFRA_ERROR, [])
    escape = _check(WC.ESCAPE, {Outcome.PASSED})
    assert WC.verdict(escape, Outcome.PASSED, [])
    assert not WC.verdict(escape, Outcome.PASSED, [1234])


def test_the_survivor_check_sees_a_session_and_an_escapee_left_behind() -> None:
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        session = WC.marks(f"ids {proc.pid} {proc.pid} {proc.pid}\n", range(0))
        assert WC.survivors(session, escapee=False) == [proc.pid]
        reported = WC.marks(f"held {proc.pid}\n", range(0))
        assert WC.survivors(reported, escapee=True) == [proc.pid]
        assert WC.survivors(reported, escapee=False) == []  # a held figure is no pid elsewhere
    finally:
        proc.kill()
        proc.wait()
    assert WC.survivors(session, escapee=False) == []


def test_a_missing_memory_wall_is_reported_as_fail() -> None:
    """Without the executor's cgroups (the reported cgroup v2 host: no per-slot memory group),
    the memfd attack holds its 1.5 GB and is graded ``passed``: the check says FAIL."""
    executor = WC.LocalExecutor(workers=1, cgroups=False, audit_hook=False)
    try:
        memfd = next(check for check in WC.CHECKS if check.name == "memfd")
        row = WC.run_check(executor, memfd, "in_process")
    finally:
        executor.close()
    assert row.outcome is Outcome.PASSED, row.line()
    assert not row.ok and " FAIL " in row.line() and "held 1500 MB" in row.detail, row.line()
