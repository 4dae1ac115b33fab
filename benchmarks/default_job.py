"""Wall time, CPU and model speed of a shipped default job, exactly as the README runs it.

Copies an example job (``--job codegen``: the README's first command; ``comment``, ``issue``,
``repo``, ``commit_message``, ``implement_change``, ``revise``, ``selfalign``: also prints the
model's calls per try; ``cloudedge``: both code models and every router) into a fresh folder (so
nothing is cached but the model file and, for ``repo``, the
repositories' environments), optionally points its ``test_index`` at another file of the
example's ``data/`` (``--data humaneval.jsonl``: the full HumanEval set), and runs
``ianvs -f benchmarkingjob.yaml --no-progress`` on it, ``--hogs`` busy-looping processes beside
it (0: alone). Prints, per generator row of the leaderboard, its main columns and
``latency_s``/``tokens_per_s``/``truncated`` (replies cut at ``max_tokens``), the model's load time and thread count from the log, the LLM
judge's call times (jobs with a judge), then a provenance line (:mod:`_provenance`) and, last::

    job=<name> wall_s=<n> cpu_s=<n> model_load_s=<n> tasks=<n> hogs=<n> rows=<n> gold_ok=<bool>

``cpu_s`` is the CPU time of ``ianvs`` and every descendant it waited for (generation,
sandboxes). ``gold_ok``: the gold controls scored as they must (``canonical``/``reference`` 1.0
on the job's main metric, ``broken`` 0.0; on ``issue`` and ``commit_message``, whose unrelated text shares some words
with any answer, below 1.0). ``--leaderboard FILE`` also writes the run's
``ianvs leaderboard`` board to FILE, followed by its provenance note
(``docs/leaderboards/codegen-default.md`` is made so).

Usage: ``python benchmarks/default_job.py [--job codegen] [--data FILE] [--job-file NAME] [--hogs 0]
[--leaderboard FILE [--title TITLE]] [--keep DIR]``
"""
from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from _provenance import Provenance  # noqa: E402

BENCH = REPO / "examples" / "smart_coding" / "smart_coding_learning_bench"
JOBS = ("codegen", "comment", "issue", "repo", "commit_message", "implement_change", "revise",
        "selfalign", "cloudedge")
#: The leaderboard columns shown per job (besides generator, latency_s, tokens_per_s, truncated).
COLUMNS = {
    "codegen": ("pass@1", "passed", "failed", "error", "syntax_error", "timeout"),
    "comment": ("code_preserved", "code_altered", "line_coverage", "chrf", "bleu", "rouge_l"),
    "issue": ("chrf", "bleu", "rouge_l", "embedding_sim", "judge_score"),
    "commit_message": ("chrf", "bleu", "rouge_l", "subject_chrf", "chrf[before 2024-06-01]",
                       "chrf[from 2024-06-01]", "judge_score", "judge_parse_failures"),
    "implement_change": ("pass@1", "f2p_share", "passed", "failed", "error", "malformed_diff",
                         "diff_does_not_apply", "no_change", "bad_path", "form_files", "form_diff"),
    "revise": ("score", "tests_pass@1", "test_graded", "similarity_graded", "edit_chrf", "exact_match",
               "score[before 2024-06-01]", "score[from 2024-06-01]", "malformed_diff", "diff_does_not_apply",
               "no_change", "form_files", "form_diff"),
    "repo": ("pass@1", "f2p_share", "passed", "failed", "syntax_error"),
    "cloudedge": ("pass@1", "cloud_share", "regret", "edge_s", "check_s", "cloud_s"),
    "selfalign": ("pass@1", "align@1", "align@2", "align_rate", "hidden_pass@1", "hidden_pass@1_first",
                  "hidden_pass@1_plus", "false_alignment", "false_aligned", "aligned",
                  "test_validity", "invalid_tests",
                  "parse_failures", "tries_per_task", "tokens_per_task", "sandbox_runs_per_task",
                  "wall_s_per_task", "tokens_per_aligned", "wall_s_per_aligned", "mutation_score",
                  "mutants", "equivalent_mutants"),
}
MAIN = {"codegen": "pass@1", "comment": "line_coverage", "issue": "rouge_l", "repo": "pass@1",
        "commit_message": "rouge_l", "implement_change": "pass@1", "revise": "score",
        "selfalign": "hidden_pass@1", "cloudedge": "pass@1"}
LOADED = re.compile(r"embedded model .* loaded in ([\d.]+)s \((?:(\d+) instance\(s\) of )?"
                    r"(\d+) thread")


def _hog() -> None:  # pragma: no cover - a child process that only burns CPU
    while True:
        pass


def testenv_of(job_file: Path) -> Path:
    """The testenv file a job file names (``testenv: "./testenv/..."``)."""
    match = re.search(r'(?m)^\s*testenv:\s*"([^"]*)"', job_file.read_text())
    return job_file.parent / (match.group(1) if match else "testenv/testenv.yaml")


