"""The main job's path with the real embedded model on a handful of tasks.

Real generation (Qwen2.5-Coder-0.5B GGUF through llama.cpp on the CPU) and real execution.
The run is killed after its first stored prediction, resumed, then re-scored with a changed
metric list: nothing is lost or generated twice, and the re-score never starts the model.
"""
from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.runner.conftest import REPO, run_cli
from tests.smart_coding.conftest import FULL, read_jsonl, write_jsonl

HPS = ('        - generator:\n            values: ["embedded"]\n'
       '        - max_tokens:\n            values: [160]\n')


@pytest.mark.slow
def test_embedded_generation_kill_resume_and_rescore(codegen_job, tmp_path: Path) -> None:
    tasks = write_jsonl(tmp_path / "tasks.jsonl",
                        [r for r in read_jsonl(FULL) if r["task_id"] in
                         ("HumanEval/0", "HumanEval/2", "HumanEval/4", "HumanEval/7")])
    job = codegen_job(HPS, test_index=tasks)
    proc = subprocess.Popen([sys.executable, "-m", "core.cmd.benchmarking", "-f", str(job),
                             "--no-progress"], cwd=tmp_path,
                            env=dict(os.environ, PYTHONPATH=str(REPO)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 300
    preds: list[Path] = []
    while time.time() < deadline and proc.poll() is None:
        preds = list(tmp_path.glob("workspace/smart_coding_codegen/codegen/*/predictions.jsonl"))
        if preds and preds[0].read_text().count("\n") >= 1:
            break
        time.sleep(0.1)
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    case_dir = preds[0].parent
    stored_before = preds[0].read_text().count("\n")
    assert 1 <= stored_before < 4

    res = run_cli("-f", str(job), cwd=tmp_path, timeout=600)  # progress as log lines (no tty)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"resuming: {stored_before} of 4 predictions already stored" in res.stderr
    # the progress line shows the speed of the samples made in this run (the reused are not timed)
    assert re.search(r"generate \(embedded\): (\d)/\1 in \d+(m \d\ds)?s? \(\d+\.\d tokens/s\)", res.stderr), res.stderr[-3000:]
    lines = [json.loads(x) for x in preds[0].read_text().splitlines()]
    assert sorted(e["index"] for e in lines) == [0, 1, 2, 3]
    generations = [json.loads(x) for x in (case_dir / "generations.jsonl").read_text().splitlines()]
    keys = [g["key"] for g in generations]
    assert len(keys) == len(set(keys)) == 4  # each sample generated exactly once
    for entry in lines:
        sample = entry["prediction"]["samples"][0]
        assert sample["raw_output"] and sample["error"] is None
        prompt = next(r["prompt"] for r in read_jsonl(tasks)
                      if r["task_id"] == entry["prediction"]["task_id"])
        assert sample["code"].startswith(prompt)  # raw completion continues the prompt
        assert sample["completion_tokens"] > 0 and sample["latency_s"] > 0
    row = next(csv.DictReader((tmp_path / "workspace/smart_coding_codegen/rank/all_rank.csv").open()))
    assert 0.0 <= float(row["pass@1"]) <= 1.0
    assert float(row["tokens_per_s"]) > 0
    total = sum(int(row[c]) for c in ("passed", "failed", "error", "syntax_error", "timeout",
                                      "memory_exceeded", "sandbox_violation", "infra_error"))
    assert total == 4

    env = job.parent / "testenv" / "testenv.yaml"
    env.write_text(env.read_text().replace("k: [1]", "k: [1, 2]"))
    rescore = run_cli("-f", str(job), "--no-progress", cwd=tmp_path, timeout=300)
    assert rescore.returncode == 0, rescore.stderr[-3000:]
    assert "the model is not called" in rescore.stderr
    assert "embedded model" not in rescore.stderr  # never loaded
    rows = list(csv.DictReader((tmp_path / "workspace/smart_coding_codegen/rank/all_rank.csv").open()))
    assert len(rows) == 1 and rows[0]["pass@1"] == row["pass@1"]
    assert rows[0]["pass@2"] == ""  # n=1 < k=2: NaN, written as an empty cell
