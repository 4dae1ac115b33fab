"""Routers for code (``hard_example_mining`` modules of the ``jointinference`` paradigm).

Each is a callable class: ``router(x)`` returns True when the item is *hard* (goes to the cloud).
Upstream's interface hands a router the input (``mining-then-inference``) or the edge's answer
(``inference-then-mining``); these routers also take the run's context through ``bind`` (the
task's record, the sandbox settings), and note the seconds their own checks cost per item in
``ctx.costs`` (reported as ``check_s``).

======================= ============ =======================================================
router                  mode         hard when
======================= ============ =======================================================
``EdgeOnly``            any          never
``CloudOnly``           any          always
``RandomRouter``        any          a per-task coin (seeded by ``seed`` and the task id) shows
                                     cloud; ``threshold`` is the *edge* share, as upstream
``OracleRouter``        mining-then  the edge's program fails the hidden tests and the cloud's
                                     passes (an upper bound: it reads the hidden tests)
``ExampleTests``        inference-   the edge's program fails the examples stated in the prompt
                        then-mining  (run in the sandbox); ``no_examples`` says where tasks
                                     without usable examples go (``cloud`` by default)
``Confidence``          inference-   the edge answer's ``statistic`` (``mean`` or ``min``) token
                        then-mining  log-probability is below ``threshold``; an answer without
                                     log-probabilities goes to the cloud
======================= ============ =======================================================

Every check that runs code runs it in the sandbox (the boundary tier by default: the verdict
is computed where the model's code does not run), through the same executor and execution cache
as the metrics, so a router sweep runs each check once.
"""
from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

from core.common.errors import ConfigError
from core.scenarios.cloudedge.examples import examples_test, prompt_examples

logger = logging.getLogger(__name__)


class _Router:
    """Shared plumbing: the context, the current record, cost notes."""

    #: modes the router works in (others are a configuration error)
    modes: tuple[str, ...] = ("mining-then-inference", "inference-then-mining", "self-design")

    def __init__(self, **_params: Any) -> None:
        self.ctx: Any = None
        self.counts: dict[str, int] = {}

    def bind(self, ctx: Any) -> None:
        if ctx.mode not in self.modes:
            raise ConfigError(f"router {type(self).__name__} works in "
                              f"{' or '.join(self.modes)}, not {ctx.mode!r}",
                              hint=f"set hard_example_mining_mode: {self.modes[0]}")
        self.ctx = ctx

    def _record(self) -> dict[str, Any]:
        return self.ctx.records[self.ctx.current]

    def _count(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def _cost(self, started: float) -> None:
        index = self.ctx.current
        self.ctx.costs[index] = self.ctx.costs.get(index, 0.0) + time.perf_counter() - started

    def cleanup(self) -> None:
        if self.counts:
            logger.info("%s: %s", type(self).__name__,
                        ", ".join(f"{k}={v}" for k, v in sorted(self.counts.items())))


class EdgeOnly(_Router):
    def __call__(self, data: Any = None) -> bool:
        return False


class CloudOnly(_Router):
    def __call__(self, data: Any = None) -> bool:
        return True


class RandomRouter(_Router):
    """Cloud for a share ``1 - threshold`` of the tasks, decided per task id (the same task
    gets the same coin in every run, whatever the order)."""

    def __init__(self, threshold: float = 0.5, seed: int = 0, **params: Any) -> None:
        super().__init__(**params)
        if not 0.0 <= float(threshold) <= 1.0:
            raise ConfigError(f"RandomRouter threshold must be in [0, 1], got {threshold!r}")
        self.threshold, self.seed = float(threshold), int(seed)

    def __call__(self, data: Any = None) -> bool:
        task = str(self._record().get("task_id", self.ctx.current))
        digest = hashlib.sha256(f"{self.seed}:{task}".encode()).digest()
        coin = int.from_bytes(digest[:8], "big") / 2 ** 64
        return coin >= self.threshold


def _grade(ctx: Any, record: dict[str, Any], answer: dict[str, Any]) -> bool:
    """True when ``answer``'s program passes ``record``'s tests in the sandbox."""
    from core.testcasecontroller.metrics.code_execution import iter_results

    # the job-wide folder: its execution cache serves every router and case of a sweep
    results = next(iter(iter_results([record], [answer], ctx.sandbox, ctx.cache_dir,
                                      show_progress=False, total=1)))
    return bool(results) and all(r.passed for r in results)


class OracleRouter(_Router):
    """The upper bound: the cloud only where that turns a failure into a pass. It asks both
    models for every task (each answer is cached for the job, so the run's own inference and
    every later case reuse it) and grades both on the hidden tests. No deployment could route
    this way; its ``check_s`` shows what knowing costs. Put it first in a sweep: the cases after
    it then all know ``oracle_pass@1`` and ``regret``."""

    modes = ("mining-then-inference",)

    def __init__(self, edgemodel: Any = None, cloudmodel: Any = None, **params: Any) -> None:
        super().__init__(**params)
        self.edge, self.cloud = edgemodel, cloudmodel

    def __call__(self, data: Any = None) -> bool:
        record = self._record()
        started = time.perf_counter()
        # both answers always: they are cached for the job, so every later case of a sweep
        # knows the oracle (the metrics' oracle_pass@1 and regret need both)
        edge_ok = _grade(self.ctx, record, self.edge.answer(record, "edge"))
        cloud_ok = _grade(self.ctx, record, self.cloud.answer(record, "cloud"))
        self._cost(started)
        return not edge_ok and cloud_ok


class ExampleTests(_Router):
    """Escalate when the edge's program fails the examples its prompt states."""

    modes = ("inference-then-mining",)

    def __init__(self, no_examples: str = "cloud", **params: Any) -> None:
        super().__init__(**params)
        if no_examples not in ("cloud", "edge"):
            raise ConfigError(f"ExampleTests no_examples must be 'cloud' or 'edge', got {no_examples!r}")
        self.no_examples = no_examples

    def __call__(self, data: Any = None) -> bool:
        record = self._record()
        entry = str(record.get("entry_point") or "")
        examples = prompt_examples(str(record.get("prompt") or ""), entry) if entry else []
        if not examples:
            self._count("no_examples")
            return self.no_examples == "cloud"
        started = time.perf_counter()
        check = {**record, "test": examples_test(examples, entry), "task_id":
                 f"{record.get('task_id')}#examples"}
        passed = _grade(self.ctx, check, _as_prediction(data))
        self._cost(started)
        self._count("examples_passed" if passed else "examples_failed")
        return not passed


class Confidence(_Router):
    """Escalate when the edge model was unsure of its answer (token log-probabilities)."""

    modes = ("inference-then-mining",)

    def __init__(self, threshold: float = -0.3, statistic: str = "mean", **params: Any) -> None:
        super().__init__(**params)
        if statistic not in ("mean", "min"):
            raise ConfigError(f"Confidence statistic must be 'mean' or 'min', got {statistic!r}")
        self.threshold, self.statistic = float(threshold), statistic

    def __call__(self, data: Any = None) -> bool:
        value = (data or {}).get(f"{self.statistic}_logprob") if isinstance(data, dict) else None
        if value is None:
            self._count("no_logprobs")
            return True
        return float(value) < self.threshold


def _as_prediction(answer: Any) -> dict[str, Any]:
    """The edge's answer as a prediction the code metrics grade (its ``samples``)."""
    if isinstance(answer, dict) and "samples" in answer:
        return answer
    raise ConfigError("ExampleTests needs the edge model's answer with its program (a CodeModel "
                      "edgemodel in inference-then-mining mode)")
