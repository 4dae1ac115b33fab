"""The builder on real packages it was not written for, one per shape, with default options (what a new
user types) except a cap on the tasks kept (``max_tasks``): src/ and flat layouts; hatchling (with
hatch-vcs), setuptools (with setuptools-scm), flit and poetry-core backends; tests outside the
package and inside it; test dependencies declared as an extra, a Poetry dev group and nowhere
(unittest-style suite); tests that need a pytest plugin's fixture (pytest-mock's ``mocker``). Each
build must keep tasks, and the kept tasks are then validated as a job runs them: in the sandbox, the
reference body passes all the task's tests and the blanked body fails its FAIL_TO_PASS tests (up to
:data:`VALIDATE` tasks per package; the builder itself already ran every blanked body).

The packages and how their sdists are fetched and checked: :mod:`.real_packages`. Building and
creating the environments need the package index (the first run only for the environments). Per-
package figures of full-size builds (``benchmarks/real_layouts.py``): repo.md, "Tried on real
layouts"."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from core.scenarios.repo.builder import BuildOptions, build
from core.scenarios.repo.env import ensure_env
from core.scenarios.repo.execute import Sample, run_samples
from core.scenarios.repo.kind import load_tasks
from core.scenarios.repo.prompts import reference_code
from core.scenarios.repo.source import materialise
from tests.scenarios.repo.real_packages import PACKAGES, sdist

#: kept tasks per package: the builder stops blanking once this many are kept (``--max-tasks``),
#: so the test's cost does not grow with the package (full-size builds: benchmarks/real_layouts.py)
MAX_TASKS = 6
#: kept tasks run as a job runs them, per package
VALIDATE = 4


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("package", PACKAGES, ids=[p[0] for p in PACKAGES])
def test_real_layout_yields_validated_tasks(package: tuple[str, str, str, str], tmp_path: Path,
                                            views_dir: Path) -> None:
    name, version, sha256, _shape = package
    archive = sdist(name, version, sha256)
    out = tmp_path / "tasks.jsonl"
    started = time.monotonic()
    report = build(BuildOptions(repo=str(archive), output=out, licence="MIT", max_tasks=MAX_TASKS))
    seconds = time.monotonic() - started
    facts = {**report.as_dict(), "build_seconds": round(seconds, 1)}
    print(f"\n{name} {version}: " + json.dumps(facts))  # the figures repo.md records (pytest -s)
    assert report.passed > 0 and 0 < report.kept <= MAX_TASKS and report.kept <= report.covered <= report.functions
    # the cap bounds the work: no function is blanked once the cap is kept (a round's surplus is
    # at most one per job beyond it)
    assert report.blanked - report.dropped_no_failure - report.dropped_sandbox <= MAX_TASKS + 1
    tasks = load_tasks(out)
    assert len(tasks) == report.kept
    assert {t["env"].get("project", {}).get("version") for t in tasks} == {version}

    src = materialise(str(archive), views_dir / "src")
    assert {t["repo"]["content_hash"] for t in tasks} == {src.content_hash}
    env = ensure_env(list(tasks[0]["env"]["requirements"]), project=tasks[0]["env"].get("project"))
    check = tasks[:: max(1, len(tasks) // VALIDATE)][:VALIDATE]
    ref = [Sample(t["task_id"] + "#ref", t, reference_code(t)) for t in check]
    blank = [Sample(t["task_id"] + "#blank", t, None) for t in check]
    results = {r.sample_id: r for r in run_samples(ref + blank, src.root, env, views_dir / "views", timeout=120)}
    bad_ref = [(s.sample_id, results[s.sample_id].outcome, results[s.sample_id].detail[-300:])
               for s in ref if results[s.sample_id].outcome != "passed"]
    assert not bad_ref
    for s in blank:
        r = results[s.sample_id]
        assert r.outcome != "passed", s.sample_id
        assert all(r.tests.get(t) != "passed" for t in s.task["tests"]["fail_to_pass"]), s.sample_id
