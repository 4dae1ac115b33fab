"""Stable keys for generated samples, and a JSONL cache that makes generation resumable.

The key of a sample is the SHA-256 of a canonical JSON document holding the
generator identity (:meth:`Generator.describe`), the task id, the mode, what is
actually sent (the prompt, or the chat messages), the decoding settings with the
stop strings resolved, the sample index and its seed. Changing any of those changes
the key; re-running the same job reproduces it on any machine.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from core.common.jsonl import key_prefix, lines_with_offsets, open_append, read_json_at
from core.generation.base import Generator
from core.generation.types import Generation, GenerationRequest

LOGGER = logging.getLogger(__name__)

KEY_SCHEMA_VERSION = 1


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_payload(request: GenerationRequest) -> dict[str, Any]:
    """The result-relevant content of a request (not including the sample index)."""
    d = request.decoding
    sent: Any = request.prompt if request.mode == "complete" else request.chat_messages()
    payload: dict[str, Any] = {
        "task_id": request.task_id,
        "mode": request.mode,
        "input": sent,
        "decoding": {
            "temperature": d.temperature, "top_p": d.top_p, "max_tokens": d.max_tokens,
            "stop": list(d.resolved_stop(request.mode)), "seed": d.seed, "n": d.n,
        },
    }
    if request.response_format is not None:  # only when set: earlier keys stay valid
        payload["response_format"] = dict(request.response_format)
    return payload


def sample_key(model: Mapping[str, Any], request: GenerationRequest, sample_index: int) -> str:
    """Hex SHA-256 identifying one sample of ``request`` by the model ``model``."""
    doc = {
        "v": KEY_SCHEMA_VERSION,
        "model": dict(model),
        "request": request_payload(request),
        "sample_index": sample_index,
        "seed": request.decoding.sample_seed(sample_index),
    }
    return hashlib.sha256(canonical_json(doc).encode("utf-8")).hexdigest()


def load_cache(path: str | os.PathLike[str]) -> dict[str, Generation]:
    """Read a generation JSONL cache: key -> Generation (successful samples only).

    A truncated last line (killed run) is skipped with a warning; a missing file is
    an empty cache. Samples recorded with ``error`` are not cached, so they are retried.
    """
    cache: dict[str, Generation] = {}
    file = Path(path)
    if not file.exists():
        return cache
    with open(file, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                gen = Generation.from_dict(json.loads(line))
            except (json.JSONDecodeError, TypeError) as exc:
                LOGGER.warning("%s:%d: unreadable cache line skipped (%s)", file, lineno, exc)
                continue
            if gen.key and gen.error is None:
                cache[gen.key] = gen
    return cache


class GenerationCache:
    """The generation JSONL cache as an index ``key -> byte offset`` (successful samples only).

    Memory grows with the number of keys (two small ints each: the key's first 64 bits and the
    line's offset), not with the generated code: a sample is read back from the file when it
    is reused, and its full key is checked then (a prefix collision is a miss, never a wrong
    sample). Built once per file and kept up to date as new samples are appended, so windows
    of a large run never re-read the whole file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.index: dict[int, int] = {}
        #: samples the last :func:`cached_generate` call took from this cache so far (they are
        #: yielded before any new one, so a consumer tells reused from new samples by count)
        self.reused = 0
        for lineno, offset, raw in lines_with_offsets(self.path):
            if not raw.strip():
                continue
            try:
                entry = json.loads(raw)
                key, error = entry.get("key"), entry.get("error")
            except (json.JSONDecodeError, AttributeError, UnicodeDecodeError) as exc:
                LOGGER.warning("%s:%d: unreadable cache line skipped (%s)", self.path,
                               lineno, exc)
                continue
            if key and error is None:
                self.index[key_prefix(str(key))] = offset

    def get(self, key: str) -> Generation | None:
        offset = self.index.get(key_prefix(key))
        if offset is None:
            return None
        gen = Generation.from_dict(read_json_at(self.path, offset))
        return gen if gen.key == key else None

    def append(self, gens: Iterable[Generation]) -> Iterator[Generation]:
        """Append every generation (errors too, for the record), flushed before it is
        yielded; a killed run loses at most the samples in flight."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open_append(self.path, binary=True) as out:
            for gen in gens:
                offset = out.seek(0, os.SEEK_END)
                out.write(json.dumps(gen.to_dict(), ensure_ascii=False).encode("utf-8") + b"\n")
                out.flush()
                if gen.key and gen.error is None:
                    self.index[key_prefix(gen.key)] = offset
                yield gen


def cached_generate(generator: Generator, requests: Iterable[GenerationRequest],
                    cache: str | os.PathLike[str] | GenerationCache) -> Iterator[Generation]:
    """Generate with resume: samples whose key is in the cache are not regenerated.

    Cached samples are yielded first (as stored), then new ones as they arrive; every
    new sample (errors included, for the record) is appended to the cache file and
    flushed before it is yielded, so a killed run loses at most the samples in flight.
    Pass a :class:`GenerationCache` to keep its index across calls.
    """
    index = cache if isinstance(cache, GenerationCache) else GenerationCache(cache)
    model = generator.describe()
    todo: list[GenerationRequest] = []
    hits = index.reused = 0
    for request in requests:
        missing = []
        for sample in request.sample_indices:
            hit = index.get(sample_key(model, request, sample))
            if hit is not None:
                hits = index.reused = hits + 1
                yield hit
            else:
                missing.append(sample)
        if missing:
            todo.append(request.with_samples(missing))
    LOGGER.info("generation cache %s: %d sample(s) reused, %d request(s) to generate",
                index.path, hits, len(todo))
    if todo:
        yield from index.append(generator.generate(todo))
