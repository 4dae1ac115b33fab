"""The default job on an idle machine and on a machine that gets busy while it runs, side by side.

A laptop, a CI runner or an edge node rarely stays idle for a whole job. This script runs the
README's main job (``benchmarks/default_job.py --job codegen``: the embedded model on the
21-task subset, every row) for each configuration in two phases, one after the other in one
sitting:

* ``idle``: nothing else running;
* ``busy``: ``--hogs`` CPU-bound processes (default 2, one per core here) that start the moment
  the embedded model has loaded, so the model cannot see them coming.

Configurations: ``default`` (the generator as shipped) and, with ``--compare``, the shape
before issue 45 (``n_threads=<cores>``: one instance on every core, what an idle machine got
then), run as the embedded generator alone with that hyperparameter. Targets (issue 45): busy
at most 2x idle for the default; the default on the idle machine no slower than before.

Prints per configuration and phase: the job's wall time, the embedded row's ``tokens_per_s``
and pass@1, and the ratios; then the provenance line.

Usage: ``python benchmarks/busy_machine.py [--hogs 2] [--compare] [--rounds 1]``
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from _provenance import Provenance  # noqa: E402

RESULT = re.compile(r"job=\S+ wall_s=([\d.]+)")
EMBEDDED = re.compile(r"generator=embedded .*?pass@1=([\d.]+).*tokens_per_s=([\d.]+)")


def one(options: list[str], hogs: int) -> tuple[float, float, float]:
    """(wall s, embedded tokens/s, embedded pass@1) of one default-job run."""
    command = [sys.executable, str(REPO / "benchmarks" / "default_job.py"), "--job", "codegen"]
    for option in options:
        command += ["--model-option", option]
    if hogs:
        command += ["--hogs", str(hogs), "--hogs-after-load"]
    out = subprocess.run(command, capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(REPO))).stdout
    wall = RESULT.search(out)
    row = EMBEDDED.search(out)
    if not wall or not row:
        raise SystemExit(f"unexpected output of default_job.py:\n{out[-2000:]}")
    return float(wall.group(1)), float(row.group(2)), float(row.group(1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=2)
    parser.add_argument("--compare", action="store_true",
                        help="also time the shape before issue 45 (one instance on every core)")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    provenance = Provenance()
    cores = len(os.sched_getaffinity(0))
    configs = {"default": []}
    if args.compare:
        configs["one instance, all cores"] = [f"n_threads={cores}"]
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for _ in range(args.rounds):
        for name, options in configs.items():
            for phase, hogs in (("idle", 0), ("busy", args.hogs)):
                results.setdefault((name, phase), []).append(one(options, hogs))
                wall, tps, p1 = results[(name, phase)][-1]
                print(f"config={name!r} phase={phase} wall_s={wall:.1f} tokens_per_s={tps} "
                      f"pass@1={p1}", flush=True)
    med = {key: (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs))
           for key, runs in results.items()}
    for name in configs:
        idle, busy = med[(name, "idle")], med[(name, "busy")]
        print(f"config={name!r} idle_wall_s={idle[0]:.1f} busy_wall_s={busy[0]:.1f} "
              f"busy_over_idle={busy[0] / idle[0]:.2f} idle_tokens_per_s={idle[1]} "
              f"busy_tokens_per_s={busy[1]}")
    if args.compare:
        base = med[("one instance, all cores", "idle")][0]
        print(f"idle_wall_default_over_before={med[('default', 'idle')][0] / base:.2f}")
    print(provenance.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
