"""Timeout calibration: pure formula and measurement on the executing node."""

from __future__ import annotations

import pytest

from core.testenvmanager.sandbox import ExecRequest, calibrate_timeouts, calibrated_timeout

from .conftest import CHECK_ADD, GOOD_PROGRAM, run_one


@pytest.mark.parametrize("t_ref, factor, floor, ceiling, expected", [
    (0.01, 5.0, 1.0, None, 1.0),
    (2.0, 5.0, 1.0, None, 10.0),
    (2.0, 5.0, 1.0, 6.0, 6.0),
    (0.0, 3.0, 0.5, 0.1, 0.5),  # ceiling never goes below the floor
])
def test_calibrated_timeout_formula(t_ref, factor, floor, ceiling, expected) -> None:
    assert calibrated_timeout(t_ref, factor, floor, ceiling) == pytest.approx(expected)


def test_calibrated_timeout_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        calibrated_timeout(-1.0)
    with pytest.raises(ValueError):
        calibrated_timeout(1.0, factor=0)


def test_calibrate_timeouts_measures_reference_and_records_limit(executor) -> None:
    slow_ref = "import time\ndef add(a, b):\n    time.sleep(0.1)\n    return a + b\n"
    reqs = [
        ExecRequest(id="slow", program="def add(a, b):\n    return 0\n", test=CHECK_ADD, entry_point="add"),
        ExecRequest(id="fast", program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add"),
        ExecRequest(id="broken", program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add", timeout=7.0),
        ExecRequest(id="noref", program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add", timeout=9.0),
    ]
    refs = {"slow": slow_ref, "fast": GOOD_PROGRAM, "broken": "def add(a, b):\n    return 1\n"}
    cal = calibrate_timeouts(executor, reqs, refs, factor=10.0, floor=0.5, repeats=2)
    by_id = {r.id: r for r in cal.requests}
    assert cal.t_ref["slow"] >= 0.2  # two sleeps of 0.1 s in check
    assert by_id["slow"].timeout == pytest.approx(max(0.5, 10.0 * cal.t_ref["slow"]))
    assert by_id["fast"].timeout == 0.5
    assert "broken" in cal.problems and by_id["broken"].timeout == 7.0
    assert by_id["noref"].timeout == 9.0
    res = run_one(executor, **{**by_id["fast"].__dict__, "metadata": {}})
    assert res.timeout_s == 0.5 and res.passed
