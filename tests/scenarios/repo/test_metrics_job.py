"""Repo metrics (pass@k, F2P/P2P shares, outcome counts, infra never scored) and the job YAML's
strict checking; the job's prompt is bounded and ends with the task's header."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from core.common.errors import IanvsError
from core.scenarios.repo.execute import SampleResult
from core.scenarios.repo.job import _check, header_of, prompt_of
from core.scenarios.repo.metrics import summarise

TASKS = {
    "a": {"tests": {"fail_to_pass": ["t1", "t2"], "pass_to_pass": ["p1"]}},
    "b": {"tests": {"fail_to_pass": ["t3"], "pass_to_pass": []}},
}


def _r(sid: str, task: str, outcome: str, tests: dict[str, str]) -> SampleResult:
    return SampleResult(sid, task, outcome, tests, "", 0.1)


def test_summary_counts_and_shares() -> None:
    rows = [
        _r("a#0", "a", "passed", {"t1": "passed", "t2": "passed", "p1": "passed"}),
        _r("a#1", "a", "failed", {"t1": "passed", "t2": "failed", "p1": "passed"}),
        _r("b#0", "b", "error", {}),
        _r("b#1", "b", "infra_error", {}),
        _r("b#2", "b", "failed", {"t3": "failed"}),
    ]
    row = summarise(rows, TASKS, ks=(1, 2))
    assert row["pass@1"] == pytest.approx((0.5 + 0.0) / 2)
    assert row["pass@2"] == pytest.approx((1.0 + 0.0) / 2)
    assert row["f2p_share"] == pytest.approx(3 / 6)  # a#0: 2, a#1: 1, b#0: 0, b#2: 0 of 2+2+1+1
    assert row["p2p_share"] == pytest.approx(1.0)
    assert (row["passed"], row["failed"], row["error"], row["infra_error"], row["samples"]) == (1, 2, 1, 1, 5)


def test_summary_without_samples_is_nan() -> None:
    row = summarise([], TASKS)
    assert math.isnan(row["pass@1"]) and math.isnan(row["f2p_share"])


def test_job_yaml_is_checked_strictly(tmp_path: Path) -> None:
    with pytest.raises(IanvsError, match="repo_job.limitt: unknown key"):
        _check({"repo_job": {"datasets": [], "limitt": 3}}, tmp_path / "job.yaml")
    with pytest.raises(IanvsError, match=r"datasets\[0\]: missing \['source'\]"):
        _check({"repo_job": {"datasets": [{"name": "x", "tasks": "t"}]}}, tmp_path / "job.yaml")
    one = {"name": "x", "tasks": "t", "source": "s"}
    with pytest.raises(IanvsError, match=r"datasets\[0\]\.services: \['mysql'\].*known services: postgres"):
        _check({"repo_job": {"datasets": [{**one, "services": ["mysql"]}]}}, tmp_path / "job.yaml")
    assert _check({"repo_job": {"datasets": [{**one, "services": ["postgres"]}]}}, tmp_path / "job.yaml")


def test_prompt_is_bounded_and_ends_with_header() -> None:
    task = {"context": "import os\n" + "x = 1\n" * 1000, "file": "m.py", "class_name": None,
            "signature": "def f(a):", "docstring": "Add one."}
    prompt = prompt_of(task, context_chars=200)
    assert len(prompt) < 320 and prompt.endswith(header_of(task))
    assert header_of(task) == 'def f(a):\n    """Add one.\n    """\n'
