"""``ianvs leaderboard`` merges runs and refuses incomparable ones (issue 13, point 5).
Real toy jobs through the ``ianvs`` command."""
from __future__ import annotations

import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.runner.conftest import FIXTURES, run_cli


def _job(tmp_path: Path, name: str, offset: int) -> Path:
    root = tmp_path / name
    shutil.copytree(FIXTURES / "toy", root, ignore=shutil.ignore_patterns("workspace"))
    alg = root / "algorithm.yaml"
    alg.write_text(alg.read_text().replace("values: [0, 1]", f"values: [{offset}]")
                   .replace("values: [1, 2]", "values: [1]"))
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=root)
    assert res.returncode == 0, res.stderr
    return root / "workspace"


def test_board_merges_runs_with_their_manifest_facts(tmp_path: Path) -> None:
    good, bad = _job(tmp_path, "day1", 0), _job(tmp_path, "day2", 1)
    out = tmp_path / "board.md"
    res = run_cli("leaderboard", str(bad), str(good), "--metric", "acc", "-o", str(out),
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    markdown_it = pytest.importorskip("markdown_it")
    tokens = markdown_it.MarkdownIt("commonmark").enable("table").parse(out.read_text())
    cells = [t.content for t in tokens if t.type == "inline"][1:]  # after the title
    header = cells[:cells.index("run") + 1]
    rows = [cells[i:i + len(header)] for i in range(len(header), len(cells), len(header))]
    assert len(rows) == 2
    by = [dict(zip(header, r)) for r in rows]
    assert [b["acc"] for b in by] == ["1.0", "0.0"]  # ranked by acc, whatever the order given
    assert by[0]["run"].endswith("day1/workspace/toyjob") and by[0]["rank"] == "1"
    for b in by:
        assert b["dataset"] == "test.jsonl" and len(b["dataset_sha256"]) == 12
        assert b["python"] and b["version"] and b["finished"]


def test_board_refuses_one_dataset_name_with_two_contents(tmp_path: Path) -> None:
    first = _job(tmp_path, "a", 0)
    root = tmp_path / "b"
    shutil.copytree(FIXTURES / "toy", root, ignore=shutil.ignore_patterns("workspace"))
    data = root / "data" / "test.jsonl"
    data.write_text(data.read_text().splitlines()[0] + "\n")
    assert run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=root).returncode == 0
    res = run_cli("leaderboard", str(first), str(root / "workspace"), cwd=tmp_path)
    assert res.returncode != 0
    assert "dataset 'test.jsonl' has different contents" in res.stderr
    assert "Traceback" not in res.stderr


def test_board_refuses_a_run_without_manifest_and_renders_html(tmp_path: Path) -> None:
    ws = _job(tmp_path, "ok", 0)
    root = tmp_path / "nomanifest"
    shutil.copytree(FIXTURES / "toy", root, ignore=shutil.ignore_patterns("workspace"))
    assert run_cli("-f", "benchmarkingjob.yaml", "--no-progress", "--no-report",
                   cwd=root).returncode == 0
    res = run_cli("leaderboard", str(root / "workspace"), cwd=tmp_path)
    assert res.returncode != 0 and "no readable report/manifest.json" in res.stderr

    res = run_cli("leaderboard", str(ws), "--html", cwd=tmp_path)
    assert res.returncode == 0, res.stderr

    class Rows(HTMLParser):
        count = 0

        def handle_starttag(self, tag: str, attrs: list) -> None:
            self.count += tag == "tr"

    parser = Rows()
    parser.feed(res.stdout)
    assert parser.count == 2  # header + the one test case of that run
