"""``benchmarks/compare_runs.py``: two runs agree when only timing columns differ, and any other
difference in a rank row or a manifest's sandbox facts is found."""
from __future__ import annotations

import json
from pathlib import Path

from tests.benchmark_scripts import benchmark_module

HEADER = "rank,algorithm,pass@1,timeout,latency_s,tokens_per_s,wall_s_per_task,gen-max_tokens,time,url\n"


def _run(root: Path, pass1: str, latency: str, graded_by: dict[str, int]) -> Path:
    rank = root / "ws" / "job" / "rank"
    rank.mkdir(parents=True)
    (rank / "all_rank.csv").write_text(
        HEADER + f"1,alg,{pass1},0,{latency},12.5,{latency},384,2026-11-28 10:00:00,./ws/job/alg/x\n")
    report = root / "ws" / "job" / "report"
    report.mkdir()
    (report / "manifest.json").write_text(json.dumps({"test_cases": [{
        "algorithm": "alg", "modules": {"basemodel": "gen"}, "status": "finished",
        "sandbox": {"backend": "local", "isolation": "full", "grading": "boundary",
                    "reference_times_s": {"count": 21, "max": float(latency)},
                    "timeouts_s": {"min": 3.0, "max": 9.0}, "graded_by": graded_by}}]}))
    return root


def test_timing_differences_are_not_differences(tmp_path: Path) -> None:
    compare = benchmark_module("compare_runs").compare
    before = _run(tmp_path / "a", "0.381", "3.2", {"host": 21})
    after = _run(tmp_path / "b", "0.381", "5.9", {"host": 21})
    assert compare(before, after) == []


def test_a_score_or_a_grader_that_changed_is_found(tmp_path: Path) -> None:
    module = benchmark_module("compare_runs")
    before = _run(tmp_path / "a", "0.381", "3.2", {"host": 21})
    score = _run(tmp_path / "b", "0.429", "3.2", {"host": 21})
    lines = module.compare(before, score)
    assert len(lines) == 1 and "'pass@1': ('0.381', '0.429')" in lines[0]
    graders = _run(tmp_path / "c", "0.381", "3.2", {"host": 20, "edge1": 1})
    assert any(line.startswith("manifest") for line in module.compare(before, graders))
    assert module.main([str(before), str(score)]) == 1
    assert module.main([str(before), str(before)]) == 0
