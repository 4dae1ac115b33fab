"""The builder on real packages it was not written for, one per shape, with default options (what a new
user types) except a cap on the tasks kept (``max_tasks``): src/ and flat layouts; hatchling (with
hatch-vcs), setuptools (with setuptools-scm), flit and poetry-core backends; tests outside the
package and inside it; test dependencies declared as an extra, a Poetry dev group and nowhere
(unittest-style suite); tests that need a pytest plugin's fixture (pytest-mock's ``mocker``);
environments holding pytest plugins the tests do not use, which the build must disable in every run
(pytest-benchmark, which starts processes as it loads; pytest-enabler, pytest-mypy, pytest-ruff,
pytest-checkdocs: :data:`.real_packages.PLUGIN_PACKAGES`). Each
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

from core.scenarios.repo.builder import BuildError, BuildOptions, build
from core.scenarios.repo.env import record_env
from core.scenarios.repo.execute import Sample, run_samples
from core.scenarios.repo.kind import load_tasks
from core.scenarios.repo.prompts import reference_code
from core.scenarios.repo.source import materialise
from tests.scenarios.repo.real_packages import PACKAGES, PLUGIN_PACKAGES, sdist

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
    # at most one per job beyond it); a function whose body the prompt already shows (a sibling
    # with the same lines: the leak check) is blanked and dropped, like one no test fails on
    assert report.blanked - report.dropped_no_failure - report.dropped_sandbox \
        - report.dropped_leak <= MAX_TASKS + 1
    tasks = load_tasks(out)
    assert len(tasks) == report.kept
    assert {t["env"].get("project", {}).get("version") for t in tasks} == {version}

    _validate(tasks, archive, views_dir)


def _validate(tasks: list[dict], archive: Path, views_dir: Path) -> None:
    """Run up to :data:`VALIDATE` of ``tasks`` as a job does: in the sandbox, the reference passes
    every test of its task and the blanked body fails its FAIL_TO_PASS tests."""
    src = materialise(str(archive), views_dir / "src")
    assert {t["repo"]["content_hash"] for t in tasks} == {src.content_hash}
    env = record_env(tasks[0])
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


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("package", PLUGIN_PACKAGES, ids=[p[0] for p in PLUGIN_PACKAGES])
def test_unused_pytest_plugins_are_disabled_and_tasks_validated(
        package: tuple[str, str, str, str, list[str], list[str]], tmp_path: Path, views_dir: Path) -> None:
    """The environment holds pytest plugins no selected test uses: the build disables them in every
    run (recorded in each task), keeps tasks, and the tasks pass their gold controls in the
    sandbox (without the choice, every sandboxed run of humanize's tests was killed as
    pytest-benchmark loaded, and pytest-enabler made every run of inflect's fail)."""
    name, version, sha256, _shape, requirements, disabled = package
    archive = sdist(name, version, sha256)
    out = tmp_path / "tasks.jsonl"
    report = build(BuildOptions(repo=str(archive), output=out, licence="MIT", max_tasks=MAX_TASKS,
                                requirements=requirements))
    print(f"\n{name} {version} + {requirements}: " + json.dumps(report.as_dict()))
    assert set(disabled) <= set(report.plugins_disabled)
    assert "pytest_cov" not in report.plugins_disabled  # the harness's own tool
    assert report.passed > 0 and 0 < report.kept <= MAX_TASKS
    tasks = load_tasks(out)
    assert all(set(disabled) <= set(t["env"]["pytest_plugins"]["disabled"]) for t in tasks)
    _validate(tasks, archive, views_dir)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_final_error_names_what_the_sandbox_refused(tmp_path: Path) -> None:
    """A plugin kept on purpose (``--pytest-plugin benchmark``) that starts a process as it loads
    kills every sandboxed run: the build keeps nothing, and its error quotes what the sandbox
    refused -- the process and the plugin's code that started it -- not only a generic blame."""
    name, version, sha256, _shape, requirements, _disabled = PLUGIN_PACKAGES[0]
    with pytest.raises(BuildError) as caught:
        build(BuildOptions(repo=str(sdist(name, version, sha256)), output=tmp_path / "tasks.jsonl", licence="MIT",
                           max_tasks=1, requirements=requirements, keep_plugins=["benchmark"],
                           test_paths=["tests/test_filesize.py"]))
    text = str(caught.value)
    assert "reference fails in the sandbox" in text or "whose reference fails in the sandbox" in text, text
    assert "seccomp" in text and "subprocess.Popen" in text and "pytest_benchmark/" in text, text
