"""Issue 42: an implement-change or revise answer cannot write the task's test side.

Each hostile class is its own case, in both reply forms (whole files, unified diff) and for both
kinds (an implement-change record, and a test-graded revise record as the revise metric grades
it, ``grader_record``): aliases of a test file, a new ``conftest.py`` anywhere, pytest's and the
interpreter's configuration files, the modules the tests import, the test packages'
``__init__.py``, caches and bytecode, new top-level modules. Controls: the task's own edits, new
modules beside them, ``setup.py`` when the task's change edits it, and similarity grading (no
test side). In the sandbox (local backend, 3 s here): a wrong change with a forging ``conftest.py`` passes in an
unpinned view (so the attack is real) and fails once the test side is pinned, and the graders
refuse the reply before anything runs. The builders leave out of test grading a change no
reply could make (``edits_test_side``; the revise builder's case builds a history: slow).
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import pytest

from core.scenarios.trajectories.implement_change import whole_files_reply
from core.scenarios.trajectories.implement_change.answer import parse_change
from core.scenarios.trajectories.implement_change.paths import TestSide, canonical_path, gold_refusals
from core.scenarios.trajectories.implement_change.scoring import parse_for_task
from core.scenarios.repo.view import make_view
from core.scenarios.trajectories.revise.metrics import grader_record

CORE = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b\n"
RIGHT = CORE.replace("return a + b\n", "return a * b\n").replace("return a * b\n", "return a + b\n", 1)
TEST = ("from calc import mul\nfrom calc.helpers import same\n\nfrom .util import twice\n\n\n"
        "def test_mul():\n    assert same(mul(2, 3), 6)\n\n\ndef test_twice():\n    assert twice(2) == 4\n")
FORGE = ("import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
         "    outcome = yield\n    report = outcome.get_result()\n    if report.failed:\n"
         "        report.outcome = 'passed'\n")
TREE = {
    "calc/__init__.py": "from .core import add, mul\n",
    "calc/core.py": CORE,
    "calc/helpers.py": "def same(a, b):\n    return a == b\n",
    "tests/__init__.py": "",
    "tests/util.py": "def twice(x):\n    return 2 * x\n",
    "tests/conftest.py": "",
    "tests/test_core.py": TEST,
    "setup.cfg": "[tool:pytest]\nxfail_strict = true\n",
    "setup.py": "from setuptools import setup\nsetup(name='calc')\n",
    "README.md": "calc\n",
}
TASK_TESTS = {"fail_to_pass": ["tests/test_core.py::test_mul"], "pass_to_pass": ["tests/test_core.py::test_twice"],
              "deselect": []}


def _write(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return _write(tmp_path / "proj", TREE)


def _implement(files: list[str] | None = None) -> dict[str, Any]:
    return {"id": "calc@1", "files": files or ["calc/core.py"], "test_files": ["tests/test_core.py"],
            "tests": TASK_TESTS, "env": {"requirements": []}}


def _revise(files: list[str] | None = None) -> dict[str, Any]:
    """A test-graded revise record as the revise metric hands it to the grader (``grader_record``):
    its ``test_files`` empty, as the builder writes them when the step changes no test."""
    changed = files or ["calc/core.py"]
    rec = {"id": "calc@2", "grading": "tests", "files": {p: TREE.get(p, "") for p in changed},
           "reference_files": {p: TREE.get(p, "") + "\n" for p in changed}, "test_files": [],
           "tests": TASK_TESTS, "env": {"requirements": []}}
    return grader_record(rec)


KINDS = {"implement_change": _implement, "revise": _revise}


def _diff(raw: str, old: str | None, new: str) -> str:
    """A unified diff whose headers name ``raw`` exactly as given (``old`` None: a new file)."""
    head = f"--- a/{raw}\n" if old is not None else "--- /dev/null\n"
    body = difflib.unified_diff((old or "").splitlines(keepends=True), new.splitlines(keepends=True), n=3)
    return "```diff\n" + head + f"+++ b/{raw}\n" + "".join(list(body)[2:]) + "```\n"


def _replies(raw: str, root: Path, new: str) -> dict[str, str]:
    """The reply writing ``new`` to ``raw``, in both forms (the name given verbatim)."""
    canon = canonical_path(raw)[0]
    old = (root / canon).read_text() if canon and (root / canon).is_file() else None
    return {"files": f"FILE: {raw}\n```python {raw}\n{new}```\n", "diff": _diff(raw, old, new)}


def _refused(raw: str, root: Path, kind: str, new: str = "x = 1\n", files: list[str] | None = None) -> list[str]:
    """The failure and detail of each form; every form must be ``bad_path``."""
    rec = KINDS[kind](files)
    out = []
    for form, reply in _replies(raw, root, new).items():
        parsed = parse_for_task(reply, rec, root)
        assert parsed.failure == "bad_path" and not parsed.edits, (kind, form, raw, parsed)
        out.append(parsed.detail)
    return out


# --------------------------------------------------------------- 1. one spelling per file
ALIASES = ["tests/test_core.py", "./tests/test_core.py", "tests/./test_core.py", "tests//test_core.py",
           "tests/../tests/test_core.py", "calc/../tests/test_core.py", "TESTS/test_core.py",
           "tests/TEST_CORE.py", "tests\\test_core.py", "/tests/test_core.py"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("alias", ALIASES)
def test_no_spelling_of_a_test_file_reaches_it(root: Path, kind: str, alias: str) -> None:
    _refused(alias, root, kind, new=TEST.replace("3), 6)", "3), 5)"))
    assert (root / "tests/test_core.py").read_text() == TEST


@pytest.mark.parametrize("kind", KINDS)
def test_a_trailing_slash_never_names_the_test_file(root: Path, kind: str) -> None:
    """In a diff the name is refused; a whole-file block so named is not a named file at all
    (its one unnamed block is the task's one file), so the test file is never written."""
    replies = _replies("tests/test_core.py/", root, "x = 1\n")
    assert parse_for_task(replies["diff"], KINDS[kind](), root).failure == "bad_path"
    parsed = parse_for_task(replies["files"], KINDS[kind](), root)
    assert "tests/test_core.py" not in parsed.edits and all(not k.startswith("tests/") for k in parsed.edits)


@pytest.mark.parametrize("raw,why", [("tests/./test_core.py", "'.'"), ("tests//test_core.py", "empty"),
                                     ("tests/test_core.py/", "empty"), ("a\x00b.py", "control"),
                                     ("a\nb.py", "control"), ("C:\\x.py", "backslash"), ("/etc/x.py", "absolute"),
                                     (".git/hooks/pre-commit", ".git"), ("pkg/.GIT/x", ".git"), ("", "empty")])
def test_canonical_path_refuses_rather_than_normalises(raw: str, why: str) -> None:
    path, reason = canonical_path(raw)
    assert path == "" and why in reason
    assert canonical_path("./calc/core.py") == ("calc/core.py", "")


def test_the_view_writer_takes_canonical_paths_only(root: Path, tmp_path: Path) -> None:
    for n, alias in enumerate(("tests/./test_core.py", "tests//test_core.py", "tests/test_core.py/", "../x.py")):
        with pytest.raises(ValueError, match="view path"):
            make_view(root, tmp_path / f"v{n}", {alias: "x = 1\n"})
    with pytest.raises(ValueError, match="view path"):
        make_view(root, tmp_path / "vp", {"calc/core.py": RIGHT}, pinned=["tests//test_core.py"])


# --------------------------------------------------------------- 2. what pytest reads
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path", ["conftest.py", "calc/conftest.py", "tests/conftest.py", "docs/deep/conftest.py",
                                  "CONFTEST.py"])
