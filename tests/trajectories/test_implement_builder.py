"""``ianvs dataset implement-change`` on a real git history made here: a step is kept exactly when
its new tests fail at the parent (with the step's test files applied) and pass at the commit,
every other step is counted under the reason it was left out, and the kept record carries what a
job needs (FAIL_TO_PASS/PASS_TO_PASS, the parent's code as context, the real change, the archived
task root)."""
from __future__ import annotations

import tarfile
from pathlib import Path

from core.scenarios.trajectories.implement_change.builder import ImplementOptions, build_implement_tasks
from core.scenarios.trajectories.builder import TrajectoryOptions, build_trajectories
from tests.scenarios.conftest import read_jsonl
from tests.trajectories.conftest import MIT, commit, git

CALC = "def add(a, b):\n    return a + b\n"
TESTS = "import calc\n\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n"
MUL = "\n\ndef test_mul():\n    assert calc.mul(2, 3) == 6\n"


def _history(root: Path) -> dict[str, str]:
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    ids = {"init": commit(root, {"LICENSE": MIT, "calc.py": CALC, "tests/test_calc.py": TESTS},
                          "Initial adder", "2021-01-01T12:00:00+00:00")}
    ids["mul"] = commit(root, {"calc.py": CALC + "\n\ndef mul(a, b):\n    return a * b\n",
                               "tests/test_calc.py": TESTS + MUL}, "Add mul", "2021-02-01T12:00:00+00:00")
    ids["code_only"] = commit(root, {"calc.py": CALC + "\n\ndef mul(a, b):\n    return b * a\n"},
                              "Swap the factors", "2021-03-01T12:00:00+00:00")
    ids["test_only"] = commit(root, {"tests/test_calc.py": TESTS + MUL + "\n\ndef test_zero():\n"
                                     "    assert calc.mul(0, 3) == 0\n"}, "Test zero", "2021-04-01T12:00:00+00:00")
    ids["already_passes"] = commit(
        root, {"calc.py": '"""Arithmetic."""\n' + CALC + "\n\ndef mul(a, b):\n    return b * a\n",
               "tests/test_calc.py": TESTS + MUL + "\n\ndef test_zero():\n    assert calc.mul(0, 3) == 0\n"
               "\n\ndef test_add_zero():\n    assert calc.add(0, 3) == 3\n"},
        "Document the module, test adding zero", "2021-05-01T12:00:00+00:00")
    return ids


def _steps_and_tasks(root: Path, tmp_path: Path) -> tuple[Path, dict, list[dict]]:
    """The history's steps file, then the implement-change build of it: (steps, report, tasks)."""
    steps = tmp_path / "steps.jsonl"
    build_trajectories(TrajectoryOptions(repo=str(root), output=steps, show_progress=False))
    out = tmp_path / "data" / "implement.jsonl"
    report = build_implement_tasks(ImplementOptions(steps=steps, repo=str(root), output=out,
                                                    sources_dir=tmp_path / "sources", timeout=120,
                                                    show_progress=False))
    return steps, report, read_jsonl(out)


def test_kept_exactly_where_the_new_tests_fail_at_the_parent(tmp_path: Path) -> None:
    ids = _history(tmp_path / "proj")
    _steps, report, tasks = _steps_and_tasks(tmp_path / "proj", tmp_path)
    assert [t["repo"]["commit"] for t in tasks] == [ids["mul"]]
    task = tasks[0]
    assert task["tests"]["fail_to_pass"] == ["tests/test_calc.py::test_mul"]
    assert task["tests"]["pass_to_pass"] == ["tests/test_calc.py::test_add"]
    assert task["repo"]["parent"] == ids["init"] and task["files"] == ["calc.py"]
    assert task["context"] == {"calc.py": CALC} and "a * b" in task["reference_files"]["calc.py"]
    assert task["test_files"] == ["tests/test_calc.py"]
    counts = report["counts"]
    assert counts["root_commit"] == 1  # the initial commit has code and tests, but no parent
    assert counts["no_tests_touched"] == 1 and counts["no_code_change"] == 1
    assert counts["no_fail_to_pass"] == 1 and counts["kept"] == 1 and counts["no_pass_at_commit"] == 0
    # the archived task root is the parent with the step's tests applied: the new test is there,
    # the new code is not
    with tarfile.open(tmp_path / "sources" / task["repo"]["source"]) as tf:
        names = {m.name.split("/", 1)[1] for m in tf.getmembers() if "/" in m.name}
        calc = tf.extractfile(next(m for m in tf.getmembers() if m.name.endswith("/calc.py")))
        test = tf.extractfile(next(m for m in tf.getmembers() if m.name.endswith("tests/test_calc.py")))
        assert calc is not None and test is not None
        assert calc.read().decode() == CALC and "test_mul" in test.read().decode()
    assert {"calc.py", "tests/test_calc.py", "LICENSE"} <= names


