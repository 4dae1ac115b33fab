"""Routers fitted on the train split (core.scenarios.cloudedge.learned), through the real CLI.

The job is the shipped split job on a slice of its train and test files, with the edge model
swapped for recorded answers whose correctness and confidence are known: the canonical solution
with a high mean log-probability for even tasks, a wrong body with a low one for odd tasks. The
cloud is the ``canonical`` generator. Everything else is real: the paradigm, the fit on the
train split (its answers graded in the sandbox), the examples run in the sandbox, the metrics.
"""
from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from core.scenarios.cloudedge.learned import ROUTER_FILE, fit_logistic, share_threshold
from core.scenarios.cloudedge.split import is_train, split
from tests.runner.conftest import run_cli
from tests.scenarios.conftest import rank_rows_by_algorithm, swap_cloudedge_models

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "examples" / "smart_coding" / "smart_coding_learning_bench"
ROUTING = "testalgorithms/routing"
TRAIN, TEST = 12, 8


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_the_shipped_split_is_the_stated_rule() -> None:
    full = _read(BENCH / "codegen" / "data" / "humaneval.jsonl")
    train, test = split(full)
    assert (len(train), len(test)) == (66, 98)
    assert _read(BENCH / "cloudedge" / "data" / "humaneval_train.jsonl") == train
    assert _read(BENCH / "cloudedge" / "data" / "humaneval_test.jsonl") == test
    assert is_train("HumanEval/1") and is_train("HumanEval/3") and not is_train("HumanEval/5")


def test_fit_logistic_finds_the_signal() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3))
    y = (x[:, 0] + 0.3 * rng.normal(size=200) > 0).astype(float)
    w = fit_logistic(x, y)
    assert w[1] > 1.0 and abs(w[2]) < 0.5 and abs(w[3]) < 0.5
    p = 1 / (1 + np.exp(-(w[0] + x @ w[1:])))
    assert np.mean((p >= 0.5) == (y == 1)) > 0.85
    # all-equal labels: a constant model at the base rate, no crash
    w = fit_logistic(x, np.ones(200))
    assert 1 / (1 + math.exp(-w[0])) > 0.9


def test_share_threshold_never_overshoots_and_keeps_ties_together() -> None:
    scores = [0.9, 0.8, 0.7, 0.1]
    assert sum(s >= share_threshold(scores, 0.5) for s in scores) == 2
    assert sum(s >= share_threshold(scores, 0.0) for s in scores) == 0
    assert sum(s >= share_threshold(scores, 1.0) for s in scores) == 4
    tied = [0.5, 0.5, 0.5, 0.1]
    assert sum(s >= share_threshold(tied, 0.5) for s in tied) == 0


@pytest.fixture()
def job(tmp_path: Path) -> Path:
    bench = tmp_path / "bench"
    shutil.copytree(BENCH / "cloudedge", bench / "cloudedge",
                    ignore=shutil.ignore_patterns("workspace"))
    job = bench / "cloudedge"
    train = _read(job / "data" / "humaneval_train.jsonl")[:TRAIN]
    test = _read(job / "data" / "humaneval_test.jsonl")[:TEST]
    for name, part in (("humaneval_train.jsonl", train), ("humaneval_test.jsonl", test)):
        (job / "data" / name).write_text("".join(json.dumps(r) + "\n" for r in part))
    answers = job / "edge_answers.jsonl"
    with answers.open("w") as fh:
        for rec in train + test:
            right = int(rec["task_id"].rpartition("/")[2]) % 2 == 0
            fh.write(json.dumps({"task_id": rec["task_id"],
                                 "completion": rec["canonical_solution"] if right
                                 else "    return None\n",
                                 "mean_logprob": -0.05 if right else -0.9,
                                 "min_logprob": -0.5 if right else -3.0}) + "\n")
    swap_cloudedge_models(job / ROUTING, answers)
    text = (job / "benchmarkingjob_split.yaml").read_text()
    keep = ("oracle", "calibrated_confidence", "learned")
    lines = text.splitlines(keepends=True)
    out, skip = [], False
    for line in lines:
        if line.strip().startswith("- name:"):
            skip = line.split('"')[1] not in keep
        elif skip and line.strip().startswith("url:"):
            skip = False
            continue
        if not skip:
            out.append(line)
    (job / "benchmarkingjob_split.yaml").write_text("".join(out))
    return job


def _rows(job: Path) -> dict[str, list[dict[str, str]]]:
    return rank_rows_by_algorithm(job / "workspace" / "cloudedge_split" / "rank" / "all_rank.csv")


