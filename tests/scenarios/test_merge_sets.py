"""``ianvs dataset merge-sets``: parts built per date window become one task file whose report
keeps each part's build report; overlapping or malformed parts are refused with one line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.common.errors import ConfigError, DatasetError
from core.scenarios.merge_sets import merge_sets
from tests.runner.conftest import run_cli


def _part(path: Path, ids: list[str], report: bool = True) -> Path:
    path.write_text("".join(json.dumps({"id": i, "committed_at": "2024-01-01T00:00:00+00:00"})
                            + "\n" for i in ids))
    if report:
        path.with_name(path.name + ".build.json").write_text(json.dumps({"tasks": len(ids),
                                                                          "window": path.stem}))
    return path


def test_parts_are_joined_in_order_with_their_reports(tmp_path: Path) -> None:
    pre = _part(tmp_path / "pre.jsonl", ["a", "b"])
    post = _part(tmp_path / "post.jsonl", ["c"], report=False)
    report = merge_sets([pre, post], tmp_path / "out" / "all.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "out" / "all.jsonl").read_text().splitlines()]
    assert [r["id"] for r in lines] == ["a", "b", "c"] and report["tasks"] == 3
    saved = json.loads((tmp_path / "out" / "all.jsonl.build.json").read_text())
    assert saved == report
    assert [(p["file"], p["tasks"]) for p in saved["parts"]] == [("pre.jsonl", 2), ("post.jsonl", 1)]
    assert saved["parts"][0]["build"] == {"tasks": 2, "window": "pre"}
    assert saved["parts"][1]["build"] is None and len(saved["parts"][0]["sha256"]) == 64


def test_overlap_and_bad_parts_are_refused(tmp_path: Path) -> None:
    a = _part(tmp_path / "a.jsonl", ["x", "y"])
    b = _part(tmp_path / "b.jsonl", ["y"])
    with pytest.raises(ConfigError, match="task y is in"):
        merge_sets([a, b], tmp_path / "m.jsonl")
    assert not (tmp_path / "m.jsonl").exists()
    with pytest.raises(ConfigError, match="one of the parts"):
        merge_sets([a], a)
    (tmp_path / "bad.jsonl").write_text('{"id": "z"}\nnot json\n')
    with pytest.raises(DatasetError, match="bad.jsonl:2: invalid JSON"):
        merge_sets([tmp_path / "bad.jsonl"], tmp_path / "m.jsonl")
    res = run_cli("dataset", "merge-sets", str(a), str(tmp_path / "none.jsonl"), "-o",
                  str(tmp_path / "m.jsonl"), cwd=tmp_path)
    assert res.returncode != 0 and "none.jsonl: task file not found" in res.stderr
    assert "Traceback" not in res.stderr
    res = run_cli("dataset", "merge-sets", str(a), "-o", str(tmp_path / "m.jsonl"), cwd=tmp_path)
    assert res.returncode == 0 and "wrote 2 tasks" in res.stdout
