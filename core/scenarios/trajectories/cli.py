"""Arguments and action of ``ianvs dataset trajectories`` (wired in :mod:`core.cmd.scenarios`)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from core.scenarios.base import DatasetCommand
from core.scenarios.trajectories.builder import TrajectoryOptions, build_trajectories, manifest_path
from core.scenarios.trajectories.filters import FilterOptions

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo", required=True,
                        help="git work tree, bare repository or .bundle (read with the git command; "
                             "nothing leaves the machine)")
    parser.add_argument("-o", "--output", required=True, type=Path, help="steps file to write (JSON lines)")
    parser.add_argument("--rev", help="tip of the mainline (default HEAD)")
    parser.add_argument("--since", help="keep commits committed on or after DATE (YYYY-MM-DD or ISO 8601; UTC "
                                        "when no offset)")
    parser.add_argument("--until", help="keep commits committed before DATE")
    parser.add_argument("--name", help="repository name recorded in ids (default: from --repo)")
    parser.add_argument("--no-pulls", dest="include_pulls", action="store_false",
                        help="walk the mainline only (default: also refs/pull/*/head)")
    parser.add_argument("--max-diff-bytes", type=int, default=64_000,
                        help="bound of a step's diff text; longer diffs are cut at a line (diff_truncated)")
    parser.add_argument("--max-files", type=int, default=50, help="more changed files: filtered as huge")
    parser.add_argument("--max-lines", type=int, default=2000,
                        help="more added+deleted lines: filtered as huge")
    parser.add_argument("--bot", action="append", default=[], metavar="PATTERN",
                        help="another bot author pattern (case-insensitive substring of name or e-mail)")
    parser.add_argument("--vendored", action="append", default=[], metavar="GLOB",
                        help="another vendored/generated path glob")
    parser.add_argument("--licence", help="SPDX id recorded in every step (default: guessed from the "
                                          "licence file at the tip)")
    parser.add_argument("--codehost", type=Path,
                        help="exported pull requests, review comments and issues (JSON; shape in "
                             "docs/proposals/scenarios/smart_coding/trajectories.md)")
    parser.add_argument("--from-manifest", type=Path,
                        help="rebuild the range and options recorded in a previous build's .build.json")
    parser.add_argument("--fresh", action="store_true", help="discard an unfinished build in -o")


def run(args: argparse.Namespace) -> int:
    opts = TrajectoryOptions(
        repo=args.repo, output=args.output, rev=args.rev, name=args.name,
        include_pulls=args.include_pulls, max_diff_bytes=args.max_diff_bytes,
        filters=FilterOptions(since=args.since, until=args.until, max_files=args.max_files,
                              max_lines=args.max_lines, bots=tuple(args.bot),
                              vendored=tuple(args.vendored)),
        licence=args.licence, codehost=args.codehost, from_manifest=args.from_manifest,
        fresh=args.fresh)
    report = build_trajectories(opts)
    sys.stdout.write(json.dumps(report.as_dict()) + "\n")
    sys.stdout.write(f"wrote {report.counts.get('kept', 0)} steps to {args.output} "
                     f"(range and counts: {manifest_path(args.output)})\n")
    return 0


COMMAND = DatasetCommand("one record per step of a repository's git history", add_arguments, run)
