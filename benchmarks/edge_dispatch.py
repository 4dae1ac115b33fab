"""Grading through Dask edge workers vs. grading locally, side by side in one run.

The 164 HumanEval reference solutions (the codegen example's ``humaneval.jsonl``), boundary
grading tier, in three harnesses per round:

1. **local**: ``LocalExecutor(workers=2)`` in this process's machine (warm);
2. **dask**: a real scheduler and two real workers (separate processes, mutual TLS on
   loopback), each node grading with ``local`` and one sandbox slot (two slots in total, like
   1.), default ``batch_size``;
3. **dask + delay**: the same with every worker reaching the scheduler through a relay that
   delays each byte by ``--delay-ms`` (20) each way (:mod:`core.edge.relay`; ``tc netem`` is
   not available in this kernel).

Every harness is warm before timing (nodes gold-checked, fork servers started). Medians over
``--rounds`` rounds. ``overhead_ms_per_sample = 1000 * (1/dask_sps - 1/local_sps)``. Besides the
figures it prints where the time goes: cluster start, connect + per-node gold check, and a
Dask round trip of one no-op batch. Final line::

    local_sps=<n> dask_sps=<n> overhead_ms_per_sample=<ms> nodes=<n> all_passed=<true|false>
"""
from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _provenance import Provenance  # noqa: E402

from core.edge.certs import write_certs  # noqa: E402
from core.edge.executor import DaskExecutor  # noqa: E402
from core.edge.processes import EdgeCluster, WorkerSpec, free_port  # noqa: E402
from core.edge.settings import DEFAULT_BATCH  # noqa: E402
from core.testenvmanager.sandbox import ExecRequest, Executor, Outcome, get_executor  # noqa: E402

DATA = (Path(__file__).resolve().parents[1] / "examples" / "smart_coding" /
        "smart_coding_learning_bench" / "codegen" / "data" / "humaneval.jsonl")


def requests(tag: str) -> list[ExecRequest]:
    """The 164 reference solutions, graded like the code metrics do (boundary tier, the prompt
    as trusted helpers when it compiles)."""
    out = []
    for line in DATA.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        try:
            compile(rec["prompt"], "<prompt>", "exec")
            helpers = rec["prompt"]
        except SyntaxError:
            helpers = ""
        out.append(ExecRequest(id=f"{tag}:{rec['task_id']}",
                               program=rec["prompt"] + rec["canonical_solution"],
                               test=rec["test"], entry_point=rec["entry_point"], timeout=20.0,
                               helpers=helpers))
    return out


def timed(executor: Executor, reqs: list[ExecRequest]) -> tuple[float, bool]:
    start = time.perf_counter()
    results = list(executor.run(reqs))
    took = time.perf_counter() - start
    ok = len(results) == len(reqs) and all(r.outcome is Outcome.PASSED for r in results)
    if not ok:
        bad = [(r.id, r.outcome.value, r.detail[:80]) for r in results if not r.passed][:5]
        logging.warning("not all passed: %s", bad)
    return len(reqs) / took, ok


def round_trip(executor: Executor, times: int = 5) -> float:
    """Median milliseconds to grade one trivial sample (the per-call cost of a harness)."""
    spent = []
    for i in range(times):
        req = ExecRequest(id=f"trip{i}", program="def f():\n    return 1\n",
                          test="def check(f):\n    assert f() == 1\n", entry_point="f")
        start = time.perf_counter()
        list(executor.run([req]))
        spent.append(time.perf_counter() - start)
    return 1000 * statistics.median(spent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    args = parser.parse_args()
    provenance = Provenance()
    logging.basicConfig(level=logging.WARNING)
    folder = Path(tempfile.mkdtemp(prefix="ianvs-edge-bench-"))
    with contextlib.ExitStack() as stack:
        if not os.environ.get("EDGE_BENCH_KEEP"):
            stack.callback(shutil.rmtree, folder, True)
        certs = folder / "certs"
        write_certs(certs, ["127.0.0.1"], ["edge1", "edge2", "slow1", "slow2"])
        t0 = time.perf_counter()
        direct = stack.enter_context(EdgeCluster(
            [WorkerSpec("edge1"), WorkerSpec("edge2")], certs, log_dir=folder / "direct"))
        direct.start(timeout=120)
        cold = time.perf_counter() - t0
        relay_port = free_port()
        delayed = stack.enter_context(EdgeCluster(
            [WorkerSpec(n, scheduler=f"tls://127.0.0.1:{relay_port}") for n in ("slow1", "slow2")],
            certs, log_dir=folder / "delayed"))
        delayed.start_scheduler()
        delayed.wait_for_workers(0, timeout=60)  # the scheduler answers
        relay = subprocess.Popen([sys.executable, "-m", "core.edge.relay", "--listen",
                                  f"127.0.0.1:{relay_port}", "--target",
                                  f"127.0.0.1:{delayed.port}", "--delay-ms", str(args.delay_ms)],
                                 env=delayed.env, stderr=subprocess.DEVNULL)
        stack.callback(relay.wait)
        stack.callback(relay.kill)
        for spec in delayed.specs:
            delayed.start_worker(spec)
        delayed.wait_for_workers(2, timeout=120)

        def dask_for(cluster: EdgeCluster) -> DaskExecutor:
            tls = cluster.client_tls()
            assert tls is not None
            return DaskExecutor(scheduler=cluster.address, batch_size=args.batch_size,
                                tls={"ca_file": tls.ca_file, "cert_file": tls.cert_file,
                                     "key_file": tls.key_file},
                                node_options={"workers": 1})

        t0 = time.perf_counter()
        dask = stack.enter_context(dask_for(direct))
        connect = time.perf_counter() - t0
        slow = stack.enter_context(dask_for(delayed))
        local = stack.enter_context(get_executor("local", workers=2))
        for ex in (local, dask, slow):  # warm every harness
            list(ex.run(requests("warm")[:8]))
        trips = {"dask": round_trip(dask), "local": round_trip(local)}
        figures: dict[str, list[float]] = {"local": [], "dask": [], "delay": []}
        all_ok = True
        for rnd in range(args.rounds):
            for name, ex in (("local", local), ("dask", dask), ("delay", slow)):
                sps, ok = timed(ex, requests(f"{name}{rnd}"))
                figures[name].append(sps)
                all_ok &= ok
        med = {k: statistics.median(v) for k, v in figures.items()}
        nodes = len(dask.nodes)
    overhead = 1000.0 * (1.0 / med["dask"] - 1.0 / med["local"])
    print(f"cold start: scheduler + 2 workers registered in {cold:.2f} s; connect + per-node "
          f"gold check {connect:.2f} s")
    print(f"one-sample round trip: local {trips['local']:.1f} ms, dask {trips['dask']:.1f} ms "
          "(median of 5)")
    print(f"rounds (samples/s): local {[round(x, 1) for x in figures['local']]}, dask "
          f"{[round(x, 1) for x in figures['dask']]}, dask+{args.delay_ms:g}ms "
          f"{[round(x, 1) for x in figures['delay']]}")
    print(f"delay_ms={args.delay_ms:g} dask_delay_sps={med['delay']:.1f} "
          f"delay_slowdown={med['dask'] / med['delay']:.2f} batch_size={args.batch_size}")
    print(provenance.line())
    print(f"local_sps={med['local']:.1f} dask_sps={med['dask']:.1f} "
          f"overhead_ms_per_sample={overhead:.2f} nodes={nodes} all_passed={str(all_ok).lower()}")


if __name__ == "__main__":
    main()
