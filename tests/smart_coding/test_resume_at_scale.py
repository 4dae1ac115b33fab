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
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.runner.conftest import REPO
from tests.smart_coding.conftest import FULL, read_jsonl

SIZE = 10_000


def _lines(path: Path) -> int:
    try:
        with path.open("rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


def _start(job: Path, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "core.cmd.benchmarking", "-f", str(job),
                             "--no-progress"], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))


def _kill_when(proc: subprocess.Popen, path_glob: str, root: Path, lines: int,
               limit: float = 600) -> None:
    """SIGKILL ``proc`` (and its process group's fork server stays orphaned but harmless: it
    exits when its socket closes) once a file matching ``path_glob`` has ``lines`` lines."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = list(root.rglob(path_glob))
        if found and _lines(found[0]) >= lines:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return
        if proc.poll() is not None:
            pytest.fail(f"the run ended before {path_glob} reached {lines} lines: "
                        f"{proc.stderr.read()[-2000:] if proc.stderr else ''}")
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"{path_glob} never reached {lines} lines")


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

    _kill_when(_start(job, tmp_path), "predictions.jsonl", workspace, 3000)  # generating
    _kill_when(_start(job, tmp_path), "executions.jsonl", workspace, 2000)   # executing
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
