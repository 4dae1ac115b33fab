"""The judge's control check: before its scores count, a judge must rank known-good answers
above known-bad ones on the run's own tasks.

**Control set.** Up to ``tasks`` records of the test set (chosen by the SHA-256 of their ids,
so the choice is stable and spread over the file). For each, three answers are judged with the
same rubric and prompts as the samples:

* ``reference``: the record's reference answer (what a perfect model replies);
* ``unrelated``: the reference answer of another control task (the next one in control
  order whose reference differs) -- fluent, on-topic for *some* task, wrong for this one;
* ``broken``: the reference's words shuffled (a fixed permutation seeded by the task id), so
  the vocabulary matches and the meaning is gone; a reference of fewer than three distinct
  words gives an empty answer instead.

**Statistic.** Every (reference, control) pair of a task gives the reference 1 when its rubric
score (mean over dimensions) is above the control's, 0.5 when equal, 0 when below *or when
either reply did not parse or the call failed* (a judge that cannot answer has not shown it can
tell them apart). With ``pairwise`` the judge is also asked "reference or control?" in both
orders, each verdict giving the reference 1 / 0.5 (TIE) / 0 (control preferred or unparsed).
A task's value against one control is the mean of its pair values; against each control, the
mean over tasks is the probability that the judge ranks the reference above that control (ties
counted half: 0.5 is chance, 1 is perfect), with its 95% percentile bootstrap interval over
tasks (:func:`core.scenarios.agreement.bootstrap_interval`, fixed seed). ``auc`` (the
``judge_control_auc`` column) is the same over both controls together; ``low`` (the
``judge_control_low`` column) is the smaller of the two per-control lower bounds.

**Pass criterion.** At least :data:`MIN_CONTROL_TASKS` control tasks and, *against each
control*, a lower bound ``>= min_low`` (default :data:`DEFAULT_MIN_LOW` = 0.7: the reference is
ranked clearly above the controls, not merely above chance). A judge that gives every answer
the same score has 0.5 and fails; so does one that grades the unrelated answer down but gives
the shuffled words of the reference full marks (it does not read the answer). Passing is
necessary, not sufficient, for meaningful scores: the controls are easy cases; agreement with
human raters (``judge_kappa``) says more.
"""
from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.common.errors import MetricInvalid
from core.generation.types import DecodingSettings, GenerationRequest
from core.scenarios.agreement import bootstrap_interval, rounded
from core.scenarios.base import TaskKind
from core.scenarios.rubric import (Rubric, pairwise_messages, parse_preference, parse_scores,
                                   score_messages)

CONTROLS = ("unrelated", "broken")
MIN_CONTROL_TASKS = 3
DEFAULT_CONTROL_TASKS = 6
DEFAULT_MIN_LOW = 0.7
CONTROL_FILE = "judge_controls.json"


class JudgeInvalid(MetricInvalid):
    """The judge failed its control check; its columns are not scores.

    A :class:`~core.common.errors.MetricInvalid`: the test case keeps its other metrics, and the
    runner shows the judge's columns as ``invalid`` (the reason in ``case.json``
    ``metric_errors`` and under the report's table), keeping the check's own figures
    (``judge_valid`` 0, ``judge_control_auc``, ``judge_control_low``) visible."""


@dataclass(frozen=True)
class ControlTask:
    """One record of the control set with the answers the judge is asked about."""

    task_id: str
    view: dict[str, str]
    answers: dict[str, str]
    """``reference`` and each control name -> the answer text."""


@dataclass
class ControlResult:
    """Outcome of the check (module docstring); ``to_dict`` is what ``judge_controls.json``
    holds."""

    tasks: int
    pairs: int
    auc: float
    """Overall: the mean over tasks of the per-task value (both controls)."""
    low: float
    """The smallest of the per-control lower bounds (what the criterion compares)."""
    high: float
    """Upper bound of the overall value."""
    min_low: float
    valid: bool
    reason: str
    controls: dict[str, dict[str, float]] = field(default_factory=dict)
    """control name -> ``auc``, ``low``, ``high`` of the reference against that control."""
    per_task: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "reason": self.reason, "tasks": self.tasks,
                "pairs": self.pairs, "auc": self.auc, "low": self.low, "high": self.high,
                "min_low": self.min_low, "criterion": f"{MIN_CONTROL_TASKS}+ tasks and, against "
                f"each control, the 95% bootstrap lower bound of the reference's win rate >= "
                f"{self.min_low}", "controls": self.controls, "per_task": self.per_task}


def broken_answer(text: str, task_id: str) -> str:
    """The reference's words in a fixed shuffled order (seeded by ``task_id``); the empty
    string when it has fewer than three distinct words (nothing meaningful to shuffle)."""
    words = text.split()
    if len(set(words)) < 3:
        return ""
    seed = int(hashlib.sha256(task_id.encode("utf-8")).hexdigest()[:16], 16)
    shuffled = list(words)
    rng = random.Random(seed)
    for _ in range(5):
        rng.shuffle(shuffled)
        if shuffled != words:
            break
    else:
        shuffled = words[::-1]
    return " ".join(shuffled)