def test_fitted_routers_fit_on_train_and_are_scored_on_test(job: Path) -> None:
    res = run_cli("-f", "benchmarkingjob_split.yaml", "--no-progress", cwd=job, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = _rows(job)
    test = _read(job / "data" / "humaneval_test.jsonl")
    wrong_test = sum(int(r["task_id"].rpartition("/")[2]) % 2 for r in test) / len(test)
    train = _read(job / "data" / "humaneval_train.jsonl")
    wrong_train = sum(int(r["task_id"].rpartition("/")[2]) % 2 for r in train) / len(train)
    # the train split's tasks are all odd or all even at some residues: both kinds are there
    assert 0 < wrong_train < 1 and 0 < wrong_test < 1
    for row in rows["calibrated_confidence"]:
        target = float(row["hard_example_mining-cloud_share"])
        reached_train = float(row["train_cloud_share"])
        assert reached_train <= target + 1e-9
        # confidence separates the answers exactly: the lowest go up, never a right one
        if target >= wrong_train:
            assert reached_train == pytest.approx(wrong_train, abs=1e-4)
            assert float(row["pass@1"]) == 1.0
            assert float(row["cloud_share"]) == pytest.approx(wrong_test, abs=1e-4)
        assert float(row["regret"]) == pytest.approx(1.0 - float(row["pass@1"]), abs=1e-4)
    for row in rows["learned"]:
        target = float(row["hard_example_mining-cloud_share"])
        assert float(row["train_cloud_share"]) <= target + 1e-9
        if target >= wrong_train:
            assert float(row["pass@1"]) == 1.0
            assert float(row["cloud_share"]) == pytest.approx(wrong_test, abs=1e-4)
    # the oracle is no fitted router: no train share
    assert math.isnan(float(rows["oracle"][0]["train_cloud_share"] or "nan"))
    # what was fitted is written down, on the train split only
    fitted = sorted((job / "workspace" / "cloudedge_split" / "learned").glob(f"*/{ROUTER_FILE}"))
    assert len(fitted) == 3
    record = json.loads(fitted[0].read_text())
    assert record["train_tasks"] == TRAIN and record["features"][0] == "mean_logprob"
    assert record["train_edge_fail_rate"] == pytest.approx(wrong_train, abs=1e-4)


def test_a_fitted_router_refuses_a_job_without_a_clean_train_split(job: Path) -> None:
    env = job / "testenv" / "testenv_split.yaml"
    original = env.read_text()
    env.write_text(original.replace('    train_index: "../data/humaneval_train.jsonl"\n', ""))
    res = run_cli("-f", "benchmarkingjob_split.yaml", "--no-progress", cwd=job, timeout=600)
    assert "fits on the train split, and this job has none" in res.stderr
    # the train split shares a task with the test split: refused, never fitted on test tasks
    env.write_text(original.replace("humaneval_train.jsonl", "humaneval_test.jsonl", 1))
    res = run_cli("-f", "benchmarkingjob_split.yaml", "--no-progress", "--fresh", cwd=job,
                  timeout=600)
    assert "shares 8 task(s) with the test split" in res.stderr


@pytest.mark.parametrize("job_file", ["benchmarkingjob.yaml", "benchmarkingjob_split.yaml"])
def test_shipped_cloudedge_jobs_run_from_the_repository_root(tmp_path: Path, job_file: str
                                                             ) -> None:
    """Both shipped jobs, run from the root of a copy of the repository exactly as the docs
    write the command, with the two models swapped for recorded answers and the canonical
    generator, on a few tasks of each split: every path the job names resolves."""
    bench = tmp_path / "examples" / "smart_coding" / "smart_coding_learning_bench"
    shutil.copytree(BENCH / "cloudedge", bench / "cloudedge",
                    ignore=shutil.ignore_patterns("workspace"))
    shutil.copytree(BENCH / "codegen" / "data", bench / "codegen" / "data")
    cut = {bench / "codegen" / "data" / "humaneval_subset.jsonl": 3,
           bench / "cloudedge" / "data" / "humaneval_train.jsonl": 6,
           bench / "cloudedge" / "data" / "humaneval_test.jsonl": 3}
    for path, keep in cut.items():
        path.write_text("".join(json.dumps(r) + "\n" for r in _read(path)[:keep]))
    answers = tmp_path / "edge_answers.jsonl"
    answers.write_text("".join(
        json.dumps({"task_id": r["task_id"], "completion": r["canonical_solution"],
                    "mean_logprob": -0.1, "min_logprob": -1.0}) + "\n"
        for path in cut for r in _read(path)))
    swap_cloudedge_models(bench / "cloudedge" / ROUTING, answers)
    job = f"examples/smart_coding/smart_coding_learning_bench/cloudedge/{job_file}"
    res = run_cli("-f", job, "--no-progress", cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    ranks = list(tmp_path.rglob("all_rank.csv"))
    assert len(ranks) == 1
    rows = list(csv.DictReader(ranks[0].open()))
    assert rows and all(float(r["pass@1"]) == 1.0 for r in rows)  # every answer is right
