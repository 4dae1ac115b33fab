"""Path-valued hyperparameters resolve like every other YAML path (issue 13, point 8): a
``samples_path`` written relative to the algorithm YAML works when ``ianvs`` runs from another
directory, and the log says which base was used. Real job, real sandbox."""
from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.runner.conftest import run_cli
from tests.smart_coding.conftest import read_jsonl


def test_samples_path_relative_to_the_algorithm_yaml(codegen_job, tmp_path: Path) -> None:
    job = codegen_job('        - generator:\n            values: ["replay"]\n'
                      '        - samples_path:\n            values: ["recorded/samples.jsonl"]\n')
    alg_dir = job.parent / "testalgorithms" / "gen"
    subset = read_jsonl(job.parent / "data" / "humaneval_subset.jsonl")
    (alg_dir / "recorded").mkdir()
    (alg_dir / "recorded" / "samples.jsonl").write_text("".join(
        json.dumps({"task_id": r["task_id"], "completion": r["canonical_solution"]}) + "\n"
        for r in subset))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = run_cli("-f", str(job), "--no-progress", cwd=elsewhere, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "hyperparameter samples_path='recorded/samples.jsonl' resolved against the folder " \
           "of gen_algorithm.yaml" in res.stderr
    row = next(csv.DictReader((elsewhere / "workspace/smart_coding_codegen/rank/all_rank.csv")
                              .open()))
    assert float(row["pass@1"]) == 1.0 and int(row["generation_error"]) == 0
    assert row["basemodel-samples_path"] == "recorded/samples.jsonl"  # as configured


def test_a_path_in_the_working_directory_wins(codegen_job, tmp_path: Path) -> None:
    job = codegen_job('        - generator:\n            values: ["replay"]\n'
                      '        - samples_path:\n            values: ["samples.jsonl"]\n')
    subset = read_jsonl(job.parent / "data" / "humaneval_subset.jsonl")
    here = tmp_path / "here"
    here.mkdir()
    (here / "samples.jsonl").write_text("".join(
        json.dumps({"task_id": r["task_id"], "completion": "    return None\n"}) + "\n"
        for r in subset))
    (job.parent / "testalgorithms" / "gen" / "samples.jsonl").write_text("".join(
        json.dumps({"task_id": r["task_id"], "completion": r["canonical_solution"]}) + "\n"
        for r in subset))
    res = run_cli("-f", str(job), "--no-progress", cwd=here, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "resolved against the working directory" in res.stderr
    row = next(csv.DictReader((here / "workspace/smart_coding_codegen/rank/all_rank.csv").open()))
    assert float(row["pass@1"]) == 0.0  # the working directory's (wrong) recording was used
