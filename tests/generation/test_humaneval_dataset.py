"""HumanEval conversion from the installed wheel, subset selection, schema validation."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.common.errors import DatasetError
from core.scenarios.codegen.task import CodegenTask, read_codegen_jsonl
from core.scenarios.codegen.humaneval import HUMANEVAL_COUNT, convert_humaneval, iter_humaneval, select_tasks
from tests.runner.conftest import run_cli


def test_convert_all(tmp_path: Path) -> None:
    out = tmp_path / "he.jsonl"
    assert convert_humaneval(out) == HUMANEVAL_COUNT
    tasks = list(read_codegen_jsonl(out))
    assert len(tasks) == HUMANEVAL_COUNT
    first = json.loads(out.read_text().splitlines()[0])
    assert list(first) == ["task_id", "prompt", "entry_point", "test", "canonical_solution",
                           "packages", "timeout", "metadata"]
    assert first["task_id"] == "HumanEval/0" and first["entry_point"] == "has_close_elements"
    assert "def check(candidate)" in first["test"]


def test_limit_and_task_ids(tmp_path: Path) -> None:
    out = tmp_path / "sub.jsonl"
    assert convert_humaneval(out, limit=3) == 3
    assert [t.task_id for t in read_codegen_jsonl(out)] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert convert_humaneval(out, task_ids=["HumanEval/7", "HumanEval/3"], limit=1) == 1
    assert [t.task_id for t in read_codegen_jsonl(out)] == ["HumanEval/7"]


def test_unknown_task_id_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="HumanEval/999"):
        convert_humaneval(tmp_path / "x.jsonl", task_ids=["HumanEval/999"])
    assert not (tmp_path / "x.jsonl").exists()


def test_select_tasks_negative_limit() -> None:
    with pytest.raises(ValueError):
        select_tasks(iter_humaneval(), limit=-1)


def test_dataset_cli(tmp_path: Path) -> None:
    out = tmp_path / "cli.jsonl"
    res = run_cli("dataset", "humaneval", "-o", str(out), "--task-ids",
                  " HumanEval/1, HumanEval/2,", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "wrote 2 records" in res.stdout
    assert [json.loads(line)["task_id"] for line in out.read_text().splitlines()] == [
        "HumanEval/1", "HumanEval/2"]


def test_dataset_cli_rejects_negative_limit(tmp_path: Path) -> None:
    res = run_cli("dataset", "humaneval", "-o", str(tmp_path / "x.jsonl"), "--limit", "-1",
                  cwd=tmp_path)
    assert res.returncode == 2
    assert "--limit: must be 0 or more" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "x.jsonl").exists()


def test_dataset_cli_unwritable_output_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = run_cli("dataset", "humaneval", "-o", str(blocker / "x.jsonl"), "--limit", "1",
                  cwd=tmp_path)
    assert res.returncode == 1
    assert "cannot write the dataset" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("patch,message", [
    ({"prompt": 3}, "'prompt' must be a string"),
    ({"entry_point": "not an id"}, "identifier"),
    ({"timeout": -1}, "timeout"),
    ({"packages": "numpy"}, "packages"),
    ({"extra": 1}, "unknown field"),
])
def test_schema_errors_name_file_and_line(tmp_path: Path, patch: dict, message: str) -> None:
    good = next(iter_humaneval()).to_record()
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "task_id": "x", **patch}) + "\n")
    with pytest.raises(DatasetError, match=message) as info:
        list(read_codegen_jsonl(path))
    assert f"{path}:2" in str(info.value)


def test_duplicate_ids_rejected(tmp_path: Path) -> None:
    good = next(iter_humaneval()).to_record()
    path = tmp_path / "dup.jsonl"
    path.write_text((json.dumps(good) + "\n") * 2)
    with pytest.raises(DatasetError, match="duplicate"):
        list(read_codegen_jsonl(path))


def test_optional_fields_round_trip() -> None:
    task = CodegenTask.from_record({"task_id": "t", "prompt": "def f():\n", "entry_point": "f",
                                    "test": "def check(c):\n    pass\n", "canonical_solution": "    pass\n",
                                    "packages": ["numpy"], "timeout": 5, "metadata": {"k": 1}})
    assert task.packages == ("numpy",) and task.timeout == 5.0
    assert CodegenTask.from_record(task.to_record()) == task
    assert task.program("X").endswith("check(f)\n")