def test_a_change_the_grading_policy_refuses_is_not_kept(tmp_path: Path) -> None:
    """The commit's own change adds ``from .extra import *`` to its package: its tests flip, but
    the grading policy refuses that file in any reply, so its gold control could never pass; the
    builder counts it ``policy_refused`` instead of keeping a task that fails its own gold."""
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    base = {"LICENSE": MIT, "pkg/__init__.py": "from .calc import add\n", "pkg/calc.py": CALC,
            "tests/test_pkg.py": "import pkg\n\n\ndef test_add():\n    assert pkg.add(2, 3) == 5\n"}
    commit(root, base, "Initial package", "2021-01-01T12:00:00+00:00")
    commit(root, {"pkg/__init__.py": "from .calc import add\nfrom .extra import *\n",
                  "pkg/extra.py": "__all__ = ['mul']\n\n\ndef mul(a, b):\n    return a * b\n",
                  "tests/test_pkg.py": base["tests/test_pkg.py"] + "\n\ndef test_mul():\n"
                                                                  "    assert pkg.mul(2, 3) == 6\n"},
           "Add mul", "2021-02-01T12:00:00+00:00")
    steps = tmp_path / "steps.jsonl"
    build_trajectories(TrajectoryOptions(repo=str(root), output=steps, show_progress=False))
    out = tmp_path / "data" / "implement.jsonl"
    report = build_implement_tasks(ImplementOptions(steps=steps, repo=str(root), output=out,
                                                    sources_dir=tmp_path / "sources", timeout=120,
                                                    show_progress=False))
    assert report["counts"]["policy_refused"] == 1 and report["counts"]["kept"] == 0, report["counts"]
    assert read_jsonl(out) == []


def test_one_per_pr_keeps_one_task_of_a_pull_request_and_its_squash_commit(tmp_path: Path) -> None:
    """A pull request of two commits that each flip a test, and the squash commit ``... (#5)``
    that repeats them on the mainline: with ``--one-per-pr`` the newest of the three is kept
    and the other two are counted ``same_pr`` without being validated; without it, all three."""
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    base = commit(root, {"LICENSE": MIT, "calc.py": CALC, "tests/test_calc.py": TESTS},
                  "Initial adder", "2021-01-01T12:00:00+00:00")
    mul = CALC + "\n\ndef mul(a, b):\n    return a * b\n"
    neg = "\n\ndef neg(a):\n    return -a\n"
    neg_test = "\n\ndef test_neg():\n    assert calc.neg(2) == -2\n"
    git(root, "checkout", "-q", "-b", "topic")
    commit(root, {"calc.py": mul, "tests/test_calc.py": TESTS + MUL}, "Add mul",
           "2021-02-01T12:00:00+00:00")
    head = commit(root, {"calc.py": mul + neg, "tests/test_calc.py": TESTS + MUL + neg_test},
                  "Add neg", "2021-02-02T12:00:00+00:00")
    git(root, "update-ref", "refs/pull/5/head", head)
    git(root, "checkout", "-q", "main")
    squash = commit(root, {"calc.py": mul + neg, "tests/test_calc.py": TESTS + MUL + neg_test},
                    "Add mul and neg (#5)", "2021-02-03T12:00:00+00:00")
    assert git(root, "rev-parse", "HEAD") != base
    steps = tmp_path / "steps.jsonl"
    build_trajectories(TrajectoryOptions(repo=str(root), output=steps, show_progress=False))
    one = build_implement_tasks(ImplementOptions(
        steps=steps, repo=str(root), output=tmp_path / "one.jsonl", sources_dir=tmp_path / "s1",
        timeout=120, show_progress=False, one_per_pr=True))
    assert [t["repo"]["commit"] for t in read_jsonl(tmp_path / "one.jsonl")] == [squash]
    assert one["counts"]["same_pr"] == 2 and one["counts"]["kept"] == 1
    assert one["options"]["one_per_pr"] is True
    every = build_implement_tasks(ImplementOptions(
        steps=steps, repo=str(root), output=tmp_path / "all.jsonl", sources_dir=tmp_path / "s2",
        timeout=120, show_progress=False))
    assert every["counts"]["kept"] == 3 and "same_pr" not in every["counts"]
    assert "not_mainline" not in every["counts"]
    main = build_implement_tasks(ImplementOptions(
        steps=steps, repo=str(root), output=tmp_path / "main.jsonl", sources_dir=tmp_path / "s3",
        timeout=120, show_progress=False, mainline_only=True))
    assert [t["repo"]["commit"] for t in read_jsonl(tmp_path / "main.jsonl")] == [squash]
    assert main["counts"]["not_mainline"] == 2 and main["counts"]["candidates"] == 1


