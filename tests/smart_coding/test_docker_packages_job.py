"""The example job whose tasks need numpy (``package_downloads``) on the ``docker`` backend:
gold runs, the ``output_parse`` mark on the leaderboard, and one clear error for records
that name an unknown image, package or a function that is not an allowed hook before anything
runs.

Real ``ianvs`` CLI, real Docker engine and images (skipped with the reason without root).
"""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from tests.runner.conftest import run_cli
from tests.sandbox.docker_env import require_docker
from tests.smart_coding.conftest import read_jsonl, write_jsonl

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "examples" / "smart_coding" / "smart_coding_learning_bench"
EXAMPLE = BENCH / "codegen_packages"


@pytest.fixture
def job(tmp_path: Path) -> Path:
    """A copy of the example beside a copy of the codegen example it borrows files from."""
    require_docker()
    for name in ("codegen", "codegen_packages"):
        shutil.copytree(BENCH / name, tmp_path / name, ignore=shutil.ignore_patterns("workspace"))
    return tmp_path / "codegen_packages"


def _rows(job: Path) -> dict[str, dict[str, str]]:
    path = job / "workspace/smart_coding_codegen_packages/rank/all_rank.csv"
    return {r["basemodel-generator"]: r for r in csv.DictReader(path.open())}


def test_numpy_tasks_gold_on_docker(job: Path) -> None:
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=job, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = _rows(job)
    canonical, broken = rows["canonical"], rows["broken"]
    assert float(canonical["pass@1"]) == 1.0 and int(canonical["passed"]) == 6
    assert float(broken["pass@1"]) == 0.0 and int(broken["passed"]) == 0
    for row in (canonical, broken):
        assert int(row["infra_error"]) == 0 and int(row["generation_error"]) == 0
        assert row["isolation"] == "full"
        # one task is graded by parsing its output: the leaderboard says so
        assert row["grading"] == "boundary+in_process+output_parse"
    board = (job / "workspace/smart_coding_codegen_packages/report/leaderboard.md").read_text()
    assert "output_parse" in board
    executions = [json.loads(line) for folder in (job / "workspace/smart_coding_codegen_packages/codegen").iterdir()
                  for line in (folder / "executions.jsonl").read_text().splitlines()]
    parsed = [e["result"] for e in executions if e["result"]["task_id"] == "NumpyEval/5"]
    assert len(parsed) == 2 and all(r["grading"] == "output_parse" and r["backend"] == "docker"
                                    for r in parsed)


@pytest.mark.parametrize("field, value, message", [
    ("output_parse_fn", "core.scenarios.codegen.records:no_such_fn",
     "output_parse_fn 'core.scenarios.codegen.records:no_such_fn' is not an allowed "
     "hook"),
    ("snippet_merge_fn", "os:system", "snippet_merge_fn 'os:system' is not an allowed hook"),
    ("run_env", "ianvs-no-such-image:0", "image 'ianvs-no-such-image:0' does not exist"),
    ("package_downloads", {"nosuch": "ianvs-no-such-package-0xdead"},
     "cannot fetch package(s) ianvs-no-such-package-0xdead"),
])
def test_a_bad_record_is_one_clear_error_before_anything_runs(job: Path, field: str, value: object,
                                                               message: str) -> None:
    data = job / "data" / "numpy_tasks.jsonl"
    rows = read_jsonl(data)
    rows[3][field] = value
    write_jsonl(data, rows)
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=job, timeout=600)
    assert res.returncode == 1
    errors = [line for line in res.stderr.splitlines() if line.startswith("ianvs: error:")]
    assert len(errors) == 1 and "NumpyEval/3" in errors[0] and message in errors[0], res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    # checked before any test case started: no test case folder, nothing generated or run
    assert not list((job / "workspace").rglob("generations.jsonl"))
    assert not list((job / "workspace").rglob("executions.jsonl"))


def test_records_with_packages_need_the_docker_backend(job: Path) -> None:
    env = job / "testenv" / "testenv.yaml"
    env.write_text(env.read_text().replace('backend: "docker"', 'backend: "local"')
                   .replace('    workers: 2\n', '').replace('min_isolation: "kernel"', 'min_isolation: "none"'))
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=job, timeout=300)
    assert res.returncode == 1
    assert "cannot provide; set 'sandbox: {backend: docker}'" in res.stderr, res.stderr[-2000:]
