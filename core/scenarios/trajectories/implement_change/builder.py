"""``ianvs dataset implement-change``: implement-the-change tasks from trajectory steps, validated.

Input: a steps file of ``ianvs dataset trajectories`` and the same repository (``--repo``, a git
directory or bundle), plus the pinned requirements of *one* environment (``--requirement``; the
repo kind's :func:`~core.scenarios.repo.env.ensure_env` creates and caches it).

1. **Candidates.** A step is a candidate when it is not a merge, its diff was not truncated, it
   is inside ``--since``/``--until``, it changes at least one test file (``tests_touched``) and
   at least one non-test Python file, at most ``--max-change-lines`` lines of non-test code,
   and the changed code files at the parent fit in ``--context-chars``. Each other step is
   counted under the first reason that excludes it (:data:`STEP_REASONS`).
2. **Validation** (newest candidates first, at most ``--max-candidates``): the parent's tree
   with the commit's test files applied (the *task root*) and the commit's tree are written
   out (``git archive``, minus ``--exclude`` paths), and the touched test files run in both,
   directly (the repository's own code; trusted) with the repo kind's test runner. Tests that
   pass at the commit and do not pass at the parent are FAIL_TO_PASS; up to ``--p2p`` tests
   that pass in both are a PASS_TO_PASS sample. A candidate is kept when FAIL_TO_PASS is not
   empty (``no_fail_to_pass`` otherwise; ``no_pass_at_commit`` when no touched test passes at
   the commit: it fails, errors or is skipped in the pinned environment -- code older than the
   pins, or tests of an optional dependency the environment lacks; ``edits_test_side`` when the
   commit's own change writes what no reply may write, :func:`.paths.gold_refusals`;
   ``policy_refused`` when the grading policy would refuse the commit's own change answered as a
   reply (its gold control: e.g. a ``from .x import *`` it adds, ``import sys`` in a module),
   :func:`core.scenarios.repo.execute.policy_refusal`;
   ``leak_dropped`` when the leak check, :mod:`core.scenarios.leak_views`, finds the answer in
   what the model is shown: the change's new code lines -- lines of ``reference_files`` that no
   shown file has -- already in the message or the pull-request title, or a change that leaves
   every shown file as it is. The before-files themselves are the task, not a leak). The
   report's ``leaks`` block counts masked and dropped tasks per reason.
   With ``--mainline-only`` a step only a pull-request ref reaches is not a candidate
   (``not_mainline``). With ``--max-test-seconds S`` a candidate whose touched tests take
   longer than S seconds in either tree is dropped (``slow_tests``: a parent that hangs until
   the timeout would cost that much for every sample that does not fix it). With
   ``--one-per-pr`` a candidate of a pull request that already has a task is not
   validated (``same_pr``): a squash-merged PR's change is in the history as its branch's
   commits and again as the squash commit (``(#N)`` ending its subject,
   :func:`..pulls.pull_number_of`), and a PR's later commits repeat its earlier ones' tests.
3. **Output.** One task record per kept candidate (docs/proposals/scenarios/smart_coding/
   trajectories.md), and per task its root as a deterministic ``.tar.gz`` in ``--sources-dir``
   (the job reads it: ``repo.source``; checked against ``repo.content_hash``). The report
   (``<output>.build.json``) has the counts of every reason and the environment's pins.
"""
from __future__ import annotations

import argparse
import difflib
import gzip
import hashlib
import io
import json
import logging
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.common.jsonl import iter_jsonl
from core.common.progress import progress_bar
from core.scenarios.trajectories.implement_change.paths import gold_refusals
from core.scenarios.base import DatasetCommand
from core.scenarios.leak_views import screen, tally
from core.scenarios.repo.env import RepoEnv, ensure_env
from core.scenarios.repo.project import ProjectError, entry_points_stub
from core.scenarios.repo.source import content_hash
from core.scenarios.repo.testrun import run_tests
from core.scenarios.trajectories.git import GitRepo, open_repo
from core.scenarios.trajectories.periods import commit_time, in_window
from core.scenarios.trajectories.pulls import pull_number_of

__all__ = ["ImplementOptions", "build_implement_tasks", "add_arguments", "run", "STEP_REASONS",
           "gold_policy_refusal", "root_environment",
           "VALIDATION_REASONS", "write_archive", "export"]

LOG = logging.getLogger(__name__)

