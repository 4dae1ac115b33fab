"""The builder reads what a repository declares (test dependencies, import roots, pytest config)
and never writes an empty dataset silently: a baseline without a passing test, or a build that
keeps nothing, is an error naming pytest's own collection errors, the environment and the next
step; every stage's counts are in the report. Real pytest runs in a real venv (the shared
``repo_env``), real files; no doubles."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.scenarios.repo.builder import BuildError, BuildOptions, build
from core.scenarios.repo.env import RepoEnv
from core.scenarios.repo.project import (ProjectError, _poetry_requirement, find_import_roots,
                                         choose_test_dependencies)
from core.scenarios.repo.testrun import config_file

REPO = Path(__file__).resolve().parents[3]


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def test_test_names_win_over_dev_and_groups_expand(tmp_path: Path) -> None:
    root = _write(tmp_path, {"pyproject.toml": """
        [dependency-groups]
        lint = ["ruff"]
        testing = ["hypothesis>=6", {include-group = "lint"}]
        dev = ["sphinx"]
        """})
    got = choose_test_dependencies(root, extras=["docs", "Tests", "dev"])
    assert [(c.kind, c.name) for c in got] == [("extra", "Tests"), ("dependency-group", "testing")]
    assert got[1].requirements == ("hypothesis>=6", "ruff")


def test_dev_only_when_no_test_group(tmp_path: Path) -> None:
    root = _write(tmp_path, {"pyproject.toml": """
        [tool.poetry.group.dev.dependencies]
        pytest = "*"
        hypothesis = "^6.1"
        pytz = {version = "~2024.1"}
        python = "^3.8"
        """})
    got = choose_test_dependencies(root, extras=["docs"])
    assert [(c.kind, c.name) for c in got] == [("poetry-group", "dev")]
    assert got[0].requirements == ("pytest", "hypothesis>=6.1,<7", "pytz>=2024.1,<2024.2")


def test_poetry_constraints() -> None:
    assert _poetry_requirement("a", "^0.2.3") == "a>=0.2.3,<0.3"
    assert _poetry_requirement("a", "1.2") == "a==1.2"
    assert _poetry_requirement("a", ">=1,<3") == "a>=1,<3"
    assert _poetry_requirement("python", "^3.8") is None


def test_tox_then_requirements_files(tmp_path: Path) -> None:
    root = _write(tmp_path, {"tox.ini": """
        [tox]
        envlist = py311
        [testenv]
        deps =
            pytest
            -r requirements-test.txt
            {env:EXTRA:}
        commands = pytest
        """, "requirements-test.txt": "freezegun==1.5.1  # time\n-e .\n"})
    got = choose_test_dependencies(root, extras=[])
    assert [(c.kind, c.requirements) for c in got] == [("tox", ("pytest", "freezegun==1.5.1"))]
    (root / "tox.ini").unlink()
    got = choose_test_dependencies(root, extras=[])
    assert [(c.kind, c.name, c.requirements) for c in got] == \
        [("requirements-file", "requirements-test.txt", ("freezegun==1.5.1",))]


def test_overrides_and_unknown_names(tmp_path: Path) -> None:
    root = _write(tmp_path, {"pyproject.toml": '[dependency-groups]\nci = ["mock"]\n'})
    assert [(c.kind, c.name) for c in choose_test_dependencies(root, ["tests", "docs"], ["docs"], ["ci"])] == \
        [("extra", "docs"), ("dependency-group", "ci")]
    with pytest.raises(ProjectError, match="no such extra.*declared extras: tests"):
        choose_test_dependencies(root, ["tests"], ["testing"], None)
    with pytest.raises(ProjectError, match="declared groups: ci"):
        choose_test_dependencies(root, [], None, ["test"])


def test_import_roots_src_and_flat(tmp_path: Path) -> None:
    root = _write(tmp_path, {"src/pkg/__init__.py": "", "src/pkg/m.py": "", "tool.py": "",
                             "tests/pkg/test_x.py": "", "build/lib/pkg/__init__.py": ""})
    assert find_import_roots(root, ["pkg", "tool", "gen"]) == (["src", "."], ["gen"])
    _write(tmp_path, {"a_tests/pkg/helper.py": ""})  # sorts before src/, holds no file of the wheel's pkg
    assert find_import_roots(root, ["pkg"], ["pkg/__init__.py", "pkg/m.py"]) == (["src"], [])


def test_config_file_follows_pytest(tmp_path: Path) -> None:
    _write(tmp_path, {"pyproject.toml": "[tool.black]\n", "tox.ini": "[tox]\n", "setup.cfg": "[tool:pytest]\n"})
    assert Path(config_file(tmp_path)).name == "setup.cfg"
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    assert Path(config_file(tmp_path)).name == "pyproject.toml"


def _src_repo(tmp_path: Path, test_text: str) -> Path:
    return _write(tmp_path / "srcrepo", {
        "src/tinypkg/__init__.py": "",
        "src/tinypkg/core.py": '''
            def double(x):
                """Twice x."""
                y = x * 2
                return y


            def shout(s):
                return s.upper() + "!"
            ''',
        "tests/test_core.py": test_text})


def test_baseline_without_a_passing_test_is_an_error(tmp_path: Path, repo_env: RepoEnv) -> None:
    """The issue's case: a missing test dependency. The error quotes pytest's collection error,
    names the environment, and says what to add; no task file and no progress file are left."""
    root = _src_repo(tmp_path, "import freezegun_missing_here\nfrom tinypkg.core import double\n\n"
                               "def test_double():\n    assert double(2) == 4\n")
    out = tmp_path / "tasks.jsonl"
    with pytest.raises(BuildError) as info:
        build(BuildOptions(repo=str(root), output=out, env=repo_env.root))
    text = info.value.render()
    assert "0 passed" in text and "1 collection error" in text
    assert "No module named 'freezegun_missing_here'" in text
    assert str(repo_env.root) in text and "import roots: src" in text
    assert "next step: module 'freezegun_missing_here' is not installed: add --requirement" in text
    assert not out.exists() and not Path(str(out) + ".progress").exists()


def test_cli_exits_non_zero_with_the_reason(tmp_path: Path, repo_env: RepoEnv) -> None:
    root = _write(tmp_path / "nothing", {"lib.py": "def f(x):\n    y = x\n    return y\n",
                                          "checks/check_lib.py": "def test_f():\n    assert True\n"})
    proc = subprocess.run([sys.executable, "-m", "core.cmd.benchmarking", "dataset", "repo", "--repo", str(root),
                           "-o", str(tmp_path / "t.jsonl"), "--env", str(repo_env.root)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    rc, err = proc.returncode, proc.stderr
    assert rc == 1 and "0 collected" in err and "collected no test" in err and "--tests PATH" in err
    assert "Traceback" not in err


def test_nothing_kept_is_an_error(tmp_path: Path, repo_env: RepoEnv) -> None:
    root = _src_repo(tmp_path, "from tinypkg.core import double\n\ndef test_double():\n"
                               "    try:\n        double(2)\n    except Exception:\n        pass\n")
    with pytest.raises(BuildError, match=r"no task kept .* 1 blanked, 1 still passed"):
        build(BuildOptions(repo=str(root), output=tmp_path / "t.jsonl", env=repo_env.root))


def test_src_layout_counts_and_import_roots(tmp_path: Path, repo_env: RepoEnv) -> None:
    """A src/ layout with no packaging metadata imports from src/ (guessed); the report has every
    stage's counts and the records carry the import roots the job needs."""
    root = _src_repo(tmp_path, "from tinypkg.core import double, shout\n\ndef test_double():\n"
                               "    assert double(2) == 4\n\ndef test_skip():\n    import pytest\n"
                               "    pytest.skip('no')\n\ndef test_bad():\n    assert shout('a') == 'b'\n")
    out = tmp_path / "t.jsonl"
    report = build(BuildOptions(repo=str(root), output=out, env=repo_env.root, sandbox_check=False)).as_dict()
    assert report["collected"] == 3 and report["passed"] == 1 and report["baseline_failures"] == 1
    assert report["skipped"] == 1 and report["functions"] == 2 and report["covered"] == 1
    assert report["blanked"] == 1 and report["kept"] == 1
    assert report["dropped"] == {"not_covered_by_a_passing_test": 1, "blank_still_passes": 0,
                                 "reference_fails_in_sandbox": 0, "answer_in_prompt": 0,
                                 "over_max_tasks": 0}
    assert report["leaks"] == {"masked": 0, "dropped": 0, "by_reason": {}}
    task = json.loads(out.read_text())
    assert task["file"] == "src/tinypkg/core.py" and task["env"]["import_roots"] == ["src"]


