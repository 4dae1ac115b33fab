"""Routers fitted on the job's train split and scored on its test split.

A threshold chosen on the tasks it is scored on overstates what a router does on tasks it has
not seen. These two routers therefore fit on the testenv's ``train_index`` tasks. The hidden
tests they read are the train tasks': the train split is there to fit on. Then they route the
test split, whose hidden tests they never read.

=========================== ==================================================================
router                      sends a test task to the cloud when
=========================== ==================================================================
``CalibratedConfidence``    the edge answer's ``statistic`` (``mean`` or ``min``) token
                            log-probability is below the threshold that sends ``cloud_share``
                            of the *train* tasks to the cloud (the lowest ones); an answer
                            without log-probabilities goes to the cloud
``LearnedRouter``           a logistic model, fitted on the train tasks to predict that the edge
                            answer fails its hidden tests, gives a probability at or above the
                            threshold: 0.5, or, with ``cloud_share``, the one that sends that
                            share of the train tasks to the cloud
=========================== ==================================================================

The learned router's features are read off the edge's answer and the task. Each is defensible
without the hidden tests:
- ``mean_logprob`` and ``min_logprob``: how sure the edge model was. A missing value becomes the
  train median, with ``no_logprobs`` set;
- ``examples_passed`` and ``no_examples``: whether the program passes the examples the prompt
  states, run in the sandbox like :class:`~core.scenarios.cloudedge.routers.ExampleTests`;
- ``prompt_size`` and ``answer_size``: the log of their lengths in characters.
Features are standardised on the train tasks. The model is an L2-regularised logistic regression
fitted by Newton's method (:func:`fit_logistic`).

Both work in ``inference-then-mining`` mode. At ``bind`` each asks the edge model for every train
task; the answers are cached job-wide, as every answer is. What was fitted goes to ``router.json``
in the test case folder, with the share of train tasks it sends up and the seconds fitting took
(not counted in any task's ``check_s``):
- ``CalibratedConfidence``: its threshold;
- ``LearnedRouter``: the feature means and scales, the coefficients and the threshold.
The ``cloudedge`` metric reports the train share as ``train_cloud_share`` beside the
``cloud_share`` reached on the test split.

A job without a train split gets a :class:`ConfigError`; so does a train split that shares a
task with the test split.
"""
from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from core.common.errors import ConfigError
from core.scenarios.codegen.examples import examples_check
from core.scenarios.cloudedge.grading import passes
from core.scenarios.cloudedge.routers import _as_prediction, _Router

logger = logging.getLogger(__name__)

ROUTER_FILE = "router.json"
FEATURES = ("mean_logprob", "min_logprob", "no_logprobs", "examples_passed", "no_examples",
            "prompt_size", "answer_size")


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, iterations: int = 50
                 ) -> np.ndarray:
    """Weights ``[intercept, w_1..w_k]`` of an L2-regularised logistic regression of ``y`` (0/1)
    on ``x`` (n x k), by Newton's method. The intercept is not penalised. All-equal labels give
    the base rate through the intercept, pulled toward 0.5 by nothing (it is unpenalised)."""
    n, k = x.shape
    design = np.hstack([np.ones((n, 1)), x])
    weights = np.zeros(k + 1)
    penalty = np.full(k + 1, float(l2))
    penalty[0] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-np.clip(design @ weights, -30, 30)))
        gradient = design.T @ (p - y) + penalty * weights
        hessian = (design.T * (p * (1 - p))) @ design + np.diag(penalty) + 1e-9 * np.eye(k + 1)
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if float(np.max(np.abs(step))) < 1e-8:
            break
    return weights


def share_threshold(scores: Sequence[float], share: float) -> float:
    """The threshold ``t`` for which ``score >= t`` sends the nearest possible share of
    ``scores`` to the cloud, not above ``share`` (ties stay together). No scores: ``inf``."""
    ordered = sorted(scores, reverse=True)
    if not ordered:
        return math.inf
    wanted = int(math.floor(share * len(ordered) + 1e-9))
    if wanted <= 0:
        return math.nextafter(ordered[0], math.inf)
    if wanted >= len(ordered):
        return ordered[-1]
    threshold = ordered[wanted - 1]
    if ordered[wanted] == threshold:  # a tie across the cut: keep the tied group on the edge
        return math.nextafter(threshold, math.inf)
    return threshold


