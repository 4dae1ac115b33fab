"""Agreement as a verdict (``python -m core.scenarios.selfalign.verdict``): the figures the doc
gives for seed 001's question, computed from rows' per-task files written here in the format the
selfalign metric writes (a loop row's and a selection row's ``selfalign_per_task.jsonl``)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from core.common.errors import IanvsError
from core.scenarios.selfalign.verdict import PER_TASK_FILE, load_row, main, pair_lines, row_lines


def _row(folder: Path, lines: list[dict[str, Any]], hyper: dict[str, Any] | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / PER_TASK_FILE).write_text("".join(json.dumps(x) + "\n" for x in lines))
    if hyper is not None:
        (folder / "case.json").write_text(json.dumps({
            "algorithm": "selfalign", "modules": {"basemodel": {"hyperparameters": hyper}}}))
    return folder


def _loop(task: str, aligned_at: int | None, hidden: list[bool]) -> dict[str, Any]:
    return {"task_id": task, "aligned_at": aligned_at, "tries": len(hidden),
            "hidden_pass": hidden, "parse_failures": 0, "tokens": 10}


def _select(task: str, agreed: bool, hidden: list[bool], selected: int) -> dict[str, Any]:
    return {"task_id": task, "method": "codet", "selected": selected, "agreed": agreed,
            "fallback": None if agreed else "no_consensus", "hidden_pass": hidden,
            "selected_pass": hidden[selected], "groups": []}


#: 10 tasks: 4 aligned (3 pass), 6 not aligned (1 passes); tasks 4 and 5 change between the
#: first and the last try (fail -> pass, pass -> fail), task 9 never produced a try
LOOP = [_loop("T/0", 1, [True]), _loop("T/1", 1, [True]), _loop("T/2", 2, [False, True]),
        _loop("T/3", 1, [False]), _loop("T/4", None, [False, False, True]),
        _loop("T/5", None, [True, False]), _loop("T/6", None, [False]),
        _loop("T/7", None, [False]), _loop("T/8", None, [False]), _loop("T/9", None, [])]


def test_a_loop_rows_agreement_against_its_hidden_verdicts(tmp_path: Path) -> None:
    row = load_row(_row(tmp_path / "case", LOOP, {"generator": "embedded", "temperature": 0.8}))
    assert row.kind == "loop" and row.name == "selfalign[generator=embedded, temperature=0.8]"
    assert [t.passed for t in row.tasks] == [True, True, True, False, True] + [False] * 5
    assert [t.first_passed for t in row.tasks][2:6] == [False, False, False, True]
    text = "\n".join(row_lines(row))
    assert "10 tasks, 4 pass the hidden tests, 4 agreed (3 of them pass)" in text
    assert "precision (agreed that pass): 0.750 (" in text
    assert "pass when not agreed: 0.167 (" in text
    assert "recall (passing that agreed): 0.750 (" in text
    # kappa: observed 8/10, expected 0.4*0.4 + 0.6*0.6 = 0.52 -> (0.8 - 0.52) / 0.48
    assert f"kappa (agreed vs passes): {(0.8 - 0.52) / 0.48:.3f} (" in text
    assert "first -> final: 2 fail -> pass, 1 pass -> fail, McNemar p = 1 (3 -> 4 passing)" in text
    assert row_lines(row) == row_lines(load_row(tmp_path / "case" / PER_TASK_FILE))


def test_a_selection_row_and_the_pair_of_rows(tmp_path: Path) -> None:
    loop = load_row(_row(tmp_path / "loop", LOOP))
    lines = [_select(f"T/{i}", i < 2, [i < 3, True], 1 if i in (6, 7) else 0) for i in range(10)]
    sel = load_row(_row(tmp_path / "sel", lines))
    assert sel.kind == "codet" and sel.name == "sel"
    assert [t.passed for t in sel.tasks] == [True] * 3 + [False] * 3 + [True] * 2 + [False] * 2
    text = "\n".join(row_lines(sel))
    assert "10 tasks, 5 pass the hidden tests, 2 agreed (2 of them pass)" in text
    assert "precision (agreed that pass): 1.000 (1.000-1.000)" in text
    assert "first -> final: 2 fail -> pass, 0 pass -> fail" in text
    pair = pair_lines(loop, sel)[0]
    # finals: loop passes 0, 1, 2, 4; sel 0, 1, 2, 6, 7 -> only loop {4}, only sel {6, 7};
    # firsts: loop passes 0, 1, 5; sel 0, 1, 2 -> equal on 8 of 10
    assert "10 shared tasks" in pair and ": 1, only in sel: 2, McNemar p = 1" in pair
    assert pair.endswith("first programs' verdicts equal on 8 of 10")


def test_a_row_with_nothing_agreed_prints_no_precision(tmp_path: Path) -> None:
    row = load_row(_row(tmp_path / "c", [_loop("T/0", None, [True]), _loop("T/1", None, [False])]))
    text = "\n".join(row_lines(row))
    # nothing to be precise about; kappa is 0 when one verdict is constant
    assert "precision (agreed that pass): -\n" in text
    assert "kappa (agreed vs passes): 0.000 (" in text


@pytest.mark.parametrize("content, expected", [
    ('{"task_id": "T/0", "n": 1}\n', "jsonl:1: not a self-align per-task line"),
    ('{"task_id": "T/0", "hidden_pass": [true]}\n', "jsonl:1: neither a loop line"),
    ('{"task_id": "T/0", "aligned_at": 1, "hidden_pass": [true]}\n{oops\n', "jsonl:2: invalid JSON"),
    ("", "no tasks"),
    ('{"task_id": "T/0", "aligned_at": 1, "hidden_pass": [true]}\n' * 2,
     "jsonl:2: task T/0 appears twice"),
])
def test_bad_files_are_named_with_their_line(tmp_path: Path, content: str, expected: str) -> None:
    (tmp_path / PER_TASK_FILE).write_text(content)
    with pytest.raises(IanvsError, match=expected):
        load_row(tmp_path)


def test_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _row(tmp_path / "a", LOOP)
    assert main([str(tmp_path / "a"), str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert out.count("(loop): 10 tasks") == 2 and "a vs a: 10 shared tasks" in out
    assert "first programs' verdicts equal on 10 of 10" in out
    assert main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "missing" in err and "Traceback" not in err


def test_the_exact_mcnemar_p_is_the_reports() -> None:
    """One exact McNemar for the report and this command (core.common.exact_tests)."""
    from core.scenarios.selfalign import verdict
    from core.storymanager.report import stats
    assert verdict.mcnemar_exact is stats.mcnemar_exact
    assert verdict.mcnemar_exact(10, 4) == pytest.approx(2 * sum(
        math.comb(14, i) for i in range(5)) / 2 ** 14)


def test_first_replies_are_compared_as_text_when_the_records_are_there(tmp_path: Path) -> None:
    """A loop folder's try-1 lines against a selection folder's sample 0: the pair line counts
    the tasks whose first replies are the same code and tests; a resumed run's later line for a
    task wins; a per-task file given alone has no records, so the count is left out."""
    loop_dir = _row(tmp_path / "loop", LOOP[:3])
    tries = [{"task_id": "T/0", "try": 1, "code": "def f(): return 1", "tests": ["assert f()"]},
             {"task_id": "T/0", "try": 2, "code": "other", "tests": []},
             {"task_id": "T/1", "try": 1, "code": "stale", "tests": []},
             {"task_id": "T/1", "try": 1, "code": None, "tests": []},
             {"task_id": "T/2", "try": 1, "code": "def g(): pass", "tests": ["assert 1"]}]
    (loop_dir / "selfalign_tries.jsonl").write_text("".join(json.dumps(x) + "\n" for x in tries))
    sel_dir = _row(tmp_path / "sel", [_select(f"T/{i}", True, [True], 0) for i in range(3)])
    samples = {"T/0": ("def f(): return 1", ["assert f()"]), "T/1": (None, []),
               "T/2": ("def g(): pass", ["assert 2"])}
    (sel_dir / "selfalign_selection.jsonl").write_text("".join(json.dumps(
        {"task_id": t, "samples": [{"index": 1, "code": "x", "tests": []},
                                   {"index": 0, "code": code, "tests": tests}]}) + "\n"
        for t, (code, tests) in samples.items()))
    loop, sel = load_row(loop_dir), load_row(sel_dir)
    assert loop.first_replies == {"T/0": ("def f(): return 1", ("assert f()",)),
                                  "T/1": (None, ()), "T/2": ("def g(): pass", ("assert 1",))}
    # T/0 same, T/1 both unreadable with no tests (same), T/2's tests differ
    assert pair_lines(loop, sel)[0].endswith(
        "; first replies identical (code and tests) on 2 of 3")
    alone = load_row(loop_dir / PER_TASK_FILE)
    assert alone.first_replies is None and "identical" not in pair_lines(alone, sel)[0]
    (sel_dir / "selfalign_selection.jsonl").write_text('{"task_id": "T/0"}\n')
    with pytest.raises(IanvsError, match="selection.jsonl:1: not a selection line"):
        load_row(sel_dir)


def _try(task: str, number: int, outcomes: list[str] | None) -> dict[str, Any]:
    units = None if outcomes is None else [{"index": i, "outcome": o} for i, o in
                                           enumerate(outcomes)]
    return {"task_id": task, "try": number, "code": "c", "tests": [], "units": units}


def test_the_best_share_rule_is_read_from_the_stored_tries(tmp_path: Path) -> None:
    """A loop folder with its tries: where nothing aligned, the try passing the largest share of
    its own tests gives the final verdict (earliest on ties; a try whose tests did not run
    counts as -1); an aligned task and a task without stored tries keep theirs; a resumed run's
    line for try t replaces tries t and later. Without the tries file there is no such line."""
    lines = [_loop("T/0", 1, [True]), _loop("T/4", None, [False, False, True]),
             _loop("T/5", None, [True, False]), _loop("T/6", None, [False, True]),
             _loop("T/7", None, [True, False]), _loop("T/9", None, [True])]
    folder = _row(tmp_path / "loop", lines)
    tries = [_try("T/0", 1, ["passed"]),
             # T/4: try 1 (2 of 3) beats 2 and 3 (1 of 3): the rule keeps try 1, which fails
             _try("T/4", 1, ["passed", "passed", "failed"]),
             _try("T/4", 2, ["passed", "failed", "failed"]),
             _try("T/4", 3, ["failed", "passed", "error"]),
             # T/5: try 1's tests all pass but one is invalid (not a pass): 2/3 > 0/3 -> try 1 passes
             _try("T/5", 1, ["passed", "passed", "invalid"]), _try("T/5", 2, ["failed"] * 3),
             # T/6: a stale try 2 (all pass) is replaced by the resumed run's try 2 (none ran)
             _try("T/6", 1, ["failed", "failed"]), _try("T/6", 2, ["passed", "passed"]),
             _try("T/6", 3, ["passed", "passed"]), _try("T/6", 2, None),
             # T/7: a tie (1 of 2 each) keeps the earliest, try 1, which passes
             _try("T/7", 1, ["passed", "failed"]), _try("T/7", 2, ["failed", "passed"])]
    (folder / "selfalign_tries.jsonl").write_text("".join(json.dumps(x) + "\n" for x in tries))
    row = load_row(folder)
    assert row.best_share_passed == {"T/0": True, "T/4": False, "T/5": True, "T/6": False,
                                     "T/7": True, "T/9": True}
    line = row_lines(row)[-1]
    # last tries: T/0, T/4, T/6, T/9 pass; the rule: T/0, T/5, T/7, T/9 (T/6's try 3 is gone
    # with the replaced try 2, so its try 1 is kept)
    assert line.startswith("  best-share rule") and "4 pass (last try kept: 4)" in line
    assert "2 fail -> pass, 2 pass -> fail, McNemar p = 1" in line
    assert load_row(folder / PER_TASK_FILE).best_share_passed is None
    (folder / "selfalign_tries.jsonl").write_text('{"task_id": "T/0"}\n')
    with pytest.raises(IanvsError, match="tries.jsonl:1: not a try line"):
        load_row(folder)
