"""The builder on real packages it was not written for, one per shape, with default options only
(what a new user types): src/ and flat layouts; hatchling (with hatch-vcs), setuptools (with
setuptools-scm), flit and poetry-core backends; tests outside the package and inside it; test
dependencies declared as an extra, a Poetry dev group and nowhere (unittest-style suite); tests that
need a pytest plugin's fixture (pytest-mock's ``mocker``). Each build must keep tasks, and the kept
tasks are then validated as a job runs them: in the sandbox, the reference body passes all the
task's tests and the blanked body fails its FAIL_TO_PASS tests (up to :data:`VALIDATE` tasks per
package; the builder itself already ran every blanked body).

Sources are fetched like the shipped sets' (``pip download NAME==VERSION --no-deps --no-binary
:all:``, the PyPI sdist) into ``~/.cache/ianvs-smart-coding/repo-sdists`` once, and checked
against the sha256 recorded here (a changed upload fails the test). Building and creating the
environments need the package index (the first run only for the environments); every package is
MIT-licensed (the licence file is in each sdist). Per-package figures: repo.md, "Tried on real
layouts"."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.scenarios.repo.builder import BuildOptions, build
from core.scenarios.repo.env import default_cache_dir, ensure_env
from core.scenarios.repo.execute import Sample, run_samples
from core.scenarios.repo.kind import load_tasks
from core.scenarios.repo.prompts import reference_code
from core.scenarios.repo.source import materialise

#: (distribution, version, sha256 of the sdist, the shape it stands for)
PACKAGES = [
    ("humanize", "4.12.1", "1338ba97415c96556758a6e2f65977ed406dddf4620d4c6db9bbdfd07f0f1232",
     "src/ layout, hatchling + hatch-vcs, tests outside, extra 'tests' (freezegun)"),
    ("platformdirs", "4.3.6", "357fb2acbc885b0419afd3ce3ed34564c13c9b95c89360cd9563f73aa5e2b907",
     "src/ layout, hatchling + hatch-vcs, extra 'test', tests use pytest-mock's mocker fixture"),
    ("tabulate", "0.9.0", "0095b12bf5966de529c0feb1fa08671671b3368eec77d7ef7ab114be2c068b3c",
     "flat layout, setuptools + setuptools-scm, tests in test/, tox.ini deps"),
    ("more-itertools", "10.5.0", "5482bfef7849c25dc3c6dd53a6173ae4795da2a41a80faea6700d9f5846c5da6",
     "flat layout, flit, unittest-style tests outside, no test dependencies"),
    ("iso8601", "2.1.0", "6b1d3829ee8921c4301998c909f7829fa9ed3cbdac0d3b16af2d743aed1ba8df",
     "flat layout, poetry-core, tests inside the package, Poetry dev group (hypothesis, pytz)"),
]
VALIDATE = 12


def sdist(name: str, version: str, sha256: str) -> Path:
    """The package's PyPI sdist, downloaded once into the cache and checked against ``sha256``."""
    cache = default_cache_dir().parent / "repo-sdists"
    cache.mkdir(parents=True, exist_ok=True)
    found = [p for p in cache.glob("*.tar.gz") if p.name.replace("_", "-").startswith(f"{name}-{version}.")]
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", f"{name}=={version}", "--no-deps",
                        "--no-binary", ":all:", "-q", "-d", str(cache)], check=True, capture_output=True)
        found = [p for p in cache.glob("*.tar.gz") if p.name.replace("_", "-").startswith(f"{name}-{version}.")]
    assert len(found) == 1, found
    assert hashlib.sha256(found[0].read_bytes()).hexdigest() == sha256, f"{found[0]} is not the recorded sdist"
    return found[0]


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("package", PACKAGES, ids=[p[0] for p in PACKAGES])
def test_real_layout_yields_validated_tasks(package: tuple[str, str, str, str], tmp_path: Path,
                                            views_dir: Path) -> None:
    name, version, sha256, _shape = package
    archive = sdist(name, version, sha256)
    out = tmp_path / "tasks.jsonl"
    started = time.monotonic()
    report = build(BuildOptions(repo=str(archive), output=out, licence="MIT"))
    seconds = time.monotonic() - started
    facts = {**report.as_dict(), "build_seconds": round(seconds, 1)}
    print(f"\n{name} {version}: " + json.dumps(facts))  # the figures repo.md records (pytest -s)
    assert report.passed > 0 and report.kept > 0 and report.kept <= report.covered <= report.functions
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
