"""Generator for any OpenAI-compatible HTTP endpoint (vLLM, llama.cpp server, Ollama, hosted).

* ``mode="complete"`` posts to ``{base_url}/completions``; ``mode="chat"`` to
  ``{base_url}/chat/completions``. ``base_url`` normally ends in ``/v1``.
* The API key is read from the environment variable whose *name* is configured
  (``api_key_env``); the key itself is never stored in :meth:`describe`, logged or
  written anywhere. A configured but unset variable is an error at construction.
* One HTTP request per sample (``n`` is not sent; per-sample ``seed + i`` is), on a
  thread pool of ``concurrency`` workers, each with its own ``requests.Session``.
* Retries, bounded by ``max_retries``, on 408/409/425/429/5xx, timeouts and
  connection errors, sleeping ``min(max_backoff, backoff_base * 2**attempt)`` scaled
  by a random factor in [0.5, 1.0] (jitter), or the server's ``Retry-After`` when it
  asks for longer (still capped by ``max_backoff``). Other 4xx responses are not
  retried. A sample that still fails is yielded with ``error`` set.
"""
from __future__ import annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests

from core.common.errors import ConfigError
from core.generation.base import Generator
from core.generation.cache_key import sample_key
from core.generation.embedded import build_generation, run_bounded
from core.generation.types import Generation, GenerationRequest

