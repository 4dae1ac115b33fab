"""Two ``ianvs -f`` runs of the HumanEval job on one machine give the scores of one run alone,
even when one run's samples attack every process near them.

Each run grades, on the 21-task subset, a ``replay`` of hostile samples that first try to reach
other processes (``prlimit`` to zero CPU and one open file, lowest priority, CPU affinity,
SIGSTOP and SIGKILL) on every pid around their own -- where the other run's fork server, judges
and samples live -- and then define the canonical solution. Each executor has its own uid block (leases), and the seccomp
filter confines those calls to the caller, so nothing reaches the other run: every score equals
the run alone, and no row has an ``infra_error``. The interpreter's audit hook is off in these
jobs (it would report the attempts as violations): what protects the other run is the kernel.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runner.conftest import REPO
from tests.smart_coding.conftest import EXAMPLE

ATTACK = '''
import os as _os, resource as _r, signal as _s
_me = _os.getpid()
for _pid in range(max(2, _me - 3000), _me + 3000):
    if _pid == _me:
        continue
    for _call in (lambda: _r.prlimit(_pid, _r.RLIMIT_CPU, (0, 0)),
                  lambda: _r.prlimit(_pid, _r.RLIMIT_NOFILE, (1, 1)),
                  lambda: _os.setpriority(_os.PRIO_PROCESS, _pid, 19),
                  lambda: _os.sched_setaffinity(_pid, {0}),
                  lambda: _os.kill(_pid, _s.SIGSTOP),
                  lambda: _os.kill(_pid, _s.SIGKILL)):
        try:
            _call()
        except Exception:
            pass
'''

HYPER = ('        - generator:\n            values: ["replay"]\n'
         '        - samples_path:\n            values: ["{samples}"]\n')


def _job(root: Path) -> Path:
    import shutil

    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("workspace"))
    tasks = [json.loads(line) for line in (root / "data" / "humaneval_subset.jsonl").open() if line.strip()]
    samples = root / "hostile.jsonl"
    with samples.open("w") as fh:
        for task in tasks:
            solution = ATTACK + task["prompt"] + task["canonical_solution"]
            fh.write(json.dumps({"task_id": task["task_id"], "solution": solution}) + "\n")
    alg = root / "testalgorithms" / "gen" / "gen_algorithm.yaml"
    text = alg.read_text()
    alg.write_text(text[: text.index("      hyperparameters:")] + "      hyperparameters:\n"
                   + HYPER.format(samples=samples))
    env = root / "testenv" / "testenv.yaml"
    text = env.read_text()
    assert 'min_isolation: "process"' in text
    env.write_text(text.replace('min_isolation: "process"', 'min_isolation: "full"\n    audit_hook: false'))
    return root / "benchmarkingjob.yaml"


def _start(job: Path, cwd: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "core.cmd.benchmarking", "-f", str(job), "--no-progress"],
                            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _scores(cwd: Path, proc: subprocess.Popen[str]) -> dict[str, dict[str, str]]:
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, err[-3000:]
    rank = next(cwd.glob("**/rank/all_rank.csv"))
    keep = ("pass@1", "passed", "failed", "error", "timeout", "infra_error", "sandbox_violation")
    return {row["basemodel-generator"]: {k: row[k] for k in keep} for row in csv.DictReader(rank.open())}


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_two_concurrent_runs_score_like_one_run_alone(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("per-executor uids need root")
    runs = {name: (tmp_path / name, _job(tmp_path / name / "job")) for name in ("alone", "a", "b")}
    alone_dir, alone_job = runs["alone"]
    alone = _scores(alone_dir, _start(alone_job, alone_dir))
    assert float(alone["replay"]["pass@1"]) == 1.0, alone["replay"]  # the attacks hurt nobody
    procs = {name: _start(runs[name][1], runs[name][0]) for name in ("a", "b")}
    together = {name: _scores(runs[name][0], proc) for name, proc in procs.items()}
    for name, scores in together.items():
        assert scores == alone, (name, scores, alone)
        assert all(row["infra_error"] == "0" for row in scores.values())