STEP_REASONS = ("merge", "root_commit", "outside_window", "not_mainline", "diff_truncated", "no_tests_touched",
                "no_code_change", "change_too_large", "context_too_large")
VALIDATION_REASONS = ("no_pass_at_commit", "no_fail_to_pass", "edits_test_side", "policy_refused",
                      "leak_dropped", "kept")


@dataclass
class ImplementOptions:
    steps: Path
    repo: str
    output: Path
    sources_dir: Path
    requirements: list[str] = field(default_factory=list)
    env: Path | None = None
    exclude: list[str] = field(default_factory=list)
    since: str | None = None
    until: str | None = None
    max_change_lines: int = 200
    context_chars: int = 24_000
    max_candidates: int = 30
    max_tasks: int = 20
    p2p: int = 10
    timeout: float = 600.0
    one_per_pr: bool = False
    mainline_only: bool = False
    max_test_seconds: float | None = None
    show_progress: bool = True


def _code_files(step: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in step["files"] if not f["is_test"] and f["path"].endswith(".py")]


def _reason(step: dict[str, Any], repo: GitRepo, opts: ImplementOptions) -> str:
    if step["is_merge"]:
        return "merge"
    if not step["parents"]:  # the history's first commit: no state before it to start from
        return "root_commit"
    if not in_window(commit_time(step["committed_at"]), opts.since, opts.until):
        return "outside_window"
    if opts.mainline_only and not step.get("on_mainline", True):
        return "not_mainline"
    if step["diff_truncated"]:
        return "diff_truncated"
    if not any(f["path"].endswith(".py") for f in step["files"] if f["is_test"]):
        return "no_tests_touched"
    code = _code_files(step)
    if not code:
        return "no_code_change"
    if sum(f["additions"] + f["deletions"] for f in code) > opts.max_change_lines:
        return "change_too_large"
    size = 0
    for f in code:
        text = repo.show_file(step["parents"][0], f["old_path"] or f["path"])
        size += len(text or "")
    return "context_too_large" if size > opts.context_chars else "kept"


