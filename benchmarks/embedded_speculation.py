"""Seconds per whole-file reply of the embedded model with and without n-gram speculation.

The networkx implement-change and revise jobs ask for whole files; most of a reply copies the
file the prompt showed. ``speculative: ngram-simple`` (``core/generation/embedded.py``) lets
llama.cpp draft tokens from the request's own text and verify them in one batch. This script
answers the same implement-change tasks both ways, side by side in one process (one
single-threaded instance each; the order alternates from task to task), and prints per task the
seconds, the generated tokens and whether the two replies are the same text, then the median
ratio (speculative / plain) and how many replies differ. Last, it asks the first task again on
the speculative instance after the others: the reply must not depend on what that instance
answered before (``repeat_same``).

Tasks: the first ``--tasks`` records of ``--data`` whose reference answer is at most
``--max-answer-chars`` long (to bound the run; every reply is greedy).

Usage: ``python benchmarks/embedded_speculation.py [--tasks 4] [--model qwen2.5-coder-0.5b]
[--max-answer-chars 4000] [--data <implement-change jsonl>]``
"""
from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _provenance import Provenance  # noqa: E402

from core.generation.embedded import EmbeddedGenerator  # noqa: E402
from core.generation.types import DecodingSettings, Generation, GenerationRequest  # noqa: E402
from core.scenarios.trajectories.implement_change import ImplementChangeKind  # noqa: E402

DATA = (ROOT / "examples/smart_coding/smart_coding_learning_bench/implement_change/data"
        / "networkx_implement_change.jsonl")


def _requests(data: Path, count: int, max_chars: int, max_tokens: int) -> list[GenerationRequest]:
    kind = ImplementChangeKind()
    decoding = DecodingSettings(temperature=0.0, max_tokens=max_tokens)
    out = []
    with data.open(encoding="utf-8") as handle:
        for line in handle:
            record = kind.validate(json.loads(line))
            if (kind.answer_chars(record) or 0) > max_chars:
                continue
            out.append(GenerationRequest(task_id=record["id"], prompt=kind.prompt(record),
                                         mode="chat", decoding=decoding,
                                         messages=tuple(kind.messages(record))))
            if len(out) == count:
                break
    return out


def _timed(gen: EmbeddedGenerator, request: GenerationRequest) -> tuple[Generation, float]:
    started = time.perf_counter()
    reply = next(iter(gen.generate([request])))
    return reply, time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--model", default="qwen2.5-coder-0.5b")
    parser.add_argument("--max-answer-chars", type=int, default=4000)
    parser.add_argument("--max-tokens", type=int, default=6144)
    parser.add_argument("--n-ctx", type=int, default=12288)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    provenance = Provenance()
    logging.basicConfig(level=logging.WARNING)
    requests = _requests(args.data, args.tasks, args.max_answer_chars, args.max_tokens)
    plain = EmbeddedGenerator(model=args.model, n_ctx=args.n_ctx, instances=1)
    spec = EmbeddedGenerator(model=args.model, n_ctx=args.n_ctx, instances=1,
                             speculative="ngram-simple")
    print("task plain_s speculative_s ratio plain_tokens speculative_tokens same_text", flush=True)
    ratios, differ, first = [], 0, None
    for index, request in enumerate(requests):
        pair = [("plain", plain), ("speculative", spec)]
        runs = dict((name, _timed(gen, request)) for name, gen in
                    (pair if index % 2 == 0 else reversed(pair)))
        (p_reply, p_s), (s_reply, s_s) = runs["plain"], runs["speculative"]
        same = p_reply.raw_output == s_reply.raw_output
        differ += not same
        if same:  # a reply that differs is a different amount of work, not a speed figure
            ratios.append(s_s / p_s)
        if first is None:
            first = s_reply.raw_output
        print(f"{request.task_id} {p_s:.1f} {s_s:.1f} {s_s / p_s:.2f} "
              f"{p_reply.completion_tokens} {s_reply.completion_tokens} {same}", flush=True)
    again, _ = _timed(spec, requests[0])
    median = f"{statistics.median(ratios):.2f}" if ratios else "n/a"
    print(f"\nmedian_ratio_same_replies={median} (speculative / plain, {len(ratios)} task(s)) "
          f"replies_differ={differ}/{len(requests)} repeat_same={again.raw_output == first}")
    plain.close()
    spec.close()
    print(provenance.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
