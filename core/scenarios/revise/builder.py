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

``--limit N`` keeps N evenly spaced tasks in commit order (``over_limit``). The report is written
next to the output (``<output>.build.json``).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.common.jsonl import iter_jsonl
from core.scenarios.trajectories.git import GitRepo, open_repo
from core.scenarios.trajectories.periods import commit_time, in_window

__all__ = ["ReviseOptions", "build_revise_tasks", "REASONS", "add_arguments", "run"]

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
    return {"id": step["id"], "repo": {"name": step["repo"]["name"], "licence": step["repo"]["licence"]},
            "commit": step["commit"], "committed_at": step["committed_at"],
            "pull_request": {"number": pr["number"], "title": pr.get("title") or "", "position": pr["position"],
                             "length": pr["length"]},
            "previous": {"commit": prev["commit"], "message": prev["message"], "diff": prev["diff"]},
            "feedback": _feedback(prev), "message": step["message"], "files": files,
            "reference_files": reference, "metadata": {"author": step["author"]}}


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
    try:
        repo = open_repo(opts.repo, workdir)[0]
        for step in steps:
            key = _pr_key(step)
            prev = by_position.get(key, {}).get(step["pull_request"]["position"] - 1) if key else None
            reason = _reason(step, prev, opts)
            task = _task(step, prev, repo, opts) if reason == "kept" and prev is not None else None
            if reason == "kept" and task is None:
                reason = "context_too_large"
            counts[reason] += 1
            if task is not None:
                tasks.append(task)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if opts.limit is not None and len(tasks) > opts.limit:
        stride = len(tasks) / opts.limit
        chosen = [tasks[int(i * stride)] for i in range(opts.limit)]
        counts["over_limit"] = len(tasks) - len(chosen)
        tasks = chosen
    opts.output.parent.mkdir(parents=True, exist_ok=True)
    opts.output.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks), encoding="utf-8")
    report = {"builder": "ianvs dataset revise", "tasks": len(tasks),
              "counts": {r: counts.get(r, 0) for r in (*REASONS, "kept", "over_limit")},
              "with_feedback": sum(1 for t in tasks if t["feedback"]),
              "steps_file": opts.steps.name, "steps_sha256": hashlib.sha256(opts.steps.read_bytes()).hexdigest(),
              "options": {"max_diff_bytes": opts.max_diff_bytes, "context_chars": opts.context_chars,
                          "limit": opts.limit, "since": opts.since, "until": opts.until}}
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


def run(args: argparse.Namespace) -> int:
    report = build_revise_tasks(ReviseOptions(steps=args.steps, repo=args.repo, output=args.output,
                                              max_diff_bytes=args.max_diff_bytes, context_chars=args.context_chars,
                                              limit=args.limit, since=args.since, until=args.until))
    sys.stdout.write(json.dumps(report["counts"]) + "\n")
    sys.stdout.write(f"wrote {report['tasks']} tasks to {args.output}\n")
    return 0
