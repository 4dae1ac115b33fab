"""``report/`` after every job (issue 13, points 1-4): Markdown, self-contained HTML with
embedded figures, a manifest without secrets, confidence intervals and paired comparisons.
Real jobs through the ``ianvs`` command (the toy job and the codegen example's gold generators
in the real sandbox). Markdown is checked with a Markdown parser, HTML with an HTML parser."""
from __future__ import annotations

import base64
import json
import math
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest

from core.storymanager.report.stats import bootstrap_ci, mcnemar_exact, paired_bootstrap
from tests.runner.conftest import REPO, run_cli, toy  # noqa: F401 - fixtures
from tests.smart_coding.conftest import codegen_job  # noqa: F401
from tests.storymanager.toy_variants import break_most_cases

CANARY_ENV = "sk-canary-from-the-environment-7f3a"
CANARY_HP = "sk-canary-hyperparameter-91c2"


class _Page(HTMLParser):
    """Images (src) and table rows by table id."""

    def __init__(self) -> None:
        super().__init__()
        self.images: list[str] = []
        self.rows: dict[str, int] = {}
        self._table: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "img":
            self.images.append(values.get("src") or "")
        elif tag == "table":
            self._table = values.get("id") or "?"
            self.rows[self._table] = 0
        elif tag == "tr" and self._table:
            self.rows[self._table] += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None


def _page(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text())
    return page


def _markdown_tables(text: str) -> list[list[list[str]]]:
    """Tables as parsed by markdown-it (CommonMark + GFM tables)."""
    markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py comes with [test]")
    tokens = markdown_it.MarkdownIt("commonmark").enable("table").parse(text)
    tables: list[list[list[str]]] = []
    row: list[str] | None = None
    for tok in tokens:
        if tok.type == "table_open":
            tables.append([])
        elif tok.type == "tr_open":
            row = []
        elif tok.type == "inline" and row is not None:
            row.append(tok.content)
        elif tok.type == "tr_close" and row is not None:
            tables[-1].append(row)
            row = None
    return tables


def _codegen(codegen_job, generators: str) -> Path:
    return codegen_job(f'        - generator:\n            values: [{generators}]\n')


