"""Resume at 10k records (issue 15, point 4): ``ianvs`` killed (SIGKILL) during generation and
again during execution, then rerun: nothing is lost, nothing is stored twice, the score is the
one an uninterrupted run gives.

The 10,000 records repeat HumanEval under new task ids; the replay recording gives each one a
distinct completion (the canonical solution plus a numbered comment), so every sample really
runs in the sandbox (no cache shortcut) and the execution phase is long enough to be killed in.
"""
from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest

from tests.runner.conftest import kill_when, start_cli
from tests.smart_coding.conftest import FULL, read_jsonl

SIZE = 10_000


def _start(job: Path, cwd: Path) -> subprocess.Popen[str]:
    return start_cli("-f", str(job), "--no-progress", cwd=cwd, stderr=subprocess.PIPE)


@pytest.mark.slow
def test_killed_twice_at_10k_loses_and_repeats_nothing(codegen_job, tmp_path: Path) -> None:
    base = read_jsonl(FULL)
    data, samples = tmp_path / "data10k.jsonl", tmp_path / "samples10k.jsonl"
    with data.open("w") as d, samples.open("w") as s:
        for n in range(SIZE):
            rec = base[n % len(base)]
            task_id = f"{rec['task_id']}#{n // len(base)}"
            d.write(json.dumps(dict(rec, task_id=task_id)) + "\n")
            s.write(json.dumps({"task_id": task_id,
                                "completion": rec["canonical_solution"] + f"\n# copy {n}\n"})
                    + "\n")
    job = codegen_job('        - generator:\n            values: ["replay"]\n'
                      f'        - samples_path:\n            values: ["{samples}"]\n',
                      test_index=data)
    workspace = tmp_path / "workspace"

    kill_when(_start(job, tmp_path), workspace, "predictions.jsonl", 3000)  # generating
    kill_when(_start(job, tmp_path), workspace, "executions.jsonl", 2000)   # executing
    final = _start(job, tmp_path)
    _out, err = final.communicate(timeout=900)
    assert final.returncode == 0, err[-3000:]

    row = next(csv.DictReader((workspace / "smart_coding_codegen/rank/all_rank.csv").open()))
    assert float(row["pass@1"]) == 1.0 and int(row["passed"]) == SIZE
    assert int(row["infra_error"]) == 0 and int(row["generation_error"]) == 0

    predictions = [json.loads(line) for line in
                   next(workspace.rglob("predictions.jsonl")).read_text().splitlines()]
    indices = [p["index"] for p in predictions]
    assert sorted(indices) == list(range(SIZE))  # every sample once: none lost, none twice

    executions = []
    for line in next(workspace.rglob("executions.jsonl")).read_text().splitlines():
        try:
            executions.append(json.loads(line)["key"])
        except ValueError:
            pass  # a line torn by the kill is never read back
    assert len(executions) == len(set(executions)) == SIZE  # each distinct sample ran once

    keys = []
    for line in next(workspace.rglob("generations.jsonl")).read_text().splitlines():
        try:
            keys.append(json.loads(line)["key"])
        except ValueError:
            pass
    assert len(keys) == len(set(keys)) == SIZE
