"""Structured output: the OpenAI-compatible client sends the reply's JSON schema as
``response_format``; a server that refuses it gets plain requests, whose replies are parsed
and whose failures are counted."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from core.generation import create_generator
from core.generation.types import DecodingSettings
from core.scenarios.selfalign.loop import GeneratorResponder
from core.scenarios.selfalign.reply import messages, parse_reply, reply_schema

RECORD = {"task_id": "toy/inc", "entry_point": "inc",
          "prompt": "def inc(x: int) -> int:\n    \"\"\"x plus one\"\"\"\n"}
PLAIN = "Here it is:\n```json\n" + json.dumps(
    {"code": "def inc(x):\n    return x + 1\n", "tests": ["assert inc(1) == 2"]}) + "\n```"


@pytest.fixture
def no_schema_server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A server without structured output (400 on ``response_format``), standing in for the
    OpenAI-compatible servers that lack it: llama.cpp, the one server this machine runs, has
    it."""
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            if body.get("max_tokens") == 3:   # llama.cpp's answer to a reply it cannot parse
                status, payload = 500, {"error": {"message": "The model produced output that "
                                                  "does not match the expected format"}}
            elif "response_format" in body:
                status, payload = 400, {"error": {"message": "unsupported parameter"}}
            else:
                status, payload = 200, {"choices": [{"message": {"content": PLAIN},
                                                     "finish_reason": "stop"}],
                                        "usage": {"prompt_tokens": 5, "completion_tokens": 7}}
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    server.shutdown()
    server.server_close()


def test_refused_schema_falls_back_to_parsing(no_schema_server: tuple[str, list[dict]]) -> None:
    url, seen = no_schema_server
    client = create_generator("openai", base_url=url, model="m", max_retries=0)
    responder = GeneratorResponder(client, DecodingSettings(max_tokens=64))
    schema = reply_schema(True, True, 1)
    msgs = messages(RECORD["prompt"], "inc", 1, "both", "failures", 1, "assert")
    reply = responder.reply(RECORD, 1, msgs, schema)
    assert reply.error is None and reply.structured is False
    assert "response_format" in seen[0] and seen[0]["response_format"]["json_schema"]["schema"] == schema
    assert "response_format" not in seen[1]
    parsed = parse_reply(reply.raw_output, True, True)
    assert parsed.error is None and parsed.tests == ("assert inc(1) == 2",)
    # from then on the schema is not sent again
    again = responder.reply(RECORD, 2, msgs, schema)
    assert again.structured is False and len(seen) == 3 and "response_format" not in seen[2]


def test_server_refusing_its_own_reply_is_a_parse_failure(
        no_schema_server: tuple[str, list[dict]], tmp_path: Any) -> None:
    from core.scenarios.selfalign.loop import LoopSettings, run_task
    from core.scenarios.selfalign.sandbox import SandboxSettings, UnitRunner
    from core.scenarios.selfalign.store import TryStore

    url, _seen = no_schema_server
    client = create_generator("openai", base_url=url, model="m", max_retries=0)
    responder = GeneratorResponder(client, DecodingSettings(max_tokens=3), structured="none")
    with UnitRunner(SandboxSettings(options={"min_isolation": "process"})) as runner:
        out = run_task(RECORD, responder, runner, TryStore(tmp_path / "t.jsonl"),
                       LoopSettings(max_tries=2))
    assert [t.parse_error for t in out.tries] == ["server_format", "server_format"]
    assert "does not match" in out.tries[0].extra["server_error"]
    assert out.aligned_at is None and out.tries[1].extra.get("repeat_of") is None


@pytest.mark.slow
def test_openai_client_gets_schema_replies_from_llama_cpp() -> None:
    from core.generation.embedded import EmbeddedGenerator

    embedded = EmbeddedGenerator(n_ctx=2048)
    try:
        client = create_generator("openai", base_url=embedded.base_url + "/v1", model="q")
        responder = GeneratorResponder(client, DecodingSettings(max_tokens=160))
        schema = reply_schema(True, True, 2)
        msgs = messages(RECORD["prompt"], "inc", 1, "both", "failures", 2, "assert")
        reply = responder.reply(RECORD, 1, msgs, schema)
        assert reply.error is None and reply.structured is True
        parsed = parse_reply(reply.raw_output, True, True)
        if reply.finish_reason != "length":
            assert parsed.error is None and len(parsed.tests or ()) == 2
            assert all(t.startswith("assert ") and "\n" not in t for t in parsed.tests or ())
        assert reply.raw_output.lstrip().startswith("{")   # the grammar admits nothing else
    finally:
        embedded.close()


def test_response_format_is_part_of_the_key_only_when_set() -> None:
    from core.generation.cache_key import request_payload, sample_key
    from core.generation.types import GenerationRequest

    msgs = ({"role": "user", "content": "hi"},)
    plain = GenerationRequest("t", "p", mode="chat", messages=msgs)
    fmt = {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}}
    shaped = GenerationRequest("t", "p", mode="chat", messages=msgs, response_format=fmt)
    assert "response_format" not in request_payload(plain)     # earlier keys stay valid
    assert request_payload(shaped)["response_format"] == fmt
    assert sample_key({"m": 1}, plain, 0) != sample_key({"m": 1}, shaped, 0)
    with pytest.raises(ValueError, match="chat"):
        GenerationRequest("t", "p", mode="complete", response_format=fmt)
