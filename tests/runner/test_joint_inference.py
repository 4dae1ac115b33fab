"""The ``jointinference`` paradigm on a job written in upstream Ianvs's shape.

``tests/fixtures/upstream_jointinference`` mirrors upstream's cloud-edge LLM example: module types
``edgemodel``/``cloudmodel``/``hard_example_mining`` from files of their own, routers registered
by the job's own router file under upstream's aliases, metrics reading upstream's
``[is_hard, result, edge_result, cloud_result]`` predictions. Its two "models" are arithmetic
stand-ins (the edge gets every sum above 20 wrong): upstream's models need GPUs or API keys,
and what is tested here is the paradigm's flow, not a model. Runs go through the real CLI.
"""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from tests.runner.conftest import FIXTURES, run_cli

JOB = FIXTURES / "upstream_jointinference"
ROUTERS = "testalgorithms/query-routing/test_queryrouting.yaml"


@pytest.fixture()
def job(tmp_path: Path) -> Path:
    dst = tmp_path / "ji"
    shutil.copytree(JOB, dst, ignore=shutil.ignore_patterns("workspace"))
    return dst


def _truth(job: Path) -> list[tuple[str, str]]:
    rows = [json.loads(line) for line in (job / "data" / "test_data.jsonl").read_text().splitlines()]
    return [(r["question"], r["answer"]) for r in rows]


def _edge_right(job: Path) -> float:
    return sum(int(a) <= 20 for _q, a in _truth(job)) / len(_truth(job))


def _set_router(job: Path, name: str, extra: str = "") -> None:
    path = job / ROUTERS
    text = path.read_text().replace('name: "EdgeOnly"', f'name: "{name}"')
    path.write_text(text + extra)


def _all_rank(job: Path) -> list[dict[str, str]]:
    with open(job / "workspace" / "benchmarkingjob" / "rank" / "all_rank.csv") as fh:
        return list(csv.DictReader(fh))


def _predictions(job: Path) -> list[list]:
    files = list((job / "workspace" / "benchmarkingjob" / "query-routing").glob("*/predictions.jsonl"))
    assert len(files) == 1, files
    rows = [json.loads(line) for line in files[0].read_text().splitlines()]
    return [r["prediction"] for r in sorted(rows, key=lambda r: r["index"])]


@pytest.mark.parametrize("router, accuracy, edge_ratio", [
    ("EdgeOnly", "edge", 100.0),
    ("CloudOnly", 100.0, 0.0),
    ("OracleRouter", 100.0, "edge"),
])
def test_upstream_shaped_job_runs_unchanged(job: Path, router: str, accuracy, edge_ratio) -> None:
    _set_router(job, router)
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=job)
    assert res.returncode == 0, res.stderr
    row, = _all_rank(job)
    share = round(100 * _edge_right(job), 2)
    assert 0 < share < 100  # the fixture has both kinds of item
    assert float(row["Accuracy"]) == (share if accuracy == "edge" else accuracy)
    assert float(row["Edge Ratio"]) == (share if edge_ratio == "edge" else edge_ratio)
    preds = _predictions(job)
    assert len(preds) == len(_truth(job))
    for (question, answer), (is_hard, result, edge, cloud) in zip(_truth(job), preds):
        # mining-then-inference (the default): exactly one model answered each item
        assert (edge is None) == is_hard and (cloud is None) == (not is_hard)
        assert result == (cloud if is_hard else edge)
        if router == "OracleRouter":
            assert is_hard == (int(answer) > 20)


def test_inference_then_mining_keeps_the_edge_answer_of_hard_items(job: Path) -> None:
    _set_router(job, "CloudOnly")
    env = job / "testenv" / "testenv.yaml"
    env.write_text(env.read_text() + '  hard_example_mining_mode: "inference-then-mining"\n')
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=job)
    assert res.returncode == 0, res.stderr
    for is_hard, result, edge, cloud in _predictions(job):
        assert is_hard and edge is not None and cloud is not None and result == cloud
    row, = _all_rank(job)
    assert float(row["Accuracy"]) == 100.0 and float(row["Edge Ratio"]) == 0.0
    # the cloud was asked once per item: 10 prompt tokens each
    assert float(row["Cloud Prompt Tokens"]) == 10 * len(_truth(job))


def test_unknown_mining_mode_is_a_clear_error(job: Path) -> None:
    path = job / ROUTERS
    path.write_text(path.read_text().replace('paradigm_type: "jointinference"',
                                             'paradigm_type: "jointinference"\n'
                                             '  hard_example_mining_mode: "mining-first"'))
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=job)
    assert res.returncode != 0
    assert "hard_example_mining_mode" in res.stderr and "mining-then-inference" in res.stderr
    assert "test_queryrouting.yaml:" in res.stderr and "Traceback" not in res.stderr