def test_max_test_seconds_drops_a_change_whose_parent_is_slow(tmp_path: Path) -> None:
    """The parent's code sleeps where the commit's returns at once (a hang the change fixes):
    with ``--max-test-seconds`` under that sleep the candidate is counted ``slow_tests``, since
    every model sample that does not fix it would wait as long; without it, it is kept."""
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    slow = CALC + "\n\ndef wait():\n    import time\n    time.sleep(4)\n    return 0\n"
    commit(root, {"LICENSE": MIT, "calc.py": slow, "tests/test_calc.py": TESTS},
           "Initial adder", "2021-01-01T12:00:00+00:00")
    fixed = commit(root, {"calc.py": CALC + "\n\ndef wait():\n    return 1\n",
                          "tests/test_calc.py": TESTS + "\n\ndef test_wait():\n"
                          "    assert calc.wait() == 1\n"},
                   "Do not wait", "2021-02-01T12:00:00+00:00")
    steps = tmp_path / "steps.jsonl"
    build_trajectories(TrajectoryOptions(repo=str(root), output=steps, show_progress=False))
    quick = build_implement_tasks(ImplementOptions(
        steps=steps, repo=str(root), output=tmp_path / "q.jsonl", sources_dir=tmp_path / "s1",
        timeout=120, show_progress=False, max_test_seconds=2.0))
    assert quick["counts"]["slow_tests"] == 1 and quick["tasks"] == 0
    assert quick["options"]["max_test_seconds"] == 2.0
    every = build_implement_tasks(ImplementOptions(
        steps=steps, repo=str(root), output=tmp_path / "a.jsonl", sources_dir=tmp_path / "s2",
        timeout=120, show_progress=False))
    assert [t["repo"]["commit"] for t in read_jsonl(tmp_path / "a.jsonl")] == [fixed]
    assert "slow_tests" not in every["counts"]


PYPROJECT = """[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "calcpkg"
version = "1.2.0"

[project.entry-points."calcpkg.backends"]
loop = "calcpkg.loop:backend"

[tool.setuptools]
packages = ["calcpkg"]
"""
#: as networkx's conftest.py looks up its test backend ``nx-loopback``: through the package's own
#: entry points, which exist only where the package is installed (or stubbed)
BACKEND_CONFTEST = """import importlib.metadata


def pytest_configure(config):
    found = importlib.metadata.entry_points(group="calcpkg.backends", name="loop")
    config.calc_backend = next(iter(found)).load()
"""


def _package_history(root: Path) -> dict[str, str]:
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    base = {"LICENSE": MIT, "pyproject.toml": PYPROJECT, "conftest.py": BACKEND_CONFTEST,
            "calcpkg/__init__.py": "", "calcpkg/calc.py": CALC, "calcpkg/loop.py": "backend = 'loop'\n",
            "tests/test_calc.py": TESTS.replace("import calc\n", "from calcpkg import calc\n")}
    ids = {"init": commit(root, base, "Initial package", "2021-01-01T12:00:00+00:00")}
    ids["mul"] = commit(root, {"calcpkg/calc.py": CALC + "\n\ndef mul(a, b):\n    return a * b\n",
                               "tests/test_calc.py": base["tests/test_calc.py"] + MUL},
                        "Add mul", "2021-02-01T12:00:00+00:00")
    return ids


def test_a_root_runs_with_its_own_entry_points(tmp_path: Path) -> None:
    """A root runs from source, not installed: a conftest that looks up the package's own entry
    point (networkx's test backend) stopped every test at the commit, and such changes were
    dropped as ``no_pass_at_commit``. The builder now reads the root's entry points (its package
    built with its own backend) and validates in an environment holding its metadata stub; the
    task records the stub (``env.project``) and the job's grading, which builds the environment
    from the record, passes the real change and fails the parent. Control: in an environment
    given as it is (``--env``, no stub) the same change is dropped, so the stub is what counts."""
    from core.scenarios.repo.env import ensure_env
    from core.scenarios.trajectories.implement_change import whole_files_reply
    from tests.trajectories.gold import gold_and_unchanged

    ids = _package_history(tmp_path / "proj")
    steps, report, tasks = _steps_and_tasks(tmp_path / "proj", tmp_path)
    assert [t["repo"]["commit"] for t in tasks] == [ids["mul"]], report["counts"]
    project = tasks[0]["env"]["project"]
    assert (project["name"], project["version"]) == ("calcpkg", "1.2.0")
    assert "[calcpkg.backends]" in project["entry_points"] and "loop = calcpkg.loop:backend" in project["entry_points"]
    assert report["with_entry_points"] == 1
    assert tasks[0]["tests"]["fail_to_pass"] == ["tests/test_calc.py::test_mul"]

    task = {**tasks[0], "id": tasks[0]["task_id"]}
    form, ref, unchanged = gold_and_unchanged([task], lambda t: whole_files_reply(t["reference_files"]),
                                              tmp_path / "sources")[task["id"]]
    assert form == "files" and ref.outcome == "passed", ref
    assert unchanged.outcome != "passed", unchanged

    plain = ensure_env([])  # the same pins, no stub
    control = build_implement_tasks(ImplementOptions(steps=steps, repo=str(tmp_path / "proj"),
                                                     output=tmp_path / "data" / "control.jsonl",
                                                     sources_dir=tmp_path / "control-sources", env=plain.root,
                                                     timeout=120, show_progress=False))
    assert control["counts"]["kept"] == 0 and control["counts"]["no_pass_at_commit"] == 1, control["counts"]
