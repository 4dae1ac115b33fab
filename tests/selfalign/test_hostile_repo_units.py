"""Hostile model-written code and units of the repository-level self-align set, by the classes
of issue 42 (run with ``pytest -k hostile``), in the real sandbox on the toolz source the repo
example ships.

* The units' view holds no test of the repository: a function under test that walks its view
  for test files finds none, so neither its failure nor the feedback of the next try carries a
  hidden test's text (while the same function in a view of the whole source finds them).
* A unit that ran no assert to completion is invalid.
* A run whose verdict the model's function or one of its units forges as ``infra_error`` (in
  this in-process tier both share pytest's interpreter) is attributed by trusted runs: the
  function's fault is an ``error``, the unit's an invalid unit; never an infrastructure failure.
"""
from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import Any

import pytest

from core.scenarios.repo.kind import load_tasks
from core.scenarios.selfalign import repo
from core.scenarios.selfalign.loop import LoopSettings, run_task, unit_checks
from core.scenarios.selfalign.sandbox import INVALID
from core.scenarios.selfalign.store import TryStore
from core.scenarios.selfalign.units import VALID, UnitCheck, judge_test
from tests.scenarios.conftest import BENCH
from tests.selfalign.test_loop import _replay

DATA = BENCH / "repo" / "data"
CONS = "toolz-1.0.0/toolz/itertoolz.py::cons"
#: the model's cons: lists every test file it can find from its own module up, with their first
#: lines, and fails with what it found (the next try's feedback)
SPY = '''def cons(el, seq):
    import os
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = []
    for folder, _dirs, files in os.walk(top):
        for name in files:
            if name == "conftest.py" or (name.startswith("test_") and "selfalign" not in name):
                with open(os.path.join(folder, name)) as fh:
                    found.append(name + ": " + fh.read(60))
    raise AssertionError("found " + repr(found))
'''


def _task() -> dict[str, Any]:
    path = BENCH / "selfalign" / "data" / "repo_default.jsonl"
    return next(r for r in load_tasks(path) if r["task_id"] == CONS)


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Any:
    cache = tmp_path_factory.mktemp("repo-units") / repo.REPO_UNITS_FILE
    with repo.RepoUnitRunner(repo.resolve_sources(None, sources_dir=DATA), cache) as r:
        yield r


def test_the_units_view_is_made_without_any_test(tmp_path: Path) -> None:
    """What :func:`repo.blind_root` leaves out, on a made-up layout: test folders, test modules
    by pytest's default names, conftest files, compiled files, and a hidden test's file of any
    name; the package and its data stay, and the source is untouched."""
    src = tmp_path / "src"
    files = {"pkg/__init__.py": "", "pkg/core.py": "def f(): pass\n", "pkg/data.json": "{}",
             "pkg/tests/__init__.py": "", "pkg/tests/test_core.py": "SECRET = 1\n",
             "pkg/tests/data/expected.txt": "SECRET", "pkg/check_core.py": "SECRET = 2\n",
             "pkg/core_test.py": "SECRET = 3\n", "conftest.py": "SECRET = 4\n",
             "test/test_other.py": "SECRET = 5\n", "pkg/__pycache__/core.cpython-311.pyc": "x",
             "pkg/old.pyc": "x", "setup.cfg": "[tool:pytest]\n", "docs/index.rst": "doc\n"}
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    blind = repo.blind_root(src, ["pkg/check_core.py"], cache=tmp_path / "blind")
    kept = sorted(str(p.relative_to(blind)) for p in blind.rglob("*") if p.is_file())
    assert kept == ["docs/index.rst", "pkg/__init__.py", "pkg/core.py", "pkg/data.json",
                    "setup.cfg"]
    assert not any("SECRET" in p.read_text() for p in blind.rglob("*") if p.is_file())
    assert sorted(str(p.relative_to(src)) for p in src.rglob("*") if p.is_file()) == sorted(files)
    assert repo.blind_root(src, ["pkg/check_core.py"], cache=tmp_path / "blind") == blind
    assert os.path.samefile(blind / "pkg/core.py", src / "pkg/core.py")  # hard links, no copy


