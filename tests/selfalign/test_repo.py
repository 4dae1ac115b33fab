"""The repository-level set of the self-align loop: repo kind records (toolz, ELI5, dataset
functions) whose model-written tests run against the model's code in a view of the repository,
and whose hidden tests are the repository's own.

The fast tests check what is decided without running anything (units, the pytest module, the
controls' tests, task selection). The slow ones run the real repository (the toolz source the
repo example ships, its environment, the sandbox): gold controls through the loop and the
metric, and recorded replies whose tests agree with wrong code (false alignment)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from core.common.errors import ConfigError
from core.scenarios.repo.execute import SampleResult
from core.scenarios.repo.kind import load_tasks
from core.scenarios.selfalign import repo
from core.scenarios.selfalign.loop import (ControlResponder, LoopSettings, run_task, shown,
                                           unit_checks)
from core.scenarios.selfalign.metrics import selfalign
from core.scenarios.selfalign.model import SelfAlignModel
from core.scenarios.selfalign.store import TRIES_FILE, TryStore
from core.testcasecontroller.metrics.calling import MetricContext
from tests.scenarios.conftest import BENCH
from tests.selfalign.test_loop import _replay

DATA = BENCH / "repo" / "data"
DEFAULT = BENCH / "selfalign" / "data" / "repo_default.jsonl"
CONS = "toolz-1.0.0/toolz/itertoolz.py::cons"


def _task(task_id: str = CONS) -> dict[str, Any]:
    return next(r for r in load_tasks(DEFAULT) if r["task_id"] == task_id)


def test_the_shipped_subset_is_three_functions_of_three_repositories() -> None:
    tasks = load_tasks(DEFAULT)
    assert [t["repo"]["name"] for t in tasks] == ["toolz-1.0.0", "eli5-0.16.0", "dataset-2.0.0"]
    assert repo.function_tasks(tasks) == tasks and all(repo.is_repo_record(t) for t in tasks)
    # methods and PostgreSQL tasks run; they can be left out; an unknown service is refused
    everything = load_tasks(DATA / "toolz-tasks.jsonl")
    method = next(t for t in everything if t["class_name"])
    assert method in repo.function_tasks(everything)
    assert method not in repo.function_tasks(everything, methods=False)
    repo.check_task(method)
    postgres = load_tasks(DATA / "dataset-postgres-tasks.jsonl")
    assert repo.function_tasks(postgres) == postgres and not repo.function_tasks(postgres, services=False)
    repo.check_task(postgres[0])
    with pytest.raises(ConfigError, match="unknown service 'redis'"):
        repo.check_task({**tasks[2], "services": ["redis"]})
    assert not repo.function_tasks([{**tasks[2], "services": ["redis"]}])


def test_the_model_sees_the_repository_prompt_never_its_tests() -> None:
    task = _task()
    prompt, entry = shown(task)
    assert entry == "cons" and "def cons(el, seq):" in prompt and "# file: toolz/itertoolz.py" in prompt
    assert not any(t.split("::")[0] in prompt for t in repo.hidden_tests(task))
    assert repo.target_import(task) == "from toolz.itertoolz import cons"
    assert repo.target_import({**task, "file": "src/pkg/mod.py", "name": "f",
                               "env": {"import_roots": ["src"]}}) == "from pkg.mod import f"
    assert repo.target_import({**task, "file": "pkg/__init__.py", "name": "f"}) == \
        "from pkg import f"


def test_units_and_the_pytest_module() -> None:
    task = _task()
    units = ["assert list(cons(1, [2])) == [1, 2]", "import os\nassert cons(1, [])",
             "assert 1 == 1", "repo-test:" + repo.hidden_tests(task)[0]]
    checks = unit_checks(task, units)
    assert [c.status for c in checks] == ["valid", "import:os", "no_call", "syntax_error"]
    # only a gold control's try may name the repository's tests, and only the task's own
    control = unit_checks(task, units, control=True)
    assert control[3].valid and control[3].test == units[3]
    assert not unit_checks(task, ["repo-test:toolz/tests/test_dicttoolz.py::test_merge"],
                           control=True)[0].valid
    module, ids = repo.units_module([(0, checks[0])], task)
    assert module.startswith('"""PYTEST_DONT_REWRITE"""\nfrom toolz.itertoolz import cons\n')
    assert ids == {0: f"{repo.UNITS_FILE}::test_unit_0"}
    assert "def test_unit_0():\n    _check_0(cons)" in module
    compile(module, repo.UNITS_FILE, "exec")      # compiled, never run here


COUNT = "dataset-2.0.0/dataset/table.py::Table.count"


def _postgres_task(task_id: str) -> dict[str, Any]:
    return next(r for r in load_tasks(DATA / "dataset-postgres-tasks.jsonl") if r["task_id"] == task_id)


def test_a_method_is_asked_for_by_class_and_its_units_call_it_on_an_instance() -> None:
    task = _postgres_task(COUNT)
    prompt, entry = shown(task)
    assert entry == "Table.count" and "method of class Table" in prompt
    assert repo.target_import(task) == "from dataset.table import Table"
    units = ['import dataset\nassert dataset.connect().create_table("t").count() == 0',
             "assert Table.count(None) == 0", "assert count() == 0", "assert 1 == 1",
             "import sqlalchemy\nassert Table.count(None) == 0"]
    checks = unit_checks(task, units)
    # the repository's own package is importable beside its tests; other packages are not
    assert [c.status for c in checks] == ["valid", "valid", "valid", "no_call", "import:sqlalchemy"]
    module, _ids = repo.units_module([(0, checks[0])], task)
    assert module.splitlines()[1] == "from dataset.table import Table"
    assert "def test_unit_0():\n    _check_0(Table.count)" in module
    compile(module, repo.UNITS_FILE, "exec")
    # a dunder method is reached through its class (and builtins), never by name
    init = next(r for r in load_tasks(DATA / "dataset-sqlite-tasks.jsonl")
                if r["qualname"] == "ChunkedUpdate.__init__")
    assert [c.status for c in unit_checks(init, ["assert ChunkedUpdate(None, 1, []) is not None",
                                                 "assert Table(None, 't') is not None"])] == \
        ["valid", "no_call"]


def test_gold_control_replies() -> None:
    task = _task()
    ref, broken = repo.control_fields(task, "reference"), repo.control_fields(task, "broken")
    assert ref["tests"] == broken["tests"] == ["repo-test:" + t for t in repo.hidden_tests(task)]
    assert "itertools.chain([el], seq)" in ref["code"]
    assert "raise NotImplementedError" in broken["code"] and "chain" not in broken["code"]
    assert repo.final_code(ref["code"], task) == ref["code"]


def test_a_unit_outcome_comes_from_its_own_test() -> None:
    node = f"{repo.UNITS_FILE}::test_unit_0"
    res = SampleResult("s", "t", "failed", {node: "failed", "x.py::t[1]": "passed",
                                            "x.py::t[2]": "skipped"}, "detail", 1.0,
                       messages={node: "AssertionError: got [2, 1]"})
    assert repo._unit_row(res, node) == {"duration_s": 1.0, "outcome": "failed",
                                         "detail": "AssertionError: got [2, 1]"}
    assert repo._unit_row(res, "x.py::t")["outcome"] == "failed"       # a skip is no pass
    assert repo._unit_row(res, "x.py::u")["outcome"] == "error"        # never ran
    late = SampleResult("s", "t", "timeout", {}, "timed out", 9.0)
    assert repo._unit_row(late, node)["outcome"] == "timeout"


def test_sources_and_hyperparameters(tmp_path: Path) -> None:
    found = repo.resolve_sources({"x": "a/x.tar.gz"}, tmp_path, sources_dir=DATA)
    assert found["toolz-1.0.0"] == DATA / "toolz-1.0.0.tar.gz"
    assert found["x"] == tmp_path / "a" / "x.tar.gz"
    with pytest.raises(ConfigError, match="not a folder"):
        repo.resolve_sources(None, sources_dir=tmp_path / "missing")
    with pytest.raises(ConfigError, match="sources_dir"):
        SelfAlignModel.check_hyperparameters({"generator": "reference", "sources_dir": 3})
    with pytest.raises(ConfigError, match="repo_timeout"):
        SelfAlignModel.check_hyperparameters({"generator": "reference", "repo_timeout": 0})


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> repo.RepoUnitRunner:
    cache = tmp_path_factory.mktemp("repo-units") / repo.REPO_UNITS_FILE
    return repo.RepoUnitRunner(repo.resolve_sources(None, sources_dir=DATA), cache)


SANDBOX = {"backend": "local", "workers": 2, "min_isolation": "kernel"}
SOURCES = {"toolz-1.0.0": str(DATA / "toolz-1.0.0.tar.gz")}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_gold_controls_on_a_repository_function(runner: repo.RepoUnitRunner,
                                                tmp_path: Path) -> None:
    """reference aligns at try 1 on the repository's tests and scores 1.0; broken never."""
    task = _task()
    rows = {}
    for variant in ("reference", "broken"):
        ws = tmp_path / variant
        ws.mkdir()
        out = run_task(task, ControlResponder(variant), runner, TryStore(ws / TRIES_FILE),
                       LoopSettings(max_tries=3))
        assert (out.aligned_at, len(out.tries)) == ((1, 1) if variant == "reference" else (None, 3))
        assert out.tries[0].extra["control"] == variant
        context = MetricContext(records=lambda: iter([task]), workspace=ws, sandbox=SANDBOX,
                                show_progress=False)
        rows[variant] = selfalign(None, [{}], context, k=[1], mutants=1, sources=SOURCES)
    ref, broken = rows["reference"], rows["broken"]
    assert ref["align@1"] == ref["hidden_pass@1"] == ref["hidden_pass@1_first"] == 1.0
    assert ref["test_validity"] == 1.0 and ref["false_alignment"] == 0.0
    assert ref["mutants"] + ref["equivalent_mutants"] == 1
    assert broken["align_rate"] == broken["hidden_pass@1"] == 0.0
    assert math.isnan(broken["false_alignment"]) and broken["test_validity"] == 1.0
    assert broken["tries_per_task"] == 3.0


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_tests_that_agree_with_wrong_code_inside_the_repository(runner: repo.RepoUnitRunner,
                                                                tmp_path: Path) -> None:
    """A recorded model appends instead of prepending and writes a test that agrees: aligned
    at try 2 after a failing test's message went back, yet the repository's test fails it."""
    task = _task()
    wrong = "def cons(el, seq):\n    return iter(list(seq) + [el])\n"
    replies = {CONS: [
        {"code": wrong, "tests": ["assert list(cons(1, [2, 3])) == [1, 2, 3]"]},
        {"code": wrong, "tests": ["assert list(cons(1, [2, 3])) == [2, 3, 1]"]}]}
    store = TryStore(tmp_path / TRIES_FILE)
    out = run_task(task, _replay(tmp_path, replies), runner, store,
                   LoopSettings(max_tries=3, tests_per_task=1))
    assert out.aligned_at == 2
    first = out.tries[0].units[0]
    assert first["outcome"] == "failed" and "got [2, 3, 1]" in first["detail"]
    assert "got [2, 3, 1]" in out.tries[1].messages[1]["content"]     # the feedback
    context = MetricContext(records=lambda: iter([task]), workspace=tmp_path, sandbox=SANDBOX,
                            show_progress=False)
    row = selfalign(None, [{}], context, k=[1, 2], mutants=0, sources=SOURCES)
    assert row["align@1"] == 0.0 and row["align@2"] == 1.0
    assert row["hidden_pass@1"] == 0.0 and row["false_alignment"] == 1.0
    assert row["test_validity"] == 0.0          # its final test fails on the original function
    # a plain row (no loop) on the same task is graded by the same repository tests
    plain = [{"task_id": CONS, "samples": [{"raw_output": f"```python\n{wrong}```",
                                            "code": wrong, "error": None}]}]
    fresh = tmp_path / "plain"
    fresh.mkdir()
    context = MetricContext(records=lambda: iter([task]), workspace=fresh, sandbox=SANDBOX,
                            show_progress=False)
    row = selfalign(None, plain, context, k=[1], mutants=0, sources=SOURCES)
    assert row["hidden_pass@1"] == 0.0 and row["plain_tasks"] == 1
    assert json.loads((tmp_path / TRIES_FILE).read_text().splitlines()[0])["try"] == 1


