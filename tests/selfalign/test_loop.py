"""The self-align loop in the real sandbox: gold controls, recorded replies, resume, invalid and
hostile model-written tests.

Replies come from the project's gold controls or from the ``replay`` generator (a real
generator of the project, replaying recorded replies keyed ``<task_id>#try<n>``), so every
path is the production one; the model's behaviour on demand (a wrong first try, an unreadable
reply) is what the recordings provide. The embedded model runs in test_job.py."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.generation import create_generator
from core.generation.types import DecodingSettings
from core.scenarios.selfalign.loop import (ControlResponder, GeneratorResponder, LoopSettings,
                                           run_task)
from core.scenarios.selfalign.sandbox import SandboxSettings, UnitRunner
from core.scenarios.selfalign.store import TryStore
from tests.scenarios.conftest import BENCH, read_jsonl

HUMANEVAL = BENCH / "codegen" / "data" / "humaneval_subset.jsonl"

TASK = {"task_id": "toy/inc", "entry_point": "inc",
        "prompt": "def inc(x: int) -> int:\n    \"\"\"x plus one\"\"\"\n",
        "canonical_solution": "    return x + 1\n",
        "test": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(-1) == 0\n"}
GOOD = "def inc(x: int) -> int:\n    return x + 1\n"
WRONG = "def inc(x: int) -> int:\n    return x + 2\n"
TESTS = ["assert inc(1) == 2", "assert inc(0) == 1", "assert inc(-5) == -4"]


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("units") / "units.jsonl"
    with UnitRunner(SandboxSettings(options={"min_isolation": "process", "workers": 2}),
                    path) as r:
        yield r


def _replay(tmp_path: Path, replies: dict[str, list[Any]]) -> GeneratorResponder:
    """A responder replaying ``replies[task_id][try - 1]`` (a dict is sent as JSON)."""
    path = tmp_path / "replies.jsonl"
    with path.open("w") as fh:
        for task_id, tries in replies.items():
            for n, reply in enumerate(tries, 1):
                text = reply if isinstance(reply, str) else json.dumps(reply)
                fh.write(json.dumps({"task_id": f"{task_id}#try{n}", "solution": text}) + "\n")
    return GeneratorResponder(create_generator("replay", samples_path=str(path)),
                              DecodingSettings(temperature=0.0))


def test_gold_controls_align_at_once_and_never(runner: UnitRunner, tmp_path: Path) -> None:
    records = read_jsonl(HUMANEVAL)[:4]
    store = TryStore(tmp_path / "tries.jsonl")
    for record in records:
        gold = run_task(record, ControlResponder("reference"), runner, store, LoopSettings())
        assert gold.aligned_at == 1 and len(gold.tries) == 1
        assert [u["outcome"] for u in gold.final.units] == ["passed"]
    broken_store = TryStore(tmp_path / "broken.jsonl")
    for record in records:
        broken = run_task(record, ControlResponder("broken"), runner, broken_store,
                          LoopSettings(max_tries=3))
        assert broken.aligned_at is None and len(broken.tries) == 3
        assert all(u["outcome"] == "error" for t in broken.tries for u in t.units)
        # tries 2 and 3 repeat try 2's messages exactly: not sent again, cost kept
        assert broken.tries[2].extra == {"repeat_of": 2, "control": "broken"}


def test_feedback_fixes_the_code_and_generate_code_keeps_the_tests(
        runner: UnitRunner, tmp_path: Path) -> None:
    responder = _replay(tmp_path, {"toy/inc": [{"code": WRONG, "tests": TESTS},
                                               {"code": GOOD}]})
    out = run_task(TASK, responder, runner, TryStore(tmp_path / "t.jsonl"),
                   LoopSettings(generate="code"))
    first, second = out.tries
    assert [u["outcome"] for u in first.units] == ["failed"] * 3 and not first.aligned
    assert second.asked == {"code": True, "tests": False} and second.tests == TESTS
    assert out.aligned_at == 2
    fed_back = second.messages[1]["content"]
    assert "got 3" in fed_back and "return x + 2" in fed_back   # inc(1) returned 3
    assert "candidate(-1)" not in json.dumps(second.messages)    # never the hidden tests


def test_unreadable_reply_is_a_counted_parse_failure(runner: UnitRunner, tmp_path: Path) -> None:
    responder = _replay(tmp_path, {"toy/inc": ['{"code": "def inc(x', {"code": GOOD, "tests": TESTS}]})
    out = run_task(TASK, responder, runner, TryStore(tmp_path / "t.jsonl"), LoopSettings())
    assert out.tries[0].parse_error == "not_json" and out.tries[0].units == []
    assert "could not be read (not_json)" in out.tries[1].messages[1]["content"]
    assert out.aligned_at == 2


def test_invalid_and_hostile_tests_are_never_passes(runner: UnitRunner, tmp_path: Path) -> None:
    tests = ["assert inc(1) == 2",
             "import os\nassert inc(1) == 2",                   # unavailable import
             "assert 2 == 2",                                   # never calls the function
             "assert inc(1) == 2\nraise SystemExit(0)",          # ends the judge's test early
             "assert inc(1) == 3 or exit(0)"]                   # tries to exit with success
    responder = _replay(tmp_path, {"toy/inc": [{"code": GOOD, "tests": tests}]})
    out = run_task(TASK, responder, runner, TryStore(tmp_path / "t.jsonl"),
                   LoopSettings(max_tries=1, tests_per_task=5, test_style="free"))
    units = out.final.units
    assert units[0]["outcome"] == "passed"
    assert (units[1]["outcome"], units[1]["reason"]) == ("invalid", "import:os")
    assert (units[2]["outcome"], units[2]["reason"]) == ("invalid", "no_call")
    assert units[3]["outcome"] not in ("passed", "invalid"), units[3]  # ran, and is no pass
    assert units[4]["reason"] == "unsafe:calls exit"
    assert units[3]["ran"] and not out.final.aligned
    assert all(not u["ran"] for u in units if u["outcome"] == "invalid")


def test_resume_repeats_no_finished_try(runner: UnitRunner, tmp_path: Path) -> None:
    replies = {"toy/inc": [{"code": WRONG, "tests": TESTS}, {"code": WRONG, "tests": TESTS[:1] * 3},
                           {"code": GOOD, "tests": TESTS}]}
    path = tmp_path / "t.jsonl"
    first = run_task(TASK, _replay(tmp_path, replies), runner, TryStore(path), LoopSettings())
    assert first.aligned_at == 3
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:2]) + "\n")   # as if killed during try 3
    again = run_task(TASK, _replay(tmp_path, replies), runner, TryStore(path), LoopSettings())
    assert again.aligned_at == 3
    assert path.read_text().splitlines()[:2] == lines[:2] and len(path.read_text().splitlines()) == 3
    # a finished task makes no new try
    done = run_task(TASK, _replay(tmp_path, replies), runner, TryStore(path), LoopSettings())
    assert [t.key for t in done.tries] == [t.key for t in again.tries]
    assert len(path.read_text().splitlines()) == 3
    # another model (here: other recordings) does not reuse these tries
    other = run_task(TASK, _replay(tmp_path, {"toy/inc": [{"code": GOOD, "tests": TESTS}]}),
                     runner, TryStore(path), LoopSettings())
    assert other.aligned_at == 1 and len(path.read_text().splitlines()) == 4
    assert [t.key for t in TryStore(path).tries("toy/inc")] == [other.tries[0].key]
