"""What the embedded model achieves as a problem and test writer on shipped toolz tasks.

Takes ``--tasks`` tasks spread evenly over the shipped toolz set (every ``len/N``-th, so
functions with and without docstrings are both in), runs :func:`core.scenarios.repo.authoring.author`
with ``--llm-problems --llm-tests`` semantics on them (embedded model, greedy, one test module per
task, validation in the sandbox on the original and the blanked function) and prints, side by
side: problems asked/written, tests written/kept/dropped by reason, tasks with kept tests, and the
time spent generating and validating (seconds, and per task). ``--out`` keeps the updated records.
Usage: ``python benchmarks/repo_authoring.py [--tasks 10] [--out authored.jsonl]`` (repo root).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import Provenance  # noqa: E402

from core.scenarios.repo.authoring import AuthoringOptions, author  # noqa: E402
from core.scenarios.repo.env import ensure_env  # noqa: E402
from core.scenarios.repo.execute import default_views_dir  # noqa: E402
from core.scenarios.repo.kind import load_tasks  # noqa: E402
from core.scenarios.repo.source import materialise  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "examples/smart_coding/smart_coding_learning_bench/repo/data"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    provenance = Provenance()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    logging.getLogger("core.scenarios.repo.authoring").setLevel(logging.DEBUG)  # why tests are dropped
    every = load_tasks(DATA / "toolz-tasks.jsonl", None)
    step = max(1, len(every) // args.tasks)
    tasks = every[::step][:args.tasks]
    default_views_dir().mkdir(parents=True, exist_ok=True)
    env = ensure_env([])
    with tempfile.TemporaryDirectory(prefix="bench-", dir=default_views_dir()) as work:
        src = materialise(str(DATA / "toolz-1.0.0.tar.gz"), Path(work, "src"))
        started = time.perf_counter()
        opts = AuthoringOptions(problems=True, tests=True, views_dir=Path(work, "views"))
        report = author(tasks, src.root, env, opts)
        total = time.perf_counter() - started
    for t in tasks:
        kept = [n for w in t["model_written_tests"] for n in w["tests"]]
        print(f"{t['qualname']:<32} problem={'yes' if t.get('problem_author') else '-':<4} kept={len(kept)}")
    row = report.as_dict()
    row.pop("model")
    print(json.dumps(row))
    print(provenance.line())
    print(f"tasks={len(tasks)} total_s={total:.1f} per_task_s={total / len(tasks):.1f} "
          f"generation_s={report.generation_s:.1f} validation_s={report.validation_s:.1f}")
    if args.out:
        args.out.write_text("".join(json.dumps(t, sort_keys=True) + "\n" for t in tasks))


if __name__ == "__main__":
    main()
