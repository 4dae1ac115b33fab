"""Metrics of the cloud-edge scenario: correctness against cloud traffic, from one function.

``cloudedge`` (alias, testenv ``metrics:``) reads the ``jointinference`` predictions
``[is_hard, result, edge_result, cloud_result]`` of this project's code models and returns:

=========================== =================================================================
column                      meaning
=========================== =================================================================
``pass@1``                  the final answers (``result``) on the hidden tests, graded in the
                            sandbox (boundary tier by default), as the codegen kind grades
``cloud_share``             share of tasks the router sent to the cloud
``edge_prompt_tokens`` ...  mean tokens per task: edge and cloud, prompt and completion
``edge_s``, ``check_s``,    mean seconds per task: edge generation, the router's own checks
``cloud_s``, ``latency_s``  (sandbox runs), cloud generation, and their sum with ``link_s``
                            (end to end)
``link_s``, ``link_kb``     for an edge model on an edge node (the ``edge_node`` generator):
                            mean seconds per task its answers spent crossing the link (round
                            trip beyond the node's own time) and mean KB per task that crossed
                            it (request and answer); 0 for an edge model in this process
``edge_lost``               share of tasks whose edge node was lost before it answered (each
                            went to the cloud; see the jointinference paradigm)
``oracle_pass@1``           share of tasks that the edge or the cloud answers correctly: the
                            best any router can do with these two answers
``regret``                  ``oracle_pass@1 - pass@1``
``train_cloud_share``       for a router fitted on the train split
                            (:mod:`core.scenarios.cloudedge.learned`), the share of the *train*
                            tasks it sends to the cloud (its target); NaN for other routers.
                            ``cloud_share`` is what it reached on the test split
=========================== =================================================================

``pass@1``, ``cloud_share``, the token and seconds columns, ``oracle_pass@1`` and ``regret``
record their per-task values (the report's intervals and paired tests).

Generation seconds are those measured when each answer was made (a cached answer keeps its
cost). ``oracle_pass@1`` and ``regret`` need both models' answer to every task; they come from
the job's shared answers (``answers.jsonl``), so they are known once any router of the job made
both passes (``CloudOnly`` and ``EdgeOnly``, or ``OracleRouter``), else NaN with a log line.
"""
from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from core.generation.cache_key import GenerationCache

logger = logging.getLogger(__name__)

COLUMNS = ("pass@1", "cloud_share", "edge_prompt_tokens", "edge_completion_tokens",
           "cloud_prompt_tokens", "cloud_completion_tokens", "edge_s", "link_s", "check_s",
           "cloud_s", "latency_s", "link_kb", "edge_lost", "oracle_pass@1", "regret",
           "train_cloud_share")


def _usage(answer: Any, name: str) -> float:
    if not isinstance(answer, dict):
        return 0.0
    return float((answer.get("usage") or {}).get(name) or 0)


def _seconds(answer: Any, name: str = "latency_s") -> float:
    if not isinstance(answer, dict):
        return 0.0
    return float((answer.get("perf") or {}).get(name) or 0.0)


def _link_kb(answer: Any) -> float:
    return (_seconds(answer, "bytes_up") + _seconds(answer, "bytes_down")) / 1000.0


def _lost(answer: Any) -> float:
    return float(isinstance(answer, dict) and bool(answer.get("lost")))

def _graded(records: list[dict[str, Any]], answers: list[Any], context: Any,
            workspace: Path) -> list[bool]:
    from core.scenarios.cloudedge.grading import passes

    return passes(records, answers, context.sandbox, workspace,
                  getattr(context, "show_progress", True),
                  tuple(getattr(context, "code_hooks", ())))