def test_no_conftest_anywhere(root: Path, kind: str, path: str) -> None:
    _refused(path, root, kind, new=FORGE)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path", ["pytest.ini", ".pytest.ini", "pytest.toml", "tox.ini", "setup.cfg",
                                  "pyproject.toml", "calc/setup.cfg", "sitecustomize.py", "usercustomize.py",
                                  "calc/evil.pth", "calc/helpers.cpython-311-x86_64-linux-gnu.so",
                                  "calc/__pycache__/core.cpython-311.pyc", ".pytest_cache/v/cache/lastfailed",
                                  "forge-1.0.dist-info/entry_points.txt", "calc.egg-info/entry_points.txt",
                                  "calc.egg-link"])
def test_no_configuration_or_start_up_file(root: Path, kind: str, path: str) -> None:
    why = _refused(path, root, kind, new="[pytest]\naddopts = -p no:python\n")
    assert all(("configure" in w or "cache" in w or "plugins" in w) for w in why), why


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path,what", [("tests/util.py", "folder of the task's tests"),
                                       ("calc/helpers.py", "a module the task's tests import"),
                                       ("calc/helpers/__init__.py", "would hide calc/helpers.py"),
                                       ("calc/__init__.py", "a module the task's tests import")])
def test_no_module_the_tests_import(root: Path, kind: str, path: str, what: str) -> None:
    forged = "def same(a, b):\n    return True\n\n\ndef twice(x):\n    return 4\n"
    assert all(what in w for w in _refused(path, root, kind, new=forged))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path", ["tests/__init__.py", "tests/sub/__init__.py", "__init__.py"])
