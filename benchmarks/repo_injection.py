"""Per-sample overhead of repo-task injection vs running the same tests directly.

For ``--tasks`` tasks spread over a shipped set (``--set toolz``, ``eli5`` or ``dataset-sqlite``),
the ways to run each task's tests (FAIL_TO_PASS + PASS_TO_PASS) with the reference body:

* ``direct``: one ``python -m pytest <tests>`` subprocess in the repository environment, on the
  unmodified source tree (no view, no injection, no sandbox) -- the floor;
* ``view``: only building the sample's hard-link view with the injected file (no test run);
* ``sandbox``: the whole path a sample takes: AST injection, view, sandboxed pytest run, with the
  fork server preloading pytest and the repository's dependencies (the default) and without.

Each is run sequentially (one worker) so the figures are per sample; the sandbox is also run with
two workers for throughput. Prints medians side by side and the ratio sandbox/direct.
Usage: ``python benchmarks/repo_injection.py [--set eli5] [--tasks 20]`` (from the repository root).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.scenarios.repo.env import ensure_env  # noqa: E402
from core.scenarios.repo.execute import Sample, default_views_dir, run_samples  # noqa: E402
from core.scenarios.repo.kind import load_tasks  # noqa: E402
from core.scenarios.repo.prompts import reference_code as _reference_code  # noqa: E402
from core.scenarios.repo.source import materialise  # noqa: E402
from core.scenarios.repo.testrun import run_tests  # noqa: E402
from core.scenarios.repo.view import make_view  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "examples/smart_coding/smart_coding_learning_bench/repo/data"


def _source(tasks_file: Path) -> Path:
    """The source the example's testenv names for this set's repository."""
    import json

    import yaml

    env = yaml.safe_load((DATA.parent / "testenv" / "testenv.yaml").read_text())["testenv"]
    sources = next(m for m in env["metrics"] if m["name"] == "repo_tests")["sources"]
    name = json.loads(tasks_file.read_text().split("\n", 1)[0])["repo"]["name"]
    return (DATA.parent / "testenv" / sources[name]).resolve()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=20, help="tasks, spread evenly over the set")
    parser.add_argument("--set", default="toolz", help="shipped set: data/<set>-tasks.jsonl (toolz, eli5, dataset-sqlite)")
    args = parser.parse_args()
    tasks_file = DATA / f"{args.set}-tasks.jsonl"
    every = load_tasks(tasks_file)
    if any(t.get("services") for t in every):
        parser.error("sets with services (PostgreSQL) are not supported by this benchmark")
    step = max(1, len(every) // args.tasks)
    tasks = every[::step][:args.tasks]
    base = default_views_dir()
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="bench-", dir=base))
    try:
        src = materialise(str(_source(tasks_file)), work / "src")
        env = ensure_env(list(tasks[0]["env"].get("requirements") or []))
        direct = []
        for t in tasks:
            start = time.perf_counter()
            got = run_tests(env.python, src.root, [*t["tests"]["fail_to_pass"], *t["tests"]["pass_to_pass"]], 120)
            direct.append(time.perf_counter() - start)
            assert all(v == "passed" for v in got.values()), got
        views = []
        for i, t in enumerate(tasks):
            start = time.perf_counter()
            make_view(src.root, work / f"v{i}", {t["file"]: (src.root / t["file"]).read_text()})
            views.append(time.perf_counter() - start)
        figures = {}
        for label, workers, preload in (("1", 1, True), ("1-nopreload", 1, False), ("2", 2, True)):
            samples = [Sample(f"{t['task_id']}#{label}", t, _reference_code(t)) for t in tasks]
            start = time.perf_counter()
            results = list(run_samples(samples, src.root, env, work / "views", workers=workers, timeout=120,
                                       preload=preload))
            wall = time.perf_counter() - start
            assert all(r.outcome == "passed" for r in results), [r.detail for r in results if r.outcome != "passed"]
            figures[label] = (wall / len(tasks), statistics.median(r.duration_s for r in results))
        d = statistics.median(direct)
        print(f"tasks={len(tasks)} ({src.root.name}; each sample runs its task's pytest selection)")
        print(f"{'direct pytest subprocess, median s/sample':<56}{d:8.3f}")
        print(f"{'hard-link view build, median s/sample':<56}{statistics.median(views):8.4f}")
        for label, text in (("1-nopreload", "sandbox, no preload, 1 worker, wall s/sample"),
                            ("1", "sandbox (inject+view+run), 1 worker, wall s/sample"),
                            ("2", "sandbox, 2 workers, wall s/sample")):
            print(f"{text:<56}{figures[label][0]:8.3f}   ratio vs direct {figures[label][0] / d:5.2f}")
        print(f"{'sandbox run only (executor duration, 1 worker), median s':<56}{figures['1'][1]:8.3f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
