"""Unit tests of the value types (no processes)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.testenvmanager.sandbox import (ExecMode, ExecRequest, ExecResult, GradingTier,
                                         IsolationLevel, Outcome)


def test_outcome_taxonomy_is_fixed() -> None:
    assert [o.value for o in Outcome] == [
        "passed", "failed", "error", "syntax_error", "timeout", "memory_exceeded",
        "sandbox_violation", "infra_error"]
    assert not Outcome.INFRA_ERROR.counts_against_model
    assert all(o.counts_against_model for o in Outcome if o is not Outcome.INFRA_ERROR)


def test_isolation_levels_are_ordered_and_parse() -> None:
    assert (IsolationLevel.NONE < IsolationLevel.PROCESS < IsolationLevel.NETNS
            < IsolationLevel.KERNEL < IsolationLevel.FULL)
    assert IsolationLevel.parse("NetNS") is IsolationLevel.NETNS
    assert IsolationLevel.parse("kernel") is IsolationLevel.KERNEL
    assert IsolationLevel.parse(4) is IsolationLevel.FULL
    assert IsolationLevel.parse(IsolationLevel.PROCESS) is IsolationLevel.PROCESS
    assert str(IsolationLevel.FULL) == "full"
    with pytest.raises(ValueError, match="expected one of none, process, netns, kernel, full"):
        IsolationLevel.parse("docker")


@pytest.mark.parametrize("kwargs, message", [
    ({"id": ""}, "id"),
    ({"timeout": 0}, "timeout"),
    ({"timeout": float("inf")}, "timeout"),
    ({"memory_mb": 1}, "memory_mb"),
    ({"entry_point": ""}, "entry_point"),
    ({"files": {"../x.py": ""}}, "relative"),
    ({"files": {"/etc/x": ""}}, "relative"),
    ({"program": "", "test": ""}, "program"),
    ({"mode": "bogus"}, "bogus"),
])
def test_request_validation(kwargs: dict, message: str) -> None:
    base = {"id": "a", "program": "x = 1", "test": "", "entry_point": "f"}
    base.update(kwargs)
    with pytest.raises(ValueError, match=message):
        ExecRequest(**base)


def test_request_payloads_split_program_from_test() -> None:
    """The boundary tier hands the program only to the candidate and the test only to the judge;
    the metadata a scheduler keeps holds no code."""
    req = ExecRequest(id="a", program="def f(): pass", test="def check(c): pass", entry_point="f",
                      helpers="H = 1", files={"d.txt": "x"}, metadata={"k": 1})
    assert req.tier is GradingTier.BOUNDARY
    meta, parts = req.payloads()
    assert set(parts) == {"cand", "judge"} and meta["grading"] == "boundary"
    assert "check" not in str(parts["cand"]) and "H = 1" not in str(parts["cand"])
    assert "def f" not in str(parts["judge"]) and parts["judge"]["helpers"] == "H = 1"
    assert parts["cand"]["files"] == {"d.txt": "x"}
    assert "def" not in str(meta) and "metadata" not in str(parts)


def test_request_grading_tiers_and_mode_coercion() -> None:
    req = ExecRequest(id="a", mode="unittest", files={"pkg/test_a.py": "x"}, metadata={"k": 1})
    assert req.mode is ExecMode.UNITTEST and req.tier is GradingTier.IN_PROCESS
    meta, parts = req.payloads()
    assert set(parts) == {"single"} and parts["single"]["files"] == {"pkg/test_a.py": "x"}
    assert ExecRequest(id="b", program="x", entry_point="f", grading="in_process").tier is GradingTier.IN_PROCESS
    with pytest.raises(ValueError, match="boundary grading needs function mode"):
        ExecRequest(id="c", program="x", mode="script", grading="boundary")
    with pytest.raises(ValueError):
        ExecRequest(id="d", program="x", entry_point="f", grading="outside")


def test_result_to_dict_uses_plain_strings() -> None:
    res = ExecResult(id="a", outcome=Outcome.TIMEOUT, exit_status=-9, duration_s=1.0,
                     isolation=IsolationLevel.NETNS, timeout_s=1.0)
    data = res.to_dict()
    assert data["outcome"] == "timeout" and data["isolation"] == "netns"
    assert not res.passed


@given(st.text(min_size=1, max_size=30), st.floats(min_value=1e-3, max_value=1e4))
def test_request_accepts_any_id_and_positive_timeout(rid: str, timeout: float) -> None:
    req = ExecRequest(id=rid, program="pass", entry_point="f", timeout=timeout)
    assert req.id == rid and req.payloads()[0]["timeout"] == timeout


def test_outcome_values_round_trip() -> None:
    for outcome in Outcome:
        assert Outcome(outcome.value) is outcome