@pytest.mark.slow
def test_tests_that_cannot_pass_in_the_sandbox_are_left_out(tmp_path: Path, repo_env: RepoEnv) -> None:
    """A test that starts a process passes in the builder's direct run but cannot pass in the
    job's sandbox: the builder runs each kept reference in the sandbox, leaves such a test out of
    the task (the task keeps its other tests) and drops a task that only it covers."""
    root = _write(tmp_path / "spawner", {
        "spawnlib/__init__.py": "",
        "spawnlib/core.py": '''
            def double(x):
                y = x * 2
                return y


            def triple(x):
                y = x * 3
                return y
            ''',
        "tests/test_core.py": '''
            import subprocess, sys
            from spawnlib.core import double, triple

            def test_double():
                assert double(2) == 4

            def test_double_in_a_child():
                assert double(1) == 2
                assert subprocess.run([sys.executable, "-c", "pass"]).returncode == 0

            def test_triple_in_a_child():
                assert triple(1) == 3
                assert subprocess.run([sys.executable, "-c", "pass"]).returncode == 0
            '''})
    out = tmp_path / "t.jsonl"
    report = build(BuildOptions(repo=str(root), output=out, env=repo_env.root)).as_dict()
    tasks = {t["qualname"]: t for t in map(json.loads, out.read_text().splitlines())}
    assert set(tasks) == {"double"}
    assert tasks["double"]["tests"]["fail_to_pass"] == ["tests/test_core.py::test_double"]
    assert report["dropped"]["reference_fails_in_sandbox"] == 1 and report["tests_left_out_in_sandbox"] == 1
