"""``ianvs dataset commit-messages``: commit-message tasks from trajectory steps.

Input: a steps file written by ``ianvs dataset trajectories`` (JSONL, ``.gz`` read as gzip)
and, optionally, the same repository (``--repo``) for the touched files' context. Each step is
kept or dropped with the first reason that applies, counted in the report:

=================== ==========================================================================
``merge``           a merge commit (its combined diff is not a change a developer describes)
``outside_window``  committed before ``--since`` or not before ``--until``
``not_mainline``    with ``--mainline-only``: reachable only from a pull-request ref. A
                    squash-merged pull request is in the history twice, as its branch's
                    commits and as the squash commit on the mainline whose message gathers
                    theirs; keeping the mainline keeps each change once
``diff_truncated``  the step's diff was cut by the trajectory builder's bound
``diff_too_large``  the diff is longer than ``--max-diff-bytes`` (a prompt budget)
``binary_only``     no text line changed (binary files, pure renames, mode changes)
``short_message``   the message has fewer than ``--min-words`` words (``fix``, ``wip``, ...)
``leak_dropped``    the message (or a near copy) is in the diff or the context, so the prompt
                    shows the answer (:mod:`core.scenarios.leak_views`)
``kept``            a task
=================== ==========================================================================

The leak check runs on every task before ``--limit``: a pull-request title that equals or nearly
copies the message's subject (or holds it) is *masked* (``pull_request_title`` set to ``""``; the
diff is the task, the title only a hint), a message found in the diff or the context drops the
step. The report's ``leaks`` block counts both per reason (``masked``, ``dropped``,
``by_reason``); every masked or dropped task is logged with its id.

``--limit N`` then keeps N tasks evenly spaced over the kept ones in commit order (counted as
``over_limit``). ``context`` is the outline (class and function header lines, with their line
numbers) of every touched Python file at the step's first parent, read with ``git show``, at
most ``--context-chars`` characters; empty without ``--repo``. The report (counts, options, the
steps file's SHA-256) is written next to the output as ``<output>.build.json``.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import logging
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.common.jsonl import iter_jsonl
from core.scenarios.base import DatasetCommand
from core.scenarios.leak_views import screen_all, tally
from core.scenarios.trajectories.git import GitRepo, open_repo
from core.scenarios.trajectories.periods import commit_time, in_window
from core.common import pyast

__all__ = ["CommitTaskOptions", "build_commit_tasks", "outline", "add_arguments", "run",
           "DROP_REASONS"]

LOG = logging.getLogger(__name__)

DROP_REASONS = ("merge", "outside_window", "not_mainline", "diff_truncated", "diff_too_large", "binary_only",
                "short_message")


@dataclass(frozen=True)
class CommitTaskOptions:
    steps: Path
    output: Path
    repo: str | None = None
    max_diff_bytes: int = 4000
    min_words: int = 3
    context_chars: int = 1200
    limit: int | None = None
    since: str | None = None
    until: str | None = None
    mainline_only: bool = False


def outline(source: str) -> list[str]:
    """``"<line>: <header>"`` for every class and function of a Python source, indented by
    nesting (decorators left out); empty when it does not parse."""
    try:
        tree = pyast.parse(source)
    except (SyntaxError, ValueError):
        return []
    lines = source.splitlines()
    out: list[str] = []

    def visit(node: ast.AST, depth: int) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                header = lines[child.lineno - 1].strip() if child.lineno <= len(lines) else child.name
                out.append(f"{child.lineno}: {'    ' * depth}{header}")
                visit(child, depth + 1)

    visit(tree, 0)
    return out


def _context(repo: GitRepo | None, step: dict[str, Any], limit: int) -> str:
    if repo is None or not step["parents"]:
        return ""
    parts: list[str] = []
    for f in step["files"]:
        if not f["path"].endswith(".py") or f["status"] == "A":
            continue
        text = repo.show_file(step["parents"][0], f["old_path"] or f["path"])
        heads = outline(text) if text is not None else []
        if heads:
            parts.append(f"{f['old_path'] or f['path']}:\n" + "\n".join(f"  {h}" for h in heads))
    text = "\n".join(parts)
    if len(text) > limit:
        text = text[:limit].rsplit("\n", 1)[0] + "\n  ..."
    return text


def _reason(step: dict[str, Any], opts: CommitTaskOptions) -> str:
    if step["is_merge"]:
        return "merge"
    if not in_window(commit_time(step["committed_at"]), opts.since, opts.until):
        return "outside_window"
    if opts.mainline_only and not step.get("on_mainline", True):
        return "not_mainline"
    if step["diff_truncated"]:
        return "diff_truncated"
    if len(step["diff"].encode("utf-8")) > opts.max_diff_bytes:
        return "diff_too_large"
    if not any(f["additions"] or f["deletions"] for f in step["files"]):
        return "binary_only"
    if len(step["message"].split()) < opts.min_words:
        return "short_message"
    return "kept"


def task_of(step: dict[str, Any], context: str) -> dict[str, Any]:
    """The commit-message record of one kept step."""
    pr = step.get("pull_request") or {}
    return {"id": step["id"], "diff": step["diff"], "files": [f["path"] for f in step["files"]],
            "context": context, "message": step["message"], "commit": step["commit"],
            "committed_at": step["committed_at"],
            "repo": {"name": step["repo"]["name"], "licence": step["repo"]["licence"]},
            "pull_request_title": pr.get("title") or "",
            "metadata": {"author": step["author"], "pull_request": pr.get("number"),
                         "tests_touched": step["tests_touched"]}}


def build_commit_tasks(opts: CommitTaskOptions) -> dict[str, Any]:
    """Write the tasks; return the report (counts per reason, leaks, options, provenance)."""
    counts: Counter[str] = Counter()
    kept: list[dict[str, Any]] = []
    for _line, step in iter_jsonl(opts.steps, "steps file"):
        reason = _reason(step, opts)
        counts[reason] += 1
        if reason == "kept":
            kept.append(step)
    workdir = Path(tempfile.mkdtemp(prefix="ianvs-commit-tasks-"))
    try:
        repo = open_repo(opts.repo, workdir)[0] if opts.repo else None
        records = [task_of(step, _context(repo, step, opts.context_chars)) for step in kept]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    records, leaks = screen_all("commit_message", records, where=opts.steps.name)
    counts["leak_dropped"] = counts["kept"] - len(records)
    counts["kept"] = len(records)
    if opts.limit is not None and len(records) > opts.limit:
        stride = len(records) / opts.limit
        chosen = [records[int(i * stride)] for i in range(opts.limit)]
        counts["over_limit"] = len(records) - len(chosen)
        records = chosen
    leak_report = tally(leaks)
    LOG.info("leak check: %d masked, %d dropped %s", leak_report["masked"],
             leak_report["dropped"], leak_report["by_reason"])
    opts.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = opts.output.with_name(f".{opts.output.name}.tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    tmp.replace(opts.output)
    report = {"builder": "ianvs dataset commit-messages", "tasks": len(records),
              "counts": {r: counts.get(r, 0)  # not_mainline only with its option
                         for r in (*DROP_REASONS, "leak_dropped", "kept", "over_limit")
                         if r != "not_mainline" or opts.mainline_only},
              "leaks": leak_report,
              "steps_file": opts.steps.name,
              "steps_sha256": hashlib.sha256(opts.steps.read_bytes()).hexdigest(),
              "options": {"max_diff_bytes": opts.max_diff_bytes, "min_words": opts.min_words,
                          "context_chars": opts.context_chars, "limit": opts.limit,
                          "since": opts.since, "until": opts.until,
                          "repo": Path(opts.repo).name if opts.repo else None,
                          **({"mainline_only": True} if opts.mainline_only else {})}}
    opts.output.with_name(opts.output.name + ".build.json").write_text(
        json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", required=True, type=Path,
                        help="steps file of 'ianvs dataset trajectories' (.jsonl or .jsonl.gz)")
    parser.add_argument("-o", "--output", required=True, type=Path, help="tasks file to write")
    parser.add_argument("--repo", help="the same repository (git dir or .bundle), for the touched "
                                       "files' outline at the parent; without it context is empty")
    parser.add_argument("--max-diff-bytes", type=int, default=4000, help="longer diffs are dropped")
    parser.add_argument("--min-words", type=int, default=3, help="shorter messages are dropped")
    parser.add_argument("--context-chars", type=int, default=1200, help="bound of the context")
    parser.add_argument("--limit", type=int, help="keep N tasks evenly spaced in commit order")
    parser.add_argument("--since", help="keep steps committed on or after DATE")
    parser.add_argument("--until", help="keep steps committed before DATE")
    parser.add_argument("--mainline-only", action="store_true",
                        help="drop steps reachable only from a pull-request ref (not_mainline): "
                             "a squash-merged PR's branch commits repeat its squash commit")


def run(args: argparse.Namespace) -> int:
    report = build_commit_tasks(CommitTaskOptions(
        steps=args.steps, output=args.output, repo=args.repo, max_diff_bytes=args.max_diff_bytes,
        min_words=args.min_words, context_chars=args.context_chars, limit=args.limit,
        since=args.since, until=args.until, mainline_only=args.mainline_only))
    sys.stdout.write(json.dumps(report["counts"]) + "\n")
    sys.stdout.write(f"wrote {report['tasks']} tasks to {args.output}\n")
    return 0


COMMAND = DatasetCommand("commit-message tasks from trajectory steps", add_arguments, run)
