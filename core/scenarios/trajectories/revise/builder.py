"""``ianvs dataset revise``: revise-after-feedback tasks from the steps of multi-commit pull requests.

Input: a steps file of ``ianvs dataset trajectories`` (built with ``--codehost`` to have review
comments) and the same repository (``--repo``). A step is a task when it is the PR's step N+1
(N >= 1) and its first parent is the PR's step N, so "the state after step N" is exactly its
parent. Each step is counted under the first reason that excludes it (:data:`REASONS`):

=====================  ========================================================================
``outside_window``     committed outside ``--since`` / ``--until``
``not_in_pr``          the step belongs to no pull request
``first_in_pr``        position 1: nothing to revise yet
``merge``              a merge commit
``previous_not_kept``  the PR's step N was filtered out by the trajectory builder
``not_consecutive``    the step's parent is not the PR's step N (a merge of the base in between)
``diff_truncated``     its diff (or step N's) was cut by the trajectory builder
``diff_too_large``     its diff or step N's is over ``--max-diff-bytes`` (prompt budget)
``binary_only``        no text line changed
``deletes_files``      it deletes or renames a file (a reply gives file contents; it cannot delete)
``context_too_large``  the files it changes, at its parent, are over ``--context-chars``
``kept``               a task
=====================  ========================================================================

``--limit N`` keeps N evenly spaced tasks in commit order (``over_limit``).

**Grading** (``--grade-tests``, with the pinned environment of ``--requirement`` / ``--env`` as
for ``ianvs dataset implement-change``): a task that touches tested code is graded by tests, every
other task by similarity to the real revision. Each kept task gets ``grading`` and, in
``metadata.grading_reason``, the first reason of :data:`GRADING_REASONS` that applies:

=====================  ========================================================================
``no_code_change``     the step changes no non-test ``.py`` file
``no_tests``           no test file of the pull request (``test_*.py`` / ``*_test.py`` changed by
                       its steps 1..N+1) exists at the step
``not_validated``      beyond ``--max-validate`` (candidates are validated newest first)
``no_pass_at_commit``  none of those tests passes at the step in the pinned environment
``no_fail_to_pass``    none passes at the step and not at its parent (with the step's own test
                       changes applied): the step flips no test
``edits_test_side``    the step's own change writes what no reply may write (a pytest
                       configuration file, say: :func:`core.scenarios.trajectories.implement_change.paths.gold_refusals`)
``policy_refused``     the grading policy would refuse the step's own change answered as a reply
                       (its gold control could not pass: a ``from .x import *`` it adds, say)
``tests``              graded by tests: FAIL_TO_PASS and a PASS_TO_PASS sample recorded
=====================  ========================================================================

Validation is the implement-change builder's (:mod:`core.scenarios.trajectories.implement_change.builder`):
the *task root* is the parent's tree with the step's own test changes applied (``git archive``,
minus ``--exclude`` paths); the tests run there and at the step, directly (the repository's own
code). A test-graded task's root is archived to ``--sources-dir``; its ``files`` and
``reference_files`` leave out the step's test files (they are in the root and are the grader's:
``test_files``). Without ``--grade-tests`` every task is ``similarity`` (``not_validated``).

**Leak check** (:mod:`core.scenarios.leak_views`), on each final record (after grading, so on
what the model is shown): a revision whose new code lines -- lines of ``reference_files`` that
no shown file has -- are already in the free text the model sees (the previous step's diff, its
message, the review comments, the next commit's message) drops the task, as does a revision that
leaves every shown file as it is (``unchanged``); a pull-request title that nearly copies them is
masked instead. Dropped tasks are counted as ``leak_dropped`` (taken out of ``kept``; a limited
build may return fewer than ``--limit``), and the report's ``leaks`` block has the masked and
dropped counts per reason; each is logged with its id.

The report is written next to the output (``<output>.build.json``).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError
from core.common.jsonl import iter_jsonl
from core.common.progress import progress_bar
from core.scenarios.trajectories.implement_change.builder import (export_roots, gold_policy_refusal,
                                                                  root_environment, write_archive)
from core.scenarios.trajectories.implement_change.paths import gold_refusals
from core.scenarios.trajectories.revise.metrics import grader_record
from core.scenarios.base import DatasetCommand
from core.scenarios.leak_views import screen_all, tally
from core.scenarios.repo.env import RepoEnv, ensure_env
from core.scenarios.repo.source import content_hash
from core.scenarios.repo.testrun import run_tests
from core.scenarios.trajectories.git import GitRepo, open_repo
from core.scenarios.trajectories.periods import commit_time, in_window

__all__ = ["ReviseOptions", "build_revise_tasks", "REASONS", "GRADING_REASONS", "add_arguments", "run"]

LOG = logging.getLogger(__name__)

GRADING_REASONS = ("no_code_change", "no_tests", "not_validated", "no_pass_at_commit", "no_fail_to_pass",
                   "edits_test_side", "policy_refused", "tests")

REASONS = ("outside_window", "not_in_pr", "first_in_pr", "merge", "previous_not_kept", "not_consecutive",
           "diff_truncated", "diff_too_large", "binary_only", "deletes_files", "context_too_large")


@dataclass(frozen=True)
class ReviseOptions:
    steps: Path
    repo: str
    output: Path
    max_diff_bytes: int = 6000
    context_chars: int = 12_000
    limit: int | None = None
    since: str | None = None
    until: str | None = None
    grade_tests: bool = False
    requirements: list[str] = field(default_factory=list)
    env: Path | None = None
    exclude: list[str] = field(default_factory=list)
    sources_dir: Path | None = None
    max_validate: int = 100
    p2p: int = 10
    timeout: float = 300.0
    show_progress: bool = False

    def sources(self) -> Path:
        """Where test-graded tasks' roots are archived (default ``<output stem>-sources``)."""
        return self.sources_dir or self.output.with_name(self.output.stem + "-sources")


