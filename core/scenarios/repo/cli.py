"""Arguments and action of ``ianvs dataset repo`` (wired into :mod:`core.cmd.benchmarking`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from core.scenarios.repo.builder import BuildOptions, build

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo", required=True,
                        help="git work tree, bare repo or .bundle; an sdist (.tar.gz/.zip); or a folder")
    parser.add_argument("-o", "--output", required=True, type=Path, help="tasks file to write (JSON lines)")
    parser.add_argument("--rev", help="git revision to check out (default HEAD)")
    parser.add_argument("--requirement", action="append", default=[], metavar="PIN",
                        help="pinned dependency installed in the repository environment (repeatable)")
    parser.add_argument("--env", type=Path, help="use this existing virtualenv instead of creating one")
    parser.add_argument("--cache-dir", type=Path, help="where environments are cached")
    parser.add_argument("--tests", action="append", default=[], metavar="PATH",
                        help="test paths to run (default: pytest's discovery)")
    parser.add_argument("--deselect", action="append", default=[], metavar="NODEID",
                        help="tests never run (e.g. ones that need the network)")
    parser.add_argument("--max-tasks", type=int, default=200)
    parser.add_argument("--max-covering", type=int, default=40, help="covering tests run per function")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per blanked run")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--licence", help="SPDX id recorded in every task")
    parser.add_argument("--service", action="append", default=[], choices=["postgres"], dest="services",
                        help="start this service for the test runs (postgres: a private server, one fresh "
                             "database per run in DATABASE_URL/PG*; needs .ci/postgres-deps.sh)")


def run(args: argparse.Namespace) -> int:
    opts = BuildOptions(repo=args.repo, output=args.output, rev=args.rev, requirements=args.requirement,
                        env=args.env, cache_dir=args.cache_dir, test_paths=args.tests, deselect=args.deselect,
                        max_tasks=args.max_tasks, max_covering=args.max_covering, timeout=args.timeout,
                        jobs=args.jobs, licence=args.licence, services=args.services)
    report = build(opts)
    sys.stdout.write(json.dumps(report.as_dict()) + "\n")
    sys.stdout.write(f"wrote {report.kept} tasks to {args.output}\n")
    return 0