def embedded_only(root: Path, options: list[str]) -> None:
    """Make the job copy in *root* run the embedded generator alone, with the hyperparameters
    ``options`` (``KEY=VALUE``, the value as YAML) added: how a configuration other than the
    default is timed (``--model-option n_threads=2``)."""
    files = [p for p in (root / "testalgorithms").rglob("*.yaml")
             if re.search(r"-\s*generator:\s*\n\s*values:", p.read_text())]
    if not files:
        raise SystemExit(f"no algorithm with a generator list under {root / 'testalgorithms'}")
    for path in files:
        text, n = re.subn(r"(-\s*generator:\s*\n(\s*)values:\s*)\[[^\]]*\]", r'\1["embedded"]',
                          path.read_text())
        indent = re.search(r"\n(\s*)-\s*generator:", text)
        pad = indent.group(1) if indent else "        "
        for option in options:
            key, _, value = option.partition("=")
            text = text.replace(f"{pad}- generator:", f"{pad}- {key}:\n{pad}    values: [{value}]\n"
                                                      f"{pad}- generator:", 1)
        path.write_text(text)


def prepare(job: str, root: Path, data: str | None,
            job_name: str = "benchmarkingjob.yaml") -> Path:
    """A fresh copy of the example *job* in *root* (``test_index`` -> ``data/<data>``);
    *job_name* the job file of the example to run."""
    shutil.copytree(BENCH / job, root, ignore=shutil.ignore_patterns("workspace"))
    if job == "cloudedge":  # its test set is the codegen example's (../codegen/data)
        shutil.copytree(BENCH / "codegen" / "data", root.parent / "codegen" / "data")
    if job == "selfalign":  # the repository-level set's sources are the repo example's
        shutil.copytree(BENCH / "repo" / "data", root.parent / "repo" / "data")
    if data:
        env = testenv_of(root / job_name)
        text, n = re.subn(r'(?m)^(\s*test_index:\s*")[^"]*(")', rf"\g<1>../data/{data}\g<2>",
                          env.read_text())
        if n != 1 or not (root / "data" / data).is_file():
            raise SystemExit(f"cannot point {env} at data/{data}")
        env.write_text(text)
    return root / job_name


def run(job_file: Path, hogs: int, after_load: bool = False) -> tuple[float, float, str]:
    """(wall s, CPU s of ianvs and its children, stderr) of one ``ianvs -f`` run, with
    ``hogs`` busy processes beside it: from the start, or (``after_load``) from the moment
    the embedded model has loaded (its log line), so the model cannot see them coming."""
    procs = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(hogs)]
    if not after_load:
        for proc in procs:
            proc.start()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    lines: list[str] = []
    try:
        child = subprocess.Popen([sys.executable, "-m", "core.cmd.benchmarking", "-f",
                                  str(job_file), "--no-progress"], cwd=job_file.parent,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                 env=dict(os.environ, PYTHONPATH=str(REPO)))
        assert child.stderr is not None
        for line in child.stderr:
            lines.append(line)
            if after_load and procs and procs[0].pid is None and LOADED.search(line):
                for proc in procs:
                    proc.start()
        returncode = child.wait()
    finally:
        wall = time.perf_counter() - started
        for proc in procs:
            if proc.pid is not None:
                proc.kill()
                proc.join(5)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    stderr = "".join(lines)
    if returncode != 0:
        raise SystemExit(f"ianvs failed ({returncode}):\n{stderr[-3000:]}")
    return wall, cpu, stderr


def count_tasks(root: Path, job_name: str = "benchmarkingjob.yaml") -> int:
    """Records in the job's test set (``test_index`` of its testenv file)."""
    env = testenv_of(root / job_name)
    match = re.search(r'(?m)^\s*test_index:\s*"([^"]*)"', env.read_text())
    if not match:
        return 0
    # as ianvs resolves it: against the job's folder (where it runs) first, then the YAML's
    path = next((p for p in (root / match.group(1), env.parent / match.group(1)) if p.is_file()),
                root / match.group(1))
    with open(path, encoding="utf-8") as data:
        return sum(1 for line in data if line.strip())


def rows(root: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(open(next(root.glob("workspace/*/rank/all_rank.csv")))))