def _is_test_module(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _pr_key(step: dict[str, Any]) -> tuple[Any, ...] | None:
    pr = step.get("pull_request")
    return None if pr is None else (pr["ref"], pr["merge_commit"], pr["number"])


def _feedback(prev: dict[str, Any]) -> str:
    lines = []
    for c in prev.get("review_comments") or []:
        where = f" ({c['path']}:{c['line']})" if c.get("path") else ""
        lines.append(f"- {c.get('author') or 'reviewer'}{where}: {c.get('body', '').strip()}")
    return "\n".join(lines)


def _reason(step: dict[str, Any], prev: dict[str, Any] | None, opts: ReviseOptions) -> str:
    if not in_window(commit_time(step["committed_at"]), opts.since, opts.until):
        return "outside_window"
    pr = step.get("pull_request")
    if pr is None:
        return "not_in_pr"
    if pr["position"] < 2:
        return "first_in_pr"
    if step["is_merge"]:
        return "merge"
    if prev is None:
        return "previous_not_kept"
    if not step["parents"] or step["parents"][0] != prev["commit"]:
        return "not_consecutive"
    if step["diff_truncated"] or prev["diff_truncated"]:
        return "diff_truncated"
    if max(len(step["diff"].encode()), len(prev["diff"].encode())) > opts.max_diff_bytes:
        return "diff_too_large"
    if not any(f["additions"] or f["deletions"] for f in step["files"] if not f["binary"]):
        return "binary_only"
    if any(f["status"] in ("D", "R") for f in step["files"]):
        return "deletes_files"
    return "kept"


def _task(step: dict[str, Any], prev: dict[str, Any], repo: GitRepo, opts: ReviseOptions) -> dict[str, Any] | None:
    files: dict[str, str] = {}
    reference: dict[str, str] = {}
    for f in step["files"]:
        if f["binary"]:
            continue
        if f["status"] != "A":
            old = repo.show_file(step["parents"][0], f["old_path"] or f["path"])
            if old is not None:
                files[f["old_path"] or f["path"]] = old
        if f["status"] != "D":
            new = repo.show_file(step["commit"], f["path"])
            if new is not None:
                reference[f["path"]] = new
    if sum(len(t) for t in files.values()) > opts.context_chars:
        return None
    pr = step["pull_request"]
    return {"id": step["id"], "grading": "similarity",
            "repo": {"name": step["repo"]["name"], "licence": step["repo"]["licence"]},
            "commit": step["commit"], "committed_at": step["committed_at"],
            "pull_request": {"number": pr["number"], "title": pr.get("title") or "", "position": pr["position"],
                             "length": pr["length"]},
            "previous": {"commit": prev["commit"], "message": prev["message"], "diff": prev["diff"]},
            "feedback": _feedback(prev), "message": step["message"], "files": files,
            "reference_files": reference, "metadata": {"author": step["author"], "grading_reason": "not_validated"}}


def _grading_candidate(step: dict[str, Any], pr_steps: dict[int, dict[str, Any]], repo: GitRepo) -> tuple[str, list[str]]:
    """``(reason, test files)``: ``"candidate"`` and the PR's test modules present at the step,
    or the first of ``no_code_change`` / ``no_tests``."""
    if not any(not f["is_test"] and f["path"].endswith(".py") and f["status"] != "D" for f in step["files"]):
        return "no_code_change", []
    position = step["pull_request"]["position"]
    paths = sorted({f["path"] for n, s in pr_steps.items() if n <= position for f in s["files"]
                    if f["is_test"] and _is_test_module(f["path"]) and f["status"] != "D"})
    present = [p for p in paths if repo.show_file(step["commit"], p) is not None]
    return ("candidate", present) if present else ("no_tests", [])


def _validate(task: dict[str, Any], step: dict[str, Any], tests: list[str], repo: GitRepo, env: RepoEnv,
              opts: ReviseOptions, workdir: Path) -> str:
    """Validate one candidate; on ``tests`` turn ``task`` into a test-graded task (module docstring)."""
    name = f"{step['repo']['name']}-{step['commit'][:12]}"
    base = workdir / name
    try:
        task_root, at_commit = export_roots(repo, step, base / "parent" / name, base / "commit" / name, opts.exclude)
        step_tests = [f["path"] for f in step["files"] if f["is_test"]]
        env, project = root_environment(task_root, opts.requirements, opts.env, env, base / "build")
        after = run_tests(env.python, at_commit, tests, opts.timeout)
        good = {t for t, o in after.items() if o == "passed"}
        if not good:
            return "no_pass_at_commit"
        before = run_tests(env.python, task_root, tests, opts.timeout)
        passed_before = {t for t, o in before.items() if o == "passed"}
        f2p = sorted(good - passed_before)
        if not f2p:
            return "no_fail_to_pass"
        graded = {**task, "test_files": step_tests,
                  "tests": {"fail_to_pass": f2p, "pass_to_pass": sorted(good & passed_before)[:opts.p2p],
                            "deselect": []},
                  **{key: {p: t for p, t in task[key].items() if p not in step_tests}
                     for key in ("files", "reference_files")}}
        refused = gold_refusals(graded, task_root)
        if refused:
            LOG.info("%s: its change edits the test side: %s", step["id"], refused[0])
            return "edits_test_side"
        why = gold_policy_refusal(grader_record(graded), task_root)  # in the grader's shape
        if why is not None:
            LOG.info("%s: the grading policy refuses its own change: %s", step["id"], why)
            return "policy_refused"
        archive = f"{name}.tar.gz"
        write_archive(task_root, opts.sources() / archive)
        task["grading"] = "tests"
        task["repo"].update({"commit": step["commit"], "parent": step["parents"][0],
                             "content_hash": content_hash(task_root), "source": archive})
        task["env"] = {"requirements": sorted(opts.requirements), "pins": env.pins,
                       **({"project": project} if project else {})}
        task.update({key: graded[key] for key in ("test_files", "tests", "files", "reference_files")})
        LOG.info("%s: test-graded, %d FAIL_TO_PASS", step["id"], len(f2p))
        return "tests"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def build_revise_tasks(opts: ReviseOptions) -> dict[str, Any]:
    """Write the tasks; return the report (counts per reason, options, provenance)."""
    counts: Counter[str] = Counter()
    by_position: dict[tuple[Any, ...], dict[int, dict[str, Any]]] = {}
    steps: list[dict[str, Any]] = []
    for _line, step in iter_jsonl(opts.steps, "steps file"):
        steps.append(step)
        key = _pr_key(step)
        if key is not None:
            by_position.setdefault(key, {})[step["pull_request"]["position"]] = step
    workdir = Path(tempfile.mkdtemp(prefix="ianvs-revise-"))
    tasks: list[dict[str, Any]] = []
    grading: Counter[str] = Counter()
    env = ensure_env(opts.requirements, existing=opts.env) if opts.grade_tests else None
    try:
        repo = open_repo(opts.repo, workdir)[0]
        by_id: dict[str, tuple[dict[str, Any], tuple[Any, ...]]] = {}
        for step in steps:
            key = _pr_key(step)
            prev = by_position.get(key, {}).get(step["pull_request"]["position"] - 1) if key else None
            reason = _reason(step, prev, opts)
            task = _task(step, prev, repo, opts) if reason == "kept" and prev is not None else None
            if reason == "kept" and task is None:
                reason = "context_too_large"
            counts[reason] += 1
            if task is not None and key is not None:
                tasks.append(task)
                by_id[task["id"]] = (step, key)
        if opts.limit is not None and len(tasks) > opts.limit:
            stride = len(tasks) / opts.limit
            chosen = [tasks[int(i * stride)] for i in range(opts.limit)]
            counts["over_limit"] = len(tasks) - len(chosen)
            tasks = chosen
        candidates: list[tuple[dict[str, Any], dict[str, Any], list[str]]] = []
        for task in tasks:
            step, key = by_id[task["id"]]
            why, tests = _grading_candidate(step, by_position[key], repo)
            if why == "candidate":
                candidates.append((task, step, tests))
            else:
                task["metadata"]["grading_reason"] = why
        candidates.sort(key=lambda c: commit_time(c[1]["committed_at"]), reverse=True)
        todo = candidates[:opts.max_validate] if env is not None else []
        with progress_bar(len(todo), "validating revisions", "step", opts.show_progress) as bar:
            for task, step, tests in todo:
                assert env is not None
                task["metadata"]["grading_reason"] = _validate(task, step, tests, repo, env, opts, workdir)
                LOG.info("%s (%s): %s", step["id"], step["committed_at"][:10], task["metadata"]["grading_reason"])
                bar.update(1)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    screened, leaks = screen_all("revise", tasks, where=opts.steps.name)
    counts["leak_dropped"] = len(tasks) - len(screened)
    counts["kept"] -= counts["leak_dropped"]
    tasks = screened
    leak_report = tally(leaks)
    LOG.info("leak check: %d masked, %d dropped %s", leak_report["masked"], leak_report["dropped"],
             leak_report["by_reason"])
    for task in tasks:
        grading[task["metadata"]["grading_reason"]] += 1
    opts.output.parent.mkdir(parents=True, exist_ok=True)
    opts.output.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")
    report = {"builder": "ianvs dataset revise", "tasks": len(tasks),
              "counts": {r: counts.get(r, 0) for r in (*REASONS, "leak_dropped", "kept", "over_limit")},
              "leaks": leak_report,
              "with_feedback": sum(1 for t in tasks if t["feedback"]),
              "grading": {"tests": sum(t["grading"] == "tests" for t in tasks),
                          "similarity": sum(t["grading"] == "similarity" for t in tasks),
                          "reasons": {r: grading.get(r, 0) for r in GRADING_REASONS}},
              "env": None if env is None else {"requirements": sorted(opts.requirements), "pins": env.pins},
              "steps_file": opts.steps.name, "steps_sha256": hashlib.sha256(opts.steps.read_bytes()).hexdigest(),
              "options": {"max_diff_bytes": opts.max_diff_bytes, "context_chars": opts.context_chars,
                          "limit": opts.limit, "since": opts.since, "until": opts.until,
                          "grade_tests": opts.grade_tests, "exclude": opts.exclude,
                          "max_validate": opts.max_validate, "p2p": opts.p2p}}
    opts.output.with_name(opts.output.name + ".build.json").write_text(json.dumps(report, indent=1) + "\n",
                                                                       encoding="utf-8")
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", required=True, type=Path, help="steps file of 'ianvs dataset trajectories'")
    parser.add_argument("--repo", required=True, help="the same repository (git directory or .bundle)")
    parser.add_argument("-o", "--output", required=True, type=Path, help="tasks file to write")
    parser.add_argument("--max-diff-bytes", type=int, default=6000)
    parser.add_argument("--context-chars", type=int, default=12_000)
    parser.add_argument("--limit", type=int, help="keep N tasks evenly spaced in commit order")
    parser.add_argument("--since", help="keep steps committed on or after DATE")
    parser.add_argument("--until", help="keep steps committed before DATE")
    parser.add_argument("--grade-tests", action="store_true",
                        help="grade the steps that touch tested code by tests (validated in the pinned environment)")
    parser.add_argument("--requirement", action="append", default=[], metavar="PIN",
                        help="pinned dependency of the one environment the tests run in (with --grade-tests)")
    parser.add_argument("--env", type=Path, help="an existing virtualenv instead (needs pytest)")
    parser.add_argument("--exclude", action="append", default=[], metavar="PATH",
                        help="path left out of test-graded task roots (notebooks, docs, large data)")
    parser.add_argument("--sources-dir", type=Path, help="where test-graded task roots are archived "
                                                          "(default: next to -o, folder <output stem>-sources)")
    parser.add_argument("--max-validate", type=int, default=100, help="candidates validated (newest first)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per validation test run")


def run(args: argparse.Namespace) -> int:
    if (args.requirement or args.env) and not args.grade_tests:
        raise ConfigError("--requirement and --env choose the environment of --grade-tests",
                          hint="add --grade-tests, or leave them out")
    report = build_revise_tasks(ReviseOptions(
        steps=args.steps, repo=args.repo, output=args.output, max_diff_bytes=args.max_diff_bytes,
        context_chars=args.context_chars, limit=args.limit, since=args.since, until=args.until,
        grade_tests=args.grade_tests, requirements=args.requirement, env=args.env, exclude=args.exclude,
        sources_dir=args.sources_dir, max_validate=args.max_validate, timeout=args.timeout))
    sys.stdout.write(json.dumps(report["counts"]) + "\n")
    sys.stdout.write(json.dumps(report["grading"]) + "\n")
    sys.stdout.write(f"wrote {report['tasks']} tasks to {args.output}\n")
    return 0


COMMAND = DatasetCommand("revise-after-feedback tasks from pull requests' steps", add_arguments,
                         run)