def cloudedge(y_true: Any, y_pred: Any, context: Any = None) -> dict[str, Any]:
    """The columns of the module docstring for one test case."""
    preds = list(y_pred)
    records = list(context.records())
    n = len(preds)
    if n == 0:
        return {c: math.nan for c in COLUMNS}
    workspace = Path(context.workspace)
    final = [p[1] for p in preds]
    passed = _graded(records, final, context, workspace)
    edge = [p[2] for p in preds]
    cloud = [p[3] for p in preds]
    row: dict[str, Any] = {
        "pass@1": round(sum(passed) / n, 4),
        "cloud_share": round(sum(bool(p[0]) for p in preds) / n, 4),
        "edge_prompt_tokens": round(sum(_usage(a, "prompt_tokens") for a in edge) / n, 1),
        "edge_completion_tokens": round(sum(_usage(a, "completion_tokens") for a in edge) / n, 1),
        "cloud_prompt_tokens": round(sum(_usage(a, "prompt_tokens") for a in cloud) / n, 1),
        "cloud_completion_tokens": round(sum(_usage(a, "completion_tokens") for a in cloud) / n, 1),
        "edge_s": round(sum(_seconds(a) for a in edge) / n, 4),
        "link_s": round(sum(_seconds(a, "link_s") for a in edge) / n, 4),
        "check_s": round(sum(_seconds(a, "check_s") for a in final) / n, 4),
        "cloud_s": round(sum(_seconds(a) for a in cloud) / n, 4),
    }
    row["latency_s"] = round(row["edge_s"] + row["link_s"] + row["check_s"] + row["cloud_s"], 4)
    row["link_kb"] = round(sum(_link_kb(a) for a in edge) / n, 3)
    row["edge_lost"] = round(sum(_lost(a) for a in edge) / n, 4)
    per_task = getattr(context, "per_task", None)
    if per_task is not None:  # the report's intervals and paired tests (means over tasks)
        for record, ok, pred in zip(records, passed, preds):
            task = str(record["task_id"])
            per_task.add("pass@1", task, float(ok), "tasks")
            per_task.add("cloud_share", task, float(bool(pred[0])), "tasks")
            for role, answer in (("edge", pred[2]), ("cloud", pred[3])):
                for kind in ("prompt_tokens", "completion_tokens"):
                    per_task.add(f"{role}_{kind}", task, _usage(answer, kind), "tasks")
                per_task.add(f"{role}_s", task, _seconds(answer), "tasks")
            per_task.add("check_s", task, _seconds(pred[1], "check_s"), "tasks")
            per_task.add("link_s", task, _seconds(pred[2], "link_s"), "tasks")
            per_task.add("edge_lost", task, _lost(pred[2]), "tasks")
    either = _oracle(records, context, workspace)
    if either is None:
        row["oracle_pass@1"] = row["regret"] = math.nan
    else:
        row["oracle_pass@1"] = round(sum(either) / n, 4)
        row["regret"] = round(row["oracle_pass@1"] - row["pass@1"], 4)
        if per_task is not None:
            for record, ok, best in zip(records, passed, either):
                task = str(record["task_id"])
                per_task.add("oracle_pass@1", task, float(best), "tasks")
                per_task.add("regret", task, float(best) - float(ok), "tasks")
    row["train_cloud_share"] = _train_share(workspace)
    return row


def _train_share(workspace: Path) -> float:
    """The train split's cloud share of a fitted router (its ``router.json``), else NaN."""
    from core.scenarios.cloudedge.learned import ROUTER_FILE

    try:
        return float(json.loads((workspace / ROUTER_FILE).read_text())["train_cloud_share"])
    except (OSError, ValueError, KeyError, TypeError):
        return math.nan


cloudedge.columns = lambda: list(COLUMNS)  # type: ignore[attr-defined]


def _oracle(records: list[dict[str, Any]], context: Any, workspace: Path) -> list[bool] | None:
    """Per task: whether the case's edge or cloud model answers it correctly, from the job's
    shared answers; None when either model has not answered every task yet."""
    from core.testcasecontroller.predictions import JOINT_CACHE_DIR
    from core.scenarios.cloudedge.models import ANSWERS_FILE, CACHE_FILE, MODELS_FILE

    cache_dir = workspace.parent.parent / JOINT_CACHE_DIR
    try:
        models = json.loads((workspace / MODELS_FILE).read_text())
        lines = (cache_dir / ANSWERS_FILE).read_text(encoding="utf-8").splitlines()
    except (OSError, ValueError):
        logger.info("oracle_pass@1 and regret: no shared answers (not this project's code models)")
        return None
    keys: dict[tuple[str, str], str] = {}
    for line in lines:
        try:
            entry = json.loads(line)
            keys[(entry["model"], entry["task_id"])] = entry["key"]
        except (ValueError, KeyError, TypeError):
            continue
    cache = GenerationCache(cache_dir / CACHE_FILE)
    answers: dict[str, list[Any]] = {}
    for role in ("edge", "cloud"):
        ident = str((models.get(role) or {}).get("id"))
        found = []
        for record in records:
            key = keys.get((ident, str(record["task_id"])))
            gen = cache.get(key) if key else None
            if gen is None:
                logger.info("oracle_pass@1 and regret: the %s model has not answered %s yet "
                            "(run a CloudOnly and an EdgeOnly case, or OracleRouter, in this job)",
                            role, record["task_id"])
                return None
            found.append({"samples": [gen.to_dict()]})
        answers[role] = found
    edge_ok = _graded(records, answers["edge"], context, cache_dir)
    cloud_ok = _graded(records, answers["cloud"], context, cache_dir)
    return [e or c for e, c in zip(edge_ok, cloud_ok)]
