"""Predictions reach the metrics the way upstream passes them (issue 14, point 1).

Plugin files here are written the way upstream examples write them: a ``predict`` that returns
a dict keyed by input (government_rag, pcb-aoi and RoboDK metrics read ``y_pred`` as a dict), a
string, or a list of another length, and two-argument metrics that index ``y_pred``. Every run
goes through the real ``ianvs`` command.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

from tests.runner.conftest import run_cli

TESTENV = """testenv:
  dataset:
    train_data: "/nonexistent/train.jsonl"
    test_data: "./test.jsonl"
  metrics:
    - name: "dict_acc"
      url: "./metric.py"
"""

ALGORITHM = """algorithm:
  paradigm_type: "singletasklearning"
  modules:
    - type: "basemodel"
      name: "upstream_model"
      url: "./basemodel.py"
      hyperparameters:
        - mode:
            values: ["{mode}"]
"""

JOB = """benchmarkingjob:
  name: "predjob"
  workspace: "./workspace"
  testenv: "./testenv.yaml"
  test_object:
    type: "algorithms"
    algorithms:
      - name: "alg"
        url: "./algorithm.yaml"
  rank:
    sort_by: [{"dict_acc": "descend"}]
    visualization:
      mode: "selected_only"
      method: "print_table"
    selected_dataitem:
      paradigms: ["all"]
      modules: ["all"]
      hyperparameters: ["all"]
      metrics: ["all"]
    save_mode: "selected_and_all"
"""

BASEMODEL = '''
import json, os
from sedna.common.class_factory import ClassFactory, ClassType


@ClassFactory.register(ClassType.GENERAL, alias="upstream_model")
class Model:
    def __init__(self, **kwargs):
        self.mode = kwargs.get("mode", "dict")
        self.log = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.jsonl")
        self.calls = 0

    def predict(self, data, **kwargs):
        self.calls += 1
        with open(self.log, "a") as fh:
            fh.write(json.dumps([str(q) for q in data]) + "\\n")
        answers = {str(q): str(eval(str(q), {"__builtins__": {}})) for q in data}
        if self.mode == "dict":
            return answers
        if self.mode == "string":
            return ";".join(answers.values())
        if self.mode == "longer":
            return list(answers.values()) + ["extra"]
        if self.mode == "switch" and self.calls > 1:
            return answers
        return list(answers.values())
'''

METRIC = '''
from sedna.common.class_factory import ClassFactory, ClassType

__all__ = ["dict_acc"]


@ClassFactory.register(ClassType.GENERAL, alias="dict_acc")
def dict_acc(y_true, y_pred):
    print("y_pred type:", type(y_pred).__name__, "len:", len(y_pred))
    if isinstance(y_pred, dict):
        print("keys:", sorted(y_pred))
        hits = sum(str(t) in y_pred.values() for t in y_true)
    elif isinstance(y_pred, str):
        hits = sum(str(t) in y_pred.split(";") for t in y_true)
    else:
        hits = sum(str(t) == str(p) for t, p in zip(y_true, y_pred))
    return round(hits / len(y_true), 4)
'''

QUESTIONS = [("1+1", "2"), ("2+3", "5"), ("3*3", "9")]


def _job(tmp_path: Path, mode: str) -> Path:
    root = tmp_path / "job"
    root.mkdir()
    (root / "testenv.yaml").write_text(TESTENV)
    (root / "algorithm.yaml").write_text(ALGORITHM.format(mode=mode))
    (root / "benchmarkingjob.yaml").write_text(JOB)
    (root / "basemodel.py").write_text(BASEMODEL)
    (root / "metric.py").write_text(METRIC)
    (root / "test.jsonl").write_text("".join(json.dumps({"question": q, "answer": a}) + "\n"
                                             for q, a in QUESTIONS))
    return root


def _calls(root: Path) -> list[list[str]]:
    path = root / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _score(root: Path) -> str:
    rows = list(csv.DictReader((root / "workspace/predjob/rank/all_rank.csv").open()))
    assert len(rows) == 1, rows
    return rows[0]["dict_acc"]


def test_dict_predictions_reach_the_metric_as_the_dict(tmp_path: Path) -> None:
    root = _job(tmp_path, "dict")
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=root)
    assert res.returncode == 0, res.stderr
    # the metric saw the model's dict itself, keyed by input, not a list of its keys
    assert "y_pred type: dict len: 3" in res.stdout
    assert "keys: ['1+1', '2+3', '3*3']" in res.stdout
    assert _score(root) == "1.0"
    # a probe call with the first input, then one call over the whole test set
    assert _calls(root) == [["1+1"], ["1+1", "2+3", "3*3"]]
    assert "cannot resume mid-way" in res.stderr
    modes = list((root / "workspace/predjob/alg").glob("*/predict_mode.json"))
    assert len(modes) == 1 and json.loads(modes[0].read_text())["mode"] == "whole_set"


def test_whole_set_case_reruns_with_one_call_over_the_whole_set(tmp_path: Path) -> None:
    root = _job(tmp_path, "dict")
    assert run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=root).returncode == 0
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=root)
    assert res.returncode == 0, res.stderr
    assert _calls(root)[2:] == [["1+1", "2+3", "3*3"]]  # no probe the second time
    assert "y_pred type: dict len: 3" in res.stdout
    assert _score(root) == "1.0"


def test_string_prediction_is_not_split_into_characters(tmp_path: Path) -> None:
    root = _job(tmp_path, "string")
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=root)
    assert res.returncode == 0, res.stderr
    assert "y_pred type: str len: 5" in res.stdout  # "2;5;9"
    assert _score(root) == "1.0"


def test_list_of_another_length_is_passed_unchanged(tmp_path: Path) -> None:
    root = _job(tmp_path, "longer")
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=root)
    assert res.returncode == 0, res.stderr
    assert "y_pred type: list len: 4" in res.stdout
    assert _calls(root) == [["1+1"], ["1+1", "2+3", "3*3"]]


def test_per_sample_lists_are_stored_and_resumed_as_before(tmp_path: Path) -> None:
    root = _job(tmp_path, "list")
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=root)
    assert res.returncode == 0, res.stderr
    assert "y_pred type: list len: 3" in res.stdout
    assert _calls(root) == [["1+1"], ["2+3"], ["3*3"]]  # one sample per call, each stored
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=root)
    assert res.returncode == 0, res.stderr
    assert len(_calls(root)) == 3  # everything stored: the model is not called again
    assert not list((root / "workspace").rglob("predict_mode.json"))


def test_model_that_changes_its_answer_shape_fails_its_case_clearly(tmp_path: Path) -> None:
    root = _job(tmp_path, "switch")
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=root)
    assert res.returncode != 0
    assert "after returning one prediction per input before" in res.stderr
    assert "Traceback" not in res.stderr
