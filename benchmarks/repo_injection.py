"""Per-sample overhead of repo-task injection vs running the same tests directly.

For ``--tasks`` tasks spread over a shipped set (``--set toolz``, ``eli5`` or ``dataset-sqlite``),
the ways to run each task's tests (FAIL_TO_PASS + PASS_TO_PASS) with the reference body:

* ``direct``: one ``python -m pytest <tests>`` subprocess in the repository environment, on the
  unmodified source tree (no view, no injection, no sandbox) -- the floor;
* ``view``: only building the sample's hard-link view with the injected file (no test run);
* ``sandbox``: the whole path a sample takes: AST injection, view, sandboxed pytest run, on the
  ``local`` backend (the venv; with the fork server preloading pytest and the repository's
  dependencies, the default, and without) and, with ``--docker``, on the ``docker`` backend (the
  repository image, warm container, views mounted read-only).
* ``policy on``/``policy off``: the local sandbox path (1 worker, preloading) with and without
  the grading policy's compile step and guards (and with the tripwire's verdict ignored; its
  snapshots are still taken), alternated for ``--rounds`` rounds; medians, and their ratio
  ``policy_overhead_ratio`` on the last line.

Each is run sequentially (one worker) so the figures are per sample; the sandbox is also run with
two workers for throughput. Prints medians side by side and the ratios to direct; the last line
puts direct, local and docker per-sample medians (1 worker) side by side.
Usage: ``python benchmarks/repo_injection.py [--set eli5] [--tasks 20] [--docker]`` (from the
repository root; ``--docker`` needs the project's Docker engine and base image).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _provenance import Provenance  # noqa: E402

from core.scenarios.repo.env import RepoEnv, ensure_env  # noqa: E402
from core.scenarios.repo.execute import Sample, default_views_dir, run_samples  # noqa: E402
from core.scenarios.repo.image_env import ImageEnv, ensure_image_env  # noqa: E402
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


RUNS = ((1, True), (1, False), (2, True))  # (workers, preload)


@contextlib.contextmanager
def _policy_off() -> Iterator[None]:
    """The runner without the grading policy: bodies injected as written, no guards, no
    tripwire (this process only; restored on exit)."""
    import core.scenarios.repo.execute as execute

    runner, confine = execute._RUNNER, execute.confine_body
    bare = runner.replace('_G["install"]({relax!r})', "pass").replace("if _CHANGED:", "if False:")
    assert bare.count("pass") == runner.count("pass") + 1 and "if False:" in bare, "the runner changed: update _policy_off"
    execute._RUNNER, execute.confine_body = bare, (lambda chunk, *_a, **_k: chunk)  # type: ignore[assignment]
    try:
        yield
    finally:
        execute._RUNNER, execute.confine_body = runner, confine


def _sandboxed(tasks: list[dict], root: Path, env: RepoEnv | ImageEnv, views: Path,
               runs: tuple[tuple[int, bool], ...] = RUNS) -> dict[tuple[int, bool], tuple[float, float]]:
    """{(workers, preload): (wall s/sample, median executor duration s)} (reference bodies)."""
    figures = {}
    for workers, preload in runs:
        samples = [Sample(f"{t['task_id']}#{workers}{preload}", t, _reference_code(t)) for t in tasks]
        start = time.perf_counter()
        results = list(run_samples(samples, root, env, views, workers=workers, timeout=120, preload=preload))
        wall = time.perf_counter() - start
        assert all(r.outcome == "passed" for r in results), [r.detail for r in results if r.outcome != "passed"]
        figures[(workers, preload)] = (wall / len(tasks), statistics.median(r.duration_s for r in results))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=20, help="tasks, spread evenly over the set")
    parser.add_argument("--set", default="toolz", help="shipped set: data/<set>-tasks.jsonl (toolz, eli5, dataset-sqlite)")
    parser.add_argument("--docker", action="store_true", help="also the docker backend")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the policy on/off pair (medians)")
    args = parser.parse_args()
    provenance = Provenance()
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
        backends = {"local": _sandboxed(tasks, src.root, env, work / "views")}
        on, off = [], []  # the policy's overhead: on and off alternately, medians of --rounds
        for _ in range(args.rounds):
            on.append(_sandboxed(tasks, src.root, env, work / "views", ((1, True),))[(1, True)])
            with _policy_off():
                off.append(_sandboxed(tasks, src.root, env, work / "views", ((1, True),))[(1, True)])
        backends["local, policy on"] = {(1, True): (statistics.median(w for w, _ in on),
                                                    statistics.median(r for _, r in on))}
        backends["local, policy off"] = {(1, True): (statistics.median(w for w, _ in off),
                                                     statistics.median(r for _, r in off))}
        if args.docker:
            image = ensure_image_env(list(tasks[0]["env"].get("requirements") or []))
            backends["docker"] = _sandboxed(tasks, src.root, image, work / "views", ((1, True), (2, True)))
        d = statistics.median(direct)
        print(f"tasks={len(tasks)} ({src.root.name}; each sample runs its task's pytest selection)")
        print(f"{'direct pytest subprocess, median s/sample':<60}{d:8.3f}")
        print(f"{'hard-link view build, median s/sample':<60}{statistics.median(views):8.4f}")
        for name, figures in backends.items():
            for (workers, preload), (wall, run) in figures.items():
                label = f"{name} sandbox, {workers} worker(s){'' if preload else ', no preload'}, wall s/sample"
                print(f"{label:<60}{wall:8.3f}   ratio vs direct {wall / d:5.2f}   (run alone {run:.3f})")
        side = " ".join(f"{name.replace(', policy ', '_policy_')}={figures[(1, True)][0]:.3f}"
                        for name, figures in backends.items())
        policy_ratio = backends["local, policy on"][(1, True)][0] / backends["local, policy off"][(1, True)][0]
        print(provenance.line())
        print(f"per-sample s, 1 worker: direct={d:.3f} {side} policy_overhead_ratio={policy_ratio:.3f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
