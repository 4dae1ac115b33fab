"""Unbiased pass@k: exact agreement, bounds, monotonicity, NaN when n < k."""
from __future__ import annotations

import logging
import math
from fractions import Fraction
from math import comb

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.testcasecontroller.metrics.passk import estimate_pass_at_k, pass_at_k, pass_at_k_from_outcomes


@st.composite
def nck(draw: st.DrawFn) -> tuple[int, int, int]:
    n = draw(st.integers(min_value=1, max_value=200))
    c = draw(st.integers(min_value=0, max_value=n))
    k = draw(st.integers(min_value=1, max_value=n))
    return n, c, k


@given(nck())
@settings(max_examples=400, deadline=None)
def test_agrees_with_exact_binomial_formula(args: tuple[int, int, int]) -> None:
    n, c, k = args
    exact = 1 - Fraction(comb(n - c, k), comb(n, k))
    assert estimate_pass_at_k(n, c, k) == pytest.approx(float(exact), abs=1e-12)


@given(nck())
@settings(max_examples=300, deadline=None)
def test_bounds(args: tuple[int, int, int]) -> None:
    value = estimate_pass_at_k(*args)
    assert 0.0 <= value <= 1.0


@given(nck())
@settings(max_examples=300, deadline=None)
def test_monotone_in_k_and_c(args: tuple[int, int, int]) -> None:
    n, c, k = args
    value = estimate_pass_at_k(n, c, k)
    if k < n:
        assert estimate_pass_at_k(n, c, k + 1) >= value - 1e-12
    if c < n:
        assert estimate_pass_at_k(n, c + 1, k) >= value - 1e-12


def test_edge_values() -> None:
    assert estimate_pass_at_k(5, 0, 1) == 0.0
    assert estimate_pass_at_k(5, 5, 5) == 1.0
    assert estimate_pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert estimate_pass_at_k(4, 1, 4) == 1.0  # n - c < k
    assert math.isnan(estimate_pass_at_k(3, 1, 5))
    assert math.isnan(estimate_pass_at_k(0, 0, 1))


@pytest.mark.parametrize("n,c,k", [(-1, 0, 1), (3, 4, 1), (3, -1, 1), (3, 1, 0)])
def test_invalid_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        estimate_pass_at_k(n, c, k)


def test_aggregate_mean_and_nan_with_warning(caplog: pytest.LogCaptureFixture) -> None:
    counts = {"a": (2, 1), "b": (2, 2), "short": (1, 1)}
    with caplog.at_level(logging.WARNING):
        result = pass_at_k(counts, ks=[1, 2])
    assert result[1] == pytest.approx((0.5 + 1.0 + 1.0) / 3)
    assert math.isnan(result[2])
    assert "pass@2 is NaN" in caplog.text and "short" in caplog.text


def test_aggregate_no_tasks_is_nan(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert math.isnan(pass_at_k({}, ks=[1])[1])
    assert "no tasks" in caplog.text


def test_from_outcomes() -> None:
    result = pass_at_k_from_outcomes({"t1": [True, False, False, False], "t2": [False] * 4}, ks=(1, 4))
    assert result[1] == pytest.approx(0.125)
    assert result[4] == pytest.approx(0.5)
