"""``tokens_per_s`` says what it is (issue 45, point 4): generated tokens over generation wall
time, the time during which some model call was running; calls side by side count once, so
several model instances show their combined throughput rather than each call's speed."""
from __future__ import annotations

import math

from core.testcasecontroller.metrics.edge_cost import edge_cost, generation_wall_s


def _pred(*samples: dict) -> dict:
    return {"task_id": "t", "samples": list(samples)}


def test_generation_wall_time_is_the_union_of_the_calls() -> None:
    assert generation_wall_s([(10.0, 4.0), (12.0, 4.0), (20.0, 2.0)]) == 8.0   # [6,12] + [18,20]
    assert generation_wall_s([(None, 3.0), (5.0, 5.0)]) == 8.0                 # old records add
    assert generation_wall_s([]) == 0.0


def test_two_calls_side_by_side_count_once() -> None:
    side_by_side = [_pred({"completion_tokens": 50, "latency_s": 5.0, "finished_at": 100.0}),
                    _pred({"completion_tokens": 50, "latency_s": 5.0, "finished_at": 100.0})]
    one_after_the_other = [_pred({"completion_tokens": 50, "latency_s": 5.0, "finished_at": 100.0}),
                           _pred({"completion_tokens": 50, "latency_s": 5.0, "finished_at": 105.0})]
    for preds, speed in ((side_by_side, 20.0), (one_after_the_other, 10.0)):
        result = edge_cost(None, preds)
        assert (result["latency_s"], result["tokens_per_s"]) == (5.0, speed)
        assert math.isnan(result["truncated"])  # no finish reason reported
    # failed calls and answers without token counts (gold controls) say nothing of speed
    assert math.isnan(edge_cost(None, [_pred({"latency_s": 0.0})])["tokens_per_s"])
    assert edge_cost(None, [_pred({"error": "down", "latency_s": 9.0})])["latency_s"] != 9.0


def test_replies_cut_at_the_token_budget_are_counted() -> None:
    """``truncated`` counts the samples whose backend stopped them at ``max_tokens``; a failed
    call is not a reply; with no finish reason reported at all the count is unknown (NaN), not
    0, so a gold control's row does not claim that nothing was cut."""
    preds = [_pred({"finish_reason": "length", "completion_tokens": 8, "latency_s": 1.0}),
             _pred({"finish_reason": "stop", "completion_tokens": 3, "latency_s": 1.0},
                   {"finish_reason": "length", "completion_tokens": 8, "latency_s": 1.0}),
             _pred({"error": "down", "finish_reason": "length", "latency_s": 1.0}),
             _pred({"latency_s": 0.0})]
    assert edge_cost(None, preds)["truncated"] == 2
    assert edge_cost(None, [_pred({"finish_reason": "stop"})])["truncated"] == 0
    assert math.isnan(edge_cost(None, [_pred({"latency_s": 0.0})])["truncated"])
