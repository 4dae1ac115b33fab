"""Human judgment round trip: run -> ``ianvs judge export`` (CSV + offline HTML) -> two raters'
ratings -> ``ianvs judge import`` twice -> re-run: the leaderboard gets human_acc, the judge's
kappa per test case and pooled over the job, and the raters' agreement; nothing is regenerated.
The judge is the scripted one in its reference-aware mode, a judge that passes its control
check (its verdicts must be known to check the kappas); everything else is the real pipeline in
a child process."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.runner.conftest import run_cli
from tests.scenarios.conftest import BENCH, read_jsonl, write_jsonl

JUDGE = ('    - name: "llm_judge"\n      url: "./metrics.py"\n      generator: "scripted_judge"\n'
         '      generator_options: {reference_aware: true, score: '
         '"functionality: 1\\nreliability: 2\\ninterpretability: 1"}\n')


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

    # Rater A accepts the reference answers except the one about indentation, and none of
    # the broken ones; rater B accepts every reference answer and no broken one. The judge
    # accepts exactly the reference answers (reference-aware, low scores for anything else).
    imported = []
    for rater in ("A", "B"):
        for row in rows:
            broken = "weather report" in row["answer"]
            strict = rater == "A" and "indentation" in row["task"]
            row["rating"], row["rater"] = ("0" if broken or strict else "1"), rater
        path = sheet / f"ratings_{rater}.csv"
        with open(path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        res = run_cli("judge", "import", "-f", str(job), str(path), cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        imported.append(res.stdout)
    assert all("imported 6 ratings" in out for out in imported)
    cases = {entry["case"] for entry in key.values()}
    assert all(list(tmp_path.glob(f"workspace/*/{c}/human_ratings.jsonl")) for c in cases)

    res = run_cli("-f", str(job), "--no-progress", "--no-report", cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stderr.count("all 3 predictions found in") == 2  # nothing regenerated
    after = _rank(tmp_path)
    ref, broken = after["reference"], after["broken"]
    assert ref["judge_valid"] == "1" and ref["judge_parse_failures"] == "0"
    assert ref["human_rated"] == "3" and ref["human_raters"] == "2"
    # per item: 0.5 (indentation: A 0, B 1), 1, 1
    assert float(ref["human_acc"]) == pytest.approx(5 / 6, abs=1e-3)
    # this case alone: the judge accepts all 3, humans 5 of 6 pairs -> no agreement beyond
    # chance; broken alone: everybody rejects everything -> undefined
    assert float(ref["judge_kappa"]) == 0.0 and broken["judge_kappa"] == ""
    assert broken["human_acc"] == "0.0"
    # pooled over both test cases: 11 of 12 pairs agree, judge 6/12 and humans 5/12 accept
    for row in (ref, broken):
        assert float(row["judge_kappa_pooled"]) == pytest.approx(5 / 6, abs=1e-3)
        assert float(row["judge_kappa_pooled_low"]) <= float(row["judge_kappa_pooled"])
        # A vs B on 6 items: 5 agree, A 2/6 and B 3/6 accept -> 2/3; alpha 1 - 2 / (70/11)
        assert float(row["rater_kappa"]) == pytest.approx(2 / 3, abs=1e-3)
        assert float(row["rater_alpha"]) == pytest.approx(1 - 22 / 70, abs=1e-3)
    agreement = json.loads(next(tmp_path.glob("workspace/*/human_agreement.json")).read_text())
    assert agreement["raters"] == ["A", "B"] and agreement["judge_pairs"] == 12


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