def judge_calls(root: Path) -> list[float]:
    """Seconds of every LLM-judge call of the run (``judge_generations.jsonl``)."""
    seconds = []
    for path in root.glob("workspace/**/judge_generations.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                seconds.append(float(json.loads(line)["latency_s"]))
            except (ValueError, KeyError, TypeError):
                continue
    return seconds


def model_calls(root: Path) -> str:
    """Self-align jobs: the model's calls (tries not repeated from the previous one) with their
    mean seconds and completion tokens, and the sandbox seconds per try."""
    calls, seconds, tokens, sandbox, tries = 0, 0.0, 0, 0.0, 0
    for path in root.glob("workspace/**/selfalign_tries.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            tries += 1
            sandbox += float(row.get("sandbox_s") or 0.0)
            if row.get("completion_tokens") and not (row.get("extra") or {}).get("repeat_of"):
                calls += 1
                seconds += float(row.get("latency_s") or 0.0)
                tokens += int(row["completion_tokens"])
    if not calls:
        return ""
    return (f"model_calls={calls} s_per_call={seconds / calls:.2f} "
            f"completion_tokens_per_call={tokens / calls:.0f} tries={tries} "
            f"sandbox_s_per_try={sandbox / max(1, tries):.3f}")


def gold_ok(job: str, table: list[dict[str, str]]) -> bool:
    if job == "cloudedge":  # the routers' bounds: EdgeOnly keeps all, CloudOnly sends all,
        # the oracle has no regret and is at least as good as either model alone
        by = {r.get("hard_example_mining"): r for r in table}
        try:
            oracle = float(by["OracleRouter"]["pass@1"])
            return (float(by["EdgeOnly"]["cloud_share"]) == 0.0
                    and float(by["CloudOnly"]["cloud_share"]) == 1.0
                    and float(by["OracleRouter"]["regret"]) == 0.0
                    and oracle >= max(float(by["EdgeOnly"]["pass@1"]),
                                      float(by["CloudOnly"]["pass@1"])))
        except (KeyError, ValueError):
            return False
    ok = True
    for row in table:
        generator = row.get("basemodel-generator", "")
        value = float(row[MAIN[job]]) if row.get(MAIN[job]) else float("nan")
        if generator in ("canonical", "reference"):
            ok &= value == 1.0
        elif generator == "broken":  # unrelated text still shares letters with an answer
            ok &= value < 1.0 if job in ("issue", "commit_message") else value == 0.0
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", choices=JOBS, default="codegen")
    parser.add_argument("--data", help="a file of the example's data/ folder as test_index")
    parser.add_argument("--job-file", default="benchmarkingjob.yaml",
                        help="the example's job file to run (selfalign: benchmarkingjob_repo.yaml "
                             "for the repository-level set)")
    parser.add_argument("--hogs", type=int, default=0, help="busy processes beside the job")
    parser.add_argument("--hogs-after-load", action="store_true",
                        help="start the busy processes when the embedded model has loaded")
    parser.add_argument("--model-option", action="append", default=[], metavar="KEY=VALUE",
                        help="run the embedded generator alone with this hyperparameter added "
                             "(repeatable), e.g. n_threads=2")
    parser.add_argument("--leaderboard", type=Path, help="write the run's leaderboard here")
    parser.add_argument("--title", help="the leaderboard's title (ianvs leaderboard --title)")
    parser.add_argument("--keep", type=Path, help="keep the job and its workspace in this folder")
    args = parser.parse_args()
    provenance = Provenance()
    base = args.keep or Path(tempfile.mkdtemp(prefix="ianvs-default-job-"))
    base.mkdir(parents=True, exist_ok=True)
    root = base / args.job
    try:
        job_file = prepare(args.job, root, args.data, args.job_file)
        if args.model_option:
            embedded_only(root, args.model_option)
        wall, cpu, log = run(job_file, args.hogs, args.hogs_after_load)
        table = rows(root)
        loads = LOADED.findall(log)
        tasks = count_tasks(root, args.job_file)
        for row in table:
            per_part = [c for c in row if c.startswith(f"{MAIN[args.job]}[")]  # pass@1[toolz]
            shown = " ".join(f"{c}={row.get(c, '')}" for c in
                             (*COLUMNS[args.job], *per_part, "latency_s", "tokens_per_s", "truncated"))
            who = row.get("basemodel-generator") or " ".join(
                v for v in (row.get("hard_example_mining"),
                            row.get("hard_example_mining-threshold")) if v) or "?"
            print(f"generator={who} {shown}", flush=True)
        for seconds, instances, threads in loads:
            print(f"model_loaded_s={seconds} instances={instances or 1} threads={threads}")
        if args.job == "selfalign" and model_calls(root):
            print(model_calls(root))
        judged = judge_calls(root)
        if judged:
            print(f"judge calls: {len(judged)}, {min(judged):.1f}-{max(judged):.1f} s each "
                  f"(median {statistics.median(judged):.1f} s)")
        if args.leaderboard:
            board = args.leaderboard.resolve()
            subprocess.run([sys.executable, "-m", "core.cmd.benchmarking", "leaderboard",
                            "workspace", "-o", str(board),
                            *(["--title", args.title] if args.title else [])],
                           cwd=root, check=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
            with board.open("a", encoding="utf-8") as out:  # the figures' provenance note
                out.write(f"\n({provenance.note()})\n")
            print(f"leaderboard={args.leaderboard}")
        load_s = max((float(s) for s, _, _ in loads), default=float("nan"))
        ok = gold_ok(args.job, table) if not args.model_option else bool(table)
        print(provenance.line())
        print(f"job={args.job} wall_s={wall:.1f} cpu_s={cpu:.1f} model_load_s={load_s:.1f} "
              f"tasks={tasks} hogs={args.hogs} rows={len(table)} gold_ok={str(ok).lower()}")
        return 0 if ok else 1
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