PG_SOURCES = {"dataset-2.0.0": str(DATA / "dataset-2.0.0.tar.gz")}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_gold_controls_on_a_method_of_a_postgresql_task(tmp_path: Path) -> None:
    """A method (``Table.count``) of the PostgreSQL set through the loop and the
    metric: reference aligns at try 1 on the repository's tests, each run on a database of its
    own, and scores 1.0; broken never aligns. The runner's service is stopped when it closes."""
    from core.scenarios.repo.postgres import PostgresUnavailable

    task = _postgres_task(COUNT)
    rows = {}
    for variant in ("reference", "broken"):
        ws = tmp_path / variant
        ws.mkdir()
        try:
            with repo.RepoUnitRunner(repo.resolve_sources(None, sources_dir=DATA), ws / repo.REPO_UNITS_FILE) as runner:
                out = run_task(task, ControlResponder(variant), runner, TryStore(ws / TRIES_FILE),
                               LoopSettings(max_tries=2))
                service = runner.service(task)
                assert service is not None and service.pid is not None
        except PostgresUnavailable as exc:
            pytest.skip(exc.render())
        assert service.pid is None                                  # stopped with the runner
        assert (out.aligned_at, len(out.tries)) == ((1, 1) if variant == "reference" else (None, 2))
        context = MetricContext(records=lambda: iter([task]), workspace=ws, sandbox=SANDBOX,
                                show_progress=False)
        rows[variant] = selfalign(None, [{}], context, k=[1], mutants=1, sources=PG_SOURCES)
    ref, broken = rows["reference"], rows["broken"]
    assert ref["align@1"] == ref["hidden_pass@1"] == 1.0 and ref["test_validity"] == 1.0
    assert ref["mutants"] + ref["equivalent_mutants"] == 1
    assert broken["align_rate"] == broken["hidden_pass@1"] == 0.0


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_method_whose_tests_agree_with_wrong_code_on_postgresql(tmp_path: Path) -> None:
    """A recorded model writes ``Table.count`` as ``return 0`` and a test that builds a table
    on the sample's own PostgreSQL database (``dataset.connect()`` reads ``DATABASE_URL``; the
    test asserts the dialect) and counts it: aligned at try 1, and the repository's tests fail
    it -- false alignment on a method of a service task; the test is valid on the original."""
    from core.scenarios.repo.postgres import PostgresUnavailable

    task = _postgres_task(COUNT)
    wrong = "def count(self, *_clauses, **kwargs) -> int:\n    return 0\n"
    unit = ('import dataset\ndb = dataset.connect()\n'
            'assert db.engine.dialect.name == "postgresql" and db.create_table("t").count() == 0')
    store = TryStore(tmp_path / TRIES_FILE)
    try:
        with repo.RepoUnitRunner(repo.resolve_sources(None, sources_dir=DATA),
                                 tmp_path / repo.REPO_UNITS_FILE) as runner:
            out = run_task(task, _replay(tmp_path, {COUNT: [{"code": wrong, "tests": [unit]}]}), runner,
                           store, LoopSettings(max_tries=2, tests_per_task=1, test_style="free"))
    except PostgresUnavailable as exc:
        pytest.skip(exc.render())
    assert out.aligned_at == 1, out.final.units
    context = MetricContext(records=lambda: iter([task]), workspace=tmp_path, sandbox=SANDBOX,
                            show_progress=False)
    row = selfalign(None, [{}], context, k=[1], mutants=0, sources=PG_SOURCES)
    assert row["align@1"] == 1.0 and row["hidden_pass@1"] == 0.0 and row["false_alignment"] == 1.0
    assert row["test_validity"] == 1.0          # the test passes on the original method too
