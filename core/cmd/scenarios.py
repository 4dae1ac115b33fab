"""CLI of the comment and issue scenarios.

* ``ianvs dataset comments --from <dir|sdist> -o out.jsonl``: comment records from a codebase;
* ``ianvs dataset issues --from <export.json|faq dir|sdist> -o out.jsonl``: issue records;
* ``ianvs dataset trajectories --repo <git dir|bundle> -o steps.jsonl``: history steps;
* ``ianvs dataset commit-messages --steps steps.jsonl -o tasks.jsonl``: commit-message tasks;
* ``ianvs dataset implement-change --steps steps.jsonl --repo <bundle> -o tasks.jsonl``:
  implement-the-change tasks, validated by running the commit's tests;
* ``ianvs dataset revise --steps steps.jsonl --repo <bundle> -o tasks.jsonl``: revise-after-
  feedback tasks from multi-commit pull requests;
* ``ianvs judge export -f job.yaml -o sheet/``: a finished run's answers as a rating sheet;
* ``ianvs judge import -f job.yaml sheet/ratings.csv [--rater NAME]``: one rater's ratings
  back into the run (other raters' ratings are kept).
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any


def add_dataset_parsers(sub: Any) -> None:
    """The ``comments``, ``issues``, ``trajectories``, ``commit-messages``,
    ``implement-change`` and ``revise`` subcommands of ``ianvs dataset``."""
    from core.scenarios.commit_message.builder import add_arguments as add_commit_arguments
    from core.scenarios.implement_change.builder import add_arguments as add_implement_arguments
    from core.scenarios.revise.builder import add_arguments as add_revise_arguments
    from core.scenarios.trajectories.cli import add_arguments as add_trajectory_arguments

    com = sub.add_parser("comments", help="comment records from a documented Python codebase")
    com.add_argument("--from", dest="source", required=True, type=Path,
                     help="a folder or a source archive (sdist) of Python files")
    com.add_argument("-o", "--output", required=True, type=Path)
    com.add_argument("--limit", type=int, help="keep at most N records (evenly spaced)")
    com.add_argument("--min-lines", type=int, default=5)
    com.add_argument("--max-lines", type=int, default=40)
    com.add_argument("--license", default="unknown", help="licence of the codebase (recorded)")
    com.add_argument("--source-name", default="", help="name recorded in ids and provenance")
    iss = sub.add_parser("issues", help="issue records from a GitHub export or FAQ documents")
    iss.add_argument("--from", dest="source", required=True, type=Path,
                     help="a GitHub REST export (.json) or a folder/sdist with faq/ documents")
    iss.add_argument("-o", "--output", required=True, type=Path)
    iss.add_argument("--limit", type=int, help="keep at most N records (evenly spaced)")
    iss.add_argument("--license", default="unknown", help="licence of the texts (recorded)")
    iss.add_argument("--source-name", default="", help="name recorded in ids and provenance")
    traj = sub.add_parser("trajectories", help="one record per step of a repository's git history")
    add_trajectory_arguments(traj)
    com_msg = sub.add_parser("commit-messages", help="commit-message tasks from trajectory steps")
    add_commit_arguments(com_msg)
    impl = sub.add_parser("implement-change", help="implement-the-change tasks from trajectory steps")
    add_implement_arguments(impl)
    rev = sub.add_parser("revise", help="revise-after-feedback tasks from pull requests' steps")
    add_revise_arguments(rev)


def run_dataset(args: argparse.Namespace) -> int | None:
    """Build the dataset named by ``args.kind``; None when it is not one of ours."""
    from core.scenarios.comment.builder import (CommentBuildOptions, build_comment_records,
                                                write_records)

    if args.kind == "trajectories":
        from core.scenarios.trajectories.cli import run as run_trajectories

        return run_trajectories(args)
    if args.kind == "commit-messages":
        from core.scenarios.commit_message.builder import run as run_commit_messages

        return run_commit_messages(args)
    if args.kind == "implement-change":
        from core.scenarios.implement_change.builder import run as run_implement

        return run_implement(args)
    if args.kind == "revise":
        from core.scenarios.revise.builder import run as run_revise

        return run_revise(args)
    leaks: Counter[str] = Counter()
    if args.kind == "comments":
        records = build_comment_records(args.source, CommentBuildOptions(
            args.source_name, args.license, args.limit, args.min_lines, args.max_lines), leaks)
    elif args.kind == "issues":
        from core.scenarios.issue.builder import build_issue_records

        records = build_issue_records(args.source, args.license, args.source_name, leaks)
        if args.limit is not None and len(records) > args.limit:
            step = len(records) / args.limit
            records = [records[int(i * step)] for i in range(args.limit)]
    else:
        return None
    count = write_records(records, args.output)
    from core.scenarios.leak_views import tally

    found = tally(leaks)
    report_path = args.output.with_name(args.output.name + ".build.json")
    report_path.write_text(json.dumps({"records": count, "leaks": found}, indent=1) + "\n",
                           encoding="utf-8")
    print(f"wrote {count} records to {args.output} (leak check: {found['dropped']} dropped; "
          f"report {report_path})")
    return 0


def judge_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ianvs judge",
                                     description="Human judgment of a finished run.")
    sub = parser.add_subparsers(dest="action", required=True)
    exp = sub.add_parser("export", help="write a rating sheet (CSV + offline HTML page)")
    exp.add_argument("-f", "--benchmarking_config_file", required=True, type=Path)
    exp.add_argument("-o", "--output", required=True, type=Path, help="folder for the sheet")
    exp.add_argument("--seed", type=int, default=0, help="shuffle seed of the items")
    imp = sub.add_parser("import", help="read ratings back into the run's test cases")
    imp.add_argument("-f", "--benchmarking_config_file", required=True, type=Path)
    imp.add_argument("ratings", type=Path, help="the filled-in ratings CSV")
    imp.add_argument("--rater", help="whose ratings these are (default: the sheet's 'rater' "
                                     "column); another rater's ratings are kept, this rater's "
                                     "earlier ones replaced")
    return parser


def run_judge(args: argparse.Namespace) -> int:
    from core.cmd.job import load_job
    from core.scenarios.human import export_sheet, import_ratings

    job = load_job(args.benchmarking_config_file)
    if args.action == "export":
        count = export_sheet(job, args.output, seed=args.seed)
        print(f"wrote {count} items to {args.output / 'ratings.csv'} and "
              f"{args.output / 'index.html'}")
        return 0
    done = import_ratings(job, args.ratings, rater=args.rater)
    print(f"imported {done} ratings; run 'ianvs -f {args.benchmarking_config_file}' again to "
          "put human_acc, the judge-human kappas (per case and pooled) and the agreement "
          "between raters on the leaderboard (nothing is regenerated)")
    return 0
