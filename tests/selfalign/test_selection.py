"""The selection baselines beside the loop (issue 48): CodeT's dual execution agreement and the
prompt-examples anchor over K samples, in the real sandbox, graded by the selfalign metric.

Samples come from the ``replay`` generator (recorded replies keyed ``<task_id>#sample<k>``) or
from the gold controls, so which program is right is known; the example job runs through the
real ``ianvs`` entry point with the gold controls."""
from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from core.common.errors import ConfigError
from core.generation import create_generator
from core.generation.types import DecodingSettings
from core.scenarios.selfalign.loop import GeneratorResponder, LoopSettings, Reply
from core.scenarios.selfalign.metrics import selfalign
from core.scenarios.selfalign.model import SelfAlignModel
from core.scenarios.selfalign.sandbox import SandboxSettings, UnitRunner
from core.scenarios.selfalign.selection import (SELECTION_FILE, SampleStore, SelectionSettings,
                                                SelectionStore, anchor_choice, codet_choice,
                                                codet_groups, draw_samples, select_task)
from core.testcasecontroller.metrics.calling import MetricContext
from tests.runner.conftest import run_cli
from tests.scenarios.conftest import BENCH, cut_test_index

SANDBOX = {"backend": "local", "timeout": 3, "memory_mb": 1024, "min_isolation": "process"}