def test_no_test_package_init(root: Path, kind: str, path: str) -> None:
    _refused(path, root, kind, new="import pytest\n")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path", ["hypothesis.py", "numpy/__init__.py", "test_extra.py", "calc/test_core.py",
                                  "calc/tests/x.py", "setup.py"])
def test_no_new_top_level_module_nor_test_by_name_nor_setup(root: Path, kind: str, path: str) -> None:
    _refused(path, root, kind)


def test_helpers_found_through_relative_and_literal_imports(tmp_path: Path) -> None:
    root = _write(tmp_path / "p", {
        "src/lib/__init__.py": "", "src/lib/core.py": "X = 1\n", "src/lib/plug.py": "", "src/lib/opt.py": "",
        "pkgtests/__init__.py": "", "pkgtests/helpers.py": "",
        "pkgtests/conftest.py": "pytest_plugins = ['lib.plug']\n",
        "pkgtests/check_it.py": "import pytest\nfrom . import helpers\nopt = pytest.importorskip('lib.opt')\n"})
    side = TestSide.for_tests(root, ["pkgtests/check_it.py"], ["src/lib/core.py"], ["src"])
    assert side.imported >= {"pkgtests/helpers.py", "src/lib/plug.py", "src/lib/opt.py", "src/lib/__init__.py",
                             "pkgtests/__init__.py"}
    assert "src/lib/core.py" not in side.imported
    assert side.refusal("src/lib/core.py") is None and side.refusal("src/lib/new.py") is None
    assert "top-level" in (side.refusal("src/numpy.py") or "")
    assert "pkgtests/" in (side.refusal("pkgtests/new.py") or "")


# --------------------------------------------------------------- 3. controls
@pytest.mark.parametrize("kind", KINDS)
def test_the_tasks_own_change_still_parses(root: Path, kind: str) -> None:
    rec = KINDS[kind]()
    for form, reply in _replies("calc/core.py", root, RIGHT).items():
        parsed = parse_for_task(reply, rec, root)
        assert parsed.failure == "" and parsed.form == form and parsed.edits == {"calc/core.py": RIGHT}, parsed
    for form, reply in _replies("calc/extra.py", root, "Y = 2\n").items():  # a new module beside it
        assert parse_for_task(reply, rec, root).edits == {"calc/extra.py": "Y = 2\n"}, form
    docs = whole_files_reply({"calc/core.py": RIGHT, "docs/notes.md": "notes\n"})
    assert set(parse_for_task(docs, rec, root).edits) == {"calc/core.py", "docs/notes.md"}


@pytest.mark.parametrize("kind", KINDS)
def test_setup_and_imported_modules_are_the_tasks_when_its_change_edits_them(root: Path, kind: str) -> None:
    rec = KINDS[kind](["calc/core.py", "setup.py", "calc/helpers.py"])
    reply = whole_files_reply({"calc/core.py": RIGHT, "setup.py": "# new\n", "calc/helpers.py": "# new\n"})
    assert set(parse_for_task(reply, rec, root).edits) == {"calc/core.py", "setup.py", "calc/helpers.py"}
    rec = KINDS[kind](["calc/core.py", "conftest.py"])   # never: the configuration is the task's
    assert parse_for_task(whole_files_reply({"conftest.py": FORGE}), rec, root).failure == "bad_path"


def test_similarity_grading_guards_only_the_form_of_paths(root: Path) -> None:
    reply = whole_files_reply({"tests/test_core.py": TEST + "\n", "tox.ini": "[tox]\n"})
    assert set(parse_change(reply, root, None).edits) == {"tests/test_core.py", "tox.ini"}
    assert parse_change(whole_files_reply({"tests/./test_core.py": "x\n"}), root, None).failure == "bad_path"


