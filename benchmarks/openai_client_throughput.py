"""Throughput of the ``openai`` generator against a local OpenAI-compatible server.

The server is the embedded model (Qwen2.5-Coder-0.5B Q4 via xllamacpp) listening on
127.0.0.1; the client is :class:`core.generation.openai_http.OpenAIGenerator` talking
HTTP to it. For each client concurrency (default 1, 4, 16) it sends the same short
raw-completion prompts with a small ``max_tokens`` and reports requests/s, generated
tokens/s and latency percentiles. The server has ``--slots`` llama.cpp slots
(continuous batching); with more concurrent requests than slots they queue.

Usage: ``python benchmarks/openai_client_throughput.py [--requests 16] [--max-tokens 16]``
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time

# this checkout's core (not whichever one is installed), and _provenance beside this file
sys.path[:0] = [os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                os.path.dirname(os.path.abspath(__file__))]

from _provenance import Provenance  # noqa: E402
from core.generation.embedded import EmbeddedGenerator  # noqa: E402
from core.generation.openai_http import OpenAIGenerator  # noqa: E402
from core.generation.types import DecodingSettings, GenerationRequest  # noqa: E402

PROMPTS = [
    "def add(a, b):\n", "def is_even(n):\n", "def reverse(s):\n", "def square(x):\n",
    "def maximum(xs):\n", "def count_vowels(s):\n", "def factorial(n):\n", "def mean(xs):\n",
]


def run(client: OpenAIGenerator, n_requests: int, max_tokens: int) -> dict[str, float]:
    reqs = [GenerationRequest(f"b{i}", PROMPTS[i % len(PROMPTS)], mode="complete",
                              decoding=DecodingSettings(max_tokens=max_tokens, stop=("\n\n",)))
            for i in range(n_requests)]
    started = time.perf_counter()
    gens = list(client.generate(reqs))
    wall = time.perf_counter() - started
    errors = sum(1 for g in gens if g.error)
    tokens = sum(g.completion_tokens or 0 for g in gens)
    lat = sorted(g.latency_s for g in gens)
    return {"concurrency": client.concurrency, "requests": len(gens), "errors": errors,
            "wall_s": round(wall, 2), "req_per_s": round(len(gens) / wall, 2),
            "gen_tokens_per_s": round(tokens / wall, 1),
            "latency_p50_s": round(statistics.median(lat), 2),
            "latency_p95_s": round(lat[min(len(lat) - 1, int(0.95 * len(lat)))], 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,4,16")
    parser.add_argument("--requests", type=int, default=16, help="requests per concurrency level")
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--slots", type=int, default=4, help="llama.cpp parallel slots of the server")
    args = parser.parse_args()
    provenance = Provenance()
    logging.basicConfig(level=logging.WARNING)
    server = EmbeddedGenerator(n_ctx=512 * args.slots, n_parallel=args.slots)
    url = server.base_url + "/v1"
    rows = []
    try:
        warm = OpenAIGenerator(url, "embedded", concurrency=1)
        run(warm, 2, 4)
        for level in (int(c) for c in args.concurrency.split(",")):
            client = OpenAIGenerator(url, "embedded", concurrency=level, timeout_s=300)
            rows.append(run(client, args.requests, args.max_tokens))
            client.close()
    finally:
        server.close()
    print(f"server: embedded Qwen2.5-Coder-0.5B Q4 on 127.0.0.1, {args.slots} slots, "
          f"{os.cpu_count()} CPU(s); {args.requests} requests/level, max_tokens={args.max_tokens}")
    print(f"{'conc':>5} {'req/s':>7} {'tok/s':>7} {'p50 s':>7} {'p95 s':>7} {'wall s':>7} {'err':>4}")
    for r in rows:
        print(f"{r['concurrency']:>5} {r['req_per_s']:>7} {r['gen_tokens_per_s']:>7} {r['latency_p50_s']:>7} "
              f"{r['latency_p95_s']:>7} {r['wall_s']:>7} {r['errors']:>4}")
    print(provenance.line())
    print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
