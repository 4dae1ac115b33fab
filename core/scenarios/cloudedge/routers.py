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
``SelfTests``           inference-   the edge's program fails a test the edge model wrote for the
                        then-mining  task (the self-align scenario's structured reply, static
                                     check and sandbox runner); ``no_tests`` says where tasks
                                     without a valid model-written test go (``cloud``)
======================= ============ =======================================================

Every check that runs code runs it in the sandbox (the boundary tier by default: the verdict
is computed where the model's code does not run), through the same executor and execution cache
as the metrics, so a router sweep runs each check once.

A router's failure on one item never ends the test case: when its check raises (the sandbox
failed, the edge model's server did not answer, an answer it cannot read), the item goes to the
cloud, the failure is logged, counted (``router_errors``) and kept in ``errors`` by item, and,
when the item is the edge's answer (``inference-then-mining``), written on that answer as
``router_error`` (so it is stored with the prediction). A :class:`ConfigError` -- a router that
cannot work in this job at all -- still stops the case.
"""
from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

from core.common.errors import ConfigError
from core.scenarios.codegen.examples import examples_check

logger = logging.getLogger(__name__)


class _Router:
    """Shared plumbing: the context, the current record, cost notes."""

    #: modes the router works in (others are a configuration error)
    modes: tuple[str, ...] = ("mining-then-inference", "inference-then-mining", "self-design")

    def __init__(self, **_params: Any) -> None:
        self.ctx: Any = None
        self.counts: dict[str, int] = {}
        #: item index -> the error its check raised (that item went to the cloud)
        self.errors: dict[int, str] = {}

    def __call__(self, data: Any = None) -> bool:
        """True when the item is hard (goes to the cloud); a failing check sends it there too
        (module docstring)."""
        try:
            return bool(self.decide(data))
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - one item's failure, recorded on it
            return self._failed(data, exc)

    def decide(self, data: Any = None) -> bool:
        """The router's own decision for one item (True: cloud)."""
        raise NotImplementedError

    def _failed(self, data: Any, exc: Exception) -> bool:
        text = f"{type(self).__name__}: {type(exc).__name__}: {exc}"[:500]
        index = self.ctx.current if self.ctx is not None else -1
        logger.warning("item %s goes to the cloud: the router's check failed (%s)", index, text)
        self._count("router_errors")
        self.errors[index] = text
        if isinstance(data, dict) and "samples" in data:  # the edge's answer: stored with it
            data["router_error"] = text
        return True

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
    def decide(self, data: Any = None) -> bool:
        return False


class CloudOnly(_Router):
    def decide(self, data: Any = None) -> bool:
        return True


class RandomRouter(_Router):
    """Cloud for a share ``1 - threshold`` of the tasks, decided per task id (the same task
    gets the same coin in every run, whatever the order)."""

    def __init__(self, threshold: float = 0.5, seed: int = 0, **params: Any) -> None:
        super().__init__(**params)
        if not 0.0 <= float(threshold) <= 1.0:
            raise ConfigError(f"RandomRouter threshold must be in [0, 1], got {threshold!r}")
        self.threshold, self.seed = float(threshold), int(seed)

    def decide(self, data: Any = None) -> bool:
        task = str(self._record().get("task_id", self.ctx.current))
        digest = hashlib.sha256(f"{self.seed}:{task}".encode()).digest()
        coin = int.from_bytes(digest[:8], "big") / 2 ** 64
        return coin >= self.threshold


def _grade(ctx: Any, record: dict[str, Any], answer: dict[str, Any]) -> bool:
    """True when ``answer``'s program passes ``record``'s tests in the sandbox."""
    from core.scenarios.cloudedge.grading import passes

    # the job-wide folder: its execution cache serves every router and case of a sweep
    return passes([record], [answer], ctx.sandbox, ctx.cache_dir)[0]


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

    def bind(self, ctx: Any) -> None:
        """Both models answer every task in one batch each (:meth:`CodeModel.prefetch`), so a
        model with several instances decodes side by side; the routing below reads the cache."""
        super().bind(ctx)
        for model in (self.edge, self.cloud):
            prefetch = getattr(model, "prefetch", None)
            if callable(prefetch):
                prefetch(list(ctx.records))

    def decide(self, data: Any = None) -> bool:
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

    def decide(self, data: Any = None) -> bool:
        check = examples_check(self._record())
        if check is None:
            self._count("no_examples")
            return self.no_examples == "cloud"
        started = time.perf_counter()
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

    def decide(self, data: Any = None) -> bool:
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


class SelfTests(_Router):
    """Escalate when the edge's program fails tests the edge model itself wrote for the task.

    The edge model is asked, in chat mode with a JSON schema (llama.cpp turns it into a
    grammar), for ``tests_per_task`` one-line asserts calling the function; the request goes
    through the job's answer cache like every answer. Each test is checked statically
    (:func:`core.scenarios.selfalign.units.check_unit`: invalid ones, e.g. not calling the
    function or importing something unavailable, are counted and never run) and the valid ones
    run one by one against the edge's program in the sandbox
    (:class:`core.scenarios.selfalign.sandbox.UnitRunner`, a fresh judge per test, results
    cached job-wide). A test found invalid when it runs (no assert completed, the function was
    never called, its judge broke) is left out like a statically invalid one. ``check_s``
    counts the tests' generation (as measured when generated) and their sandbox runs."""

    modes = ("inference-then-mining",)

    def __init__(self, tests_per_task: int = 3, max_tokens: int = 256,
                 no_tests: str = "cloud", **params: Any) -> None:
        super().__init__(**params)
        if no_tests not in ("cloud", "edge"):
            raise ConfigError(f"SelfTests no_tests must be 'cloud' or 'edge', got {no_tests!r}")
        if int(tests_per_task) < 1:
            raise ConfigError(f"SelfTests tests_per_task must be >= 1, got {tests_per_task!r}")
        self.tests_per_task, self.max_tokens = int(tests_per_task), int(max_tokens)
        self.no_tests = no_tests
        self.runner: Any = None

    def bind(self, ctx: Any) -> None:
        from core.scenarios.selfalign.sandbox import SandboxSettings, UnitRunner
        from core.testenvmanager.sandbox.pool import SANDBOX_KEYS

        super().bind(ctx)
        sandbox = dict(ctx.sandbox or {})
        timeout = sandbox.get("timeout", "auto")
        self.runner = UnitRunner(SandboxSettings(
            backend=str(sandbox.get("backend", "local")),
            options={k: v for k, v in sandbox.items() if k not in SANDBOX_KEYS},
            timeout=float(timeout) if isinstance(timeout, (int, float)) else 3.0,
            memory_mb=int(sandbox.get("memory_mb", 1024))), ctx.cache_dir / "selftests_units.jsonl")

    def _request(self, record: dict[str, Any]) -> Any:
        from core.generation.types import DecodingSettings, GenerationRequest
        from core.scenarios.selfalign.reply import reply_schema, response_format

        entry = str(record.get("entry_point") or "")
        system = (f"You write unit tests for a Python function. Reply with one JSON object whose "
                  f"\"tests\" field holds {self.tests_per_task} tests; each test is one assert "
                  f"statement that calls `{entry}` with concrete arguments and compares its "
                  f"result with the value the description says it must return.")
        user = f"Write the tests for `{entry}`:\n```python\n{str(record.get('prompt') or '').rstrip()}\n```"
        schema = reply_schema(False, True, self.tests_per_task, "assert")
        return GenerationRequest(task_id=f"{record.get('task_id')}#selftests",
                                 prompt=str(record.get("prompt") or ""), entry_point=entry,
                                 mode="chat", decoding=DecodingSettings(max_tokens=self.max_tokens),
                                 messages=({"role": "system", "content": system},
                                           {"role": "user", "content": user}),
                                 response_format=response_format(schema))

    def decide(self, data: Any = None) -> bool:
        from core.scenarios.selfalign.reply import parse_reply
        from core.scenarios.selfalign.sandbox import INVALID
        from core.scenarios.selfalign.units import check_unit

        record = self._record()
        entry = str(record.get("entry_point") or "")
        answer = _as_prediction(data)
        started = time.perf_counter()
        gen, cached = self.ctx.edgemodel.generate_cached(self._request(record))
        spent = gen.latency_s if cached else 0.0  # a cached generation keeps its cost
        parsed = parse_reply(gen.raw_output, want_code=False, want_tests=True) if gen.error is None \
            else None
        units = [check_unit(t, entry, str(record.get("prompt") or ""))
                 for t in (parsed.tests or ())] if parsed is not None and parsed.error is None else []
        valid = [u for u in units if u.valid]
        self.counts["invalid_tests"] = self.counts.get("invalid_tests", 0) + len(units) - len(valid)
        if parsed is None or parsed.error is not None:
            self._count("unparsed_replies")
        if not valid:
            self._count("no_valid_tests")
            self._cost(started)
            self.ctx.costs[self.ctx.current] += spent
            return self.no_tests == "cloud"
        program = str((answer.get("samples") or [{}])[0].get("code") or "")
        outcomes = self.runner.run(program, valid, entry, helpers=str(record.get("prompt") or ""))
        self._cost(started)
        self.ctx.costs[self.ctx.current] += spent
        # a test found invalid when it ran (it ran no assert, never called the function, broke
        # its judge) is left out like one found invalid before
        graded = [o for o in outcomes if o.outcome != INVALID]
        self.counts["invalid_tests"] += len(outcomes) - len(graded)
        if not graded:
            self._count("no_valid_tests")
            return self.no_tests == "cloud"
        failed = any(not o.passed for o in graded)
        self._count("self_tests_failed" if failed else "self_tests_passed")
        return failed

    def cleanup(self) -> None:
        super().cleanup()
        if self.runner is not None:
            self.runner.close()
            self.runner = None
