"""What a boundary-tier candidate can time of the judge: the gap from its reply to the next call.

A sample never sees its verdict, but it sees when the judge calls it again (docs/sandbox.md,
"Cross-sample grading"). This measures, from inside the candidate, the time from returning one
answer to being called with the next argument, over ``--calls`` calls of one task
(``for i in range(N): assert candidate(i) == i``), for candidates that answer

* ``right``: every answer right;
* ``wrong``: every answer wrong (the judge records the failed assert and goes on);
* ``test_raises``: a value the test's own expression fails on (``candidate(i) + 0`` raises
  ``TypeError`` in the judge while evaluating the assert);
* ``candidate_raises``: the candidate raises ``ValueError``, re-raised in the judge.

Each variant runs once per round on the ``local`` executor (boundary tier, strongest isolation
available), rounds alternating the order; the candidate prints the median gap of its calls and
the figure is the median over rounds. Prints a provenance line (:mod:`_provenance`), then, last::

    right_us=<n> wrong_us=<n> test_raises_us=<n> candidate_raises_us=<n> rounds=<n> calls=<n>

Usage: ``python benchmarks/judge_call_timing.py [--calls 2000] [--rounds 5]``
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _provenance import Provenance  # noqa: E402
from core.testenvmanager.sandbox import ExecRequest, get_executor  # noqa: E402

CANDIDATE = """
import time
_gaps = []
_last = [None]
def f(x):
    now = time.perf_counter_ns()
    if _last[0] is not None:
        _gaps.append(now - _last[0])
    if len(_gaps) == {calls} - 1:
        _gaps.sort()
        print("GAP_NS", _gaps[len(_gaps) // 2], flush=True)
    {answer}
"""
ANSWERS = {
    "right": "_last[0] = time.perf_counter_ns()\n    return x",
    "wrong": "_last[0] = time.perf_counter_ns()\n    return x + 1",
    "test_raises": "_last[0] = time.perf_counter_ns()\n    return None",
    "candidate_raises": "_last[0] = time.perf_counter_ns()\n    raise ValueError(x)",
}
TEST = """
def check(candidate):
    for i in range({calls}):
        assert {expression} == i
"""


def request(variant: str, calls: int) -> ExecRequest:
    expression = "candidate(i) + 0" if variant == "test_raises" else "candidate(i)"
    return ExecRequest(id=variant, program=CANDIDATE.format(calls=calls, answer=ANSWERS[variant]),
                       test=TEST.format(calls=calls, expression=expression), entry_point="f",
                       timeout=60.0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    provenance = Provenance()
    variants = list(ANSWERS)
    gaps: dict[str, list[float]] = {v: [] for v in variants}
    with get_executor("local", workers=1) as executor:
        print(f"isolation {executor.isolation}", flush=True)
        for rnd in range(args.rounds):
            order = variants if rnd % 2 == 0 else variants[::-1]
            for variant in order:
                result = next(iter(executor.run([request(variant, args.calls)])))
                line = next((ln for ln in result.stdout.splitlines() if ln.startswith("GAP_NS")),
                            None)
                if line is None:
                    raise SystemExit(f"{variant}: no timing ({result.outcome.value}: "
                                     f"{result.detail[:200]})")
                gaps[variant].append(int(line.split()[1]) / 1000)
                print(f"round={rnd} variant={variant} outcome={result.outcome.value} "
                      f"gap_us={gaps[variant][-1]:.1f}", flush=True)
    medians = {v: statistics.median(g) for v, g in gaps.items()}
    print(provenance.line())
    print(" ".join(f"{v}_us={m:.1f}" for v, m in medians.items())
          + f" rounds={args.rounds} calls={args.calls}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
