"""The embedded generator's ``speculative`` setting (``core.generation.embedded``, module
docstring): only drafts made from the request's own tokens are accepted; a speculative reply is
a function of its request (the same after other requests), speculation really runs (llama.cpp
reports drafted tokens), and it is part of the generator's identity, so answers made one way
are never reused for the other. The model tests run the real embedded model (slow tier)."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from core.common.errors import IanvsError
from core.generation import DecodingSettings, GenerationRequest, generator_parameters
from core.generation.cache_key import sample_key
from core.generation.embedded import EmbeddedGenerator, speculative_setting
from tests.runner.conftest import run_cli
from tests.scenarios.conftest import BENCH

#: a file the model is asked to give back unchanged: a reply that copies its prompt, which is
#: what the n-gram drafts predict
SOURCE = "\n".join(
    [f"def step_{i}(value: int) -> int:\n    \"\"\"Add {i} to value.\"\"\"\n    return value + {i}\n"
     for i in range(8)])
COPY = GenerationRequest(
    task_id="copy", prompt="", mode="chat",
    decoding=DecodingSettings(max_tokens=160, temperature=0.0, seed=1),
    messages=({"role": "user", "content": "Give back this Python file unchanged, in one "
               f"```python block:\n\n```python\n{SOURCE}```"},))
OTHER = GenerationRequest(
    task_id="other", prompt="", mode="chat",
    decoding=DecodingSettings(max_tokens=48, temperature=0.0, seed=1),
    messages=({"role": "user", "content": "Write a Python function that reverses a string."},))


@pytest.mark.parametrize("value, expected", [(None, "none"), ("none", "none"),
                                             ("ngram-simple", "ngram-simple"),
                                             ("NGRAM_SIMPLE", "ngram-simple")])
def test_accepted_settings(value: Any, expected: str) -> None:
    assert speculative_setting(value) == expected


@pytest.mark.parametrize("value, reason", [("ngram-mod", "depend on the requests"),
                                           ("ngram-cache", "depend on the requests"),
                                           ("draft", "second (draft) model"),
                                           ("lookahead", None)])
def test_refused_settings_say_why_and_what_to_write(value: str, reason: str | None) -> None:
    with pytest.raises(IanvsError) as caught:
        speculative_setting(value)
    message = str(caught.value)
    assert repr(value) in message
    if reason:
        assert reason in message
    assert "ngram-simple" in (caught.value.hint or "")


def test_it_is_a_hyperparameter_of_the_embedded_generator() -> None:
    """A job's ``speculative`` hyperparameter reaches the constructor (the basemodel passes
    only the parameters a generator accepts)."""
    assert "speculative" in generator_parameters("embedded").accepted


@pytest.mark.slow
def test_a_speculative_reply_depends_on_its_request_only_and_is_keyed_apart() -> None:
    spec = EmbeddedGenerator(instances=1, n_ctx=2048, speculative="ngram-simple")
    plain = EmbeddedGenerator(instances=1, n_ctx=2048)
    try:
        first = next(iter(spec.generate([COPY])))
        next(iter(spec.generate([OTHER])))
        again = next(iter(spec.generate([COPY])))
        raw = spec._servers[0].handle_chat_completions(spec._body(COPY, 0))
        plain_reply = next(iter(plain.generate([COPY])))
    finally:
        spec.close()
        plain.close()
    assert first.error is None and "def step_0" in first.raw_output
    assert again.raw_output == first.raw_output
    assert raw["choices"][0]["message"]["content"] == first.raw_output
    assert raw["timings"]["draft_n"] > 0 and raw["timings"]["draft_n_accepted"] > 0
    assert plain_reply.error is None and plain_reply.raw_output
    assert spec.describe()["speculative"] == "ngram-simple"
    assert "speculative" not in plain.describe()
    assert sample_key(spec.describe(), COPY, 0) != sample_key(plain.describe(), COPY, 0)


def test_validate_names_the_line_of_a_refused_setting(tmp_path: Path) -> None:
    """``ianvs validate`` on the shipped codegen job with ``speculative: ngram-mod`` added: the
    problem is reported at that hyperparameter's line, with why and what to write, and no model
    is loaded for it (the real command)."""
    job = tmp_path / "codegen"
    shutil.copytree(BENCH / "codegen", job)
    algorithm = job / "testalgorithms" / "gen" / "gen_algorithm.yaml"
    text = algorithm.read_text(encoding="utf-8")
    text = text.rstrip("\n") + '\n        - speculative:\n            values: ["ngram-mod"]\n'
    algorithm.write_text(text, encoding="utf-8")
    line = text.splitlines().index("        - speculative:") + 1
    res = run_cli("validate", "-f", "benchmarkingjob.yaml", cwd=job)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert f"gen_algorithm.yaml:{line}:" in out
    assert "speculative 'ngram-mod' is not supported" in out and "depend on the requests" in out
    assert "write speculative: one of none, ngram-simple" in out
    assert "Traceback" not in out
