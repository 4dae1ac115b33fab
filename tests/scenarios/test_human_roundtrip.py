"""Human judgment round trip: run -> ``ianvs judge export`` (CSV + offline HTML) -> ratings ->
``ianvs judge import`` -> re-run: the leaderboard gets human_acc and Cohen's kappa against the
LLM judge, and nothing is regenerated. The judge is the scripted one (its verdicts must be
known to check the kappa); everything else is the real pipeline in a child process."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from core.scenarios.human import cohen_kappa
from tests.runner.conftest import run_cli
from tests.scenarios.conftest import BENCH, read_jsonl, write_jsonl

JUDGE = ('    - name: "llm_judge"\n      url: "./metrics.py"\n      generator: "scripted_judge"\n'
         '      generator_options: {marker: "extern", marked_score: '
         '"functionality: 1\\nreliability: 2\\ninterpretability: 1"}\n')


def test_cohen_kappa_values() -> None:
    assert cohen_kappa([1, 1, 0], [1, 0, 1]) == pytest.approx(-0.5)
    assert cohen_kappa([1, 0, 0], [1, 0, 1]) == pytest.approx(0.4)
    assert cohen_kappa([1, 0, 1, 0], [1, 0, 1, 0]) == 1.0
    assert math.isnan(cohen_kappa([1, 1], [1, 1])) and math.isnan(cohen_kappa([1], [1]))


def _rank(tmp_path: Path) -> dict[str, dict[str, str]]:
    path = next(tmp_path.glob("workspace/*/rank/all_rank.csv"))
    return {r["basemodel-generator"]: r for r in csv.DictReader(open(path))}


@pytest.mark.slow  # over 5 s: the fast tier stays under 5 minutes
def test_export_rate_import_rescore(scenario_job, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "issues.jsonl",
                       read_jsonl(BENCH / "issue/data/issues_subset.jsonl")[:3])
    job = scenario_job("issue", ["reference", "broken"], test_index=data, judge=JUDGE)
    metrics_py = job.parent / "testenv" / "metrics.py"
    metrics_py.write_text(metrics_py.read_text() + "import tests.scenarios.scripted_judge\n")
    res = run_cli("-f", str(job), "--no-progress", "--no-report", cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    before = _rank(tmp_path)
    assert before["reference"]["human_rated"] == "0" and before["reference"]["human_acc"] == ""

    sheet = tmp_path / "sheet"
    res = run_cli("judge", "export", "-f", str(job), "-o", str(sheet), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(open(sheet / "ratings.csv", newline="")))
    assert len(rows) == 6 and all(r["rating"] == "" for r in rows)
    page = (sheet / "index.html").read_text()
    assert all(r["item"] in page for r in rows) and "Download ratings.csv" in page
    assert "broken" not in page and "reference" not in json.dumps(
        [r["item"] for r in rows])                       # blind: no generator names shown
    key = json.loads((sheet / "items.json").read_text())

    # The rater accepts the reference answers except the one about indentation, and none of
    # the broken ones; the scripted judge rejects only the answer mentioning `extern`.
    for row in rows:
        broken = "weather report" in row["answer"]
        row["rating"] = "0" if broken or "indentation" in row["task"] else "1"
    with open(sheet / "ratings.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    res = run_cli("judge", "import", "-f", str(job), str(sheet / "ratings.csv"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "imported 6 ratings" in res.stdout
    cases = {entry["case"] for entry in key.values()}
    assert all((job.parent / "workspace").glob(f"*/{c}/human_ratings.jsonl") for c in cases)

    res = run_cli("-f", str(job), "--no-progress", "--no-report", cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stderr.count("all 3 predictions found in") == 2  # nothing regenerated
    after = _rank(tmp_path)
    ref, broken = after["reference"], after["broken"]
    assert ref["human_rated"] == "3" and float(ref["human_acc"]) == pytest.approx(2 / 3, 1e-3)
    # humans [0 (indentation), 1 (extern), 1], judge [1, 0, 1]: kappa = -0.5
    assert float(ref["judge_kappa"]) == pytest.approx(-0.5)
    # the scripted judge accepts every unrelated answer, the humans none: no agreement beyond
    # chance (observed 0 = expected 0)
    assert broken["human_acc"] == "0.0" and float(broken["judge_kappa"]) == 0.0
    assert ref["judge_parse_failures"] == "0"


def test_import_rejects_bad_ratings_with_file_and_line(scenario_job, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "issues.jsonl",
                       read_jsonl(BENCH / "issue/data/issues_subset.jsonl")[:2])
    job = scenario_job("issue", ["reference"], test_index=data, judge="")
    assert run_cli("-f", str(job), "--no-progress", "--no-report", cwd=tmp_path,
                   timeout=300).returncode == 0
    sheet = tmp_path / "sheet"
    assert run_cli("judge", "export", "-f", str(job), "-o", str(sheet),
                   cwd=tmp_path).returncode == 0
    rows = list(csv.DictReader(open(sheet / "ratings.csv", newline="")))
    rows[0]["rating"], rows[1]["rating"] = "1", "yes"
    with open(sheet / "ratings.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with open(sheet / "ratings.csv", newline="") as fh:   # where the second record starts
        reader = csv.reader(fh)
        next(reader), next(reader)
        second = reader.line_num + 1
    res = run_cli("judge", "import", "-f", str(job), str(sheet / "ratings.csv"), cwd=tmp_path)
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert second > 3  # the answers span several lines
    assert f"{sheet / 'ratings.csv'}:{second}: field 'rating' must be 1, 0 or empty, got " \
        "'yes'" in res.stderr
