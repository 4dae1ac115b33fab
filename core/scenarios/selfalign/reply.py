"""What the model is asked for on each try, and how its reply is read.

The reply is structured: a JSON object whose fields keep the code and the tests apart, so no
second model has to check the format.

* :func:`reply_schema` -- the JSON schema of one try's reply: ``{"code": str, "tests": [str]}``
  when both are generated, ``{"code": str}`` or ``{"tests": [str]}`` when only one is. With
  ``test_style="assert"`` every test is constrained to one ``assert`` line (what a small model
  writes reliably); ``"free"`` allows any Python (test functions, loops, several asserts).
* :func:`response_format` -- the OpenAI-style ``response_format`` carrying that schema; the
  embedded llama.cpp backend compiles it into a grammar, so the reply cannot leave the schema
  except by running out of tokens.
* :func:`messages` -- the chat messages of a try: the task prompt (never the dataset's tests),
  and from the second try on the previous code and tests with, when ``feedback="failures"``,
  the failing tests, their assertion messages and output (truncated).
* :func:`parse_reply` -- the fields of a reply, or a parse error (``not_json``,
  ``not_object``, ``missing:<field>``, ``type:<field>``) that the try records and the metrics
  count; never raises.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: what a try regenerates after the first (the first try always asks for both)
GENERATE_CHOICES = ("code", "tests", "both")
FEEDBACK_CHOICES = ("none", "failures")
TEST_STYLES = ("assert", "free")

#: feedback is cut to this many characters per failing test (message and output together)
FEEDBACK_CHARS = 300

SYSTEM = ("You write a Python function and unit tests for it. Reply with one JSON object. "
          "\"code\" holds the complete function (signature included, with the imports it needs; "
          "no docstring, no tests, no examples). \"tests\" holds {n} tests; {style}")
STYLE_TEXT = {
    "assert": "each test is one assert statement that calls the function and compares its "
              "result with the expected value.",
    "free": "each test is a short piece of Python using assert statements that calls the "
            "function; use only the standard library.",
}


def wanted(generate: str, try_index: int) -> tuple[bool, bool]:
    """``(code, tests)``: which fields try ``try_index`` (1-based) asks for."""
    if try_index <= 1 or generate == "both":
        return True, True
    return generate == "code", generate == "tests"


def reply_schema(want_code: bool, want_tests: bool, tests_per_task: int,
                 test_style: str = "assert", max_code_chars: int = 2000,
                 max_test_chars: int = 300) -> dict[str, Any]:
    """The JSON schema of a reply holding the wanted fields (see the module docstring)."""
    props: dict[str, Any] = {}
    if want_code:
        props["code"] = {"type": "string", "maxLength": max_code_chars}
    if want_tests:
        item: dict[str, Any] = {"type": "string", "maxLength": max_test_chars}
        if test_style == "assert":
            item["pattern"] = "^assert [^\\n]+$"
        props["tests"] = {"type": "array", "items": item, "minItems": tests_per_task,
                          "maxItems": tests_per_task}
    return {"type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


def response_format(schema: Mapping[str, Any]) -> dict[str, Any]:
    """OpenAI ``response_format`` of a JSON schema (llama.cpp accepts the same object)."""
    return {"type": "json_schema",
            "json_schema": {"name": "selfalign_reply", "strict": True, "schema": dict(schema)}}


#: what the next try is told about an invalid test, by reason (``import:`` and ``unsafe:``
#: reasons carry their detail after the colon)
INVALID_TEXT = {
    "empty": "it is empty", "syntax_error": "it is not valid Python",
    "too_deep": "it nests too deeply", "reserved": "it uses a name reserved by the test harness",
    "no_call": "it never calls {entry_point}", "no_assert": "it has no assert statement",
    "shadows": "it defines its own {entry_point} instead of testing the given one",
    "import": "it imports {detail}, which is not available", "unsafe": "it {detail}",
    "compile": "it cannot be compiled as a test ({detail})",
    "ran_no_assert": "none of its assert statements ran to completion",
    "ran_no_call": "it never called {entry_point} when it ran",
    "harness": "it broke the test harness ({detail})",
}


def invalid_text(reason: str, entry_point: str) -> str:
    """A sentence for an invalid test's reason (see :mod:`.units`)."""
    head, _, detail = reason.partition(":")
    return "invalid: " + INVALID_TEXT.get(head, head).format(entry_point=entry_point,
                                                            detail=detail)