#: a task whose prompt states one example (inc(1) is 2)
TASK = {"task_id": "toy/inc", "entry_point": "inc",
        "prompt": "def inc(x: int) -> int:\n    \"\"\"x plus one\n    >>> inc(1)\n    2\n"
                  "    \"\"\"\n",
        "canonical_solution": "    return x + 1\n",
        "test": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(-1) == 0\n"}
GOOD = "def inc(x: int) -> int:\n    return x + 1\n"
WRONG = "def inc(x: int) -> int:\n    return x + 2\n"
DOUBLE = "def inc(x: int) -> int:\n    return 2 * x\n"
#: two samples write the same wrong program with tests that agree with it (the majority); one
#: writes the right program with right tests; one doubles (it passes a right test, inc(1) == 2,
#: and a wrong one); the last reply cannot be read
REPLIES: list[Any] = [
    {"code": WRONG, "tests": ["assert inc(1) == 3", "assert inc(0) == 2"]},
    {"code": GOOD, "tests": ["assert inc(1) == 2", "assert inc(5) == 6"]},
    {"code": WRONG, "tests": ["assert inc(2) == 4", "assert inc(1) == 3"]},
    {"code": DOUBLE, "tests": ["assert inc(1) == 2", "assert inc(3) == 6"]},
    '{"code": "def inc(x',
]


class _Counting:
    """A responder that counts the replies it was asked for (the resume check)."""

    def __init__(self, inner: GeneratorResponder) -> None:
        self.inner, self.deterministic, self.calls = inner, inner.deterministic, 0
        self.down: set[int] = set()     # samples whose backend call fails (server down)

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def reply(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.inner.reply(*args, **kwargs)

    def sample_replies(self, *args: Any) -> Any:
        for k, reply in self.inner.sample_replies(*args):
            self.calls += 1
            yield k, (Reply("", True, error="server down") if k in self.down else reply)


def _replay(tmp_path: Path, task_id: str, replies: list[Any]) -> _Counting:
    path = tmp_path / "replies.jsonl"
    with path.open("w") as fh:
        for k, reply in enumerate(replies):
            text = reply if isinstance(reply, str) else json.dumps(reply)
            fh.write(json.dumps({"task_id": f"{task_id}#sample{k}", "solution": text}) + "\n")
    return _Counting(GeneratorResponder(create_generator("replay", samples_path=str(path)),
                                        DecodingSettings(temperature=0.8, seed=1)))


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("units") / "units.jsonl"
    with UnitRunner(SandboxSettings(options={"min_isolation": "process", "workers": 2}),
                    path) as r:
        yield r


def test_codet_groups_score_and_break_ties_deterministically() -> None:
    a, b = frozenset({0, 1}), frozenset({2})
    # {0, 1} x 1 program = 2; {2} x 2 programs = 2: a tie on score goes to more programs
    groups = codet_groups([a, b, None, b])
    assert [(g["members"], g["passed"], g["score"]) for g in groups] == \
        [([1, 3], [2], 2), ([0], [0, 1], 2)]
    assert codet_choice([a, b, None, b]) == (1, True)
    # the same score and size: the group holding the earlier sample
    one, other = frozenset({0}), frozenset({1})
    assert codet_choice([one, other]) == (0, True) and codet_choice([other, one]) == (0, True)
    assert codet_choice([b, a]) == (1, True)              # a higher score wins wherever it is
    # no program passes a unit: no consensus, the first sample with a program
    assert codet_choice([None, frozenset(), frozenset()]) == (1, False)
    assert codet_choice([None, None]) == (None, False)
    assert anchor_choice([None, False, True, True]) == 2 and anchor_choice([False]) is None


def test_codet_picks_the_majority_and_the_anchor_the_example_passing_program(
        runner: UnitRunner, tmp_path: Path) -> None:
    responder = _replay(tmp_path, "toy/inc", REPLIES)
    store = SampleStore(tmp_path / "samples.jsonl")
    samples = draw_samples(TASK, responder, runner, store, LoopSettings(tests_per_task=2), 5)
    assert responder.calls == 5
    assert [s.extra["sample"] for s in samples] == [0, 1, 2, 3, 4]
    assert samples[4].parse_error == "not_json" and samples[4].code == ""
    # every readable sample agrees with its own tests, the wrong ones included
    assert [s.aligned for s in samples] == [True, True, True, True, False]
    codet = select_task(TASK, samples, runner, SelectionSettings("codet"),
                        SelectionStore(tmp_path / "codet.jsonl"))
    assert codet["units"] == ["assert inc(1) == 3", "assert inc(0) == 2", "assert inc(1) == 2",
                              "assert inc(5) == 6", "assert inc(2) == 4", "assert inc(3) == 6"]
    assert codet["matrix"][4] is None                     # no program: no candidate
    # x + 2 twice, passing its 3 tests (score 6), beats 2x (inc(1) == 2, inc(2) == 4 and
    # inc(3) == 6: 3) and x + 1 (inc(1) == 2 and inc(5) == 6: 2)
    assert codet["groups"][0] == {"members": [0, 2], "passed": [0, 1, 4], "score": 6}
    assert [(g["members"], g["score"]) for g in codet["groups"]] == [([0, 2], 6), ([3], 3),
                                                                     ([1], 2)]
    assert (codet["selected"], codet["agreed"], codet["fallback"]) == (0, True, None)
    anchor = select_task(TASK, samples, runner, SelectionSettings("examples"),
                         SelectionStore(tmp_path / "examples.jsonl"))
    # inc(1) == 2 holds for x + 1 and for 2x: the earliest of them
    assert anchor["examples"] == 1
    assert anchor["example_pass"] == [False, True, False, True, None]
    assert (anchor["selected"], anchor["agreed"], anchor["fallback"]) == (1, True, None)
    # a resumed run (killed after two samples) draws only the missing three
    lines = store.path.read_text().splitlines()
    store.path.write_text("\n".join(lines[:2]) + "\n")
    again = _replay(tmp_path, "toy/inc", REPLIES)
    redrawn = draw_samples(TASK, again, runner, SampleStore(store.path),
                           LoopSettings(tests_per_task=2), 5)
    assert again.calls == 3 and [s.key for s in redrawn] == [s.key for s in samples]
    # a stored choice whose samples match is reused as stored
    assert select_task(TASK, redrawn, runner, SelectionSettings("codet"),
                       SelectionStore(tmp_path / "codet.jsonl")) == codet


def test_the_anchor_falls_back_when_no_example_holds_or_none_is_stated(
        runner: UnitRunner, tmp_path: Path) -> None:
    only_wrong = [REPLIES[0], REPLIES[2], REPLIES[4]]
    samples = draw_samples(TASK, _replay(tmp_path, "toy/inc", only_wrong), runner,
                           SampleStore(tmp_path / "s.jsonl"), LoopSettings(tests_per_task=2), 3)
    codet = select_task(TASK, samples, runner, SelectionSettings("examples"),
                        SelectionStore(tmp_path / "a.jsonl"))
    assert codet["example_pass"] == [False, False, None]
    assert (codet["agreed"], codet["fallback"], codet["selected"]) == \
        (False, "no_example_passed", 0)
    silent = {**TASK, "task_id": "toy/silent", "prompt": "def inc(x: int) -> int:\n"
                                                         "    \"\"\"x plus one\"\"\"\n"}
    samples = draw_samples(silent, _replay(tmp_path, "toy/silent", [REPLIES[3], REPLIES[1]]),
                           runner, SampleStore(tmp_path / "s2.jsonl"),
                           LoopSettings(tests_per_task=2), 2)
    first = select_task(silent, samples, runner, SelectionSettings("examples", 2, "first"),
                        SelectionStore(tmp_path / "b.jsonl"))
    assert (first["examples"], first["fallback"], first["selected"]) == (0, "no_examples", 0)
    assert first["matrix"] == [None, None]                # 'first' needs no agreement runs
    # codet's choice instead: 2x passes inc(1) == 2 and its own inc(3) == 6 (2 units, 1
    # program); x + 1 passes inc(1) == 2 and inc(5) == 6: the same score and size, so the
    # earlier sample, 2x
    via = select_task(silent, samples, runner, SelectionSettings("examples", 2, "codet"),
                      SelectionStore(tmp_path / "c.jsonl"))
    assert (via["fallback"], via["selected"]) == ("no_examples", 0)


def test_metric_grades_the_selected_program_on_the_hidden_tests(
        runner: UnitRunner, tmp_path: Path) -> None:
    """CodeT's majority is wrong here and the anchor's program right: the metric grades each
    row's selected program, counts the agreement and the false agreement, and the samples'
    own pass@1."""
    samples = draw_samples(TASK, _replay(tmp_path, "toy/inc", REPLIES), runner,
                           SampleStore(tmp_path / "samples.jsonl"),
                           LoopSettings(tests_per_task=2), 5)
    rows = {}
    for method in ("codet", "examples"):
        case = tmp_path / method
        case.mkdir()
        select_task(TASK, samples, runner, SelectionSettings(method),
                    SelectionStore(case / SELECTION_FILE))
        context = MetricContext(records=lambda: iter([TASK]), workspace=case, sandbox=SANDBOX,
                                show_progress=False)
        rows[method] = selfalign(None, [{}], context, k=[1])
        assert set(rows[method]) == set(selfalign.columns(k=[1]))
    codet, anchor = rows["codet"], rows["examples"]
    assert codet["hidden_pass@1"] == 0.0 and anchor["hidden_pass@1"] == 1.0
    assert codet["agreed"] == anchor["agreed"] == 1
    assert codet["false_agreement"] == 1.0 and anchor["false_agreement"] == 0.0
    assert codet["fallbacks"] == anchor["fallbacks"] == 0
    assert math.isnan(codet["no_examples"]) and anchor["no_examples"] == 0
    # one of the 5 samples passes the hidden tests (the unreadable one is graded as its stub)
    assert codet["sample_pass@1"] == anchor["sample_pass@1"] == 0.2
    assert codet["hidden_pass@1_first"] == 0.0 and codet["samples"] == 5
    assert codet["parse_failures"] == 1 and codet["tasks"] == 1
    # distinct sampled tests (inc(1) == 3 is written twice) holding on the reference:
    # inc(1) == 2 and inc(5) == 6 of 6
    assert codet["test_validity"] == 0.3333
    assert math.isnan(codet["align_rate"]) and math.isnan(codet["false_alignment"])
    per_task = [json.loads(line) for line in
                (tmp_path / "codet" / "selfalign_per_task.jsonl").read_text().splitlines()]
    assert per_task[0]["hidden_pass"] == [False, True, False, False, False]


@pytest.mark.parametrize("params, text", [
    ({"selection": "codeT"}, "selection must be one of loop, codet, examples"),
    ({"selection": "codet", "temperature": 0.0, "seed": 1}, "greedy decoding"),
    ({"selection": "codet", "temperature": 0.8}, "needs a seed"),
    ({"samples": 5}, "not of the loop"),
    ({"selection": "codet", "anchor_fallback": "first", "temperature": 0.8, "seed": 1},
     "anchor_fallback is a setting of selection: examples"),
    ({"selection": "examples", "anchor_fallback": "none", "temperature": 0.8, "seed": 1},
     "anchor_fallback must be one of codet, first"),
    ({"selection": "codet", "samples": 0, "temperature": 0.8, "seed": 1}, "samples must be"),
])
def test_bad_selection_hyperparameters_are_refused(params: dict, text: str) -> None:
    with pytest.raises(ConfigError, match=text):
        SelfAlignModel.check_hyperparameters(params)


def test_selection_hyperparameters() -> None:
    model = SelfAlignModel(selection="examples", samples=3, temperature=0.8, seed=7)
    assert model.selection is not None and model.selection.describe() == \
        {"method": "examples", "samples": 3, "anchor_fallback": "codet"}
    assert SelfAlignModel().selection is None
    # the gold controls draw the same reply each time: no temperature needed
    SelfAlignModel.check_hyperparameters({"generator": "reference", "selection": "codet"})


FULL_TASKS = ("HumanEval/0", "HumanEval/41", "HumanEval/47")


def _full_job(tmp_path: Path) -> Path:
    """The full job with the gold controls in every model row (``canonical`` for plain), no
    mutants, the loop greedy only, on :data:`FULL_TASKS`: /0 states examples its reference
    passes, /41 states none, /47's prompt states a median its reference (and the hidden test)
    contradicts."""
    root = tmp_path / "selfalign"
    shutil.copytree(BENCH / "selfalign", root, ignore=shutil.ignore_patterns("workspace"))
    algs = root / "testalgorithms"
    for path, old, new in (
            (algs / "gen" / "full_loop_algorithm.yaml", '["embedded"]', '["reference", "broken"]'),
            (algs / "gen" / "full_loop_algorithm.yaml", "[0.0, 0.8]", "[0.0]"),
            (algs / "gen" / "full_select_algorithm.yaml", '["embedded"]',
             '["reference", "broken"]'),
            (algs / "plain" / "plain_algorithm.yaml", '["embedded"]', '["canonical"]'),
            (root / "testenv" / "testenv_full.yaml", "mutants: 10", "mutants: 0")):
        text = path.read_text()
        assert old in text, (path, old)
        path.write_text(text.replace(old, new))
    cut_test_index(root, lambda records: [r for r in records if r["task_id"] in FULL_TASKS],
                   testenv="testenv_full.yaml")
    return root


@pytest.mark.slow
def test_full_job_gold_controls_through_ianvs(tmp_path: Path) -> None:
    """Every row of benchmarkingjob_full.yaml with the gold controls: ``reference`` scores
    1.0 and ``broken`` 0.0 in the loop, under CodeT and under the anchor; plain canonical 1.0.
    CodeT and the anchor share one set of samples."""
    root = _full_job(tmp_path)
    res = run_cli("-f", str(root / "benchmarkingjob_full.yaml"), "--no-progress", "--no-report",
                  cwd=root, timeout=900)
    assert res.returncode == 0, res.stderr[-4000:]
    rank = csv.DictReader(open(next(root.glob("workspace/*/rank/all_rank.csv"))))
    rows = {(r["algorithm"], r["basemodel-generator"], r.get("basemodel-selection") or ""): r
            for r in rank}
    assert set(rows) == {("selfalign", g, "") for g in ("reference", "broken")} | \
        {("select", g, m) for g in ("reference", "broken") for m in ("codet", "examples")} | \
        {("plain", "canonical", "")}
    for key, row in rows.items():
        want = "0.0" if key[1] == "broken" else "1.0"
        assert row["hidden_pass@1"] == row["pass@1"] == want, (key, row)
    for method in ("codet", "examples"):
        ref, broken = rows[("select", "reference", method)], rows[("select", "broken", method)]
        assert ref["sample_pass@1"] == ref["hidden_pass@1_plus"] == "1.0"
        assert broken["sample_pass@1"] == "0.0" and broken["agreed"] == "0"
        assert broken["fallbacks"] == "3" and broken["false_agreement"] in ("", "nan")
        assert ref["samples"] == broken["samples"] == "15" and ref["tasks"] == "3"
        assert ref["test_validity"] == "1.0" and ref["align_rate"] in ("", "nan")
    codet = rows[("select", "reference", "codet")]
    # the hidden test is each sample's own test: all 5 programs agree on it
    assert (codet["agreed"], codet["false_agreement"], codet["fallbacks"]) == ("3", "0.0", "0")
    anchor = rows[("select", "reference", "examples")]
    # /0's examples hold; /41 states none; /47's stated median contradicts its reference: both
    # fall back to CodeT's choice, which is right
    assert (anchor["agreed"], anchor["fallbacks"], anchor["no_examples"]) == ("1", "2", "1")
    assert anchor["false_agreement"] == "0.0"
    assert rows[("select", "broken", "examples")]["no_examples"] == "1"
    assert rows[("selfalign", "reference", "")]["agreed"] in ("", "nan")
    (samples,) = root.glob("workspace/*/selfalign-shared/selfalign_samples.jsonl")
    lines = [json.loads(line) for line in samples.read_text().splitlines()]
    # 2 controls x 3 tasks x 5 samples, drawn once for both methods
    assert len(lines) == 30 and len({line["key"] for line in lines}) == 30


def test_every_stated_example_of_humaneval_is_a_valid_unit() -> None:
    """The anchor's unit passes the static checks of model-written tests on every HumanEval
    prompt that states examples (115 of 164), so no task falls back for want of a unit."""
    from core.scenarios.selfalign.selection import anchor_unit
    from tests.scenarios.conftest import read_jsonl

    records = read_jsonl(BENCH / "selfalign" / "data" / "humaneval_plus.jsonl")
    units = [anchor_unit(r) for r in records]
    assert sum(1 for n, _ in units if n) == 115
    assert all(unit is not None and unit.valid for n, unit in units if n)


def test_a_sample_the_backend_fails_stops_the_task_and_keeps_the_ones_before(
        runner: UnitRunner, tmp_path: Path) -> None:
    """The backend fails on sample 2: samples 0 and 1 are stored, the task stops with
    GenerationFailed (the basemodel leaves it for the next run), and the next run draws
    only what is missing."""
    from core.scenarios.selfalign.loop import GenerationFailed

    store = SampleStore(tmp_path / "samples.jsonl")
    down = _replay(tmp_path, "toy/inc", REPLIES)
    down.down = {2}
    with pytest.raises(GenerationFailed, match="toy/inc sample 2: server down"):
        draw_samples(TASK, down, runner, store, LoopSettings(tests_per_task=2), 3)
    assert len(store.path.read_text().splitlines()) == 2
    again = _replay(tmp_path, "toy/inc", REPLIES)
    samples = draw_samples(TASK, again, runner, SampleStore(store.path),
                           LoopSettings(tests_per_task=2), 3)
    assert again.calls == 1
    assert [s.code.endswith(c) for s, c in zip(samples, (WRONG, GOOD, WRONG))] == [True] * 3
