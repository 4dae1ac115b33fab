"""The selfalign metric from stored tries (no model): alignment, hidden pass@1, false
alignment, validity, mutation score and cost, with every program graded in the sandbox."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from core.scenarios.selfalign.loop import LoopSettings, run_task
from core.scenarios.selfalign.metrics import selfalign
from core.scenarios.selfalign.mutants import make_mutants
from core.scenarios.selfalign.sandbox import SandboxSettings, UnitRunner
from core.scenarios.selfalign.store import TRIES_FILE, TryStore
from core.testcasecontroller.metrics.calling import MetricContext
from tests.selfalign.test_loop import GOOD, TASK, WRONG, _replay

SANDBOX = {"backend": "local", "timeout": 3, "memory_mb": 1024, "min_isolation": "process"}
#: a second task whose code is wrong yet passes its own (wrong) test: false alignment
TWICE = {"task_id": "toy/twice", "entry_point": "twice",
         "prompt": "def twice(x: int) -> int:\n    \"\"\"x times two\"\"\"\n",
         "canonical_solution": "    return x * 2\n",
         "test": "def check(candidate):\n    assert candidate(3) == 6\n    assert candidate(0) == 0\n"}


def test_mutants_are_deterministic_and_change_the_function() -> None:
    module = TASK["prompt"] + TASK["canonical_solution"]
    first = make_mutants(module, "inc", 10)
    assert [m.operator for m in first] == ["RET", "AOR", "CRP"]   # ast.walk order
    assert [m.code for m in first] == [m.code for m in make_mutants(module, "inc", 10)]
    assert "return None" in first[0].code
    assert "return x - 1" in first[1].code and "return x + 2" in first[2].code
    assert make_mutants(module, "missing", 10) == [] and make_mutants("def (", "inc", 3) == []
    assert len(make_mutants(module, "inc", 2)) == 2


@pytest.mark.slow
def test_metric_row_from_stored_tries(tmp_path: Path) -> None:
    replies = {
        # inc: wrong at try 1, right at try 2 (aligned, hidden pass); weak tests
        "toy/inc": [{"code": WRONG, "tests": ["assert inc(1) == 2", "assert inc(2) > 1"]},
                    {"code": GOOD, "tests": ["assert inc(1) > 0", "assert inc(2) > 1"]}],
        # twice: x + x + 1 with a test that agrees with it: aligned, hidden fail
        "toy/twice": [{"code": "def twice(x):\n    return x + x + 1\n",
                       "tests": ["assert twice(1) == 3", "import os\nassert twice(0) == 1"]},
                      {"code": "def twice(x):\n    return x + x + 1\n",
                       "tests": ["assert twice(1) == 3", "assert twice(2) == 5"]}],
    }
    responder = _replay(tmp_path, replies)
    store = TryStore(tmp_path / TRIES_FILE)
    with UnitRunner(SandboxSettings(options={"min_isolation": "process"})) as runner:
        for record in (TASK, TWICE):
            run_task(record, responder, runner, store, LoopSettings(max_tries=3, tests_per_task=2,
                                                                   test_style="free"))
    records = [TASK, TWICE]
    context = MetricContext(records=lambda: iter(records), workspace=tmp_path, sandbox=SANDBOX,
                            show_progress=False)
    row = selfalign(None, [{}, {}], context, k=[1, 2])
    assert row["tasks"] == 2 and row["tries"] == 4 and row["tries_per_task"] == 2.0
    assert row["align@1"] == 0.0 and row["align@2"] == row["align_rate"] == 1.0
    assert row["hidden_pass@1"] == 0.5 and row["hidden_pass@1_first"] == 0.0
    assert row["false_aligned"] == 1 and row["false_alignment"] == 0.5
    # final tests on the reference: inc's 2 hold; twice's expect 3 and 5 from 2 and 4: invalid
    assert row["test_validity"] == 0.5
    assert row["invalid_tests"] == 0.125           # 1 of 8 graded units (import os)
    assert row["parse_failures"] == 0
    # inc: None killed (TypeError), x - 1 killed (inc(1) = 0), x + 2 survives 'inc(1) > 0';
    # twice: its final tests fail on the reference, so they kill none of its 3 mutants
    # (a wrong test fails on every program; counting that as killing would reward it)
    assert (row["mutants"], row["equivalent_mutants"]) == (6, 0)
    assert row["mutation_score"] == 0.3333
    assert row["tokens_per_task"] == 0.0 and math.isnan(row["tokens_per_aligned"]) is False
    curves = json.loads((tmp_path / "selfalign_per_try.json").read_text())
    assert curves["align"] == [0.0, 1.0] and curves["hidden_pass@1"] == [0.0, 0.5]
    assert curves["false_alignment"][1] == 0.5
    # intervals over the 2 tasks: try 1 aligned none (0 wide at 0; no aligned task, so false
    # alignment has none); try 2 aligned both, one of them wrongly: resampling spans 0..1
    bands = curves["intervals"]
    assert bands["align_95"] == [[0.0, 0.0], [1.0, 1.0]]
    assert bands["false_alignment_95"][0] == [None, None]
    assert bands["hidden_pass@1_95"][1] == [0.0, 1.0] == bands["false_alignment_95"][1]
    assert (tmp_path / "selfalign_per_try.png").stat().st_size > 1000
    again = selfalign(None, [{}, {}], context, k=[1, 2])   # a re-score: same row, from caches
    assert again == row


@pytest.mark.slow
def test_plain_row_is_graded_on_base_and_amplified_tests(tmp_path: Path) -> None:
    """A row without the loop (the ``plain`` codegen basemodel) gets hidden pass@1 on the base
    and on the amplified tests, graded in the sandbox like the loop's final code."""
    plus = "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(10) == 11\n"
    inc = {**TASK, "metadata": {"test_plus": {"test": plus}}}
    # hard-codes the base test's two cases: passes them, fails the amplified input 10
    cheat = "def inc(x: int) -> int:\n    return {1: 2, -1: 0}.get(x, 0)\n"
    preds = [{"task_id": "toy/inc", "samples": [{"task_id": "toy/inc", "sample_index": 0,
                                                 "code": cheat, "error": None}]},
             {"task_id": "toy/twice", "samples": [{"task_id": "toy/twice", "sample_index": 0,
                                                   "code": "def twice(x):\n    return 2 * x\n",
                                                   "error": None}]}]
    records = [inc, TWICE]
    context = MetricContext(records=lambda: iter(records), workspace=tmp_path, sandbox=SANDBOX,
                            show_progress=False)
    row = selfalign(None, preds, context, k=[1, 2], mutants=0)
    assert row["hidden_pass@1"] == 1.0 and row["hidden_pass@1_plus"] == 0.0
    assert row["plus_tasks"] == 1 and row["plain_tasks"] == 2 and row["tasks"] == 0
    assert math.isnan(row["align_rate"]) and math.isnan(row["test_validity"])
    assert set(row) == set(selfalign.columns(k=[1, 2]))
    # a loop row whose every task failed to generate is not a plain row: nothing graded
    failed = [{"task_id": r["task_id"], "samples": [{"code": "", "error": "server down"}]}
              for r in records]
    row = selfalign(None, failed, context, k=[1, 2], mutants=0)
    assert row["unfinished"] == 2 and math.isnan(row["hidden_pass@1"])


