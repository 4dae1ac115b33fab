"""Gold runs on all 164 HumanEval tasks: canonical solutions pass, the broken control fails.

Real generation (from the dataset) and real execution in the local sandbox; these validate
the pipeline and the executing node before any model is trusted.
"""
from __future__ import annotations

import csv
from pathlib import Path

from tests.runner.conftest import run_cli
from tests.smart_coding.conftest import FULL


def test_canonical_scores_1_and_broken_scores_0_on_all_164(codegen_job, tmp_path: Path) -> None:
    job = codegen_job('        - generator:\n            values: ["canonical", "broken"]\n',
                      test_index=FULL)
    res = run_cli("-f", str(job), "--no-progress", cwd=tmp_path, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = {r["basemodel-generator"]: r for r in csv.DictReader(
        (tmp_path / "workspace/smart_coding_codegen/rank/all_rank.csv").open())}
    canonical, broken = rows["canonical"], rows["broken"]
    assert float(canonical["pass@1"]) == 1.0 and int(canonical["passed"]) == 164
    assert float(broken["pass@1"]) == 0.0 and int(broken["passed"]) == 0
    for row in (canonical, broken):
        assert int(row["infra_error"]) == 0 and int(row["generation_error"]) == 0
        assert sum(int(row[c]) for c in ("passed", "failed", "error", "syntax_error",
                                         "timeout", "memory_exceeded",
                                         "sandbox_violation")) == 164


def test_broken_variants_are_caught_for_the_right_reason(codegen_job, tmp_path: Path) -> None:
    job = codegen_job('        - generator:\n            values: ["broken"]\n'
                      '        - variant:\n            values: ["syntax", "none"]\n')
    res = run_cli("-f", str(job), "--no-progress", cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = {r["basemodel-variant"]: r for r in csv.DictReader(
        (tmp_path / "workspace/smart_coding_codegen/rank/all_rank.csv").open())}
    assert int(rows["syntax"]["syntax_error"]) == 21 and float(rows["syntax"]["pass@1"]) == 0
    assert float(rows["none"]["pass@1"]) == 0.0 and int(rows["none"]["passed"]) == 0
