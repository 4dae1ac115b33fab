"""Repeated tasks, references and samples (issue 15, point 1): a dataset that repeats a
problem under new task ids is graded completely (it used to crash with ``KeyError`` because
calibration keyed its probes by reference content and lost the duplicates' timeouts), identical
references are measured once and identical code runs once. Real executor, real job."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from core.testenvmanager.sandbox import ExecRequest, calibrate_timeouts, get_executor
from tests.runner.conftest import run_cli
from tests.smart_coding.conftest import FULL, read_jsonl, write_jsonl

ADD = "def add(a, b):\n    return a + b\n"
CHECK = "def check(candidate):\n    assert candidate(2, 3) == 5\n"


class CountingExecutor:
    """Passes everything to a real local executor and records every request it is given."""

    def __init__(self) -> None:
        self.inner = get_executor("local", workers=2)
        self.name = self.inner.name
        self.seen: list[ExecRequest] = []

    def run(self, requests):
        batch = list(requests)
        self.seen.extend(batch)
        return self.inner.run(batch)

    def close(self) -> None:
        self.inner.close()


def test_identical_references_are_probed_once_and_reused() -> None:
    ex = CountingExecutor()
    try:
        reqs = [ExecRequest(id=f"t{i}", program="def add(a, b):\n    return 0\n", test=CHECK,
                            entry_point="add") for i in range(3)]
        cal = calibrate_timeouts(ex, reqs, {r.id: ADD for r in reqs}, floor=0.5)
        assert len(ex.seen) == 1  # one probe for three tasks
        assert set(cal.t_ref) == {"t0", "t1", "t2"} and not cal.problems
        assert len({r.timeout for r in cal.requests}) == 1 and len(cal.measured) == 1
        again = calibrate_timeouts(ex, reqs, {r.id: ADD for r in reqs}, floor=0.5,
                                   known=cal.measured)
        assert len(ex.seen) == 1  # nothing measured twice
        assert [r.timeout for r in again.requests] == [r.timeout for r in cal.requests]
    finally:
        ex.close()


def test_a_failing_shared_reference_is_a_problem_for_every_task_using_it() -> None:
    ex = CountingExecutor()
    try:
        reqs = [ExecRequest(id=f"t{i}", program=ADD, test=CHECK, entry_point="add", timeout=7.0)
                for i in range(2)]
        cal = calibrate_timeouts(ex, reqs, {r.id: "def add(a, b):\n    return 1\n"
                                            for r in reqs})
        assert set(cal.problems) == {"t0", "t1"} and not cal.measured
        assert [r.timeout for r in cal.requests] == [7.0, 7.0]
    finally:
        ex.close()


def test_humaneval_repeated_under_new_ids_is_graded_completely(codegen_job,
                                                               tmp_path: Path) -> None:
    base = read_jsonl(FULL)[:4]
    rows = [dict(rec, task_id=f"{rec['task_id']}#{copy}") for copy in range(3) for rec in base]
    data = write_jsonl(tmp_path / "repeated.jsonl", rows)
    job = codegen_job('        - generator:\n            values: ["canonical"]\n',
                      test_index=data)
    res = run_cli("-f", str(job), "--no-progress", cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "KeyError" not in res.stderr
    row = next(csv.DictReader((tmp_path / "workspace/smart_coding_codegen/rank/all_rank.csv")
                              .open()))
    assert float(row["pass@1"]) == 1.0 and int(row["passed"]) == 12
    case = next((tmp_path / "workspace/smart_coding_codegen").glob("*/*/calibration.jsonl"),
                None) or next((tmp_path / "workspace").rglob("calibration.jsonl"))
    assert len(case.read_text().splitlines()) == 4  # four distinct references measured
    executions = [json.loads(line) for line in
                  next((tmp_path / "workspace").rglob("executions.jsonl")).read_text()
                  .splitlines()]
    assert len(executions) == 4  # identical code and test: executed once, cached for all
