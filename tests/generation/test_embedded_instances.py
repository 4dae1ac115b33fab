"""The embedded generator's model instances (issue 45): by default one single-threaded instance
per core, requests spread over them; outputs do not depend on the shape (instances, threads,
which instance answered), so a busy machine changes the speed, never the answers. Real model,
real llama.cpp (slow tier)."""
from __future__ import annotations

import logging

import pytest

from core.common.errors import IanvsError
from core.scenarios.codegen.humaneval import iter_humaneval, select_tasks
from core.generation import DecodingSettings, GenerationRequest
from core.generation.embedded import MAX_INSTANCES, EmbeddedGenerator, default_instances

pytestmark = pytest.mark.slow

TASKS = select_tasks(iter_humaneval(), task_ids=["HumanEval/0", "HumanEval/2", "HumanEval/4",
                                                 "HumanEval/7"])
DECODING = DecodingSettings(max_tokens=40)


def _outputs(gen: EmbeddedGenerator) -> dict[str, str]:
    reqs = [GenerationRequest(t.task_id, t.prompt, t.entry_point, "complete", DECODING)
            for t in TASKS]
    try:
        return {g.task_id: g.raw_output for g in gen.generate(reqs)}
    finally:
        gen.close()


def test_the_answers_do_not_depend_on_instances_or_threads(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="core.generation.embedded"):
        pooled = EmbeddedGenerator(n_ctx=1024, instances=2)
    assert pooled.instances == 2 and pooled.n_threads == 1 and pooled.concurrency == 2
    assert "2 instance(s) of 1 thread(s)" in caplog.text
    spread = _outputs(pooled)
    single = _outputs(EmbeddedGenerator(n_ctx=1024, instances=1))
    two_threads = _outputs(EmbeddedGenerator(n_ctx=1024, n_threads=2))
    assert set(spread) == {t.task_id for t in TASKS} and all(spread.values())
    assert spread == single == two_threads


def test_the_default_shape_and_bad_values() -> None:
    assert 1 <= default_instances() <= MAX_INSTANCES
    with pytest.raises(IanvsError, match="instances must be at least 1"):
        EmbeddedGenerator(n_ctx=512, instances=0)
    explicit = EmbeddedGenerator(n_ctx=512, n_threads=2)
    try:
        assert (explicit.instances, explicit.n_threads) == (1, 2)   # the earlier shape, on request
    finally:
        explicit.close()
