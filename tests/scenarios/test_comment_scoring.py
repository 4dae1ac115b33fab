"""The comment kind's annotation mapping and metrics: the AST gate cannot be gamed.

Inputs are real functions of the Python standard library (the shipped dataset) and small
rewrites of them; every sample is scored by the real metric code.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.scenarios import get_kind
from core.scenarios.comment.annotate import (extract_annotations, render_annotations,
                                             same_program, strip_comments)
from core.scenarios.comment.metrics import comment_scores

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "examples/smart_coding/smart_coding_learning_bench/comment/data/comments.jsonl"

SOURCE = '''def add(x, y):  # entry point
    """Add two numbers.

    Returns their sum.
    """
    # compute it
    z = x + y  # plain addition
    if z > 3:
        return z
    # small results are clamped
    else:
        return 0
'''


def _records(n: int = 5) -> list[dict]:
    lines = DATA.read_text().splitlines()[:n]
    return [json.loads(line) for line in lines]


def _score(records: list[dict], answers: list[str], tmp_path: Path) -> dict:
    preds = [{"task_id": r["id"], "samples": [{"task_id": r["id"], "sample_index": 0,
                                               "raw_output": a, "error": None}]}
             for r, a in zip(records, answers)]
    ctx = SimpleNamespace(records=lambda: iter(records), workspace=tmp_path)
    return comment_scores(None, preds, ctx)


def test_strip_and_extract_map_comments_to_code_lines() -> None:
    snippet = strip_comments(SOURCE)
    assert snippet == ("def add(x, y):\n    z = x + y\n    if z > 3:\n        return z\n"
                       "    else:\n        return 0\n")
    anns = extract_annotations(SOURCE, snippet)
    assert [(a.line_number, a.annotation) for a in anns] == [
        (1, "entry point Add two numbers. Returns their sum."),
        (2, "compute it plain addition"),
        (5, "small results are clamped")]
    rendered = render_annotations(snippet, anns)
    assert same_program(rendered, snippet)
    assert extract_annotations(rendered, snippet) == anns


def test_reformatted_but_same_program_still_maps_by_ast() -> None:
    snippet = strip_comments(SOURCE)
    assert snippet is not None
    reformatted = ("def add(x,\n        y):\n    # sum\n    z = (x +\n         y)\n"
                   "    if z > 3:\n        return z\n    else:\n        return 0\n")
    anns = extract_annotations(reformatted, snippet)
    assert anns is not None and [(a.line_number, a.annotation) for a in anns] == [(2, "sum")]


@pytest.mark.parametrize("change", [
    ("x + y", "y + x"),            # a different expression
    ("return 0", "return 1"),      # a different constant
    ("z = x + y", "w = x + y"),    # a renamed variable
])
def test_changed_code_is_not_the_same_program(change: tuple[str, str]) -> None:
    snippet = strip_comments(SOURCE)
    assert snippet is not None
    assert extract_annotations(snippet.replace(*change), snippet) is None


def test_reference_scores_perfect_and_rewrites_score_zero(tmp_path: Path) -> None:
    kind = get_kind("comment")
    records = [kind.validate(r) for r in _records()]
    reference = [kind.reference(r) for r in records]
    perfect = _score(records, reference, tmp_path)
    assert perfect["code_preserved"] == 1.0 and perfect["code_altered"] == 0
    assert perfect["line_coverage"] == 1.0
    assert perfect["chrf"] == 100.0 and perfect["bleu"] == 100.0 and perfect["rouge_l"] == 1.0

    # The same good comments, but one statement of each function altered: zero everywhere.
    altered = []
    for r, text in zip(records, reference):
        lines = text.splitlines()
        code_line = next(i for i, l in enumerate(lines) if l.strip() and
                         not l.strip().startswith("#") and not l.lstrip().startswith("def "))
        lines.insert(code_line, " " * (len(lines[code_line]) - len(lines[code_line].lstrip()))
                     + "_forged = 1")
        altered.append("```python\n" + "\n".join(lines) + "\n```\n")
    zero = _score(records, altered, tmp_path)
    assert zero["code_altered"] == len(records) and zero["code_preserved"] == 0.0
    assert zero["line_coverage"] == 0.0 and zero["chrf"] == 0.0 and zero["bleu"] == 0.0
    assert zero["rouge_l"] == 0.0
    per_sample = [json.loads(l) for l in (tmp_path / "comment_scores.jsonl").read_text()
                  .splitlines()]
    assert [p["preserved"] for p in per_sample] == [False] * len(records)


def test_uncommented_code_is_preserved_but_scores_nothing(tmp_path: Path) -> None:
    kind = get_kind("comment")
    records = [kind.validate(r) for r in _records(3)]
    echo = _score(records, [r["code_snippet"] for r in records], tmp_path)
    assert echo["code_preserved"] == 1.0 and echo["code_altered"] == 0
    assert echo["line_coverage"] == 0.0 and echo["chrf"] == 0.0 and echo["rouge_l"] == 0.0
    garbage = _score(records, ["def (:\n", "", "just prose"], tmp_path)
    assert garbage["code_altered"] == 3 and garbage["line_coverage"] == 0.0


def test_shipped_reference_annotations_round_trip() -> None:
    """Every shipped record's reference reply scores exactly 1 on coverage (builder check)."""
    kind = get_kind("comment")
    for record in kind.read(DATA):
        anns = extract_annotations(kind.reference(record), record["code_snippet"])
        assert anns is not None
        assert [a.to_dict() for a in anns] == record["annotations"], record["id"]
