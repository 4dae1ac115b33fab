"""Do two runs of the same jobs give the same results? (A refactor's "behaviour unchanged" check.)

Each argument is a folder holding the workspaces of one run, e.g. what
``benchmarks/default_job.py --job <kind> --keep <folder>`` keeps. Every rank row of ``all_rank.csv``
is compared with the row of the same job, algorithm and hyperparameters in the other run. The
timing columns differ from run to run and are left out: ``time``, ``url``, anything ending in
``_s``, ``wall_s_per_...``, ``latency...`` and ``..._per_s``. The report manifests' sandbox facts
are compared per test case too: backend, isolation and grading tiers, graders, and how many
timeouts were calibrated. Their times are left out.

    python benchmarks/compare_runs.py BEFORE AFTER

Prints one line per differing row and a summary; exits 1 when anything differs.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path
from typing import Any

Row = dict[str, str]


def _timing(column: str) -> bool:
    return (column in ("time", "url") or column.endswith("_s") or "per_s" in column
            or column.startswith("wall_s") or "latency" in column)


def rank_rows(root: Path) -> dict[tuple[str, ...], Row]:
    """(job, algorithm, hyperparameter columns) -> the row's non-timing columns."""
    rows: dict[tuple[str, ...], Row] = {}
    for path in sorted(root.rglob("all_rank.csv")):
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                params = tuple(f"{k}={v}" for k, v in sorted(row.items()) if "-" in k)
                key = (path.parent.parent.name, row.get("algorithm", ""), *params)
                rows[key] = {k: v for k, v in row.items() if not _timing(k)}
    return rows


def manifest_cases(root: Path) -> list[tuple[Any, ...]]:
    """Per test case of every report manifest: what must not change between two runs."""
    cases = []
    for path in sorted(root.rglob("report/manifest.json")):
        for case in json.loads(path.read_text())["test_cases"]:
            sandbox = case["sandbox"]
            cases.append((path.parent.parent.name, case.get("algorithm"),
                          json.dumps(case.get("modules"), sort_keys=True),
                          sandbox.get("backend"), sandbox.get("isolation"), sandbox.get("grading"),
                          sandbox["reference_times_s"]["count"],
                          json.dumps(sandbox.get("graded_by"), sort_keys=True),
                          case.get("status")))
    return sorted(cases, key=repr)


def compare(before: Path, after: Path) -> list[str]:
    """Lines describing every difference (empty: the runs agree)."""
    out = []
    a, b = rank_rows(before), rank_rows(after)
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            ra, rb = a.get(key) or {}, b.get(key) or {}
            diff = {c: (ra.get(c), rb.get(c)) for c in sorted(set(ra) | set(rb))
                    if ra.get(c) != rb.get(c)}
            out.append(f"rank {key[0]} {key[1]}: {diff}")
    ma, mb = manifest_cases(before), manifest_cases(after)
    if ma != mb:
        out += [f"manifest before {x}\n         after  {y}" for x, y in zip(ma, mb) if x != y]
        if len(ma) != len(mb):
            out.append(f"manifest: {len(ma)} test cases before, {len(mb)} after")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    lines = compare(args.before, args.after)
    for line in lines:
        print(line)
    rows = len(rank_rows(args.before))
    print(f"{rows} rank rows and {len(manifest_cases(args.before))} manifest cases compared: "
          + ("the runs agree" if not lines else f"{len(lines)} difference(s)"))
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