class _Fitted(_Router):
    """Shared plumbing: the train split, the edge's answers to it, the fit's record."""

    modes = ("inference-then-mining",)

    def __init__(self, cloud_share: float | None = None, **params: Any) -> None:
        super().__init__(**params)
        if cloud_share is not None and not 0.0 <= float(cloud_share) <= 1.0:
            raise ConfigError(f"{type(self).__name__} cloud_share must be in [0, 1], "
                              f"got {cloud_share!r}")
        self.cloud_share = None if cloud_share is None else float(cloud_share)
        self.fit_record: dict[str, Any] = {}

    def bind(self, ctx: Any) -> None:
        super().bind(ctx)
        train = list(getattr(ctx, "train_records", None) or [])
        name = type(self).__name__
        if not train:
            raise ConfigError(f"{name} fits on the train split, and this job has none",
                              hint="add a train_index (tasks other than the test split's) to "
                                   "the testenv's dataset")
        test_ids = {str(r.get("task_id")) for r in ctx.records}
        shared = sorted(str(r.get("task_id")) for r in train if str(r.get("task_id")) in test_ids)
        if shared:
            raise ConfigError(f"{name}: the train split shares {len(shared)} task(s) with the "
                              f"test split (e.g. {shared[0]})",
                              hint="a router fitted on the tasks it is scored on overstates it")
        started = time.perf_counter()
        prefetch = getattr(ctx.edgemodel, "prefetch", None)
        if callable(prefetch):  # the train answers side by side, then one by one from the cache
            prefetch(train)
        answers = [ctx.edgemodel.answer(record, "edge") for record in train]
        self.fit(train, answers)
        self.fit_record.update(router=name, train_tasks=len(train),
                               target_cloud_share=self.cloud_share,
                               fit_s=round(time.perf_counter() - started, 3))
        (ctx.case_dir / ROUTER_FILE).write_text(json.dumps(self.fit_record, indent=1) + "\n",
                                               encoding="utf-8")
        logger.info("%s fitted on %d train tasks: %s of them to the cloud", name, len(train),
                    self.fit_record.get("train_cloud_share"))

    def fit(self, train: list[dict[str, Any]], answers: list[dict[str, Any]]) -> None:
        raise NotImplementedError


class CalibratedConfidence(_Fitted):
    """A confidence threshold that sends ``cloud_share`` of the train tasks to the cloud."""

    def __init__(self, cloud_share: float = 0.3, statistic: str = "mean", **params: Any) -> None:
        super().__init__(cloud_share=cloud_share, **params)
        if statistic not in ("mean", "min"):
            raise ConfigError(f"CalibratedConfidence statistic must be 'mean' or 'min', "
                              f"got {statistic!r}")
        self.statistic = statistic
        self.threshold = -math.inf

    def _value(self, answer: Mapping[str, Any]) -> float | None:
        value = answer.get(f"{self.statistic}_logprob") if isinstance(answer, Mapping) else None
        return None if value is None else float(value)

    def fit(self, train: list[dict[str, Any]], answers: list[dict[str, Any]]) -> None:
        values = [self._value(a) for a in answers]
        known = [v for v in values if v is not None]
        # the lowest confidences go up: threshold on the negated values
        share = float(self.cloud_share or 0.0)
        unknown = len(values) - len(known)  # these always go up
        room = max(0.0, share - unknown / len(values)) * len(values) / max(1, len(known))
        self.threshold = -share_threshold([-v for v in known], room) if known else -math.inf
        sent = unknown + sum(1 for v in known if v < self.threshold)
        self.fit_record.update(statistic=self.statistic, threshold=self.threshold,
                               no_logprobs=unknown,
                               train_cloud_share=round(sent / len(values), 4))

    def decide(self, data: Any = None) -> bool:
        value = self._value(data) if isinstance(data, Mapping) else None
        if value is None:
            self._count("no_logprobs")
            return True
        return value < self.threshold


