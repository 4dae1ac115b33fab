"""CLI of human judgment, shared by every text-scored kind (the ``ianvs dataset`` builders are
the kinds' own: :func:`core.scenarios.dataset_commands`).

* ``ianvs judge export -f job.yaml -o sheet/``: a finished run's answers as a rating sheet;
* ``ianvs judge import -f job.yaml sheet/ratings.csv [--rater NAME]``: one rater's ratings
  back into the run (other raters' ratings are kept).
"""
from __future__ import annotations

import argparse
from pathlib import Path


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
