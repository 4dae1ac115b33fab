"""A test case begun by one model setup is not finished by another: resuming after the model
changed (another model file, llama.cpp build, way of sending requests; here another replay
recording) stops with one readable error naming what differs, exit 1, and the stored
predictions untouched. Without the check the row would silently mix two setups."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.common.errors import IanvsError
from core.generation.codegen_model import check_same_identity, record_identity
from tests.runner.conftest import REPO
from tests.smart_coding.conftest import EXAMPLE

HYPER = ('        - generator:\n            values: ["replay"]\n'
         '        - samples_path:\n            values: ["{samples}"]\n')


def _job(root: Path, samples: Path) -> Path:
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("workspace"))
    alg = root / "testalgorithms" / "gen" / "gen_algorithm.yaml"
    text = alg.read_text()
    alg.write_text(text[: text.index("      hyperparameters:")] + "      hyperparameters:\n"
                   + HYPER.format(samples=samples))
    return root / "benchmarkingjob.yaml"


def _write_samples(path: Path, tasks: list[dict], extra: str) -> None:
    with path.open("w") as fh:
        for task in tasks:
            solution = task["prompt"] + task["canonical_solution"] + extra
            fh.write(json.dumps({"task_id": task["task_id"], "solution": solution}) + "\n")


def _run(job: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "core.cmd.benchmarking", "-f", str(job),
                           "--no-progress"], cwd=job.parent, env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.slow
def test_resume_with_another_model_is_refused(tmp_path: Path) -> None:
    tasks = [json.loads(line) for line in (EXAMPLE / "data" / "humaneval_subset.jsonl").open()
             if line.strip()]
    samples = tmp_path / "samples.jsonl"
    _write_samples(samples, tasks, "")
    job = _job(tmp_path / "job", samples)
    first = _run(job)
    assert first.returncode == 0, first.stderr[-3000:]
    stored = next(job.parent.glob("workspace/**/model.json")).parent / "predictions.jsonl"
    lines = stored.read_text().splitlines(keepends=True)
    stored.write_text("".join(lines[:-3]))  # as if killed three tasks before the end
    kept = stored.read_bytes()
    _write_samples(samples, tasks, "\n# another model\n")  # the recording (its identity) changed
    second = _run(job)
    assert second.returncode == 1
    assert "another model setup" in second.stderr and "samples_sha256" in second.stderr
    assert "Traceback" not in second.stderr
    assert stored.read_bytes() == kept  # nothing stored by the other model, nothing lost
    _write_samples(samples, tasks, "")  # back to the setup the case was begun with
    third = _run(job)
    assert third.returncode == 0, third.stderr[-3000:]
    assert len(stored.read_text().splitlines()) == len(lines)


def test_identity_check_rules(tmp_path: Path) -> None:
    a = {"generator": {"generator": "embedded", "backend": "x-1"}, "mode": "chat"}
    b = {"generator": {"generator": "embedded", "backend": "x-2"}, "mode": "chat"}
    record_identity(tmp_path, a)  # no predictions yet: written
    record_identity(tmp_path, b)  # still none: a new setup may take the empty case over
    assert json.loads((tmp_path / "model.json").read_text()) == b
    (tmp_path / "predictions.jsonl").write_text('{"index": 0}\n')
    check_same_identity(tmp_path, b)  # the same setup resumes
    with pytest.raises(IanvsError, match=r"differs in: generator\.backend"):
        record_identity(tmp_path, a)
    assert json.loads((tmp_path / "model.json").read_text()) == b  # not overwritten
