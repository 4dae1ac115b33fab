"""Injection in the sandbox: right and wrong samples of one task run in parallel in private
hard-link views; edits never reach the source or another sample; un-injectable code is a
syntax_error; views are removed afterwards. Real sandbox (local backend), real venv."""

from __future__ import annotations

import json
from pathlib import Path

from core.scenarios.repo.builder import BuildOptions, build
from core.scenarios.repo.env import RepoEnv
from core.scenarios.repo.execute import Sample, run_samples
from core.scenarios.repo.source import content_hash
from core.scenarios.repo.view import make_view


def test_view_edits_do_not_touch_the_source(mini_repo: Path, tmp_path: Path) -> None:
    before = content_hash(mini_repo)
    view = make_view(mini_repo, tmp_path / "v", {"minilib/core.py": "X = 1\n"})
    assert (view / "minilib/core.py").read_text() == "X = 1\n"
    assert content_hash(mini_repo) == before
    assert (view / "tests/test_core.py").stat().st_ino == (mini_repo / "tests/test_core.py").stat().st_ino
    assert (view / "minilib/core.py").stat().st_ino != (mini_repo / "minilib/core.py").stat().st_ino


def test_parallel_samples_are_isolated(mini_repo: Path, repo_env: RepoEnv, tmp_path: Path, views_dir: Path) -> None:
    out = tmp_path / "tasks.jsonl"
    build(BuildOptions(repo=str(mini_repo), output=out, env=repo_env.root))
    task = next(t for t in map(json.loads, out.read_text().splitlines()) if t["qualname"] == "add")
    before = content_hash(mini_repo)
    samples = []
    for i in range(3):
        samples.append(Sample(f"good{i}", task, "def add(a, b):\n    return b + a\n"))
        samples.append(Sample(f"bad{i}", task, "def add(a, b):\n    return a - b\n"))
    samples.append(Sample("broken", task, "def add(a, b:\n"))
    samples.append(Sample("hostile", task, "def add(a, b):\n    open('/work/x', 'w')\n    return a + b\n"))
    views = views_dir
    results = {r.sample_id: r for r in run_samples(samples, mini_repo, repo_env, views, workers=2, timeout=30)}
    for i in range(3):
        assert results[f"good{i}"].outcome == "passed", results[f"good{i}"].detail
        assert results[f"good{i}"].tests == {"tests/test_core.py::test_add": "passed"}
        assert results[f"bad{i}"].outcome == "failed"
        assert results[f"bad{i}"].tests == {"tests/test_core.py::test_add": "failed"}
    assert results["broken"].outcome == "syntax_error"
    assert results["hostile"].outcome != "passed" and not Path("/work/x").exists()
    assert content_hash(mini_repo) == before
    assert list(views.iterdir()) == []


def test_views_under_private_tmp_are_refused(mini_repo: Path, repo_env: RepoEnv, tmp_path: Path) -> None:
    import pytest
    from core.common.errors import IanvsError
    with pytest.raises(IanvsError, match="private tmpfs"):
        list(run_samples([], mini_repo, repo_env, tmp_path / "views"))


def test_a_test_whose_teardown_never_reports_has_not_passed(mini_repo: Path, repo_env: RepoEnv, tmp_path: Path,
                                                            views_dir: Path) -> None:
    """A test passes once its call passed and its teardown finished: here the repository's own
    reporting hook breaks pytest (an internal error) right after the call passed, before the
    teardown's report (as Debian's Python 3.11.2 does while pytest renders some tracebacks).
    The sample fails and the test is not recorded as passed."""
    task = {"task_id": "minirepo/minilib/core.py::add", "file": "minilib/core.py", "qualname": "add",
            "tests": {"fail_to_pass": ["tests/test_core.py::test_add"], "pass_to_pass": []}}
    (mini_repo / "tests" / "conftest.py").write_text(
        "def pytest_runtest_logreport(report):\n"
        "    if report.when == 'teardown':\n"
        "        raise RuntimeError('reporting broke')\n")
    (res,) = run_samples([Sample("ref", task, None)], mini_repo, repo_env, views_dir, reference=True, timeout=30)
    assert res.outcome == "failed" and "pytest exit status 3" in res.detail, res.detail
    assert res.tests.get("tests/test_core.py::test_add") != "passed", res.tests
