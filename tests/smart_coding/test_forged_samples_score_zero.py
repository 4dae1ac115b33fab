"""Hostile completions that implement nothing score 0 through ``ianvs -f`` (``pytest -k hostile``).

The issue that introduced boundary grading found a completion implementing nothing that scored
pass@1 = 1.0 on HumanEval through ``ianvs -f``. Here every task of the example's subset gets
completions that only attack the harness (leave early with status 0, write forged verdicts and
protocol frames on every descriptor, return an object equal to everything, patch the functions a
harness calls on its way out, predefine ``check``), replayed through a real job. The leaderboard
must show pass@1 = 0 and say the scores were graded across the boundary.
"""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.runner.conftest import run_cli
from tests.smart_coding.conftest import EXAMPLE, read_jsonl, write_jsonl

ATTACKS = [
    "    return None\nimport os\nos._exit(0)\n",
    ("    return None\nimport os, struct\nmsg = b'[\"t\",[\"ok\",1,{},[]]]'\n"
     "for fd in range(3, 64):\n    for data in (struct.pack('>I', len(msg)) + msg,\n"
     "                 b'0' * 32 + b' passed 0.0\\n'):\n        try:\n            os.write(fd, data)\n"
     "        except OSError:\n            pass\n"),
    ("    return None\nclass _Eq:\n    def __eq__(self, other):\n        return True\n"
     "    __hash__ = object.__hash__\ndef {entry}(*args, **kwargs):\n    return _Eq()\n"),
    ("    return None\nimport os, time, json\nos.pwrite = lambda fd, data, off: len(data)\n"
     "os.write = lambda fd, data: len(data)\ntime.perf_counter = lambda: 0.0\n"
     "json.dumps = lambda *a, **k: '[]'\ndef check(candidate):\n    return True\n"),
]


@pytest.mark.slow
def test_hostile_completions_implementing_nothing_score_zero(codegen_job, tmp_path: Path) -> None:
    problems = read_jsonl(EXAMPLE / "data" / "humaneval_subset.jsonl")
    samples = [{"task_id": p["task_id"], "completion": attack.replace("{entry}", p["entry_point"])}
               for p in problems for attack in ATTACKS]
    sample_file = write_jsonl(tmp_path / "samples.jsonl", samples)
    job = codegen_job('        - generator:\n            values: ["replay"]\n'
                      f'        - samples_path:\n            values: ["{sample_file}"]\n'
                      '        - n:\n            values: [4]\n')
    env = job.parent / "testenv" / "testenv.yaml"
    env.write_text(env.read_text().replace('timeout: "auto"', "timeout: 1"))
    res = run_cli("-f", str(job), "--no-progress", cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    row = next(csv.DictReader((tmp_path / "workspace/smart_coding_codegen/rank/all_rank.csv").open()))
    assert float(row["pass@1"]) == 0.0, row
    assert int(row["passed"]) == 0 and int(row["infra_error"]) == 0, row
    # every sample is failed, error, a violation or a timeout (a sample that patches the functions
    # its own side of the channel uses can only silence itself: the judge waits for the deadline)
    assert sum(int(row[k]) for k in ("failed", "error", "sandbox_violation", "timeout")) == len(samples), row
    assert row["grading"] == "boundary" and row["isolation"], row