def build_controls(kind: TaskKind, records: Iterable[Mapping[str, Any]],
                   tasks: int = DEFAULT_CONTROL_TASKS) -> list[ControlTask]:
    """The control set of a test set (module docstring); fewer than two records with
    distinct references give an empty list (no unrelated answer exists)."""
    chosen: dict[str, dict[str, Any]] = {}
    for raw in records:
        rec = kind.validate(raw)
        chosen.setdefault(rec["id"], rec)
    order = sorted(chosen, key=lambda i: hashlib.sha256(i.encode("utf-8")).hexdigest())
    picked = [chosen[i] for i in order[:max(0, tasks)]]
    refs = [kind.answer(kind.judge_view(r)["reference"], r) for r in picked]
    out = []
    for n, rec in enumerate(picked):
        others = [refs[(n + k) % len(picked)] for k in range(1, len(picked))]
        unrelated = next((o for o in others if o.strip() != refs[n].strip()), None)
        if unrelated is None:
            continue
        out.append(ControlTask(rec["id"], kind.judge_view(rec),
                               {"reference": refs[n], "unrelated": unrelated,
                                "broken": broken_answer(refs[n], rec["id"])}))
    return out if len(out) >= 2 else []


def request_id(task_id: str, answer: str, what: str) -> str:
    """Generation id of a control call; independent of the test case, so test cases that
    share a judge share its control answers."""
    return f"control/{task_id}/{answer}/{what}"


def control_requests(rubric: Rubric, controls: Sequence[ControlTask],
                     decoding: DecodingSettings, pairwise: bool) -> list[GenerationRequest]:
    """Every judge call of the control check."""
    out: list[GenerationRequest] = []
    for c in controls:
        for name, answer in c.answers.items():
            out.append(GenerationRequest(
                request_id(c.task_id, name, "score"), "", mode="chat", decoding=decoding,
                messages=tuple(score_messages(rubric, c.view, answer))))
        if pairwise:
            ref = c.answers["reference"]
            for name in CONTROLS:
                bad = c.answers[name]
                for what, (a, b) in (("ab", (ref, bad)), ("ba", (bad, ref))):
                    out.append(GenerationRequest(
                        request_id(c.task_id, name, what), "", mode="chat", decoding=decoding,
                        messages=tuple(pairwise_messages(rubric, c.view, a, b))))
    return out


def _mean_score(reply: str | None, rubric: Rubric) -> float | None:
    scores = parse_scores(reply, rubric) if reply is not None else None
    return None if scores is None else sum(scores.values()) / len(scores)


def _order_value(reply: str | None, reference_is: str) -> float:
    pref = parse_preference(reply) if reply is not None else None
    if pref is None:
        return 0.0
    return 0.5 if pref == "TIE" else float(pref == reference_is)


def _check(values: Sequence[float]) -> dict[str, float]:
    """Mean of per-task values and its 95% bootstrap interval over tasks, rounded."""
    auc, low, high = bootstrap_interval(list(values), lambda v: sum(v) / len(v))
    return {"auc": rounded(auc), "low": rounded(low), "high": rounded(high)}


def evaluate_controls(rubric: Rubric, controls: Sequence[ControlTask],
                      replies: Mapping[str, str], pairwise: bool,
                      min_low: float = DEFAULT_MIN_LOW) -> ControlResult:
    """The statistic and the verdict of the check (module docstring); ``replies`` maps
    control request ids to the judge's raw replies (a missing id is a failed call)."""
    per_task: list[dict[str, Any]] = []
    per_control: dict[str, list[float]] = {name: [] for name in CONTROLS}
    pairs = 0
    for c in controls:
        ref = _mean_score(replies.get(request_id(c.task_id, "reference", "score")), rubric)
        row: dict[str, Any] = {"task_id": c.task_id, "reference": ref}
        for name in CONTROLS:
            bad = _mean_score(replies.get(request_id(c.task_id, name, "score")), rubric)
            row[name] = bad
            wins = [0.0 if ref is None or bad is None else
                    1.0 if ref > bad else 0.5 if ref == bad else 0.0]
            if pairwise:
                wins += [_order_value(replies.get(request_id(c.task_id, name, "ab")), "A"),
                         _order_value(replies.get(request_id(c.task_id, name, "ba")), "B")]
                row[f"{name}_pairwise"] = wins[1:]
            pairs += len(wins)
            row[f"{name}_value"] = sum(wins) / len(wins)
            per_control[name].append(row[f"{name}_value"])
        row["value"] = sum(row[f"{n}_value"] for n in CONTROLS) / len(CONTROLS)
        per_task.append(row)
    overall = _check([row["value"] for row in per_task])
    checks = {name: _check(values) for name, values in per_control.items()}
    low = min((c["low"] for c in checks.values()), default=math.nan)
    n = len(per_task)
    if n < MIN_CONTROL_TASKS:
        valid = False
        reason = (f"too few tasks for the judge's control check ({n}, needs "
                  f"{MIN_CONTROL_TASKS} with distinct reference answers)")
    else:
        failing = [name for name, c in checks.items() if not c["low"] >= min_low]
        valid = not failing
        detail = "; ".join(f"{name} {c['auc']:.2f} (95% lower bound {c['low']:.2f})"
                           for name, c in checks.items())
        reason = (f"the judge {'passed' if valid else 'failed'} its control check: it ranked "
                  f"the reference answers above unrelated and broken answers with probability "
                  f"{overall['auc']:.2f} over {pairs} control pairs of {n} tasks; per control: "
                  f"{detail}; each lower bound needs >= {min_low:.2f}"
                  + (f" ({', '.join(failing)} not)" if failing else ""))
    return ControlResult(n, pairs, overall["auc"], rounded(low), overall["high"], min_low,
                         valid, reason, checks, per_task)
