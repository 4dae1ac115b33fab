"""Cache keys and resume; replay of recorded samples; canonical and broken references."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from core.common.errors import ConfigError, DatasetError, RegistryError
from core.scenarios.codegen.humaneval import iter_humaneval, select_tasks
from core.generation import (DecodingSettings, Generation, GenerationRequest, Generator,
                             cached_generate, create_generator, sample_key)
from core.generation.cache_key import load_cache
from core.generation.replay import ReplayGenerator

TASKS = select_tasks(iter_humaneval(), task_ids=["HumanEval/0", "HumanEval/12", "HumanEval/32", "HumanEval/53"])
REQS = [GenerationRequest(t.task_id, t.prompt, t.entry_point) for t in TASKS]
BY_ID = {t.task_id: t for t in TASKS}


def passes(task_id: str, code: str, tmp_path: Path) -> bool:
    """Run the HumanEval check in a fresh interpreter (real execution)."""
    script = tmp_path / "prog.py"
    script.write_text(BY_ID[task_id].program(code))
    return subprocess.run([sys.executable, str(script)], capture_output=True, timeout=30).returncode == 0


# ---------------------------------------------------------------- keys
def test_key_is_stable_golden() -> None:
    req = GenerationRequest("HumanEval/0", "def f():\n", "f", "complete", DecodingSettings(max_tokens=16))
    key = sample_key({"generator": "x"}, req, 0)
    assert key == sample_key({"generator": "x"}, req, 0)
    # golden: changes only if the key schema changes (then bump KEY_SCHEMA_VERSION) or the default
    # stops do (the key holds the resolved stops, so generations made with other stops are not
    # reused; last change: "\n@" added)
    assert key == "828661478f76b3094ec25a5cfa63a100e2c73266f2579f4ae7217bb2ea5cb6a3"


@pytest.mark.parametrize("change", [
    {"prompt": "def g():\n"}, {"mode": "chat"}, {"task_id": "other"},
    {"decoding": DecodingSettings(max_tokens=17)}, {"decoding": DecodingSettings(max_tokens=16, temperature=0.2)},
    {"decoding": DecodingSettings(max_tokens=16, stop=("\n",))},
    {"decoding": DecodingSettings(max_tokens=16, seed=1)},
])
def test_key_changes_with_result_relevant_fields(change: dict[str, Any]) -> None:
    base = dict(task_id="HumanEval/0", prompt="def f():\n", entry_point="f", mode="complete",
                decoding=DecodingSettings(max_tokens=16))
    a = sample_key({"g": 1}, GenerationRequest(**base), 0)
    assert sample_key({"g": 1}, GenerationRequest(**{**base, **change}), 0) != a
    assert sample_key({"g": 2}, GenerationRequest(**base), 0) != a
    assert sample_key({"g": 1}, GenerationRequest(**base), 1) != a
    assert sample_key({"g": 1}, GenerationRequest(**base, samples=(0,)), 0) == a


def test_decoding_validation() -> None:
    with pytest.raises(ValueError):
        DecodingSettings(n=0)
    with pytest.raises(ValueError, match="unknown decoding"):
        DecodingSettings.from_mapping({"temprature": 0.1})
    assert DecodingSettings.from_mapping({"stop": "\n"}).stop == ("\n",)
    with pytest.raises(ValueError):
        GenerationRequest("t", "p", decoding=DecodingSettings(n=2), samples=(2,))


class Counting(Generator):
    """A real generator wrapper that counts the samples it was asked for."""

    def __init__(self, inner: Generator) -> None:
        self.inner, self.calls = inner, 0

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Generation]:
        for gen in self.inner.generate(requests):
            self.calls += 1
            yield gen


def test_cached_generate_resumes(tmp_path: Path) -> None:
    cache = tmp_path / "gen.jsonl"
    reqs = [GenerationRequest(r.task_id, r.prompt, r.entry_point, decoding=DecodingSettings(n=3)) for r in REQS]
    first = Counting(create_generator("broken"))
    # simulate a killed run: consume only 5 samples
    it = cached_generate(first, reqs, cache)
    done = [next(it) for _ in range(5)]
    it.close()
    assert first.calls == 5 and len(load_cache(cache)) == 5
    with open(cache, "a") as handle:
        handle.write('{"task_id": "trunc')  # torn last line
    second = Counting(create_generator("broken"))
    all_ = list(cached_generate(second, reqs, cache))
    assert second.calls == 12 - 5
    assert sorted((g.task_id, g.sample_index) for g in all_) == sorted(
        (r.task_id, i) for r in reqs for i in range(3))
    assert {g.key for g in done} <= {g.key for g in all_}
    third = Counting(create_generator("broken"))
    assert len(list(cached_generate(third, reqs, cache))) == 12 and third.calls == 0


# ---------------------------------------------------------------- reference
def test_canonical_passes_and_broken_fails(tmp_path: Path) -> None:
    canonical = create_generator("canonical", solutions={t.task_id: t.canonical_solution for t in TASKS})
    for gen in canonical.generate(REQS):
        assert gen.ok and passes(gen.task_id, gen.code, tmp_path), gen.task_id
    for variant in ("raise", "none", "syntax"):
        for gen in create_generator("broken", variant=variant).generate(REQS):
            assert not passes(gen.task_id, gen.code, tmp_path), (variant, gen.task_id)


def test_canonical_from_dataset_and_missing(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(TASKS[0].to_record()) + "\n")
    gens = list(create_generator("canonical", dataset_path=path).generate(REQS[:2]))
    assert gens[0].ok and gens[1].error and "no canonical" in gens[1].error


def test_factory_errors() -> None:
    with pytest.raises(RegistryError, match="did you mean 'replay'"):
        create_generator("replya")
    with pytest.raises(ConfigError):
        create_generator("broken", variant="nope")
    with pytest.raises(ConfigError):
        create_generator("broken", colour="red")


# ---------------------------------------------------------------- replay
def test_replay_completion_and_solution_styles(tmp_path: Path) -> None:
    t0, t12 = BY_ID["HumanEval/0"], BY_ID["HumanEval/12"]
    samples = tmp_path / "samples.jsonl.gz"
    lines = [
        {"task_id": "HumanEval/0", "completion": t0.canonical_solution},
        {"task_id": "HumanEval/0", "completion": "    return 42\n"},
        {"task_id": "HumanEval/12", "solution": t12.prompt + t12.canonical_solution},
        {"task_id": "HumanEval/999", "completion": "x"},
    ]
    with gzip.open(samples, "wt") as handle:
        handle.write("\n".join(json.dumps(x) for x in lines) + "\n\n")
    gens = list(ReplayGenerator(samples).generate(REQS[:3]))
    by = {(g.task_id, g.sample_index): g for g in gens}
    assert passes("HumanEval/0", by["HumanEval/0", 0].code, tmp_path)
    assert not passes("HumanEval/0", by["HumanEval/0", 1].code, tmp_path)
    assert by["HumanEval/12", 0].code == t12.prompt + t12.canonical_solution
    assert passes("HumanEval/12", by["HumanEval/12", 0].code, tmp_path)
    assert by["HumanEval/32", 0].error and "no recorded sample" in by["HumanEval/32", 0].error
    assert len({g.key for g in gens}) == len(gens)


@pytest.mark.parametrize("line,message", [
    ("{not json", "invalid JSON"), ('{"completion": "x"}', "task_id"), ('{"task_id": "a"}', "completion"),
])
def test_replay_malformed(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"task_id": "a", "completion": "x"}\n' + line + "\n")
    with pytest.raises(DatasetError, match=message) as info:
        ReplayGenerator(path)
    assert f"{path}:2" in str(info.value)