@pytest.mark.slow
def test_a_test_that_fails_on_the_reference_kills_no_mutant(tmp_path: Path) -> None:
    """The wrong ``assert inc(1) == 5`` fails on every program, mutants included; it must kill
    none of them, while the right ``assert inc(1) > 0`` kills the two that break it (None and
    x - 1; x + 2 survives). Each row has one task whose final tests are just that one."""
    scores = {}
    for name, test in (("wrong", "assert inc(1) == 5"), ("right", "assert inc(1) > 0")):
        workspace = tmp_path / name
        workspace.mkdir()
        responder = _replay(workspace, {"toy/inc": [{"code": GOOD, "tests": [test]}]})
        store = TryStore(workspace / TRIES_FILE)
        with UnitRunner(SandboxSettings(options={"min_isolation": "process"})) as runner:
            run_task(TASK, responder, runner, store,
                     LoopSettings(max_tries=1, tests_per_task=1, test_style="free"))
        context = MetricContext(records=lambda: iter([TASK]), workspace=workspace,
                                sandbox=SANDBOX, show_progress=False)
        row = selfalign(None, [{}], context, k=[1])
        assert row["mutants"] == 3 and row["equivalent_mutants"] == 0
        scores[name] = (row["mutation_score"], row["test_validity"])
    assert scores["wrong"] == (0.0, 0.0)
    assert scores["right"] == (0.6667, 1.0)