@pytest.mark.parametrize("kind", KINDS)
def test_a_diff_cannot_move_or_delete_a_test_file(root: Path, kind: str) -> None:
    """Edits only ever write files: a rename away from the test file, or its deletion, never
    reaches the view (git applies them to a scratch tree that does not hold the file, or the
    name is refused)."""
    rename = ("```diff\ndiff --git a/tests/test_core.py b/calc/moved.py\nsimilarity index 100%\n"
              "rename from tests/test_core.py\nrename to calc/moved.py\n```\n")
    delete = "```diff\n--- a/tests/test_core.py\n+++ /dev/null\n@@ -1,12 +0,0 @@\n" + "".join(
        f"-{line}" for line in TEST.splitlines(keepends=True)) + "```\n"
    for reply in (rename, delete):
        parsed = parse_for_task(reply, KINDS[kind](), root)
        assert parsed.failure in ("bad_path", "diff_does_not_apply") and not parsed.edits, parsed


def test_pinned_lists_the_test_side_of_the_tree(root: Path) -> None:
    side = TestSide.for_task(_implement(), root)
    pinned = side.pinned({"calc/core.py": RIGHT, "conftest.py": FORGE})
    assert {"tests/test_core.py", "tests/conftest.py", "tests/util.py", "tests/__init__.py", "setup.cfg",
            "setup.py", "calc/helpers.py", "calc/__init__.py", "conftest.py"} <= pinned
    assert "calc/core.py" not in pinned and "README.md" not in pinned


def test_the_view_writes_the_pinned_test_side_after_the_edits(root: Path, tmp_path: Path) -> None:
    side = TestSide.for_task(_implement(), root)
    edits = {"calc/core.py": RIGHT, "tests/test_core.py": "def test_mul():\n    pass\n", "conftest.py": FORGE,
             "tests/util.py": "def twice(x):\n    return 4\n"}
    view = make_view(root, tmp_path / "v", edits, side.pinned(edits))
    assert (view / "calc/core.py").read_text() == RIGHT
    assert (view / "tests/test_core.py").read_text() == TEST and not (view / "conftest.py").exists()
    assert (view / "tests/util.py").stat().st_ino == (root / "tests/util.py").stat().st_ino
    assert (root / "tests/util.py").read_text() == TREE["tests/util.py"]


# --------------------------------------------------------------- 4. the builders
def test_gold_refusals_name_a_change_no_reply_could_make(root: Path) -> None:
    assert gold_refusals(_implement(["calc/core.py", "setup.py"]), root) == []
    refused = gold_refusals({**_revise(), "reference_files": {"calc/core.py": RIGHT, "tox.ini": "[pytest]\n"}}, root)
    assert len(refused) == 1 and refused[0].startswith("tox.ini: pytest")


@pytest.mark.slow  # builds a history and runs its tests: about 5 s
def test_revise_builder_grades_by_similarity_a_step_that_edits_the_test_config(tmp_path: Path) -> None:
    """The step that fixes ``mul`` (flipping its test) also adds a ``tox.ini``: a reply could
    never pass it by tests (the file is refused), so it is graded by similarity, and says why."""
    from core.scenarios.trajectories.revise.builder import ReviseOptions, build_revise_tasks
    from core.scenarios.trajectories.builder import TrajectoryOptions, build_trajectories
    from tests.scenarios.conftest import read_jsonl
    from tests.trajectories.conftest import MIT, commit, git

    repo = tmp_path / "proj"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    calc = "def add(a, b):\n    return a + b\n"
    commit(repo, {"LICENSE": MIT, "calc.py": calc}, "Initial adder", "2021-01-01T12:00:00+00:00")
    git(repo, "checkout", "-q", "-b", "topic")
    commit(repo, {"calc.py": calc + "\n\ndef mul(a, b):\n    return a + b\n",
                  "tests/test_calc.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"},
           "Add mul with its test", "2021-02-01T12:00:00+00:00")
    fix = commit(repo, {"calc.py": calc + "\n\ndef mul(a, b):\n    return a * b\n", "tox.ini": "[pytest]\n"},
                 "Fix mul, configure pytest", "2021-03-01T12:00:00+00:00")
    git(repo, "checkout", "-q", "main")
    git(repo, "update-ref", "refs/pull/5/head", fix)
    steps = tmp_path / "steps.jsonl"
    build_trajectories(TrajectoryOptions(repo=str(repo), output=steps, show_progress=False))
    out = tmp_path / "revise.jsonl"
    report = build_revise_tasks(ReviseOptions(steps=steps, repo=str(repo), output=out, grade_tests=True,
                                              timeout=120))
    (task,) = read_jsonl(out)
    assert task["commit"] == fix and task["grading"] == "similarity"
    assert task["metadata"]["grading_reason"] == "edits_test_side"
    assert report["grading"]["reasons"]["edits_test_side"] == 1 and report["grading"]["tests"] == 0


