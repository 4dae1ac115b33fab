"""Record schemas of the comment and issue kinds: a broken record is one readable error naming
file, line and field; upstream Ianvs's metadata.json + data.jsonl layout also runs."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from core.common.errors import DatasetError
from core.scenarios import get_kind
from tests.runner.conftest import run_cli
from tests.scenarios.conftest import BENCH, read_jsonl, write_jsonl

COMMENT = read_jsonl(BENCH / "comment/data/comments_subset.jsonl")
ISSUE = read_jsonl(BENCH / "issue/data/issues_subset.jsonl")


def _without(record: dict, key: str) -> dict:
    return {k: v for k, v in record.items() if k != key}


@pytest.mark.parametrize("kind,bad,field", [
    ("comment", lambda r: _without(r, "code_snippet"), "'code_snippet'"),
    ("comment", lambda r: {**r, "annotations": []}, "'annotations'"),
    ("comment", lambda r: {**r, "annotations": [{"line_number": 999, "annotation": "x"}]},
     "'annotations[0].line_number'"),
    ("comment", lambda r: {**r, "annotations": [{"line_number": 1, "annotation": 3}]},
     "'annotations[0].annotation'"),
    ("comment", lambda r: {**r, "code": "x"}, "'code'"),
    ("issue", lambda r: _without(r, "question"), "'question'"),
    ("issue", lambda r: _without(r, "answer_1"), "'answer_1'"),
    ("issue", lambda r: {**r, "answer_3": r["answer_1"]}, "answer_3"),
    ("issue", lambda r: {**r, "answer_1": {**r["answer_1"], "body": ""}}, "'answer_1.body'"),
    ("issue", lambda r: {**r, "answer_1": {**r["answer_1"], "login": "x"}}, "'answer_1.login'"),
    ("issue", lambda r: {**r, "created_at": 5}, "'created_at'"),
])
def test_bad_record_names_file_line_and_field(kind, bad, field, tmp_path: Path) -> None:
    good = COMMENT if kind == "comment" else ISSUE
    rows = [good[0], bad(dict(good[1])), good[2]]
    path = write_jsonl(tmp_path / "data.jsonl", rows)
    with pytest.raises(DatasetError) as err:
        get_kind(kind).check_file(path)
    assert err.value.source == str(path) and err.value.line == 2
    assert field in err.value.message


def test_validate_and_run_stop_at_the_bad_line(scenario_job, tmp_path: Path) -> None:
    rows = [dict(r) for r in ISSUE[:3]]
    rows[2]["answer_1"] = {**rows[2]["answer_1"], "body": 7}
    data = write_jsonl(tmp_path / "bad.jsonl", rows)
    job = scenario_job("issue", ["reference"], test_index=data)
    res = run_cli("validate", "-f", str(job), cwd=tmp_path)
    assert res.returncode == 1
    assert f"{data}:3: field 'answer_1.body' must be a string, got a int" in res.stderr
    res = run_cli("-f", str(job), "--no-progress", cwd=tmp_path)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert f"ianvs: error: {data}:3: field 'answer_1.body'" in res.stderr
    assert not (tmp_path / "workspace").exists() or not list(
        (tmp_path / "workspace").rglob("predictions.jsonl"))


def test_unknown_task_kind_is_a_config_error(scenario_job, tmp_path: Path) -> None:
    job = scenario_job("issue", ["reference"])
    env = job.parent / "testenv" / "testenv.yaml"
    env.write_text(env.read_text().replace('task_kind: "issue"', 'task_kind: "isue"'))
    res = run_cli("validate", "-f", str(job), cwd=tmp_path)
    out = res.stdout + res.stderr  # validate lists every problem it finds
    assert res.returncode == 1
    assert "'testenv.task_kind' unknown task kind 'isue'" in out
    assert "did you mean 'issue'" in out


def test_upstream_metadata_layout_runs(scenario_job, tmp_path: Path) -> None:
    """Upstream's smart-coding layout: metadata.json + data.jsonl (query/response) through
    test_data_info, scored by the issue kind with its gold controls."""
    folder = tmp_path / "upstream"
    folder.mkdir()
    (folder / "metadata.json").write_text(json.dumps({
        "dataset": "Code_issue BenchMark", "description": "FAQ questions",
        "level_1_dim": "single-modal", "level_2_dim": "text", "level_3_dim": "Q&A",
        "level_4_dim": "code_issue"}))
    write_jsonl(folder / "data.jsonl", [
        {"query": r["question"], "response": r["answer_1"]["body"],
         "judge_prompt": "", "level_3_dim": "knowledge Q&A", "level_4_dim": "code_issue"}
        for r in ISSUE[:3]])
    job = scenario_job("issue", ["reference", "broken"], judge="")
    env = job.parent / "testenv" / "testenv.yaml"
    text = env.read_text()
    old = next(l for l in text.splitlines() if l.strip().startswith("test_index:"))
    env.write_text(text.replace(old, f'    test_data_info: "{folder / "metadata.json"}"'))
    res = run_cli("-f", str(job), "--no-progress", "--no-report", cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = list(csv.DictReader(open(next(tmp_path.glob("workspace/*/rank/all_rank.csv")))))
    by_gen = {r["basemodel-generator"]: r for r in rows}
    assert float(by_gen["reference"]["chrf"]) == 100.0
    assert float(by_gen["reference"]["embedding_sim"]) == pytest.approx(1.0, abs=1e-4)
    assert float(by_gen["broken"]["chrf"]) < 20.0
    assert float(by_gen["broken"]["embedding_sim"]) < 0.9