def test_a_failed_run_resumes_without_asking_the_models_again(job: Path) -> None:
    """The edge model fails on the 6th item of the first run; the rerun asks it only for the
    items without a stored prediction, and a third run builds no module at all."""
    model = job / "testalgorithms" / "query-routing" / "edge_model.py"
    calls = job / "calls.txt"
    model.write_text(model.read_text().replace(
        "        a, b = (int(v) for v in data.split(\"+\"))\n",
        "        import os\n"
        f"        with open({str(calls)!r}, 'a') as fh:\n"
        "            fh.write(data + '\\n')\n"
        f"        if os.path.exists({str(job / 'fail')!r}) and "
        f"len(open({str(calls)!r}).read().split()) == 6:\n"
        "            raise RuntimeError('edge device lost')\n"
        "        a, b = (int(v) for v in data.split(\"+\"))\n", 1))
    (job / "fail").write_text("")
    first = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=job)
    assert "edge device lost" in first.stderr and "item 5" in first.stderr
    assert len(calls.read_text().split()) == 6
    (job / "fail").unlink()
    second = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=job)
    assert second.returncode == 0, second.stderr
    asked = calls.read_text().split()
    questions = [q for q, _a in _truth(job)]
    assert asked == questions[:6] + questions[5:], "only the unfinished items are asked again"
    row, = _all_rank(job)
    assert float(row["Accuracy"]) == round(100 * _edge_right(job), 2)
    third = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=job)
    assert third.returncode == 0 and calls.read_text().split() == asked


def test_mode_in_the_job_file_is_ignored_with_a_pointer(job: Path) -> None:
    """Upstream's example puts the mode in the job file, where upstream ignores it: so do we,
    but the warning says where it takes effect."""
    path = job / "benchmarkingjob.yaml"
    path.write_text(path.read_text().replace(
        '  workspace: "./workspace"\n',
        '  workspace: "./workspace"\n  hard_example_mining_mode: "inference-then-mining"\n'))
    res = run_cli("validate", "-f", "benchmarkingjob.yaml", cwd=job)
    assert res.returncode == 0, res.stderr
    assert "hard_example_mining_mode" in res.stderr and "testenv or the algorithm YAML" in res.stderr


def test_a_dataset_processor_transforms_the_items_first(job: Path) -> None:
    """As upstream: the processor gets the parsed test set and its items are what the models and
    the router see."""
    (job / "testalgorithms" / "query-routing" / "data_processor.py").write_text(
        "from sedna.common.class_factory import ClassFactory, ClassType\n\n"
        "__all__ = ['Spaced']\n\n\n"
        "@ClassFactory.register(ClassType.GENERAL, alias='Spaced')\n"
        "class Spaced:\n"
        "    '''Rewrites '3+1' as '3 + 1'; the models must then strip the spaces.'''\n\n"
        "    def __call__(self, dataset):\n"
        "        dataset.x = [x.replace('+', ' + ') for x in dataset.x]\n"
        "        return dataset\n")
    alg = job / ROUTERS
    alg.write_text(alg.read_text().replace(
        "  modules:\n",
        '  modules:\n    - type: "dataset_processor"\n      name: "Spaced"\n'
        '      url: "./testalgorithms/query-routing/data_processor.py"\n', 1))
    model = job / "testalgorithms" / "query-routing" / "edge_model.py"
    seen = job / "seen.txt"
    model.write_text(model.read_text().replace(
        "        a, b = (int(v) for v in data.split(\"+\"))\n",
        f"        open({str(seen)!r}, 'a').write(data + '\\n')\n"
        "        a, b = (int(v) for v in data.split(\"+\"))\n", 1))
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=job)
    assert res.returncode == 0, res.stderr
    assert seen.read_text().splitlines() == [q.replace("+", " + ") for q, _a in _truth(job)]


def test_a_killed_run_resumes_without_asking_for_finished_items(job: Path) -> None:
    """kill -9 of ``ianvs`` mid-run: the rerun asks the edge model only for the items whose
    prediction was not stored (at most the one in flight is asked twice)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.runner.conftest import REPO

    model = job / "testalgorithms" / "query-routing" / "edge_model.py"
    calls = job / "calls.txt"
    model.write_text(model.read_text().replace(
        "        a, b = (int(v) for v in data.split(\"+\"))\n",
        "        import time\n"
        f"        open({str(calls)!r}, 'a').write(data + '\\n')\n"
        "        time.sleep(0.4)\n"
        "        a, b = (int(v) for v in data.split(\"+\"))\n", 1))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "core.cmd.benchmarking", "-f",
                             "benchmarkingjob.yaml", "--no-progress"], cwd=job, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not calls.exists() or len(calls.read_text().split()) < 5):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    first = calls.read_text().split()
    assert 5 <= len(first) < len(_truth(job)), "killed mid-run"
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=job)
    assert res.returncode == 0, res.stderr
    asked = calls.read_text().split()[len(first):]
    questions = [q for q, _a in _truth(job)]
    assert asked == questions[len(questions) - len(asked):]  # only the tail, in order
    assert len(asked) <= len(questions) - len(first) + 1
    row, = _all_rank(job)
    assert float(row["Accuracy"]) == round(100 * _edge_right(job), 2)