# --------------------------------------------------------------- 5. in the sandbox
def test_a_forging_conftest_does_not_pass_a_wrong_change(root: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Wrong ``mul`` plus a conftest that turns failed reports into passes: passed in a view
    without pinning and without the grading policy (the attack is real), refused by the policy
    without pinning (it imports pytest), not passed with the test side pinned; the graders
    refuse the reply before running it (implement-change and revise alike)."""
    from core.scenarios.trajectories.implement_change.builder import write_archive
    from core.scenarios.trajectories.implement_change.scoring import grade
    from core.scenarios.repo.env import ensure_env
    from core.scenarios.repo.execute import Sample, default_views_dir, run_samples
    from core.scenarios.repo.source import content_hash

    wrong = {"calc/core.py": CORE + "\n# mul still adds\n", "conftest.py": FORGE}
    task = {**_implement(), "task_id": "calc@1", "file": "calc/core.py"}
    side = TestSide.for_task(task, root)
    samples = [Sample("unpinned", task, None, edits=wrong),
               Sample("pinned", task, None, edits=wrong, pinned=side.pinned(wrong)),
               Sample("right", task, None, edits={"calc/core.py": RIGHT}, pinned=side.pinned())]
    results = {r.sample_id: r for r in run_samples(samples, root, ensure_env([]), default_views_dir(), workers=2,
                                                   timeout=120)}
    assert results["unpinned"].outcome == "sandbox_violation", results["unpinned"].detail[-500:]
    assert "conftest.py" in results["unpinned"].detail and "pytest" in results["unpinned"].detail
    import core.scenarios.repo.execute as execute
    monkeypatch.setattr(execute, "_confined_edits", lambda edits, *_a: dict(edits))  # the policy off
    (bare,) = run_samples(samples[:1], root, ensure_env([]), default_views_dir(), timeout=120)
    assert bare.outcome == "passed", bare.detail[-500:]
    assert results["pinned"].outcome != "passed" and results["pinned"].tests.get(TASK_TESTS["fail_to_pass"][0]) \
        != "passed", results["pinned"]
    assert results["right"].outcome == "passed", results["right"].detail[-500:]

    sources = tmp_path / "sources"
    write_archive(root, sources / "calc.tar.gz")
    repo = {"name": "calc", "source": "calc.tar.gz", "content_hash": content_hash(root), "commit": "1"}
    reply = whole_files_reply(wrong)
    for name, rec in (("implement", {**task, "repo": repo}), ("revise", {**_revise(), "repo": repo})):
        res, form = grade([(name, rec, reply)], sources)[name]
        assert (res.outcome, form) == ("bad_path", "files") and "conftest.py" in res.detail, res


@pytest.mark.parametrize("attack", [
    "import _pytest.reports\n_pytest.reports.BaseReport.passed = property(lambda s: True)\n",
    "import sys\nsys.modules['_pytest.runner'].call_and_report = None\n",
    "import builtins\nbuiltins.AssertionError = Exception\n",
])
def test_a_wrong_change_that_patches_grading_is_a_violation(root: Path, tmp_path: Path, attack: str) -> None:
    """Issue 43: a whole-file reply whose module-level statement reaches pytest, sys.modules or
    builtins is ``sandbox_violation`` through both graders (implement-change and revise), and
    the same file without the attack is graded as usual (its wrong ``mul`` fails)."""
    from core.scenarios.trajectories.implement_change.builder import write_archive
    from core.scenarios.trajectories.implement_change.scoring import grade
    from core.scenarios.repo.source import content_hash

    sources = tmp_path / "sources"
    write_archive(root, sources / "calc.tar.gz")
    repo = {"name": "calc", "source": "calc.tar.gz", "content_hash": content_hash(root), "commit": "1"}
    task = {**_implement(), "task_id": "calc@1", "file": "calc/core.py", "repo": repo}
    for name, rec in (("implement", task), ("revise", {**_revise(), "repo": repo})):
        for label, text in (("attack", CORE + "\n" + attack), ("plain", CORE + "\n# mul still adds\n")):
            res, form = grade([(name, rec, whole_files_reply({"calc/core.py": text}))], sources)[name]
            want = "sandbox_violation" if label == "attack" else "failed"
            assert (res.outcome, form) == (want, "files"), (name, label, res.outcome, res.detail[-300:])
