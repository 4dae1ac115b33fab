"""Metrics of a repo run: pass@k over tasks, FAIL_TO_PASS / PASS_TO_PASS shares, outcome counts.

A sample *passes* when every test of its task passed (sandbox outcome ``passed``). ``infra_error``
samples are counted and reported but never scored (they are dropped from pass@k's per-task n).
The F2P share is the fraction of (sample, FAIL_TO_PASS test) pairs that passed; the same for P2P.
A test with no reported outcome (the run died first) counts as not passed.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Iterable, Sequence

from core.scenarios.repo.execute import SampleResult
from core.testcasecontroller.metrics.passk import pass_at_k

__all__ = ["summarise", "OUTCOMES"]

#: outcome columns of a repo run (sandbox outcomes)
OUTCOMES = ("passed", "failed", "error", "syntax_error", "timeout", "memory_exceeded", "sandbox_violation",
            "infra_error")


def summarise(results: Iterable[SampleResult], tasks: dict[str, dict], ks: Sequence[int] = (1,)) -> dict[str, float | int]:
    """Summary row: ``pass@k`` for each k, ``f2p_share``, ``p2p_share``, outcome counts, ``samples``."""
    counts: dict[str, list[int]] = {t: [0, 0] for t in tasks}
    outcomes: Counter[str] = Counter()
    f2p = [0, 0]
    p2p = [0, 0]
    for r in results:
        outcomes[r.outcome] += 1
        if r.outcome == "infra_error":
            continue
        counts[r.task_id][0] += 1
        counts[r.task_id][1] += r.outcome == "passed"
        spec = tasks[r.task_id]["tests"]
        for tally, names in ((f2p, spec["fail_to_pass"]), (p2p, spec["pass_to_pass"])):
            for name in names:
                tally[0] += 1
                tally[1] += r.tests.get(name) == "passed"
    scored = {t: (n, c) for t, (n, c) in counts.items() if n}
    row: dict[str, float | int] = {f"pass@{k}": v for k, v in pass_at_k(scored, ks).items()}
    row["f2p_share"] = f2p[1] / f2p[0] if f2p[0] else math.nan
    row["p2p_share"] = p2p[1] / p2p[0] if p2p[0] else math.nan
    row["samples"] = sum(outcomes.values())
    row.update({k: outcomes.get(k, 0) for k in OUTCOMES})
    return row