LOGGER = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def sanitize_url(url: str) -> str:
    """``url`` without user info, query or fragment (safe to log and to hash)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


class OpenAIGenerator(Generator):
    """Concurrent, retrying client of an OpenAI-compatible API.

    Args:
        base_url: e.g. ``http://127.0.0.1:8080/v1``.
        model: model name sent in each request (part of the cache key).
        api_key_env: NAME of the environment variable holding the key; ``None`` for
            servers without auth.
        concurrency: parallel requests (threads), >= 1.
        timeout_s: per-request timeout (connect and read).
        max_retries: retries after the first attempt (0 = no retry).
        backoff_base, max_backoff: exponential backoff parameters, seconds.
        extra_body: additional JSON fields sent with every request (e.g. ``top_k``).
        max_stop: send at most this many stop strings (the hosted OpenAI API accepts
            4); the rest are still applied client-side to raw completions.
        logprobs: ask for each generated token's log-probability (``logprobs`` in the body);
            the generations then carry ``mean_logprob``/``min_logprob`` when the server
            returns them (the cloud-edge ``Confidence`` router reads them).
        sleep: injectable sleep function (tests pass a recorder).

    Failures: a sample whose request still fails after the retries gets ``error`` set (never
    a model failure). If a sample fails only because the endpoint could not be connected to
    and no request has ever reached it, the endpoint is taken as unreachable: the remaining
    samples fail at once ("not sent") instead of each waiting through its retries.

    Raises:
        ConfigError: ``api_key_env`` names an unset variable, or bad numbers.
    """

    name = "openai"

    def __init__(self, base_url: str, model: str, *, api_key_env: str | None = None,
                 concurrency: int = 4, timeout_s: float = 120.0, max_retries: int = 5,
                 backoff_base: float = 0.5, max_backoff: float = 30.0,
                 extra_body: dict[str, Any] | None = None, max_stop: int | None = None,
                 logprobs: bool = False,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if concurrency < 1 or max_retries < 0 or timeout_s <= 0 or backoff_base < 0:
            raise ConfigError("openai generator: concurrency >= 1, max_retries >= 0, "
                              "timeout_s > 0 and backoff_base >= 0 are required")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.max_backoff = max_backoff
        self.extra_body = dict(extra_body or {})
        self.max_stop = max_stop
        self.logprobs = bool(logprobs)
        self._sleep = sleep
        self._api_key_env = api_key_env
        self._headers = {"Content-Type": "application/json"}
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise ConfigError(f"environment variable {api_key_env} (the API key for "
                                  f"{sanitize_url(self.base_url)}) is not set",
                                  hint=f"export {api_key_env}=...")
            self._headers["Authorization"] = f"Bearer {key}"
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._sessions_lock = threading.Lock()
        # circuit breaker: set when a sample failed only because the endpoint could not be
        # reached and no sample has ever succeeded; later samples then fail at once
        self._unreachable: str | None = None
        self._reached = False

    def describe(self) -> dict[str, Any]:
        """Endpoint (sanitised), model and extra body fields; never the key."""
        identity: dict[str, Any] = {"generator": self.name,
                                    "endpoint": sanitize_url(self.base_url),
                                    "model": self.model, "extra_body": self.extra_body}
        if self.logprobs:  # answers cached without log-probabilities are not reused then
            identity["logprobs"] = True
        return identity

    def __repr__(self) -> str:
        return (f"OpenAIGenerator(base_url={sanitize_url(self.base_url)!r}, model={self.model!r}, "
                f"api_key_env={self._api_key_env!r})")

    def close(self) -> None:
        with self._sessions_lock:
            for session in self._sessions:
                session.close()
            self._sessions.clear()
        self._local = threading.local()

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.headers.update(self._headers)
            self._local.session = session
            with self._sessions_lock:
                self._sessions.append(session)
        return session

    def _body(self, request: GenerationRequest, sample_index: int) -> dict[str, Any]:
        d = request.decoding
        body: dict[str, Any] = {"model": self.model, "max_tokens": d.max_tokens,
                                "temperature": d.temperature, "top_p": d.top_p}
        seed = d.sample_seed(sample_index)
        if seed is not None:
            body["seed"] = seed
        stop = list(d.resolved_stop(request.mode))
        if stop:
            body["stop"] = stop if self.max_stop is None else stop[: self.max_stop]
        if request.mode == "complete":
            body["prompt"] = request.prompt
            if self.logprobs:
                body["logprobs"] = 1  # completions: how many alternatives per token
        else:
            body["messages"] = request.chat_messages()
            if self.logprobs:
                body["logprobs"] = True
            if request.response_format is not None:
                body["response_format"] = dict(request.response_format)
        body.update(self.extra_body)
        return body

    def backoff_delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based)."""
        delay = min(self.max_backoff, self.backoff_base * (2 ** attempt)) * random.uniform(0.5, 1.0)
        if retry_after:
            try:
                delay = max(delay, min(self.max_backoff, float(retry_after)))
            except ValueError:
                pass
        return delay

    def _post(self, url: str, body: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None, int]:
        """POST with retries: (response json, error message, attempts made)."""
        last_error = "no attempt made"
        never_connected = True
        for attempt in range(self.max_retries + 1):
            retry_after = None
            try:
                resp = self._session().post(url, json=body, timeout=self.timeout_s)
            except requests.ConnectionError as exc:  # refused, DNS, connect timeout, reset
                last_error = f"{type(exc).__name__}: {exc}"[:300]
            except requests.Timeout as exc:  # connected, but no answer in time
                never_connected = False
                last_error = f"{type(exc).__name__}: {exc}"[:300]
            else:
                never_connected = False
                self._reached = True
                if resp.status_code == 200:
                    try:
                        data = resp.json()
                    except ValueError:
                        return None, f"HTTP 200 with a non-JSON body: {resp.text[:200]!r}", attempt + 1
                    if not isinstance(data, dict) or not data.get("choices"):
                        return None, f"HTTP 200 without choices: {str(data)[:200]}", attempt + 1
                    return data, None, attempt + 1
                last_error = f"HTTP {resp.status_code}: {resp.text[:200]}"
                if resp.status_code not in RETRY_STATUS and resp.status_code < 500:
                    return None, last_error, attempt + 1
                retry_after = resp.headers.get("Retry-After")
            if attempt < self.max_retries:
                delay = self.backoff_delay(attempt, retry_after)
                LOGGER.debug("retry %d/%d in %.2fs after %s", attempt + 1, self.max_retries, delay, last_error)
                self._sleep(delay)
        if never_connected and not self._reached:
            self._unreachable = last_error
        return None, f"{last_error} (after {self.max_retries + 1} attempts)", self.max_retries + 1

    def _one(self, request: GenerationRequest, sample_index: int, key: str) -> Generation:
        path = "/completions" if request.mode == "complete" else "/chat/completions"
        started = time.perf_counter()
        if self._unreachable is not None and not self._reached:
            return Generation(task_id=request.task_id, sample_index=sample_index, raw_output="",
                              code="", latency_s=0.0, key=key,
                              error=f"not sent: {sanitize_url(self.base_url)} could not be "
                                    f"reached ({self._unreachable})")
        data, error, _ = self._post(self.base_url + path, self._body(request, sample_index))
        latency = time.perf_counter() - started
        if data is None:
            LOGGER.warning("%s sample %d failed: %s", request.task_id, sample_index, error)
            return Generation(task_id=request.task_id, sample_index=sample_index, raw_output="",
                              code="", latency_s=latency, error=error, key=key)
        return build_generation(request, sample_index, key, data, latency)

    def generate(self, requests_: Iterable[GenerationRequest]) -> Iterator[Generation]:
        model = self.describe()
        jobs = ((r, i, sample_key(model, r, i)) for r in requests_ for i in r.sample_indices)
        yield from run_bounded(self._one, jobs, self.concurrency)
