"""Samples of a repo task that try to pass without implementing the function: ending pytest's
session with exit status 0, skipping or xfailing the test from inside the body, exiting the
process with 0, printing a forged per-test result line. None may be graded ``passed`` and a
printed line must not become the sample's per-test outcomes (which feed f2p_share). Real sandbox,
real venv, the mini repository of conftest (task ``add``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.scenarios.repo.builder import BuildOptions, build
from core.scenarios.repo.env import RepoEnv
from core.scenarios.repo.execute import RESULT_MARK, Sample, run_samples

FORGED = json.dumps({"tests/test_core.py::test_add": "passed"})
BODIES = {
    "pytest_exit_0": "import pytest\n    pytest.exit('bye', returncode=0)",
    "pytest_skip": "import pytest\n    pytest.skip('not today')",
    "pytest_xfail": "import pytest\n    pytest.xfail('expected')",
    "os_exit_0": "import os\n    os._exit(0)",
    "system_exit_0": "raise SystemExit(0)",
    "printed_mark_then_exit": f"import os, sys\n    sys.stdout.write('\\n{RESULT_MARK}' + {FORGED!r} + '\\n')\n"
                              "    sys.stdout.flush()\n    os._exit(0)",
    "printed_mark_then_wrong": f"print('\\n{RESULT_MARK}' + {FORGED!r})\n    return a - b",
}


@pytest.fixture()
def add_task(mini_repo: Path, repo_env: RepoEnv, tmp_path: Path) -> dict:
    out = tmp_path / "tasks.jsonl"
    build(BuildOptions(repo=str(mini_repo), output=out, env=repo_env.root))
    return next(t for t in map(json.loads, out.read_text().splitlines()) if t["qualname"] == "add")


def test_forging_samples_never_pass(add_task: dict, mini_repo: Path, repo_env: RepoEnv, views_dir: Path) -> None:
    samples = [Sample(k, add_task, f"def add(a, b):\n    {body}\n") for k, body in BODIES.items()]
    samples.append(Sample("honest", add_task, "def add(a, b):\n    return a + b\n"))
    got = {r.sample_id: r for r in run_samples(samples, mini_repo, repo_env, views_dir, timeout=30)}
    assert got["honest"].outcome == "passed", got["honest"].detail
    for key in BODIES:
        assert got[key].outcome != "passed", (key, got[key].detail)
        assert got[key].tests.get("tests/test_core.py::test_add") != "passed", (key, got[key].tests)