def test_codegen_report_has_intervals_comparison_figures_and_manifest(codegen_job,
                                                                      tmp_path: Path) -> None:
    job = _codegen(codegen_job, '"canonical", "broken"')
    res = run_cli("-f", str(job), "--no-progress", cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    report = tmp_path / "workspace/smart_coding_codegen/report"
    page = _page(report / "index.html")
    assert page.rows["leaderboard"] == 3  # header + 2 test cases
    assert page.rows["comparisons"] == 3  # header + pass@1 + latency_s (a mean over samples)
    assert len(page.images) >= 3
    for src in page.images:  # embedded, no network, real PNGs
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "http" not in (report / "index.html").read_text()
    tables = _markdown_tables((report / "leaderboard.md").read_text())
    leaderboard, intervals, comparison, detect = tables[0], tables[1], tables[2], tables[3]
    assert leaderboard[0][-1] == "pass@1 95% CI" and len(leaderboard) == 3
    assert {row[-1] for row in leaderboard[1:]} == {"[1.000, 1.000]", "[0.000, 0.000]"}
    # each row differs from the other on the main metric (21 tasks won by one side)
    assert leaderboard[0][-2] == "differs from (pass@1)"
    assert sorted(row[-2] for row in leaderboard[1:]) == ["#1", "#2"]
    assert intervals[0][:2] == ["row", "pass@1"] and len(intervals) == 3
    assert comparison[0][0] == "column" and comparison[1][0] == "pass@1"
    assert comparison[1][-1] == "significant" and comparison[1][7] == "McNemar (21 / 0)"
    assert detect[1][:2] == ["pass@1", "21"] and float(detect[1][3]) == round(6 / 21, 4)
    for name in ("metric", "outcomes", "tasks"):
        assert (report / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    manifest = json.loads((report / "manifest.json").read_text())
    data = job.parent / "data" / "humaneval_subset.jsonl"
    import hashlib
    assert manifest["dataset"]["sha256"] == hashlib.sha256(data.read_bytes()).hexdigest()
    assert manifest["dataset"]["records"] == 21
    assert manifest["command"][:2] == ["ianvs", "-f"]
    assert manifest["machine"]["python"] and manifest["machine"]["cpu_count"]
    cases = manifest["test_cases"]
    assert {c["model"]["generator"]["generator"] for c in cases} == {"canonical", "broken"}
    for case in cases:
        assert case["sandbox"]["isolation"] and case["sandbox"]["grading"] == "boundary"
        assert case["sandbox"]["reference_times_s"]["count"] >= 1
        assert case["sandbox"]["timeouts_s"]["min"] >= 3.0  # the calibrated floor
        assert case["started"] and case["finished"]


def test_two_equal_cases_are_not_called_different(codegen_job, tmp_path: Path) -> None:
    job = codegen_job('        - generator:\n            values: ["canonical"]\n'
                      '        - max_tokens:\n            values: [100, 200]\n')
    res = run_cli("-f", str(job), "--no-progress", cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    md = (tmp_path / "workspace/smart_coding_codegen/report/leaderboard.md").read_text()
    assert "not significant (noise)" in md


def test_no_secret_reaches_any_report_file(toy: Path) -> None:
    alg = toy / "algorithm.yaml"
    alg.write_text(alg.read_text().replace(
        "        - offset:", f'        - api_key:\n            values: ["{CANARY_HP}"]\n'
                            "        - offset:"))
    env = dict(os.environ, IANVS_CANARY=CANARY_ENV, PYTHONPATH=str(REPO))
    import subprocess
    import sys
    res = subprocess.run([sys.executable, "-m", "core.cmd.benchmarking", "-f",
                          "benchmarkingjob.yaml", "--no-progress"], cwd=toy, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    report = toy / "workspace/toyjob/report"
    files = list(report.iterdir())
    assert {"index.html", "leaderboard.md", "manifest.json"} <= {f.name for f in files}
    for path in files:
        data = path.read_bytes()
        assert CANARY_ENV.encode() not in data and CANARY_HP.encode() not in data, path
    assert "<redacted>" in (report / "leaderboard.md").read_text()


def test_report_of_failed_cases_nan_metrics_and_one_case_renders(toy: Path) -> None:
    break_most_cases(toy)
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=toy)
    assert res.returncode == 1  # three of four cases failed; one is ranked
    report = toy / "workspace/toyjob/report"
    page = _page(report / "index.html")
    assert page.rows["leaderboard"] == 2  # one case: no comparison, no interval
    md = (report / "leaderboard.md").read_text()
    assert "No two test cases have per-task values" in md
    assert _markdown_tables(md)[0][1][-1] == "n/a"


def test_no_report_flag(toy: Path) -> None:
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", "--no-report", cwd=toy)
    assert res.returncode == 0, res.stderr
    assert not (toy / "workspace/toyjob/report").exists()


def test_statistics() -> None:
    mean, low, high = bootstrap_ci([1, 0, 1, 1, 0, 1, 1, 1])
    assert mean == 0.75 and 0.4 < low < 0.75 < high <= 1.0
    assert all(math.isnan(v) for v in bootstrap_ci([]))
    diff, low, high, p = paired_bootstrap([1] * 20, [0] * 20)
    assert (diff, low, high) == (1.0, 1.0, 1.0) and p == 0.0
    assert paired_bootstrap([1, 0, 1], [1, 0, 1])[3] == 1.0
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(10, 0) == pytest.approx(2 / 2 ** 10)
    assert mcnemar_exact(5, 5) == 1.0
    with pytest.raises(ValueError):
        paired_bootstrap([1], [1, 2])