def export(repo: GitRepo, commit: str, dest: Path, exclude: list[str]) -> None:
    """``git archive`` of ``commit`` (minus ``exclude``) extracted at ``dest``."""
    dest.mkdir(parents=True)
    specs = ["."] + [f":!{p}" for p in exclude]
    data = subprocess.run(["git", "archive", "--format=tar", commit, "--", *specs], cwd=repo.path,
                          capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tf:
        tf.extractall(dest, filter="data")


def write_archive(root: Path, out: Path) -> None:
    """A deterministic ``.tar.gz`` of ``root`` under the top folder ``root.name`` (sorted
    entries, zero times and owners, gzip without a name or time)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        paths = sorted(p for p in root.rglob("*"))
        for path in [root, *paths]:
            info = tf.gettarinfo(str(path), arcname=str(Path(root.name) / path.relative_to(root)))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if info.isfile():
                with open(path, "rb") as fh:
                    tf.addfile(info, fh)
            else:
                tf.addfile(info)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                               compresslevel=9) as gz:
        gz.write(buf.getvalue())


def _passed(results: dict[str, str]) -> set[str]:
    return {t for t, outcome in results.items() if outcome == "passed"}


def _task(step: dict[str, Any], repo: GitRepo, opts: ImplementOptions, name: str, root_hash: str,
          archive: str, f2p: list[str], p2p: list[str], env_pins: list[str],
          project: dict[str, str] | None = None) -> dict[str, Any]:
    parent, commit = step["parents"][0], step["commit"]
    code = _code_files(step)
    context: dict[str, str] = {}
    reference: dict[str, str] = {}
    patch: list[str] = []
    for f in code:
        old = repo.show_file(parent, f["old_path"] or f["path"]) or ""
        new = repo.show_file(commit, f["path"]) if f["status"] != "D" else None
        if f["status"] != "A":
            context[f["old_path"] or f["path"]] = old
        if new is not None:
            reference[f["path"]] = new
        patch.extend(difflib.unified_diff(old.splitlines(keepends=True), (new or "").splitlines(keepends=True),
                                          f"a/{f['old_path'] or f['path']}", f"b/{f['path']}"))
    pr = step.get("pull_request") or {}
    return {
        "task_id": step["id"], "kind": "implement_change",
        "repo": {"name": name, "licence": step["repo"]["licence"], "commit": commit, "parent": parent,
                 "content_hash": root_hash, "source": archive},
        "env": {"requirements": sorted(opts.requirements), "pins": env_pins,
                **({"project": project} if project else {})},
        "file": code[0]["path"], "message": step["message"], "pull_request_title": pr.get("title") or "",
        "committed_at": step["committed_at"], "files": [f["path"] for f in code], "context": context,
        "reference_files": reference, "reference_patch": "".join(patch),
        "test_files": [f["path"] for f in step["files"] if f["is_test"]],
        "tests": {"fail_to_pass": f2p, "pass_to_pass": p2p, "deselect": []},
        "metadata": {"author": step["author"], "pull_request": pr.get("number"),
                     "position": pr.get("position")},
    }


def build_implement_tasks(opts: ImplementOptions) -> dict[str, Any]:
    """Write the tasks and their source archives; return the report (module docstring)."""
    counts: Counter[str] = Counter()
    leaks: Counter[str] = Counter()
    env = ensure_env(opts.requirements, existing=opts.env)
    workdir = Path(tempfile.mkdtemp(prefix="ianvs-implement-"))
    tasks: list[dict[str, Any]] = []
    try:
        repo, _origin = open_repo(opts.repo, workdir)
        candidates: list[dict[str, Any]] = []
        for _line, step in iter_jsonl(opts.steps, "steps file"):
            reason = _reason(step, repo, opts)
            counts[reason] += 1
            if reason == "kept":
                candidates.append(step)
        counts["candidates"] = counts.pop("kept", 0)
        candidates.sort(key=lambda s: commit_time(s["committed_at"]), reverse=True)
        counts["not_validated"] = max(0, len(candidates) - opts.max_candidates)
        with_task: set[int] = set()  # pull requests with a task (--one-per-pr)
        with progress_bar(min(len(candidates), opts.max_candidates), "validating changes", "commit",
                          opts.show_progress) as bar:
            for step in candidates[:opts.max_candidates]:
                if len(tasks) >= opts.max_tasks:
                    counts["over_limit"] += 1
                    bar.update(1)
                    continue
                number = pull_number_of(step) if opts.one_per_pr else None
                if number is not None and number in with_task:
                    LOG.info("%s: pull request #%d has a task already", step["id"], number)
                    counts["same_pr"] += 1
                    bar.update(1)
                    continue
                outcome, task = _validate(step, repo, env, opts, workdir, leaks)
                LOG.info("%s (%s): %s", step["id"], step["committed_at"][:10], outcome)
                counts[outcome] += 1
                if task is not None:
                    tasks.append(task)
                    if number is not None:
                        with_task.add(number)
                bar.update(1)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    tasks.sort(key=lambda t: t["committed_at"])
    opts.output.parent.mkdir(parents=True, exist_ok=True)
    opts.output.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")
    # the reasons of options not given are left out of the report (earlier reports lack them)
    unused = {reason for reason, used in (("not_mainline", opts.mainline_only),
                                          ("same_pr", opts.one_per_pr),
                                          ("slow_tests", opts.max_test_seconds is not None))
              if not used}
    report = {"builder": "ianvs dataset implement-change", "tasks": len(tasks),
              "with_entry_points": sum(1 for t in tasks if "project" in t["env"]),
              "counts": {k: counts.get(k, 0) for k in (*STEP_REASONS, "candidates", "not_validated",
                                                       "over_limit", "same_pr", "slow_tests",
                                                       *VALIDATION_REASONS) if k not in unused},
              "leaks": tally(leaks),
              "steps_file": opts.steps.name,
              "steps_sha256": hashlib.sha256(opts.steps.read_bytes()).hexdigest(),
              "env": {"requirements": sorted(opts.requirements), "pins": env.pins},
              "options": {"exclude": opts.exclude, "since": opts.since, "until": opts.until,
                          "max_change_lines": opts.max_change_lines, "context_chars": opts.context_chars,
                          "max_candidates": opts.max_candidates, "max_tasks": opts.max_tasks,
                          "p2p": opts.p2p, **({"one_per_pr": True} if opts.one_per_pr else {}),
                          **({"mainline_only": True} if opts.mainline_only else {}),
                          **({"max_test_seconds": opts.max_test_seconds}
                             if opts.max_test_seconds is not None else {})}}
    opts.output.with_name(opts.output.name + ".build.json").write_text(json.dumps(report, indent=1) + "\n",
                                                                       encoding="utf-8")
    return report


def export_roots(repo: GitRepo, step: dict[str, Any], task_root: Path, at_commit: Path,
                 exclude: list[str]) -> tuple[Path, Path]:
    """Export ``step``'s commit to ``at_commit`` and its first parent to ``task_root`` with the
    step's test files as they are at the commit (a test file the step deleted is deleted): the
    root a task starts from, where the new tests must fail. Returns ``(task_root, at_commit)``."""
    export(repo, step["parents"][0], task_root, exclude)
    export(repo, step["commit"], at_commit, exclude)
    for path in [f["path"] for f in step["files"] if f["is_test"]]:
        src, dst = at_commit / path, task_root / path
        if src.is_file():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
        else:
            dst.unlink(missing_ok=True)
    return task_root, at_commit


def _validate(step: dict[str, Any], repo: GitRepo, env: RepoEnv, opts: ImplementOptions,
              workdir: Path, leaks: Counter[str]) -> tuple[str, dict[str, Any] | None]:
    name = f"{step['repo']['name']}-{step['commit'][:12]}"
    base = workdir / name
    try:
        task_root, at_commit = export_roots(repo, step, base / "parent" / name, base / "commit" / name, opts.exclude)
        test_files = [f["path"] for f in step["files"] if f["is_test"] and f["path"].endswith(".py")]
        runnable = [p for p in test_files if (at_commit / p).is_file()]
        if not runnable:
            return "no_pass_at_commit", None
        env, project = root_environment(task_root, opts.requirements, opts.env, env, base / "build")
        started = time.monotonic()
        after = run_tests(env.python, at_commit, runnable, opts.timeout)
        middle = time.monotonic()
        before = run_tests(env.python, task_root, runnable, opts.timeout)
        took = max(middle - started, time.monotonic() - middle)
        if opts.max_test_seconds is not None and took > opts.max_test_seconds:
            LOG.info("%s: its tests took %.0f s in one tree", step["id"], took)
            return "slow_tests", None
        good = _passed(after)
        if not good:
            LOG.info("%s: at the commit %s", step["id"], dict(Counter(after.values())) or "no test ran")
            return "no_pass_at_commit", None
        f2p = sorted(good - _passed(before))
        if not f2p:
            return "no_fail_to_pass", None
        p2p = sorted(good & _passed(before))[:opts.p2p]
        archive = f"{name}.tar.gz"
        task = _task(step, repo, opts, step["repo"]["name"], content_hash(task_root), archive, f2p, p2p,
                     env.pins, project)
        screened = screen("implement_change", task)
        leaks[screened.key] += 1
        if screened.record is None:
            assert screened.finding is not None
            LOG.info("%s: the prompt shows the answer: %s", step["id"], screened.finding.describe())
            return "leak_dropped", None
        task = screened.record
        refused = gold_refusals(task, task_root)
        if refused:
            LOG.info("%s: its change edits the test side: %s", step["id"], refused[0])
            return "edits_test_side", None
        why = gold_policy_refusal(task, task_root)
        if why is not None:
            LOG.info("%s: the grading policy refuses its own change: %s", step["id"], why)
            return "policy_refused", None
        write_archive(task_root, opts.sources_dir / archive)
        LOG.info("%s: %d FAIL_TO_PASS, %d PASS_TO_PASS", step["id"], len(f2p), len(p2p))
        return "kept", task
    finally:
        shutil.rmtree(base, ignore_errors=True)


def root_environment(task_root: Path, requirements: list[str], given: Path | None, default: RepoEnv,
                     work: Path) -> tuple[RepoEnv, dict[str, str] | None]:
    """The environment a task root's tests run in, and the metadata stub its task records as
    ``env.project`` (``None``: none needed).

    A root runs from source, so its package's own entry points (networkx's test backend, which
    its ``conftest.py`` looks up; a pytest plugin the project ships) are registered only through
    a stub in the environment (:func:`core.scenarios.repo.project.entry_points_stub`). A root that
    declares none runs in ``default``; one that does runs in the environment of the same pins
    with its stub (one cached venv per distinct stub, created by
    :func:`core.scenarios.repo.env.ensure_env`, as the job creates it from the record). When the
    package cannot be built, or ``given`` (``--env``) is used as it is, the root runs in
    ``default`` without its entry points, with a warning; its tests may then fail at the commit
    too and the candidate is dropped as before."""
    try:
        stub = entry_points_stub(task_root, work)
    except ProjectError as exc:
        LOG.warning("%s: its entry points could not be read, its tests run without them: %s", task_root.name, exc)
        return default, None
    if stub is None:
        return default, None
    if given is not None:
        LOG.warning("%s declares entry points, but --env %s is used as it is: they are not registered",
                    task_root.name, given)
        return default, None
    LOG.info("%s: package %s %s registers its entry points (%s)", task_root.name, stub["name"], stub["version"],
             ", ".join(line.strip("[]") for line in stub["entry_points"].splitlines() if line.startswith("[")))
    return ensure_env(requirements, project=stub), stub


def gold_policy_refusal(task: dict[str, Any], task_root: Path) -> str | None:
    """Why the task's own change, answered as a model's reply (the gold control), would be
    refused by the grading policy or not parse; None when it would run."""
    from core.scenarios.repo.execute import SampleResult, policy_refusal
    from core.scenarios.trajectories.implement_change import whole_files_reply
    from core.scenarios.trajectories.implement_change.scoring import task_sample

    # the grader's form of the record: implement-change tasks name their id task_id
    rec = {**task, "id": task.get("id", task.get("task_id"))}
    item, _form = task_sample(f"{rec['id']}#ref", rec, whole_files_reply(task["reference_files"]),
                              task_root)
    if isinstance(item, SampleResult):
        return f"{item.outcome}: {item.detail}"
    return policy_refusal(item, task_root)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", required=True, type=Path, help="steps file of 'ianvs dataset trajectories'")
    parser.add_argument("--repo", required=True, help="the same repository (git directory or .bundle)")
    parser.add_argument("-o", "--output", required=True, type=Path, help="tasks file to write")
    parser.add_argument("--sources-dir", type=Path, help="where task roots are archived (default: next to -o, "
                                                          "folder <output stem>-sources)")
    parser.add_argument("--requirement", action="append", default=[], metavar="PIN",
                        help="pinned dependency of the one environment every task is validated and run in")
    parser.add_argument("--env", type=Path, help="an existing virtualenv instead (needs pytest)")
    parser.add_argument("--exclude", action="append", default=[], metavar="PATH",
                        help="path left out of task roots (notebooks, docs, large data)")
    parser.add_argument("--since", help="keep commits committed on or after DATE")
    parser.add_argument("--until", help="keep commits committed before DATE")
    parser.add_argument("--max-change-lines", type=int, default=200)
    parser.add_argument("--context-chars", type=int, default=24_000)
    parser.add_argument("--max-candidates", type=int, default=30, help="candidates validated (newest first)")
    parser.add_argument("--max-tasks", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per validation test run")
    parser.add_argument("--one-per-pr", action="store_true",
                        help="at most one task per pull request (a squash commit counts as its "
                             "PR's); the others are counted same_pr, not validated")
    parser.add_argument("--max-test-seconds", type=float, metavar="S",
                        help="drop a candidate whose tests take longer than S seconds at the commit "
                             "or at the parent (slow_tests): every model sample runs them")
    parser.add_argument("--mainline-only", action="store_true",
                        help="only commits of the mainline (not_mainline: reachable only from a "
                             "pull-request ref), so windows whose PR refs differ compare alike")


def run(args: argparse.Namespace) -> int:
    sources = args.sources_dir or args.output.with_name(args.output.stem + "-sources")
    report = build_implement_tasks(ImplementOptions(
        steps=args.steps, repo=args.repo, output=args.output, sources_dir=sources,
        requirements=args.requirement, env=args.env, exclude=args.exclude, since=args.since, until=args.until,
        max_change_lines=args.max_change_lines, context_chars=args.context_chars,
        max_candidates=args.max_candidates, max_tasks=args.max_tasks, timeout=args.timeout,
        one_per_pr=args.one_per_pr, mainline_only=args.mainline_only,
        max_test_seconds=args.max_test_seconds))
    sys.stdout.write(json.dumps(report["counts"]) + "\n")
    sys.stdout.write(f"wrote {report['tasks']} tasks to {args.output} (sources in {sources})\n")
    return 0


COMMAND = DatasetCommand("implement-the-change tasks from trajectory steps", add_arguments, run)