@dataclass(frozen=True)
class Feedback:
    """What the next try is told about one model-written test of the previous try."""

    index: int
    test: str
    status: str
    detail: str = ""


def _fence(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def messages(prompt: str, entry_point: str, try_index: int, generate: str, feedback: str,
             tests_per_task: int, test_style: str, previous_code: str | None = None,
             previous_tests: Sequence[str] | None = None,
             failures: Sequence[Feedback] = ()) -> list[dict[str, str]]:
    """Chat messages of try ``try_index`` (1-based).

    The first try sees the task prompt only. A later try also sees what the previous try
    ended with (the code and tests it keeps or must replace) and, with ``feedback="failures"``,
    each failing or invalid test with its status and a message truncated to
    :data:`FEEDBACK_CHARS`; with ``feedback="none"`` only that they disagree.
    """
    system = SYSTEM.format(n=tests_per_task, style=STYLE_TEXT[test_style].replace(
        "the function", f"`{entry_point}`"))
    user = f"Complete the function `{entry_point}`:\n{_fence(prompt)}\n"
    if try_index > 1:
        want_code, want_tests = wanted(generate, try_index)
        user += "\nYour previous answer:\n" + _fence(previous_code or "") + "\nwith the tests:\n"
        user += _fence("\n".join(previous_tests or [])) + "\n"
        if feedback == "failures" and failures:
            user += "\nThese tests did not pass:\n"
            for f in failures:
                detail = f" -- {f.detail}" if f.detail else ""
                user += f"- test {f.index + 1} `{f.test.strip()[:200]}`: {f.status}{detail[:FEEDBACK_CHARS]}\n"
        else:
            user += "\nThe code does not pass all of these tests.\n"
        if want_code and want_tests:
            user += "Write the function and the tests again so that they are correct and agree."
        elif want_code:
            user += "Keep the tests. Write the function again so that it is correct and passes them."
        else:
            user += "Keep the function. Write the tests again so that they are correct."
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class ParsedReply:
    """The fields of one reply; ``error`` is None when every wanted field was read."""

    code: str | None
    tests: tuple[str, ...] | None
    error: str | None = None


def _json_object(raw: str) -> Any:
    """The JSON value of ``raw``: the whole text, else the outermost ``{...}`` inside it (a
    server without structured output may wrap the object in prose or a fence)."""
    text = raw.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    start, end = text.find("{"), text.rfind("}")
    if start == -1 or end <= start:
        raise ValueError("no JSON object")
    return json.loads(text[start:end + 1])


def parse_reply(raw: str, want_code: bool, want_tests: bool) -> ParsedReply:
    """Read the wanted fields of ``raw`` (see the module docstring); never raises."""
    try:
        value = _json_object(raw)
    except ValueError:  # JSONDecodeError included
        return ParsedReply(None, None, "not_json")
    if not isinstance(value, dict):
        return ParsedReply(None, None, "not_object")
    code: str | None = None
    tests: tuple[str, ...] | None = None
    if want_code:
        if "code" not in value:
            return ParsedReply(None, None, "missing:code")
        if not isinstance(value["code"], str):
            return ParsedReply(None, None, "type:code")
        code = value["code"]
    if want_tests:
        if "tests" not in value:
            return ParsedReply(code, None, "missing:tests")
        raw_tests = value["tests"]
        if not isinstance(raw_tests, list) or not all(isinstance(t, str) for t in raw_tests):
            return ParsedReply(code, None, "type:tests")
        tests = tuple(raw_tests)
    return ParsedReply(code, tests)
