"""The builder on a tiny real repository: baseline failures excluded, coverage-driven tests,
blank-must-fail, one-line and uncovered functions skipped, records complete; CLI errors readable."""

from __future__ import annotations

import json
from pathlib import Path

from core.cmd.benchmarking import main as ianvs
from core.scenarios.repo.builder import BuildOptions, build
from core.scenarios.repo.env import RepoEnv


def test_build_mini_repo(mini_repo: Path, repo_env: RepoEnv, tmp_path: Path) -> None:
    out = tmp_path / "tasks.jsonl"
    report = build(BuildOptions(repo=str(mini_repo), output=out, env=repo_env.root, licence="MIT"))
    tasks = {t["qualname"]: t for t in map(json.loads, out.read_text().splitlines())}
    # silent: its test swallows the NotImplementedError -> blank still passes -> dropped
    # uncovered: no test covers it; Box.__init__ and twin/twin_too/add/get are kept
    assert set(tasks) == {"add", "twin", "twin_too", "Box.__init__", "Box.get"}
    assert report.baseline_failures == ["tests/test_core.py::test_broken_upstream"]
    assert report.dropped_no_failure == 1
    add = tasks["add"]
    assert add["tests"]["fail_to_pass"] == ["tests/test_core.py::test_add"]
    assert "tests/test_core.py::test_broken_upstream" not in add["tests"]["fail_to_pass"]
    assert add["reference"] == "    return a + b\n" and add["docstring"] == "Return a + b."
    assert add["signature"] == "def add(a, b):" and add["repo"]["licence"] == "MIT"
    assert add["repo"]["origin"] == "minirepo" and len(add["repo"]["content_hash"]) == 64
    assert any(p.startswith("pytest==") for p in add["env"]["pins"])
    assert add["position"] == {"def_line": 5, "body_start": 7, "end_line": 7}


def test_cli_bad_repo_is_one_readable_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    rc = ianvs(["dataset", "repo", "--repo", str(tmp_path / "nope"), "-o", str(tmp_path / "t.jsonl")])
    err = capsys.readouterr().err
    assert rc == 1 and "no such file or directory" in err and "Traceback" not in err


def test_build_with_test_paths_and_deselect(mini_repo: Path, repo_env: RepoEnv, tmp_path: Path) -> None:
    out = tmp_path / "tasks.jsonl"
    broken = "tests/test_core.py::test_broken_upstream"
    report = build(BuildOptions(repo=str(mini_repo), output=out, env=repo_env.root,
                                test_paths=["tests/test_core.py"], deselect=[broken], max_tasks=2,
                                sandbox_check=False))
    tasks = [json.loads(line) for line in out.read_text().splitlines()]
    assert report.baseline_failures == [] and report.kept == 2 and len(tasks) == 2
    assert all(t["tests"]["deselect"] == [broken] for t in tasks)


def test_max_tasks_stops_blanking(mini_repo: Path, repo_env: RepoEnv, tmp_path: Path) -> None:
    """``max_tasks`` bounds the work, not only the output: functions past the cap are never blanked,
    and the kept tasks are the ones an uncapped build keeps first (file order)."""
    full = tmp_path / "full.jsonl"
    build(BuildOptions(repo=str(mini_repo), output=full, env=repo_env.root, sandbox_check=False, jobs=1))
    everything = [json.loads(line)["task_id"] for line in full.read_text().splitlines()]
    capped = tmp_path / "capped.jsonl"
    report = build(BuildOptions(repo=str(mini_repo), output=capped, env=repo_env.root, sandbox_check=False,
                                jobs=1, max_tasks=2))
    assert [json.loads(line)["task_id"] for line in capped.read_text().splitlines()] == everything[:2]
    assert report.kept == 2 and report.blanked < report.covered
    assert report.dropped_max_tasks == report.covered - report.blanked


def test_cli_rejects_non_positive_max_tasks(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    rc = ianvs(["dataset", "repo", "--repo", str(tmp_path), "-o", str(tmp_path / "t.jsonl"), "--max-tasks", "0"])
    err = capsys.readouterr().err
    assert rc != 0 and "--max-tasks 0" in err and "Traceback" not in err
