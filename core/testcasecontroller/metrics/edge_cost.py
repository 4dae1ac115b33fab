"""Generation cost of any task kind: latency per sample, decoding throughput, and how many
replies the token budget cut.

Predictions are the per-task ``{"task_id", "samples": [{"latency_s", "completion_tokens",
"finished_at", "error", ...}]}`` every generator in :mod:`core.generation` writes; this metric
reads nothing kind-specific.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def generation_wall_s(calls: Sequence[tuple[float | None, float]]) -> float:
    """Seconds during which at least one of ``calls`` was running: the union of the intervals
    ``[finished_at - latency_s, finished_at]``, so calls that ran side by side count once.
    A call without ``finished_at`` (recorded before it existed) adds its whole latency."""
    spans = sorted((end - max(0.0, latency), end) for end, latency in calls if end is not None)
    total = sum(max(0.0, latency) for end, latency in calls if end is None)
    start = stop = None
    for begin, end in spans:
        if stop is None or begin > stop:
            if stop is not None and start is not None:
                total += stop - start
            start, stop = begin, end
        else:
            stop = max(stop, end)
    if stop is not None and start is not None:
        total += stop - start
    return total


def edge_cost(y_true: Any, y_pred: Sequence[Any], context: Any = None) -> dict[str, float]:
    """Generation latency per sample, generation throughput and replies cut by the token
    budget (NaN when not reported).

    ``latency_s``: mean wall time of one sample's call. ``tokens_per_s``: generated
    (completion) tokens over generation wall time, the time during which some call was
    running (:func:`generation_wall_s`; concurrent calls count once, so several model instances
    decoding side by side show their combined throughput, and a resumed run counts each
    call's own time). ``truncated``: samples whose reply stopped at ``max_tokens`` (the
    backend's ``finish_reason`` is ``length``): what was graded is a cut reply, so a kind whose
    prompt asks for whole files scores the budget, not the model, on those (NaN when no sample
    reports a finish reason: gold controls, recorded replies). ``context`` is unused; declaring it gets the stored predictions streamed
    from disk instead of a list of all of them (see
    :class:`~core.testcasecontroller.metrics.calling.PlainPredictions`).
    """
    latency = 0.0
    tokens = 0
    samples = 0
    counted_tokens = False
    calls: list[tuple[float | None, float]] = []
    truncated = 0
    reported_finish = False
    # latency_s is a mean over samples: its per-task values give it an interval (tokens_per_s
    # is a ratio of sums, not a mean, so it has none)
    per_task = getattr(context, "per_task", None)
    for pred in y_pred:
        for sample in pred.get("samples", []) if isinstance(pred, dict) else []:
            if sample.get("error"):
                continue
            samples += 1
            seconds = float(sample.get("latency_s") or 0.0)
            latency += seconds
            if per_task is not None:
                per_task.add("latency_s", str(pred.get("task_id")), seconds)
            finished = sample.get("finished_at")
            calls.append((float(finished) if isinstance(finished, (int, float)) else None, seconds))
            if sample.get("finish_reason") is not None:
                reported_finish = True
                truncated += sample["finish_reason"] == "length"
            if sample.get("completion_tokens") is not None:
                tokens += int(sample["completion_tokens"])
                counted_tokens = True
    wall = generation_wall_s(calls)
    return {
        "latency_s": round(latency / samples, 4) if samples else math.nan,
        "tokens_per_s": round(tokens / wall, 2) if counted_tokens and wall > 0 else math.nan,
        "truncated": truncated if reported_finish else math.nan,
    }


edge_cost.columns = lambda: ["latency_s", "tokens_per_s", "truncated"]  # type: ignore[attr-defined]
