"""Dataset resolution and parsing (ianvs-compat §4, with the listed fixes)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from core.common.config_base import Section
from core.common.errors import ConfigError, DatasetError
from core.testenvmanager.dataset.dataset import parse_dataset_section
from core.testenvmanager.dataset.parsers import JsonlDataset, MetaDataset, TxtIndexDataset


def dataset(tmp_path: Path, **keys: str):
    return parse_dataset_section(Section(keys, tmp_path / "testenv.yaml", "testenv.dataset"))


def test_jsonl_through_test_index_is_the_whole_dataset(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"question": "a", "answer": 1, "extra": [1]}\n\n'
                                      '{"question": "b", "answer": 2, "extra": [2]}\n')
    cfg = dataset(tmp_path, test_index=str(tmp_path / "d.jsonl"))
    ds = cfg.parse("test", "inference")
    assert isinstance(ds, JsonlDataset)
    assert list(ds.x) == ["a", "b"] and ds.y.dtype.kind == "i"
    assert [r["extra"] for r in ds.records()] == [[1], [2]]  # all fields kept
    assert len(ds) == 2


def test_bad_jsonl_line_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"question": "a", "answer": 1}\n{"question": \n')
    ds = dataset(tmp_path, test_data=str(tmp_path / "d.jsonl")).parse("test", "inference")
    with pytest.raises(DatasetError, match=r"d\.jsonl:2: invalid JSON"):
        _ = ds.x


def test_records_are_streamed_not_loaded(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    path.write_text('{"question": "q", "answer": "a"}\n' * 3 + "not json\n")
    ds = dataset(tmp_path, test_data=str(path)).parse("test", "inference")
    it = ds.records()
    assert next(it)["question"] == "q"  # the bad line 4 has not been read yet
    with pytest.raises(DatasetError, match=":4:"):
        list(it)


def test_missing_x_field_suggests_setting(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"prompt": "p", "answer": 1}\n')
    ds = dataset(tmp_path, test_data=str(tmp_path / "d.jsonl")).parse("test", "inference")
    with pytest.raises(DatasetError, match=r"d\.jsonl:1: record has no 'question'.*x_field"):
        _ = ds.x
    ok = dataset(tmp_path, test_data=str(tmp_path / "d.jsonl"), x_field="prompt")
    assert list(ok.parse("test", "inference").x) == ["p"]


def test_numpy_coercion_matches_upstream(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"question": "a", "answer": 1}\n'
                                      '{"question": 2, "answer": "x"}\n')
    ds = dataset(tmp_path, test_data=str(tmp_path / "d.jsonl")).parse("test", "inference")
    assert ds.x.tolist() == ["a", "2"] and ds.y.tolist() == ["1", "x"]


def test_relative_missing_path_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a local file"):
        dataset(tmp_path, test_data="nope.jsonl")


def test_absolute_missing_train_is_empty(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text('{"question": "a", "answer": 1}\n')
    cfg = dataset(tmp_path, test_data=str(tmp_path / "d.jsonl"),
                  train_data=str(tmp_path / "absent" / "data.jsonl"))
    assert len(cfg.parse("train", "train")) == 0


@pytest.mark.parametrize("name,key,message", [
    ("d.parquet", "test_data", "format 'parquet' is not supported"),
    ("d.JSONL", "test_data", "format 'JSONL' is not supported"),
    ("d.txt", "test_data", "test_data accepts jsonl, csv, json"),
    ("data.json", "test_data_info", "must be named metadata.json"),
])
def test_unsupported_formats(tmp_path: Path, name: str, key: str, message: str) -> None:
    (tmp_path / name).write_text("{}")
    with pytest.raises(ConfigError, match=message):
        dataset(tmp_path, **{key: str(tmp_path / name)})


def test_legacy_test_url_is_an_index_alias(tmp_path: Path) -> None:
    (tmp_path / "index.txt").write_text("img1.png 3\n")
    (tmp_path / "img1.png").write_text("")
    ds = dataset(tmp_path, test_url=str(tmp_path / "index.txt")).parse("test", "test")
    assert isinstance(ds, TxtIndexDataset)
    assert ds.x.tolist() == [str(tmp_path / "img1.png")] and ds.y.tolist() == []
    train = dataset(tmp_path, test_url=str(tmp_path / "index.txt"),
                    train_index=str(tmp_path / "index.txt")).parse("train", "train")
    assert train.y.tolist() == ["3"]  # a plain label stays a label


def test_no_test_set_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="names no test set"):
        dataset(tmp_path)


def test_metadata_dataset(tmp_path: Path) -> None:
    (tmp_path / "metadata.json").write_text(
        '{"dataset": "D", "description": "d", "level_1_dim": "l1", "level_2_dim": "l2",'
        ' "level_4_dim": "l4"}')
    (tmp_path / "data.jsonl").write_text(
        '{"prompt": "P:", "query": "1+1?", "response": "2", "judge_prompt": "J",'
        ' "level_3_dim": "a", "level_4_dim": "b"}\n{"query": "q2", "response": "r2"}\n')
    ds = dataset(tmp_path, test_data_info=str(tmp_path / "metadata.json")).parse("test", "x")
    assert isinstance(ds, MetaDataset) and ds.need_other_info
    assert ds.x.tolist() == ["P:1+1?", "q2"] and ds.y.tolist() == ["2", "r2"]
    assert ds.judge_prompts.tolist() == ["J", ""] and ds.level_4_dim == "l4"
    assert ds.dataset_name == "D" and isinstance(ds.level_3, np.ndarray)
