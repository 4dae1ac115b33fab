"""Tokens/s of the embedded model by thread count, on an idle machine and beside a CPU hog.

The README's first command runs the embedded model (Qwen2.5-Coder-0.5B Q4 via xllamacpp). Its
speed depends on how many llama.cpp threads it runs: they wait for each other at every layer,
so a thread that shares its core with another busy process slows them all. This script
measures, side by side in one run, every ``--threads`` value (``auto``: the generator's default,
since 2026-11-28 one single-threaded instance per core, the prompts answered side by side; before,
one instance on the cores not busy at load time) with llama.cpp's busy-wait level ``--poll`` (0-100, its own
default 50), each on an idle machine and beside ``--hogs`` busy-looping processes, and prints
the median generated tokens/s over ``--rounds`` alternating rounds (each configuration runs in
its own child process, loading the model once).

The ratio column is each row against the first configuration under the same load.

Usage: ``python benchmarks/embedded_threads.py [--threads 1,2,auto] [--poll 50] [--hogs 1]
[--rounds 3] [--max-tokens 96]``
"""
from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _provenance import Provenance  # noqa: E402

PROMPTS = [
    'def fib(n: int) -> int:\n    """Return the n-th Fibonacci number."""\n',
    'def is_palindrome(s: str) -> bool:\n    """True when s reads the same backwards."""\n',
    'def merge_sorted(a: list, b: list) -> list:\n    """Merge two sorted lists into one."""\n',
]

CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
from core.generation.embedded import EmbeddedGenerator
from core.generation.types import DecodingSettings, GenerationRequest
import xllamacpp
_params = xllamacpp.CommonParams
def _with_poll():  # llama.cpp's busy-wait level, set on the params the generator builds
    params = _params()
    params.cpuparams.poll = params.cpuparams_batch.poll = {poll}
    return params
xllamacpp.CommonParams = _with_poll
gen = EmbeddedGenerator(n_threads={threads}, n_ctx=1024)
prompts = {prompts!r}
reqs = [GenerationRequest(f"p{{i}}", p, mode="complete",
                          decoding=DecodingSettings(max_tokens={max_tokens}, stop=()))
        for i, p in enumerate(prompts)]
list(gen.generate(reqs[:1]))  # warm-up
started = time.perf_counter()
tokens = sum(g.completion_tokens or 0 for g in gen.generate(reqs))
print(json.dumps({{"tokens": tokens, "wall": time.perf_counter() - started}}))
"""


def _hog() -> None:  # pragma: no cover - a child process that only burns CPU
    while True:
        pass


def one(threads: int | None, poll: int, max_tokens: int, timeout: float) -> float:
    """Generated tokens/s of one configuration in a fresh child process."""
    code = CHILD.format(root=str(ROOT), threads=threads, poll=poll, prompts=PROMPTS,
                        max_tokens=max_tokens)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=timeout, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return float(result["tokens"]) / float(result["wall"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2,auto",
                        help="comma-separated thread counts (auto: the generator's default)")
    parser.add_argument("--poll", default="50", help="comma-separated llama.cpp poll levels")
    parser.add_argument("--hogs", type=int, default=1, help="busy processes for the loaded runs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--timeout", type=float, default=600, help="seconds per configuration")
    args = parser.parse_args()
    provenance = Provenance()
    logging.basicConfig(level=logging.WARNING)
    threads_list = [None if t == "auto" else int(t) for t in args.threads.split(",")]
    configs = [(t, p) for t in threads_list for p in map(int, args.poll.split(","))]
    loads = [0, args.hogs] if args.hogs else [0]
    samples: dict[tuple[int, int | None, int], list[float]] = {}
    print(f"cores={os.cpu_count()} loadavg_at_start={os.getloadavg()[0]:.2f} "
          f"date={time.strftime('%Y-%m-%d')}", flush=True)
    for rnd in range(args.rounds):
        order = configs if rnd % 2 == 0 else list(reversed(configs))
        for hogs in loads:
            procs = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(hogs)]
            for proc in procs:
                proc.start()
            try:
                for threads, poll in order:
                    tps = one(threads, poll, args.max_tokens, args.timeout)
                    samples.setdefault((hogs, threads, poll), []).append(tps)
                    print(f"round={rnd} hogs={hogs} threads={threads} poll={poll} "
                          f"tokens_per_s={tps:.2f}", flush=True)
            finally:
                for proc in procs:
                    proc.kill()
                    proc.join(5)
    print("\nhogs threads poll median_tokens_per_s ratio")
    for hogs in loads:
        base = statistics.median(samples[(hogs, *configs[0])])
        for threads, poll in configs:
            med = statistics.median(samples[(hogs, threads, poll)])
            print(f"{hogs:>4} {threads or 'auto':>7} {poll:>4} {med:>19.2f} {med / base:>5.2f}")
    print(provenance.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