def test_hostile_function_finds_no_hidden_test_and_feeds_none_back(runner: Any,
                                                                  tmp_path: Path) -> None:
    task = _task()
    source = runner.root(task) / "toolz" / "tests" / "test_itertoolz.py"
    hidden_text = source.read_text()
    body = hidden_text[hidden_text.index("def test_cons"):].split("\n\n")[0]
    assert "cons(" in body
    unit = "assert list(cons(1, [2])) == [1, 2]"
    replies = {CONS: [{"code": SPY, "tests": [unit]}, {"code": SPY, "tests": [unit]}]}
    out = run_task(task, _replay(tmp_path, replies), runner, TryStore(tmp_path / "t.jsonl"),
                   LoopSettings(max_tries=2, tests_per_task=1, generate="code"))
    first = out.tries[0].units[0]
    assert first["outcome"] == "failed" and "found []" in first["detail"], first
    fed_back = out.tries[1].messages[1]["content"].split("These tests did not pass:")[1]
    assert "found []" in fed_back
    for line in body.splitlines()[1:]:
        assert line.strip() not in fed_back, line
    assert "test_itertoolz" not in fed_back and "conftest" not in fed_back
    # the control: the same function in a view of the whole source finds the tests
    checks = unit_checks(task, [unit])
    rows = runner._attributed(SPY, [(0, checks[0])], task, runner.root(task))
    assert "found []" not in rows[0]["detail"] and ".py: " in rows[0]["detail"], rows


def test_hostile_repository_unit_that_checks_nothing_is_invalid(runner: Any) -> None:
    task = _task()
    units = ["def gen():\n    assert list(cons(1, [2])) == [1, 2]\n    yield\ngen()\n",
             "assert list(cons(1, [2])) == [1, 2]"]
    checks = unit_checks(task, units)
    assert [c.status for c in checks] == [VALID, VALID]
    outs = runner.run(repo.reference_code(task), checks, task)
    assert [(o.outcome, o.reason) for o in outs] == [(INVALID, "ran_no_assert"), ("passed", "")]


#: writes the in-process harness's verdict record as ``infra_error`` and ends the process
FORGE = '''import sys, os
frame = sys._getframe(0)
while frame is not None and "nonce" not in frame.f_locals:
    frame = frame.f_back
record = frame.f_locals["nonce"] + " infra_error 0.0\\nforged"
os.pwrite(frame.f_locals["result_fd"], record.encode(), 0)
os._exit(0)
'''


@pytest.mark.slow
def test_hostile_forged_infra_error_is_pinned_on_the_function_or_the_unit(runner: Any) -> None:
    """The model's function would forge the verdict when called: the grading policy refuses it
    before it runs (``sys``, frames, ``os._exit``), so its units are ``sandbox_violation`` (no
    pass); a unit forging it (test code, which the policy does not confine: a judge test no
    static check saw) is invalid, and the good unit beside it passes. Each case costs the
    attribution's trusted runs (about ten runs in all)."""
    task = _task()
    forging_code = "def cons(el, seq):\n" + "".join(f"    {line}\n" for line in FORGE.splitlines())
    good = unit_checks(task, ["assert list(cons(1, [2])) == [1, 2]"])[0]
    forging_unit = UnitCheck(VALID, judge_test(
        ast.parse("assert list(cons(1, [2])) == [1, 2]\n" + FORGE), "cons", count_calls=False))
    out, = runner.run(forging_code, [good], task)
    assert out.outcome == "sandbox_violation" and "grading policy refused" in out.detail, out
    outs = runner.run(repo.reference_code(task), [good, forging_unit], task)
    assert [o.outcome for o in outs] == ["passed", INVALID]
    assert outs[1].reason == "harness:forged", outs[1]
