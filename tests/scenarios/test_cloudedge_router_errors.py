"""A router's failure on one answer of a jointinference test case (issue 42, run with
``pytest -k hostile``): the answer goes to the cloud with the failure written on it, and the
case goes on to its last item. Through the paradigm's own loop (``run_joint_inference``), the
real ``SelfTests`` router and the sandbox; the two models are stand-ins whose answers are known.

On six HumanEval tasks: the edge model's server fails while writing the tests of one task, the
sandbox fails on another's program (a :class:`SandboxInfraError`, the one failure the unit
runner raises), and the other four are routed by their tests as usual.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.scenarios.cloudedge.routers import SelfTests
from core.scenarios.selfalign.sandbox import SandboxInfraError
from core.testcasecontroller.algorithm.paradigm.joint_inference import (JointInferenceInputs,
                                                                         run_joint_inference)
from core.testenvmanager.dataset.parsers import JsonlDataset

BENCH = Path(__file__).resolve().parents[2] / "examples" / "smart_coding" / "smart_coding_learning_bench"
SUBSET = BENCH / "codegen" / "data" / "humaneval_subset.jsonl"


@dataclass
class _Generation:
    raw_output: str
    error: str | None = None
    latency_s: float = 0.0


class _Edge:
    """Answers the canonical solution for even tasks and ``return None`` for odd ones; writes
    the task's first hidden assert that calls the function as its test (one the right answer
    passes); its server fails on ``down``."""

    def __init__(self, records: list[dict[str, Any]], down: str) -> None:
        self.records, self.down = records, down
        self.ctx: Any = None

    def bind(self, ctx: Any) -> None:
        self.ctx = ctx

    def predict(self, data: Any, **_kwargs: Any) -> dict[str, Any]:
        record = self.records[self.ctx.current]
        body = record["canonical_solution"] if self.ctx.current % 2 == 0 else "    return None\n"
        return {"samples": [{"code": record["prompt"] + body}]}

    def generate_cached(self, request: Any) -> tuple[_Generation, bool]:
        record = self.records[self.ctx.current]
        if record["task_id"] == self.down:
            raise ConnectionError("the edge model's server did not answer")
        entry = record["entry_point"]
        line = next(s.strip() for s in record["test"].splitlines()
                    if s.strip().startswith("assert") and "candidate(" in s)
        test = line.replace("candidate(", f"{entry}(")
        return _Generation(json.dumps({"tests": [test]})), False


class _Cloud:
    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.records = records
        self.ctx: Any = None

    def bind(self, ctx: Any) -> None:
        self.ctx = ctx

    def inference(self, data: Any, **_kwargs: Any) -> dict[str, Any]:
        record = self.records[self.ctx.current]
        return {"samples": [{"code": record["prompt"] + record["canonical_solution"]}]}


def test_hostile_router_failure_on_one_answer_routes_it_and_the_case_completes(
        tmp_path: Path) -> None:
    records = [r for r in map(json.loads, SUBSET.read_text().splitlines())
               if r["entry_point"] != "find_zero"][:6]  # its test has no one-line assert
    test_file = tmp_path / "tasks.jsonl"
    test_file.write_text("".join(json.dumps(r) + "\n" for r in records))
    down, broken = records[2]["task_id"], records[4]["task_id"]

    class FlakySandbox(SelfTests):
        """SelfTests whose sandbox fails on the program of task ``broken``."""

        def bind(self, ctx: Any) -> None:
            super().bind(ctx)
            run = self.runner.run

            def flaky(program: str, *args: Any, **kwargs: Any) -> Any:
                if program.startswith(records[4]["prompt"]):
                    raise SandboxInfraError("sandbox infra_error: the fork server died")
                return run(program, *args, **kwargs)

            self.runner.run = flaky

    inp = JointInferenceInputs(
        case_dir=tmp_path / "case", cache_dir=tmp_path / "cache",
        test=JsonlDataset(test_file, "test", x_field="prompt", y_field="task_id"),
        make_modules=lambda: {"edgemodel": _Edge(records, down), "cloudmodel": _Cloud(records)},
        router=lambda: (FlakySandbox, {}), router_name="SelfTests",
        mode="inference-then-mining", sandbox={"backend": "local", "workers": 1},
        show_progress=False)
    (tmp_path / "case").mkdir()
    predictions, info = run_joint_inference(inp)
    assert len(predictions) == 6                                  # the case went to its end
    hard = [p[0] for p in predictions]
    # tests written by the edge: the right answers (even) stay, the wrong ones (odd) go up;
    # the two failures go up with the failure on the edge's answer
    assert hard == [False, True, True, True, True, True], hard
    errors = {i: p[2].get("router_error") for i, p in enumerate(predictions)}
    assert "ConnectionError: the edge model's server did not answer" in errors[2]
    assert "SandboxInfraError" in errors[4] and "fork server died" in errors[4]
    assert [i for i, e in errors.items() if e] == [2, 4]
    assert info["routed"] == {"edge": 1, "cloud": 5, "edge_lost": 0}
    # stored with the predictions: a resumed or re-scored case sees it
    stored = (tmp_path / "case" / "predictions.jsonl").read_text()
    assert stored.count("router_error") == 2


class _ThirdPartyRouter:
    """A router of no base class of this project (an upstream-style plug-in) that raises on
    every other item."""

    def __init__(self, **_params: Any) -> None:
        self.calls = 0

    def __call__(self, data: Any = None) -> bool:
        self.calls += 1
        if self.calls % 2 == 0:
            raise RuntimeError(f"router broke on call {self.calls}")
        return False


def test_hostile_third_party_router_failure_routes_the_item_in_both_mining_modes(
        tmp_path: Path) -> None:
    """The paradigm itself catches a router's failure on one item, whatever the router: the
    item goes to the cloud, the error is kept (on the edge's answer in
    ``inference-then-mining``; never written on the test item), and the case completes."""
    records = [json.loads(line) for line in SUBSET.read_text().splitlines()][:4]
    test_file = tmp_path / "tasks.jsonl"
    test_file.write_text("".join(json.dumps(r) + "\n" for r in records))
    for mode in ("inference-then-mining", "mining-then-inference"):
        case = tmp_path / mode
        case.mkdir()
        inp = JointInferenceInputs(
            case_dir=case, cache_dir=tmp_path / "cache",
            test=JsonlDataset(test_file, "test", x_field="prompt", y_field="task_id"),
            make_modules=lambda: {"edgemodel": _Edge(records, down=""), "cloudmodel": _Cloud(records)},
            router=lambda: (_ThirdPartyRouter, {}), router_name="ThirdParty", mode=mode,
            sandbox={"backend": "local", "workers": 1}, show_progress=False)
        predictions, info = run_joint_inference(inp)
        assert [p[0] for p in predictions] == [False, True, False, True], (mode, predictions)
        assert info["routed"] == {"edge": 2, "cloud": 2, "edge_lost": 0}
        if mode == "inference-then-mining":
            assert "router broke on call 2" in predictions[1][2]["router_error"]
        assert all("router_error" not in str(r) for r in inp.test.x), mode  # test items untouched
