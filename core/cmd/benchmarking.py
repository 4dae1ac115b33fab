"""The ``ianvs`` command.

``ianvs -f job.yaml`` runs a benchmarking job (upstream-compatible flags ``-f``, ``-v``,
``-h`` and exit codes). Subcommands, which never change what ``-f`` does:

* ``ianvs validate -f job.yaml``: check files, schemas, aliases and sort metrics, run nothing;
* ``ianvs dataset humaneval -o out.jsonl``: write HumanEval in the codegen record schema;
* ``ianvs edge certs|scheduler|worker|demo``: grade on edge nodes (see :mod:`core.cmd.edge`).
* ``ianvs sandbox image build`` / ``ianvs sandbox sweep``: the docker backend's images and
  leftovers; ``ianvs sandbox doctor`` / ``ianvs sandbox clean``: the walls of this machine and
  what dead runs left (:mod:`core.cmd.sandbox`).
* ``ianvs dataset comments|issues --from ... -o out.jsonl``: build comment / issue records;
* ``ianvs judge export|import -f job.yaml ...``: human rating sheets of a finished run.
* ``ianvs dataset repo --repo <git dir|sdist|folder> -o tasks.jsonl``: build repo-level tasks.

Errors print one line (file:line: what; fix) and exit 1; ``--debug`` adds the traceback.
"""
from __future__ import annotations

import argparse
import gc
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from core.__version__ import __version__
from core.common.errors import IanvsError
from core.common.redact import scrub
from core.common.log import setup_logging

logger = logging.getLogger("ianvs")

SUBCOMMANDS = ("validate", "dataset", "leaderboard", "judge", "edge", "sandbox")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--debug", action="store_true",
                        help="show tracebacks and DEBUG logs")
    parser.add_argument("--log-level", default="INFO",
                        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="log level on stderr (default INFO)")


def main_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ianvs", description="AI Benchmarking Tool",
        epilog="subcommands: 'ianvs validate -f job.yaml' checks a job without running it; "
               "'ianvs dataset humaneval -o out.jsonl' converts HumanEval; "
               "'ianvs edge certs|scheduler|worker|demo' grades on edge nodes (Dask); "
               "'ianvs sandbox image build' builds the docker backend's base image; "
               "'ianvs sandbox doctor' / 'ianvs sandbox clean' show the walls and remove what "
               "dead runs left.")
    parser.add_argument("-f", "--benchmarking_config_file", nargs="?", default=None,
                        help="run the benchmarking job in this YAML file")
    parser.add_argument("-v", "--version", action="version", version=__version__,
                        help="print the version and exit")
    parser.add_argument("--fresh", action="store_true",
                        help="start new test-case folders instead of resuming stored "
                             "predictions")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.add_argument("--no-report", action="store_true",
                        help="do not write report/ (index.html, leaderboard.md, manifest.json)")
    parser.add_argument("--full-table", action="store_true",
                        help="print the leaderboard with every column in one table, as upstream "
                             "Ianvs does (default: fitted to 120 columns, urls listed below)")
    _common(parser)
    return parser


def _fail(exc: BaseException, debug: bool) -> int:
    if debug:
        logger.exception("benchmarkingjob runs failed")
    message = str(exc) if isinstance(exc, IanvsError) else f"{type(exc).__name__}: {exc}"
    print(f"ianvs: error: {scrub(message)}", file=sys.stderr)
    return 1


def _run(argv: Sequence[str]) -> int:
    parser = main_parser()
    if not argv:
        parser.print_help(sys.stderr)
        return 1
    args = parser.parse_args(argv)
    setup_logging("DEBUG" if args.debug else args.log_level)
    if args.benchmarking_config_file is None:
        print("ianvs: error: -f needs the path of a benchmarkingjob YAML file", file=sys.stderr)
        return 1
    path = Path(args.benchmarking_config_file)
    if not path.is_file():
        print(f"ianvs: error: not found benchmarking config({path}) file in local",
              file=sys.stderr)
        return 1
    try:
        from core.cmd.job import load_job
        from core.cmd.runner import run_job

        job = load_job(path)
        summary = run_job(job, fresh=args.fresh, show_progress=not args.no_progress,
                          debug=args.debug, full_table=args.full_table,
                          report=not args.no_report, command=["ianvs", *argv])
    except (IanvsError, OSError) as exc:
        return _fail(exc, args.debug)
    except KeyboardInterrupt:
        print("ianvs: interrupted; finished predictions are stored, run the same command "
              "again to resume", file=sys.stderr)
        return 130
    if summary.rank_files is not None:
        logger.info("rank files: %s", summary.rank_files.rank_dir)
    for name, cases in summary.metric_errors.items():
        print(f"ianvs: warning: metric {name!r} failed in {len(cases)} of "
              f"{len(summary.outcomes)} test cases ({cases[0][1]}); its value is NaN in their "
              "rank rows (details in each case.json)", file=sys.stderr)
    if summary.failed:
        for outcome in summary.failed:
            print(f"ianvs: testcase {outcome.case.url} failed: {outcome.error}",
                  file=sys.stderr)
        print(f"ianvs: error: {len(summary.failed)} of {len(summary.outcomes)} test cases "
              "failed (details in each case.json)", file=sys.stderr)
        return 1
    logger.info("benchmarkingjob runs successfully.")
    return 0


def validate_parser() -> argparse.ArgumentParser:
    """The parser of ``ianvs validate`` (builds it only; imports nothing heavy)."""
    parser = argparse.ArgumentParser(prog="ianvs validate",
                                     description="Check a job without running any model.")
    parser.add_argument("-f", "--benchmarking_config_file", required=True)
    _common(parser)
    return parser


