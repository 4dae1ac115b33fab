"""``.json`` dataset files through ``train_data``/``test_data``/``*_index``/``*_url`` (issue 14,
point 3), through the real ``ianvs`` command.

Upstream read a ``*_index`` JSON file as COCO annotations and resolved a ``*_data`` JSON file to
nothing, which worked only where that split was never read (the cloud-edge LLM example names a
``.json`` train file its paradigm never trains on). Here a JSON file is read when its data is
first used: an unused train file never stops a job; a JSON array of records works as a data set.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.runner.conftest import run_cli

JOB = """benchmarkingjob:
  name: "jsonjob"
  workspace: "./workspace"
  testenv: "./testenv.yaml"
  test_object:
    type: "algorithms"
    algorithms:
      - name: "alg"
        url: "./algorithm.yaml"
  rank:
    sort_by: [{"acc": "descend"}]
    selected_dataitem:
      paradigms: ["all"]
      modules: ["all"]
      hyperparameters: ["all"]
      metrics: ["all"]
    save_mode: "selected_and_all"
"""

ALGORITHM = """algorithm:
  paradigm_type: "singletasklearning"
  modules:
    - type: "basemodel"
      name: "calc"
      url: "./basemodel.py"
"""

BASEMODEL = '''
from sedna.common.class_factory import ClassFactory, ClassType


@ClassFactory.register(ClassType.GENERAL, alias="calc")
class Calc:
    def __init__(self, **kwargs):
        pass
{train}
    def predict(self, data, **kwargs):
        return [str(eval(str(q), {{"__builtins__": {{}}}})) for q in data]
'''

TRAIN = '''
    def train(self, train_data, **kwargs):
        print("trained on", len(train_data.x), "samples:", train_data.y.tolist())
'''

METRIC = '''
from sedna.common.class_factory import ClassFactory, ClassType


@ClassFactory.register(ClassType.GENERAL, alias="acc")
def acc(y_true, y_pred):
    return round(sum(str(t) == str(p) for t, p in zip(y_true, y_pred)) / len(y_true), 4)
'''

RECORDS = [{"question": "1+1", "answer": "2"}, {"question": "2*3", "answer": "6"}]


def _job(tmp_path: Path, dataset: str, *, trains: bool = False) -> Path:
    root = tmp_path / "job"
    root.mkdir()
    (root / "benchmarkingjob.yaml").write_text(JOB)
    (root / "algorithm.yaml").write_text(ALGORITHM)
    (root / "basemodel.py").write_text(BASEMODEL.format(train=TRAIN if trains else ""))
    (root / "acc.py").write_text(METRIC)
    (root / "testenv.yaml").write_text(
        "testenv:\n  dataset:\n" + dataset
        + '  metrics:\n    - name: "acc"\n      url: "./acc.py"\n')
    return root


def _acc(root: Path) -> str:
    rows = list(csv.DictReader((root / "workspace/jsonjob/rank/all_rank.csv").open()))
    return rows[0]["acc"]


def test_unused_json_train_file_does_not_stop_the_job(tmp_path: Path) -> None:
    """As in upstream's cloud-edge example: a .json train file the model never trains on (its
    content is not even a record array)."""
    root = _job(tmp_path, '    train_data: "./train.json"\n    test_data: "./test.jsonl"\n')
    (root / "train.json").write_text(json.dumps({"not": "records", "images": []}))
    (root / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=root)
    assert res.returncode == 0, res.stderr
    assert _acc(root) == "1.0"
    assert run_cli("validate", "-f", "benchmarkingjob.yaml", cwd=root).returncode == 0


def test_json_record_array_as_train_and_test_sets(tmp_path: Path) -> None:
    root = _job(tmp_path, '    train_data: "./train.json"\n    test_index: "./test.json"\n',
                trains=True)
    (root / "train.json").write_text(json.dumps([{"question": "5-1", "answer": "4"}]))
    (root / "test.json").write_text(json.dumps(RECORDS, indent=2))
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=root)
    assert res.returncode == 0, res.stderr
    assert "trained on 1 samples: ['4']" in res.stdout
    assert _acc(root) == "1.0"
    stored = list((root / "workspace").rglob("predictions.jsonl"))
    assert len(stored) == 1 and len(stored[0].read_text().splitlines()) == 2  # per sample


@pytest.mark.parametrize("key", ["test_data", "test_url"])
def test_malformed_json_test_file_is_one_clear_error(tmp_path: Path, key: str) -> None:
    root = _job(tmp_path, f'    {key}: "./test.json"\n')
    (root / "test.json").write_text('[\n  {"question": "1+1", "answer": "2"},\n  {"question": }\n]\n')
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=root)
    assert res.returncode != 0
    assert "test.json:3" in res.stderr and "invalid JSON" in res.stderr
    assert "Traceback" not in res.stderr


def test_json_record_without_input_field_names_the_element(tmp_path: Path) -> None:
    root = _job(tmp_path, '    test_data: "./test.json"\n')
    (root / "test.json").write_text(json.dumps([RECORDS[0], {"prompt": "1+1"}]))
    res = run_cli("validate", "-f", "benchmarkingjob.yaml", cwd=root)
    assert res.returncode != 0
    assert "array element 2: record has no 'question' field" in res.stdout + res.stderr


def test_json_file_that_is_neither_records_nor_coco_is_refused_when_used(tmp_path: Path) -> None:
    root = _job(tmp_path, '    test_data: "./test.json"\n')
    (root / "test.json").write_text(json.dumps({"question": "1+1"}))
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=root)
    assert res.returncode != 0
    assert "expected a JSON array of objects, found a dict" in res.stderr


COCO_MODEL = '''
from sedna.common.class_factory import ClassFactory, ClassType


@ClassFactory.register(ClassType.GENERAL, alias="calc")
class Tracker:
    def __init__(self, **kwargs):
        pass

    def predict(self, data, **kwargs):
        print("x keys:", sorted(data))
        return {name: len(boxes) for boxes, _info, name in data["annotations"]}
'''

COCO_METRIC = '''
from sedna.common.class_factory import ClassFactory, ClassType


@ClassFactory.register(ClassType.GENERAL, alias="acc")
def acc(y_true, y_pred):
    print("gt files:", [p.name for p in y_true], "pred:", y_pred)
    return float(sum(y_pred.values()))
'''


def test_coco_index_file_goes_to_predict_whole_and_metrics_unchanged(tmp_path: Path) -> None:
    """upstream's JSONDataParse layout (MOT17 in COCO form): ``x`` is one mapping, so predict
    is called once and its dict reaches the metric as is."""
    pytest.importorskip("pycocotools.coco", reason="pycocotools comes with the [datasources] "
                                                   "extra (also in [test])")
    root = _job(tmp_path, '    test_index: "./mot/annotations/val_half.json"\n')
    (root / "basemodel.py").write_text(COCO_MODEL)
    (root / "acc.py").write_text(COCO_METRIC)
    gt = root / "mot" / "train" / "MOT17-02" / "gt" / "gt_val_half.txt"
    gt.parent.mkdir(parents=True)
    gt.write_text("")
    (root / "mot" / "annotations").mkdir(parents=True)
    (root / "mot" / "annotations" / "val_half.json").write_text(json.dumps({
        "images": [{"id": i, "width": 640, "height": 480, "frame_id": i, "video_id": 1,
                    "file_name": f"MOT17-02/img1/{i:06d}.jpg"} for i in (1, 2)],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "area": 12,
             "iscrowd": 0, "track_id": 1},
            {"id": 2, "image_id": 2, "category_id": 1, "bbox": [1, 2, 3, 4], "area": 12,
             "iscrowd": 0, "track_id": 1},
            {"id": 3, "image_id": 2, "category_id": 1, "bbox": [5, 6, 7, 8], "area": 56,
             "iscrowd": 0, "track_id": 2}],
        "categories": [{"id": 1, "name": "pedestrian"}]}))
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=root)
    assert res.returncode == 0, res.stderr
    assert "x keys: ['annotations', 'class_ids', 'coco', 'data_dir', 'ids']" in res.stdout
    assert ("gt files: ['gt_val_half.txt'] pred: {'MOT17-02/img1/000001.jpg': 1, "
            "'MOT17-02/img1/000002.jpg': 2}") in res.stdout
    assert _acc(root) == "3.0"
