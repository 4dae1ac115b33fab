"""Does an offline judge pass its control check on a shipped default subset?

Runs exactly the check the ``llm_judge`` metric runs before it scores anything
(:mod:`core.scenarios.judge_controls`): the kind's default rubric, the example job's default
test subset, up to ``--tasks`` control tasks, each task's reference answer against an unrelated
and a broken answer, greedy decoding with ``--max-tokens``. The judge is the embedded generator
with ``--model`` (``qwen2.5-coder-0.5b`` or ``qwen2.5-coder-1.5b``). Judge calls are cached in
``--cache-dir`` (default: a fresh temporary folder, so nothing is reused).

Prints one line per control task (the judge's mean rubric score of the reference, the
unrelated and the broken answer; ``None`` = unparsed), the check's reason, the judge-call
timing, a provenance line (:mod:`_provenance`) and, last::

    kind=<kind> model=<model> tasks=<n> pairs=<n> auc=<x> unrelated_auc=<x> unrelated_low=<x> \
broken_auc=<x> broken_low=<x> valid=<bool> parse_failures=<n> calls=<n> call_median_s=<x>

(``call_median_s`` counts only calls made by this run; a fully cached rerun reports its cache
reads, near 0.)

Usage: ``python benchmarks/judge_controls.py --kind issue --model qwen2.5-coder-0.5b
[--tasks 6] [--max-tokens 24] [--pairwise] [--cache-dir DIR]``
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _provenance import Provenance  # noqa: E402

from core.common.jsonl import iter_jsonl  # noqa: E402
from core.generation import create_generator  # noqa: E402
from core.generation.cache_key import GenerationCache, cached_generate  # noqa: E402
from core.generation.types import DecodingSettings  # noqa: E402
from core.scenarios import get_kind  # noqa: E402
from core.scenarios.judge_controls import (build_controls, control_requests,  # noqa: E402
                                           evaluate_controls)
from core.scenarios import get_kind  # noqa: E402
from core.scenarios.rubric import load_rubric, parse_scores  # noqa: E402

LOGGER = logging.getLogger("judge_controls")
REPO = Path(__file__).resolve().parents[1]
SUBSETS = {
    "issue": "issue/data/issues_subset.jsonl",
    "comment": "comment/data/comments_subset.jsonl",
    "commit_message": "commit_message/data/commit_messages_subset.jsonl",
}
BENCH = REPO / "examples/smart_coding/smart_coding_learning_bench"


def main() -> None:
    provenance = Provenance()
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kind", choices=sorted(SUBSETS), default="issue")
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--pairwise", action="store_true")
    parser.add_argument("--cache-dir", type=Path)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    kind = get_kind(args.kind)
    rubric = load_rubric(get_kind(args.kind).rubric_path())
    records = [r for _line, r in iter_jsonl(BENCH / SUBSETS[args.kind], "dataset file")]
    controls = build_controls(kind, records, args.tasks)
    requests = control_requests(rubric, controls, DecodingSettings(temperature=0.0,
                                                                   max_tokens=args.max_tokens),
                                args.pairwise)
    cache_dir = args.cache_dir or Path(tempfile.mkdtemp(prefix="judge-controls-"))
    judge = create_generator("embedded", model=args.model)
    replies: dict[str, str] = {}
    times: list[float] = []
    try:
        cache = GenerationCache(cache_dir / f"{args.kind}-{args.model}.jsonl")
        last = time.perf_counter()
        for gen in cached_generate(judge, requests, cache):
            now = time.perf_counter()
            times.append(now - last)
            last = now
            if gen.error is None:
                replies[gen.task_id] = gen.raw_output
    finally:
        judge.close()
    result = evaluate_controls(rubric, controls, replies, args.pairwise)
    for row in result.per_task:
        LOGGER.info("task %s: reference=%s unrelated=%s broken=%s value=%.2f", row["task_id"],
                    row["reference"], row["unrelated"], row["broken"], row["value"])
    LOGGER.info("%s", result.reason)
    failures = sum(1 for r in requests if r.task_id.endswith("/score")
                   and parse_scores(replies.get(r.task_id, ""), rubric) is None)
    median = statistics.median(times) if times else float("nan")
    print(provenance.line())
    print(f"kind={args.kind} model={args.model} tasks={result.tasks} pairs={result.pairs} "
          f"auc={result.auc} "
          + "".join(f"{name}_auc={c['auc']} {name}_low={c['low']} "
                    for name, c in result.controls.items())
          + f"valid={result.valid} "
          f"parse_failures={failures} calls={len(requests)} call_median_s={median:.1f}")


if __name__ == "__main__":
    main()
