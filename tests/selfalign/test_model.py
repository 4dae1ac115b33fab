"""Hyperparameters of the self-align basemodel are checked without loading a model."""
from __future__ import annotations

import pytest

from core.common.errors import ConfigError, RegistryError
from core.scenarios.selfalign.model import SelfAlignModel


def test_defaults_and_choices() -> None:
    model = SelfAlignModel()
    assert model.generator_name == "embedded" and model.structured == "auto"
    assert model.loop.describe() == {"max_tries": 5, "generate": "both", "feedback": "failures",
                                     "tests_per_task": 3, "test_style": "assert"}
    assert model.decoding.max_tokens == 512 and model.decoding.temperature == 0.0
    assert model.sandbox.executor_options()["judge_requests"] == 1
    SelfAlignModel.check_hyperparameters({"generator": "openai", "base_url": "http://x/v1",
                                          "model": "m", "generate": "tests", "max_tries": 2})


@pytest.mark.parametrize("params, error, text", [
    ({"generate": "cod"}, ConfigError, "generate must be one of code, tests, both"),
    ({"feedback": "all"}, ConfigError, "feedback must be one of"),
    ({"max_tries": 0}, ConfigError, "max_tries must be a positive integer"),
    ({"tests_per_task": "3"}, ConfigError, "tests_per_task"),
    ({"test_timeout": -1}, ConfigError, "test_timeout"),
    ({"generator": "embeded"}, RegistryError, "unknown generator"),
    ({"generator": "reference", "n_threads": 2}, ConfigError, "not used by the 'reference'"),
    ({"generator": "embedded", "n_thread": 2}, ConfigError, "n_thread"),
    ({"n": 2}, ConfigError, "one sample per try"),
    ({"max_trie": 2}, ConfigError, "did you mean 'max_tries'|max_tries"),
])
def test_bad_hyperparameters_are_refused(params: dict, error: type, text: str) -> None:
    with pytest.raises(error, match=text):
        SelfAlignModel.check_hyperparameters(params)
