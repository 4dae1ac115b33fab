"""The shared JSONL reader: streaming, gzip, and errors naming file and line."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from core.common.errors import DatasetError
from core.common.jsonl import iter_jsonl


def test_yields_line_numbers_and_skips_blank_lines(tmp_path: Path) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text('{"a": 1}\n\n   \n{"a": 2}\n', encoding="utf-8")
    assert list(iter_jsonl(f)) == [(1, {"a": 1}), (4, {"a": 2})]


def test_reads_gzip_by_name(tmp_path: Path) -> None:
    f = tmp_path / "s.jsonl.gz"
    with gzip.open(f, "wt", encoding="utf-8") as handle:
        handle.write('{"task_id": "t/0"}\n{"task_id": "t/1"}\n')
    assert [obj["task_id"] for _, obj in iter_jsonl(f)] == ["t/0", "t/1"]


def test_is_lazy_errors_only_when_the_bad_line_is_reached(tmp_path: Path) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text('{"a": 1}\n{"a": \n', encoding="utf-8")
    it = iter_jsonl(f)
    assert next(it) == (1, {"a": 1})
    with pytest.raises(DatasetError) as info:
        next(it)
    assert info.value.line == 2 and "invalid JSON" in str(info.value)
    assert str(f) in str(info.value)


@pytest.mark.parametrize("line, needle", [("[1, 2]", "got list"), ("3", "got int"),
                                          ('"x"', "got str")])
def test_rejects_non_objects(tmp_path: Path, line: str, needle: str) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text('{"ok": true}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=needle) as info:
        list(iter_jsonl(f))
    assert info.value.line == 2


def test_missing_file_is_named_with_what(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="samples file not found"):
        list(iter_jsonl(tmp_path / "nope.jsonl", "samples file"))


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    f = tmp_path / "d.jsonl"
    f.write_bytes(b'{"a": 1}\n{"a": "\xff"}\n')
    with pytest.raises(DatasetError, match="UTF-8"):
        list(iter_jsonl(f))


def test_corrupt_gzip_is_a_dataset_error(tmp_path: Path) -> None:
    f = tmp_path / "s.jsonl.gz"
    f.write_bytes(b"this is not gzip data\n")
    with pytest.raises(DatasetError, match="cannot read"):
        list(iter_jsonl(f))
