"""Full-size builds of the repository builder on real packages of different shapes.

For each package of ``tests/scenarios/repo/real_packages.py`` (the sdists the builder's test uses,
fetched once and checked by sha256), runs ``ianvs dataset repo`` the way a new user does: default
options only (``--max-tasks 200``), in a fresh output folder. Prints one row per package:
collected/passed tests, functions, covered, blanked, kept, drops by reason, tests left out in the
sandbox and the build's wall time, then the provenance line. Environments are cached across runs
(``~/.cache/ianvs-smart-coding/repo-envs``), so a second run times the build, not pip.

Usage: ``python benchmarks/real_layouts.py [--only NAME ...] [--max-tasks N]`` (from the
repository root; the first run needs the package index for the sdists and environments).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import Provenance  # noqa: E402

from core.scenarios.repo.builder import BuildOptions, build  # noqa: E402
from tests.scenarios.repo.real_packages import PACKAGES, sdist  # noqa: E402

COLUMNS = ("package", "collected", "passed", "functions", "covered", "blanked", "kept", "no_failure",
           "sandbox", "over_max", "left_out", "seconds")


def main() -> None:
    provenance = Provenance()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", default=[], metavar="NAME", help="build only this package")
    parser.add_argument("--max-tasks", type=int, default=200, help="the builder's --max-tasks (default: its own)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    unknown = set(args.only) - {p[0] for p in PACKAGES}
    if unknown:
        parser.error(f"unknown package(s): {', '.join(sorted(unknown))}")
    rows = []
    for name, version, sha256, _shape in PACKAGES:
        if args.only and name not in args.only:
            continue
        archive = sdist(name, version, sha256)
        with tempfile.TemporaryDirectory(prefix="real-layouts-") as tmp:
            started = time.monotonic()
            report = build(BuildOptions(repo=str(archive), output=Path(tmp) / "tasks.jsonl", licence="MIT",
                                        max_tasks=args.max_tasks))
            seconds = time.monotonic() - started
        rows.append((f"{name} {version}", report.collected, report.passed, report.functions, report.covered,
                     report.blanked, report.kept, report.dropped_no_failure, report.dropped_sandbox,
                     report.dropped_max_tasks, report.sandbox_tests_dropped, f"{seconds:.0f}"))
        print("  ".join(str(v) for v in rows[-1]), flush=True)
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for row in rows:
        print("| " + " | ".join(str(v) for v in row) + " |")
    print(provenance.line())
    total = sum(float(r[-1]) for r in rows)
    print(f"packages={len(rows)} max_tasks={args.max_tasks} total_s={total:.0f}")


if __name__ == "__main__":
    main()