def _validate(argv: Sequence[str]) -> int:
    args = validate_parser().parse_args(argv)
    setup_logging("DEBUG" if args.debug else args.log_level)
    from core.cmd.validate import validate_job

    try:
        problems, warnings = validate_job(Path(args.benchmarking_config_file))
    except (IanvsError, OSError) as exc:
        return _fail(exc, args.debug)
    for line in warnings:
        print(f"warning: {line}")
    for line in problems:  # each names file, line and fix, as a run's error does
        print(f"ianvs: error: {line}", file=sys.stderr)
    if problems:
        print(f"ianvs: error: {len(problems)} problem(s) found in "
              f"{args.benchmarking_config_file}", file=sys.stderr)
        return 1
    print(f"{args.benchmarking_config_file}: OK ({len(warnings)} warning(s))")
    return 0


def dataset_parser() -> argparse.ArgumentParser:
    """The parser of ``ianvs dataset``: one subcommand per :class:`DatasetCommand` in the
    registry (:func:`core.scenarios.dataset_commands`; builds it only, nothing runs)."""
    from core.scenarios import dataset_commands

    parser = argparse.ArgumentParser(prog="ianvs dataset",
                                     description="Build datasets in this project's formats.")
    sub = parser.add_subparsers(dest="kind", required=True)
    for name, command in dataset_commands().items():
        child = sub.add_parser(name, help=command.help)
        command.add_arguments(child)
        if command.logging_options:
            _common(child)
    _common(parser)
    return parser


def _dataset(argv: Sequence[str]) -> int:
    from core.scenarios import dataset_commands

    args = dataset_parser().parse_args(argv)
    setup_logging("DEBUG" if args.debug else args.log_level)
    command = dataset_commands()[args.kind]
    try:
        return command.run(args)
    except command.errors as exc:
        return _fail(exc, args.debug)


def leaderboard_parser() -> argparse.ArgumentParser:
    """The parser of ``ianvs leaderboard`` (builds it only)."""
    parser = argparse.ArgumentParser(
        prog="ianvs leaderboard",
        description="Merge the results of several jobs (models, machines, days) into one "
                    "leaderboard, with each run's manifest facts as columns.")
    parser.add_argument("paths", nargs="+", type=Path,
                        help="workspaces, job folders or rank folders")
    parser.add_argument("-o", "--output", type=Path, help="write here (default: stdout)")
    parser.add_argument("--html", action="store_true", help="HTML instead of Markdown")
    parser.add_argument("--metric", help="rank by this column (default: the first metric)")
    parser.add_argument("--title", default="Leaderboard across runs")
    _common(parser)
    return parser


def _leaderboard(argv: Sequence[str]) -> int:
    args = leaderboard_parser().parse_args(argv)
    setup_logging("DEBUG" if args.debug else args.log_level)
    from core.storymanager.report.board import build_board

    try:
        text = build_board(args.paths, args.metric, args.output, args.html, args.title)
    except (IanvsError, OSError) as exc:
        return _fail(exc, args.debug)
    if args.output is None:
        sys.stdout.write(text)
    else:
        print(f"wrote {args.output}")
    return 0


def judge_cli_parser() -> argparse.ArgumentParser:
    """The parser of ``ianvs judge`` as the command uses it (with ``--debug``/``--log-level``)."""
    from core.cmd.scenarios import judge_parser

    parser = judge_parser()
    _common(parser)
    return parser


def _judge(argv: Sequence[str]) -> int:
    from core.cmd.scenarios import run_judge

    args = judge_cli_parser().parse_args(argv)
    setup_logging("DEBUG" if args.debug else args.log_level)
    try:
        return run_judge(args)
    except (IanvsError, OSError) as exc:
        return _fail(exc, args.debug)


def command_parser(subcommand: str | None = None) -> argparse.ArgumentParser:
    """The argparse parser that ``ianvs <subcommand> ...`` parses its arguments with.

    ``None`` is the job runner's (``ianvs -f job.yaml``); otherwise one of
    :data:`SUBCOMMANDS` (KeyError for any other name). Only builds the parser: nothing is run
    and nothing heavy is imported, so tests may check documented commands against it.
    """
    if subcommand is None:
        return main_parser()
    if subcommand == "edge":
        from core.cmd.edge import edge_parser

        return edge_parser()
    if subcommand == "sandbox":
        from core.cmd.sandbox import sandbox_parser

        return sandbox_parser()
    builders = {"validate": validate_parser, "dataset": dataset_parser,
                "leaderboard": leaderboard_parser, "judge": judge_cli_parser}
    return builders[subcommand]()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ianvs`` console script; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "validate":
        return _validate(argv[1:])
    if argv and argv[0] == "dataset":
        return _dataset(argv[1:])
    if argv and argv[0] == "leaderboard":
        return _leaderboard(argv[1:])
    if argv and argv[0] == "edge":
        from core.cmd.edge import edge_main

        return edge_main(argv[1:])
    if argv and argv[0] == "sandbox":
        from core.cmd.sandbox import main as sandbox_main

        return sandbox_main(argv[1:])
    if argv and argv[0] == "judge":
        return _judge(argv[1:])
    return _run(argv)


def cli() -> None:
    status = main()
    # Nothing runs after this but the exit handlers (which still run: executors are closed,
    # logs flushed). Freezing the objects alive now spares the interpreter's exit its full
    # cyclic collections over every one of them (numpy, matplotlib, the run's state): about
    # 0.15-0.2 s on a 2-core machine, 5% of a short job. Reference counting still frees them.
    gc.freeze()
    sys.exit(status)


if __name__ == "__main__":
    cli()
