"""Large runs: peak memory and per-record overhead of ``ianvs -f`` as the dataset grows.

Builds test sets of 1k, 10k and 100k records by repeating HumanEval's 164 problems under new task
ids (``HumanEval/0#3`` ...), then runs the codegen example job on each with the ``canonical``
generator and with the ``replay`` generator (a ``samples.jsonl`` holding the canonical
completions), each in a fresh workspace, and measures for the ``ianvs`` process:

* ``rss_mb``: peak resident memory of the ``ianvs`` process itself (``VmHWM`` read from
  ``/proc`` until it exits; the fork server and sandboxed children are separate processes);
* ``cpu_ms_per_record``: CPU time of the ``ianvs`` process itself per record (the harness's
  overhead outside the sandbox: parsing, generation bookkeeping, storage, metrics);
* ``sps``: records per second, wall clock, whole job.

Repeated problems have identical code and tests, so the sandbox executes each distinct sample
once and serves the rest from its cache: the numbers measure the harness, not the sandbox.

Usage: ``python benchmarks/scale.py [--sizes 1000 10000 100000] [--keep DIR] [--no-report]``
(``--no-report``: without the report and its matplotlib figures). Prints a provenance line
(:mod:`_provenance`), then, last::

    rss_mb_1k=<n> rss_mb_10k=<n> rss_mb_100k=<n> sps_100k=<n>

(the largest of the two generators' peaks per size; ``sps_100k`` of the slower generator).
Targets (issue 15): peak RSS under 150 MB at 100k, under 1 ms of harness CPU per record.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from _provenance import Provenance  # noqa: E402
EXAMPLE = REPO / "examples" / "smart_coding" / "smart_coding_learning_bench" / "codegen"
LOGGER = logging.getLogger("scale")


def make_dataset(path: Path, samples: Path, size: int) -> None:
    """``size`` records repeating HumanEval under new ids, and a replay file of canonical
    completions for them."""
    base = [json.loads(line) for line in (EXAMPLE / "data" / "humaneval.jsonl").open()]
    with path.open("w") as data, samples.open("w") as replay:
        for n in range(size):
            rec = base[n % len(base)]
            task_id = f"{rec['task_id']}#{n // len(base)}"
            data.write(json.dumps(dict(rec, task_id=task_id)) + "\n")
            replay.write(json.dumps({"task_id": task_id,
                                     "completion": rec["canonical_solution"]}) + "\n")


def make_job(root: Path, dataset: Path, generator: str, samples: Path) -> Path:
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("workspace"))
    env = root / "testenv" / "testenv.yaml"
    env.write_text(env.read_text().replace('test_index: "../data/humaneval_subset.jsonl"',
                                           f'test_index: "{dataset}"'))
    alg = root / "testalgorithms" / "gen" / "gen_algorithm.yaml"
    text = alg.read_text()
    head = text[: text.index("      hyperparameters:")]
    extra = (f'        - samples_path:\n            values: ["{samples}"]\n'
             if generator == "replay" else "")
    alg.write_text(head + "      hyperparameters:\n"
                   f'        - generator:\n            values: ["{generator}"]\n' + extra)
    return root / "benchmarkingjob.yaml"


def _proc_stat(pid: int) -> tuple[int, float]:
    """(VmHWM in kB, CPU seconds of the process itself), or (0, 0) once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0, 0.0
    hwm = next((int(line.split()[1]) for line in status.splitlines()
                if line.startswith("VmHWM:")), 0)
    tick = os.sysconf("SC_CLK_TCK")
    return hwm, (int(stat[11]) + int(stat[12])) / tick


def run_job(job: Path, cwd: Path, report: bool = True) -> dict[str, float]:
    start = time.perf_counter()
    flags = ["--no-progress"] + ([] if report else ["--no-report"])
    proc = subprocess.Popen([sys.executable, "-m", "core.cmd.benchmarking", "-f", str(job),
                             *flags], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    hwm, cpu = 0, 0.0
    while proc.poll() is None:
        h, c = _proc_stat(proc.pid)
        hwm, cpu = max(hwm, h), max(cpu, c)
        time.sleep(0.2)
    wall = time.perf_counter() - start
    err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"ianvs failed ({proc.returncode}): {err[-2000:]}")
    return {"rss_mb": hwm / 1024, "cpu_s": cpu, "wall_s": wall}


def pass_at_1(workspace: Path) -> float:
    rank = next(workspace.rglob("all_rank.csv"))
    header, row = rank.read_text().splitlines()[:2]
    return float(dict(zip(header.split(","), row.split(",")))["pass@1"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--generators", nargs="+", default=["canonical", "replay"])
    parser.add_argument("--keep", type=Path, help="keep the jobs and workspaces in this folder")
    parser.add_argument("--no-report", action="store_true",
                        help="run ianvs with --no-report (no figures: without matplotlib)")
    args = parser.parse_args()
    provenance = Provenance()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    base = args.keep or Path(tempfile.mkdtemp(prefix="ianvs-scale-"))
    base.mkdir(parents=True, exist_ok=True)
    summary: dict[int, dict[str, dict[str, float]]] = {}
    try:
        for size in args.sizes:
            data, samples = base / f"data-{size}.jsonl", base / f"samples-{size}.jsonl"
            make_dataset(data, samples, size)
            for generator in args.generators:
                root = base / f"job-{size}-{generator}"
                job = make_job(root, data, generator, samples)
                m = run_job(job, root, report=not args.no_report)
                m["pass@1"] = pass_at_1(root / "workspace")
                summary.setdefault(size, {})[generator] = m
                print(f"size={size} generator={generator} rss_mb={m['rss_mb']:.1f} "
                      f"cpu_ms_per_record={1000 * m['cpu_s'] / size:.3f} "
                      f"sps={size / m['wall_s']:.0f} wall_s={m['wall_s']:.1f} "
                      f"pass@1={m['pass@1']}", flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    names = {1000: "1k", 10000: "10k", 100000: "100k"}
    parts = [f"rss_mb_{names.get(size, size)}={max(m['rss_mb'] for m in runs.values()):.1f}"
             for size, runs in summary.items()]
    largest = max(summary)
    parts.append(f"sps_{names.get(largest, largest)}="
                 f"{min(largest / m['wall_s'] for m in summary[largest].values()):.0f}")
    print(provenance.line())
    print(" ".join(parts))
    ok = all(m["pass@1"] == 1.0 for runs in summary.values() for m in runs.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