class LearnedRouter(_Fitted):
    """A logistic model of "the edge's answer fails" over the module docstring's features."""

    def __init__(self, cloud_share: float | None = None, l2: float = 1.0,
                 **params: Any) -> None:
        super().__init__(cloud_share=cloud_share, **params)
        self.l2 = float(l2)
        self.weights = np.zeros(len(FEATURES) + 1)
        self.mean = np.zeros(len(FEATURES))
        self.scale = np.ones(len(FEATURES))
        self.medians = {"mean_logprob": 0.0, "min_logprob": 0.0}
        self.threshold = 0.5

    def _examples(self, records: list[dict[str, Any]], answers: list[dict[str, Any]]
                  ) -> list[float | None]:
        """Per task: 1.0/0.0 when its program passes/fails the prompt's examples (run in the
        sandbox, all at once), None when the prompt states none."""
        checks = [(i, check) for i, record in enumerate(records)
                  if (check := examples_check(record)) is not None]
        found: list[float | None] = [None] * len(records)
        if checks:
            passed = passes([check for _, check in checks],
                            [_as_prediction(answers[i]) for i, _ in checks],
                            self.ctx.sandbox, self.ctx.cache_dir)
            for (i, _), ok in zip(checks, passed):
                found[i] = 1.0 if ok else 0.0
        return found

    def _features(self, record: Mapping[str, Any], answer: Mapping[str, Any],
                  examples: float | None) -> list[float]:
        mean, low = answer.get("mean_logprob"), answer.get("min_logprob")
        code = str(((answer.get("samples") or [{}])[0] or {}).get("code") or "")
        return [float(mean) if mean is not None else self.medians["mean_logprob"],
                float(low) if low is not None else self.medians["min_logprob"],
                1.0 if mean is None else 0.0,
                examples if examples is not None else 0.0,
                1.0 if examples is None else 0.0,
                math.log1p(len(str(record.get("prompt") or ""))),
                math.log1p(len(code))]

    def _probability(self, row: Sequence[float]) -> float:
        z = (np.asarray(row) - self.mean) / self.scale
        return float(1.0 / (1.0 + math.exp(-float(np.clip(self.weights[0] + z @ self.weights[1:],
                                                          -30, 30)))))

    def fit(self, train: list[dict[str, Any]], answers: list[dict[str, Any]]) -> None:
        for name in ("mean_logprob", "min_logprob"):
            known = [float(a[name]) for a in answers if a.get(name) is not None]
            self.medians[name] = float(np.median(known)) if known else 0.0
        graded = passes(train, [_as_prediction(a) for a in answers], self.ctx.sandbox,
                        self.ctx.cache_dir)
        fails = np.array([0.0 if ok else 1.0 for ok in graded])
        examples = self._examples(train, answers)
        rows = np.array([self._features(r, a, e) for r, a, e in zip(train, answers, examples)])
        self.mean = rows.mean(axis=0)
        self.scale = np.where(rows.std(axis=0) > 1e-12, rows.std(axis=0), 1.0)
        self.weights = fit_logistic((rows - self.mean) / self.scale, fails, self.l2)
        scores = [self._probability(r) for r in rows]
        self.threshold = 0.5 if self.cloud_share is None else \
            share_threshold(scores, self.cloud_share)
        sent = sum(1 for s in scores if s >= self.threshold)
        self.fit_record.update(
            features=list(FEATURES), mean=self.mean.round(6).tolist(),
            scale=self.scale.round(6).tolist(), weights=self.weights.round(6).tolist(),
            medians=self.medians, threshold=self.threshold, l2=self.l2,
            train_edge_fail_rate=round(float(fails.mean()), 4),
            train_accuracy=round(float(np.mean([(s >= 0.5) == bool(f)
                                                for s, f in zip(scores, fails)])), 4),
            train_cloud_share=round(sent / len(train), 4))

    def decide(self, data: Any = None) -> bool:
        record = self._record()
        answer = _as_prediction(data)
        started = time.perf_counter()
        examples = self._examples([record], [answer])[0]
        self._cost(started)
        self._count("no_examples" if examples is None else
                    "examples_passed" if examples else "examples_failed")
        return self._probability(self._features(record, answer, examples)) >= self.threshold
