"""Tasks side by side (``task_workers``): each task's tries and prediction are the same as when
the tasks run one at a time, predictions come back in the records' order, failures are left for
the next run, and the stores written from several threads hold whole lines.

The loop runs with the replay generator (recorded replies, so the outcome is known) and the real
sandbox; ``_each_task`` is also driven directly to see that two tasks really overlap."""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from core.common.errors import ConfigError
from core.scenarios.selfalign.loop import GenerationFailed
from core.scenarios.selfalign.model import SelfAlignModel, _each_task
from core.scenarios.selfalign.store import TRIES_FILE

TASKS = [{"task_id": f"toy/add{n}", "entry_point": f"add{n}",
          "prompt": f"def add{n}(x: int) -> int:\n    \"\"\"x plus {n}\"\"\"\n",
          "canonical_solution": f"    return x + {n}\n",
          "test": f"def check(candidate):\n    assert candidate(1) == {1 + n}\n"}
         for n in range(1, 7)]


def _replies(n: int) -> list[dict[str, Any]]:
    """Try 1 is wrong for even n (its tests catch it), try 2 right; odd n right at try 1."""
    good = {"code": f"def add{n}(x: int) -> int:\n    return x + {n}\n",
            "tests": [f"assert add{n}(1) == {1 + n}", f"assert add{n}(0) == {n}"]}
    wrong = {"code": f"def add{n}(x: int) -> int:\n    return x - {n}\n",
             "tests": good["tests"]}
    return [wrong, good] if n % 2 == 0 else [good]


@dataclass
class _Context:
    """The framework's predict context, reduced to what the model uses."""

    records: list[dict[str, Any]]
    workspace: Path
    saved: dict[int, Any] = field(default_factory=dict)
    retry: set[int] = field(default_factory=set)
    show_progress: bool = False
    final: bool = True

    def save(self, position: int, prediction: Any) -> None:
        assert threading.current_thread() is threading.main_thread()
        self.saved[position] = prediction

    def retry_later(self, position: int) -> None:
        self.retry.add(position)


def _run(tmp_path: Path, name: str, workers: int) -> tuple[list[dict[str, Any]], Path]:
    samples = tmp_path / "replies.jsonl"
    with samples.open("w") as fh:
        for n, task in enumerate(TASKS, 1):
            for t, reply in enumerate(_replies(n), 1):
                fh.write(json.dumps({"task_id": f"{task['task_id']}#try{t}",
                                     "solution": json.dumps(reply)}) + "\n")
    workspace = tmp_path / name
    model = SelfAlignModel(generator="replay", samples_path=str(samples), max_tries=3,
                           generate="code", test_timeout=5, min_isolation="process",
                           task_workers=workers)
    context = _Context(list(TASKS), workspace)
    predictions = model.predict([t["prompt"] for t in TASKS], context=context)
    assert sorted(context.saved) == list(range(len(TASKS))) and not context.retry
    return predictions, workspace


def test_side_by_side_tasks_give_what_one_at_a_time_gives(tmp_path: Path) -> None:
    alone, ws1 = _run(tmp_path, "one", 1)
    together, ws2 = _run(tmp_path, "two", 3)
    assert [p["task_id"] for p in together] == [t["task_id"] for t in TASKS]
    assert together == alone
    assert [p["selfalign"]["aligned_at"] for p in together] == [1, 2, 1, 2, 1, 2]

    def tries(ws: Path) -> dict[tuple[str, int], dict[str, Any]]:
        lines = [json.loads(line) for line in (ws / TRIES_FILE).read_text().splitlines()]
        return {(r["task_id"], r["try"]): {k: r[k] for k in ("key", "code", "aligned")}
                for r in lines}
    assert tries(ws2) == tries(ws1) and len(tries(ws2)) == 9


def test_each_task_overlaps_tasks_keeps_order_and_leaves_failures(tmp_path: Path) -> None:
    running, peak = [0], [0]
    lock = threading.Lock()

    def one(record: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        try:
            time.sleep(0.05 * (6 - int(record["task_id"][-1])))  # later tasks finish first
            if record["task_id"].endswith("3"):
                raise GenerationFailed("server down")
            return {"task_id": record["task_id"], "samples": []}, True
        finally:
            with lock:
                running[0] -= 1

    class _Bar:
        def update(self, n: int) -> None: ...
        def set_postfix_str(self, text: str) -> None: ...

    context = _Context(list(TASKS), tmp_path)
    results, failed = _each_task(list(TASKS), context, _Bar(), one, "ok", workers=2)
    assert peak[0] == 2 and failed == 1 and context.retry == {2}
    assert [r["task_id"] for r in results] == [t["task_id"] for t in TASKS]
    assert "server down" in results[2]["samples"][0]["error"]
    assert sorted(context.saved) == [0, 1, 3, 4, 5]


@pytest.mark.parametrize("value", [0, "2", 1.5, True])
def test_task_workers_must_be_a_positive_integer(value: Any) -> None:
    with pytest.raises(ConfigError, match="task_workers"):
        SelfAlignModel.check_hyperparameters({"task_workers": value})
