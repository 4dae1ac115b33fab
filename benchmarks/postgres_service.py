"""Costs of the repo kind's PostgreSQL service (:mod:`core.scenarios.repo.postgres`).

Prints, side by side (medians):

* ``start``: initdb + server start + template, per run (``--starts`` runs), and ``stop``;
* ``psql floor``: one ``SELECT 1`` through ``psql`` (the process every admin statement costs);
* ``create`` / ``drop`` of a per-sample role + database, for both ``CREATE DATABASE`` strategies;
* end to end, sequentially (one worker), the reference body of the first ``--tasks`` tasks of the
  shipped ``dataset`` sets: sandboxed sample on SQLite (in memory) vs on PostgreSQL (its own
  database per sample), and the ratio.

Usage: ``python benchmarks/postgres_service.py [--starts 3] [--dbs 20] [--tasks 10]`` (repo root).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import Provenance  # noqa: E402

from core.scenarios.repo.env import ensure_env  # noqa: E402
from core.scenarios.repo.execute import Sample, default_views_dir, run_samples  # noqa: E402
from core.scenarios.repo.kind import load_tasks  # noqa: E402
from core.scenarios.repo.prompts import reference_code as _reference_code  # noqa: E402
from core.scenarios.repo.postgres import PostgresService  # noqa: E402
from core.scenarios.repo.source import materialise  # noqa: E402

REPO = Path(__file__).resolve().parents[1] / "examples/smart_coding/smart_coding_learning_bench/repo"


def _ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1000:8.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--dbs", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=10)
    args = parser.parse_args()
    provenance = Provenance()

    starts, stops, floor = [], [], []
    per: dict[str, tuple[list[float], list[float]]] = {}
    for strategy in ("FILE_COPY", "WAL_LOG"):
        pg = PostgresService(strategy=strategy)
        t0 = time.perf_counter()
        pg.start()
        starts.append(time.perf_counter() - t0)
        for _ in range(5):
            t0 = time.perf_counter()
            pg.query("SELECT 1;")
            floor.append(time.perf_counter() - t0)
        for i in range(args.dbs):
            pg.drop_database(pg.create_database(f"bench{i}"))
        per[strategy] = (pg.stats.created, pg.stats.dropped)
        t0 = time.perf_counter()
        pg.close()
        stops.append(time.perf_counter() - t0)
    for _ in range(max(0, args.starts - 2)):
        t0 = time.perf_counter()
        with PostgresService():
            starts.append(time.perf_counter() - t0)
    print(f"service start (initdb+server+template), {len(starts)} runs: {_ms(starts)}   stop: {_ms(stops)}")
    print(f"psql floor (SELECT 1):                          {_ms(floor)}")
    for strategy, (created, dropped) in per.items():
        print(f"per-sample database, {strategy:9s} ({len(created)}):  create {_ms(created)}   drop {_ms(dropped)}")

    files = {name: REPO / "data" / f"{name}-tasks.jsonl" for name in ("dataset-sqlite", "dataset-postgres")}
    env = ensure_env(list(load_tasks(files["dataset-postgres"], 1)[0]["env"]["requirements"]))
    base = default_views_dir()
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-pg-", dir=base))
    try:
        src = materialise(str(REPO / "data" / "dataset-2.0.0.tar.gz"), work / "src")
        figures = {}
        for name in ("dataset-sqlite", "dataset-postgres"):
            tasks = load_tasks(files[name], args.tasks)
            samples = [Sample(t["task_id"], t, _reference_code(t)) for t in tasks]
            with PostgresService() if name.endswith("postgres") else _Null() as service:
                t0 = time.perf_counter()
                results = list(run_samples(samples, src.root, env, work / "views", workers=1, timeout=120,
                                           service=service))
                wall = time.perf_counter() - t0
            figures[name] = (statistics.median(r.duration_s for r in results), wall / len(results),
                             sum(r.outcome == "passed" for r in results))
        for name, (med, per_wall, passed) in figures.items():
            print(f"{name:17s} {args.tasks} tasks, 1 worker: sandbox run median {med * 1000:7.1f} ms, "
                  f"wall per sample {per_wall * 1000:7.1f} ms, passed {passed}/{args.tasks}")
        ratio = figures["dataset-postgres"][1] / figures["dataset-sqlite"][1]
        print(f"postgres/sqlite wall per sample: {ratio:.2f}x")
        print(provenance.line())
        print(json.dumps({"start_s": statistics.median(starts), "create_s": {k: statistics.median(v[0]) for k, v in per.items()}}))
    finally:
        shutil.rmtree(work, ignore_errors=True)


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    main()
