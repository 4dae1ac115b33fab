"""A token budget that cannot hold the whole answer the prompt asks for is said, not graded
silently (core/scenarios/budget.py): the networkx implement-change job of 2026-11-29 cut 9 of
its first 14 replies at ``max_tokens`` 1024 in the middle of the file the prompt asked for
whole, and nothing in the leaderboard said so. Every shipped job is held to it by
``tests/runner/test_shipped_jobs_validate.py``; the ``truncated`` column is tested in
``tests/smart_coding/test_edge_cost.py``."""
from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.scenarios import get_kind
from core.scenarios.budget import (CHARS_PER_TOKEN, AnswerSize, answer_sizes, answer_tokens,
                                   budget_problems, budget_warning)
from tests.runner.conftest import run_cli
from tests.scenarios.conftest import BENCH, cut_test_index

SUBSET = BENCH / "implement_change" / "data" / "implement_change_subset.jsonl"


def test_the_shortfalls_of_max_tokens_and_n_ctx() -> None:
    sizes = [AnswerSize("small", 30, 300), AnswerSize("large", 3000, 600),
             AnswerSize("middle", 1200, 6000)]
    assert answer_tokens(3000) == math.ceil(3000 / CHARS_PER_TOKEN) == 1000
    assert budget_problems(sizes, {"max_tokens": 1000, "n_ctx": 2400}) == []
    found = budget_problems(sizes, {"max_tokens": 300, "n_ctx": 2000})
    assert [p.limit for p in found] == ["max_tokens", "n_ctx"]
    assert [p.text for p in found] == [
        "max_tokens=300 may not hold the whole answer on 2 of 3 task(s) (the largest, large, "
        "may need 1000 tokens at 3 characters a token)",
        "n_ctx=2000 may not hold the whole prompt and answer on 1 of 3 task(s) (the largest, "
        "middle, may need 2400 tokens at 3 characters a token)"]
    # limits not given as integers are not checked (a gold control has none)
    for hyper in ({}, {"max_tokens": True}, {"max_tokens": "many"}, {"max_tokens": 2.5}):
        assert budget_problems(sizes, hyper) == [] and budget_warning("k", sizes, hyper) is None
    # a gold control answers with a fixed text: no budget cuts it
    for control in ("reference", "canonical", "broken"):
        assert budget_problems(sizes, {"max_tokens": 300, "generator": control}) == []
    warning = budget_warning("implement_change", sizes, {"max_tokens": 300, "generator": "embedded"})
    assert warning is not None and warning.startswith("max_tokens=300 may not hold")
    assert "implement_change prompt asks for whole files" in warning


def test_the_answer_size_is_the_reference_reply_of_a_whole_file_kind() -> None:
    kind = get_kind("implement_change")
    records = [kind.validate(json.loads(line)) for line in SUBSET.open()]
    sizes = answer_sizes(kind, records)
    assert [(s.task_id, s.answer_chars) for s in sizes] == [
        (r["id"], len(kind.reference(r))) for r in records]
    assert all(s.prompt_chars == sum(len(m["content"]) for m in kind.messages(r))
               for s, r in zip(sizes, records))

    def never_read() -> Iterator[dict[str, Any]]:
        raise AssertionError("a kind that fixes no answer size reads no record")
        yield {}

    assert answer_sizes(get_kind("codegen"), never_read()) == []
    assert get_kind("revise").answer_chars is not get_kind("codegen").answer_chars


def _job(tmp_path: Path, max_tokens: int, generators: str) -> Path:
    root = tmp_path / "job"
    shutil.copytree(BENCH / "implement_change", root, ignore=shutil.ignore_patterns("workspace"))
    cut_test_index(root, lambda records: records[:1])  # toolz@28aa566f0d5d, 806 characters
    algorithm = root / "testalgorithms" / "gen" / "gen_algorithm.yaml"
    text = algorithm.read_text()
    text = re.sub(r"(- max_tokens:\n\s+values: )\[\d+\]", rf"\g<1>[{max_tokens}]", text)
    text = re.sub(r'values: \["embedded", "reference", "broken"\]', f"values: {generators}", text)
    algorithm.write_text(text)
    return root


def test_validate_warns_at_the_hyperparameters_line(tmp_path: Path) -> None:
    root = _job(tmp_path, 100, '["embedded", "reference", "broken"]')
    res = run_cli("validate", "-f", str(root / "benchmarkingjob.yaml"), cwd=root)
    assert res.returncode == 0, res.stderr
    lines = (root / "testalgorithms" / "gen" / "gen_algorithm.yaml").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "- max_tokens:" in text)
    assert (f"warning: {root}/testalgorithms/gen/gen_algorithm.yaml:{line}: max_tokens=100 may "
            "not hold the whole answer on 1 of 1 task(s) (the largest, toolz@28aa566f0d5d, may "
            "need 269 tokens") in res.stdout
    assert "OK (1 warning(s))" in res.stdout
    enough = _job(tmp_path / "enough", 269, '["embedded", "reference", "broken"]')
    res = run_cli("validate", "-f", str(enough / "benchmarkingjob.yaml"), cwd=enough)
    assert res.returncode == 0 and "OK (0 warning(s))" in res.stdout, res.stdout


def test_a_run_warns_at_the_test_case_that_falls_short(tmp_path: Path) -> None:
    """A budget of 100 tokens through ``ianvs -f``: the warning is logged at the start of the
    test case, and the run goes on. The model is the ``replay`` generator answering with the
    reference from a recording (no model is loaded here; the embedded model's own run of this
    job is in ``test_default_jobs.py``; gold controls are never warned, above)."""
    root = _job(tmp_path, 100, '["replay"]')
    kind = get_kind("implement_change")
    record = kind.validate(json.loads(SUBSET.open().readline()))
    samples = root / "replies.jsonl"
    samples.write_text(json.dumps({"task_id": record["id"], "solution": kind.reference(record)})
                       + "\n")
    algorithm = root / "testalgorithms" / "gen" / "gen_algorithm.yaml"
    algorithm.write_text(algorithm.read_text().replace(
        "        - max_tokens:", f'        - samples_path:\n            values: ["{samples}"]\n'
        "        - max_tokens:"))
    res = run_cli("-f", str(root / "benchmarkingjob.yaml"), "--no-progress", "--no-report",
                  cwd=root, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    warned = [line for line in res.stderr.splitlines() if "may not hold the whole" in line]
    assert len(warned) == 1 and "testcase 1/1" in warned[0] and "max_tokens=100" in warned[0], \
        res.stderr[-3000:]
    rows = (next(root.glob("workspace/*/rank/all_rank.csv"))).read_text()
    assert "truncated" in rows.splitlines()[0]
