"""How the embedded generator sends requests (``core.generation.embedded``, module docstring):
an answer depends on its request only, not on the request the instance served before (no
prompt cache), and a schema-constrained chat reply comes back as generated, cut or not,
instead of being refused by llama.cpp's chat parser (asked again through the completion endpoint). Real model, real llama.cpp (slow tier);
the requests are self-align tries recorded from the full job (fixtures/selfalign_requests.json).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.generation import DecodingSettings, GenerationRequest
from core.generation.embedded import EmbeddedGenerator, complete_under_schema, schema_of
from core.scenarios.selfalign.reply import reply_schema, response_format

pytestmark = pytest.mark.slow

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "selfalign_requests.json")
                     .read_text(encoding="utf-8"))
DECODING = DecodingSettings(max_tokens=384, temperature=0.0, seed=1)


def _request(messages: list[dict[str, str]], asked: dict[str, bool], tag: str,
             decoding: DecodingSettings = DECODING) -> GenerationRequest:
    schema = reply_schema(asked["code"], asked["tests"], 3)
    return GenerationRequest(task_id=tag, prompt="", mode="chat", decoding=decoding,
                             messages=tuple(messages), response_format=response_format(schema))


def _one(gen: EmbeddedGenerator, request: GenerationRequest) -> Any:
    return next(iter(gen.generate([request])))


def test_an_answer_does_not_depend_on_the_request_before_it() -> None:
    """The same try asked on a fresh instance, then again right after the task's previous try
    (which shares its prefix): the same reply. With llama.cpp's prompt cache on, the second
    came out different on this machine (2026-11-28), within the first 96 tokens."""
    pair = FIXTURE["prefix_pair"]
    short = DecodingSettings(max_tokens=96, temperature=0.0, seed=1)
    second = _request(pair["second"], pair["asked"], "second", short)
    gen = EmbeddedGenerator(instances=1)
    try:
        fresh = _one(gen, second)
        _one(gen, _request(pair["first"], pair["asked"], "first", short))
        after = _one(gen, second)
    finally:
        gen.close()
    assert fresh.error is None and fresh.raw_output
    assert after.raw_output == fresh.raw_output
    assert gen.describe()["requests"] == "no-prompt-cache;refused-chat-by-completion"


def test_a_refused_reply_comes_back_as_generated() -> None:
    """A reply llama.cpp's chat endpoint refused ("does not match the expected peg-native
    format") though it is valid JSON under the schema: asked again through the completion
    endpoint, rendered by the same chat template (same prompt token count as the chat
    endpoint's), it comes back whole, ``route`` ``completion``. (Refused on this machine,
    2026-11-28; where another CPU's arithmetic makes the chat endpoint accept it, the reply is
    the chat endpoint's and ``route`` is None.)"""
    case = FIXTURE["refused_valid"]
    request = _request(case["messages"], case["asked"], "refused")
    gen = EmbeddedGenerator(instances=1)
    try:
        result = _one(gen, request)
        server = gen._servers[0]
        chat = server.handle_chat_completions(
            {"messages": case["messages"], "max_tokens": 1, "cache_prompt": False})
        direct = None if result.route else server.handle_chat_completions(gen._body(request, 0))
    finally:
        gen.close()
    if direct is not None:  # accepted here: the chat endpoint's own reply, no route
        assert result.error is None
        assert result.raw_output == direct["choices"][0]["message"]["content"]
        return
    assert result.error is None and result.route == "completion"
    assert result.prompt_tokens == chat["usage"]["prompt_tokens"]
    valid = json.loads(result.raw_output)
    assert set(valid) == {"code", "tests"} and len(valid["tests"]) == 3
    assert result.finish_reason == "stop"


def test_the_completion_route_returns_a_cut_reply_as_cut() -> None:
    """The way back for a refused reply, on a reply cut at ``max_tokens``: its text as far as
    it got, ``finish_reason`` ``length`` (the caller sees a cut reply, not an error)."""
    case = FIXTURE["cut"]
    schema = reply_schema(case["asked"]["code"], case["asked"]["tests"], 3)
    gen = EmbeddedGenerator(instances=1)
    try:
        response = complete_under_schema(
            gen._servers[0], {"messages": case["messages"], "max_tokens": 48, "temperature": 0.0,
                              "top_k": 1, "seed": 1, "cache_prompt": False,
                              "response_format": response_format(schema)}, schema)
    finally:
        gen.close()
    choice = response["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"].startswith("{")
    with pytest.raises(json.JSONDecodeError):
        json.loads(choice["message"]["content"])


def test_schema_of_response_formats() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert schema_of(response_format(schema)) == schema
    assert schema_of({"type": "json_object"}) == {"type": "object"}
    assert schema_of({"type": "text"}) is None and schema_of(None) is None


def test_an_accepted_reply_is_the_chat_endpoints() -> None:
    """A constrained request the chat endpoint answers is not asked again: same text as the
    chat endpoint gives, no route."""
    pair = FIXTURE["prefix_pair"]
    short = DecodingSettings(max_tokens=64, temperature=0.0, seed=1)
    request = _request(pair["first"], {"code": False, "tests": True}, "tests-only", short)
    gen = EmbeddedGenerator(instances=1)
    try:
        result = _one(gen, request)
        chat = gen._servers[0].handle_chat_completions(
            {"messages": list(request.messages), "max_tokens": 64, "temperature": 0.0,
             "top_p": 1.0, "top_k": 1, "seed": 1, "cache_prompt": False,
             "response_format": dict(request.response_format or {})})
    finally:
        gen.close()
    assert result.route is None and result.error is None
    assert result.raw_output == chat["choices"][0]["message"]["content"]
