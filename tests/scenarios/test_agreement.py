"""Agreement statistics with hand-computed values, and ratings of several raters kept side by
side: two raters' imports add up, a rater's re-import replaces only that rater's ratings, and
judge-human agreement is pooled over the test cases of a job with an interval.

The job here is a folder laid out as a finished run leaves it (``case.json``,
``predictions.jsonl``, ``judge_items.jsonl`` per test case): these tests are about reading
and pooling ratings, which needs no model; the round trip through a real run is in
test_human_roundtrip.py."""
from __future__ import annotations

import csv
import json
import logging
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.common.errors import DatasetError
from core.scenarios.agreement import (bootstrap_interval, cohen_kappa, krippendorff_alpha,
                                      pooled_kappa)
from core.scenarios.human import (AGREEMENT_FILE, HUMAN_FILE, KEY_FILE, human_judgment,
                                  import_ratings, read_ratings)

# two test cases of four items each; the judge's accept verdicts
JUDGE = {"c1": [1, 1, 0, 0], "c2": [1, 0, 1, 0]}
RATER_A = {"c1": [1, 1, 0, 0], "c2": [1, 0, 1, 0]}   # agrees with the judge on all 8
RATER_B = {"c1": [1, 1, 0, 1], "c2": [1, 0, 1, 0]}   # differs on c1's last item


def test_cohen_kappa_known_values() -> None:
    assert cohen_kappa([1, 1, 0], [1, 0, 1]) == pytest.approx(-0.5)
    assert cohen_kappa([1, 0, 0], [1, 0, 1]) == pytest.approx(0.4)
    assert cohen_kappa([1, 0, 1, 1], [1, 0, 0, 1]) == pytest.approx(0.5)
    assert math.isnan(cohen_kappa([1, 1], [1, 1])) and math.isnan(cohen_kappa([1], [1]))


def test_krippendorff_alpha_known_values() -> None:
    # coincidences: 1-1: 4, 0-0: 2, 0-1: 2 -> D_o = 2, D_e = (64 - 25 - 9) / 7 -> 8/15
    units = [[1, 1], [0, 0], [1, 0], [1, 1]]
    assert krippendorff_alpha(units) == pytest.approx(8 / 15)
    assert krippendorff_alpha(units + [[0]]) == pytest.approx(8 / 15)  # a lone rating: ignored
    assert krippendorff_alpha([[1, 1, 1], [0, 0, 0]]) == 1.0           # three raters agree
    assert math.isnan(krippendorff_alpha([[1, 1], [1, 1]]))             # one label only
    assert math.isnan(krippendorff_alpha([[1], [0]]))                   # nothing pairable


def test_bootstrap_interval_is_deterministic_and_brackets_the_value() -> None:
    data = [0.0, 1.0] * 10

    def avg(v: list[float]) -> float:
        return sum(v) / len(v)

    value, low, high = bootstrap_interval(data, avg)
    assert value == 0.5 and 0.25 < low < 0.5 < high < 0.75
    assert bootstrap_interval(data, avg) == (value, low, high)
    assert bootstrap_interval([1.0] * 5, avg) == (1.0, 1.0, 1.0)
    assert math.isnan(bootstrap_interval([], avg)[1])
    # pooled kappa over items holding several pairs each
    assert pooled_kappa([[(1, 1), (1, 0)], [(0, 0), (0, 0)]]) == pytest.approx(0.5)


def _job(tmp_path: Path) -> SimpleNamespace:
    """A finished run's folder with two test cases and a blind sheet's ``items.json``."""
    job_dir = tmp_path / "workspace" / "job"
    key = {}
    for case, verdicts in JUDGE.items():
        case_dir = job_dir / "alg" / case
        case_dir.mkdir(parents=True)
        (case_dir / "case.json").write_text("{}")
        (case_dir / "predictions.jsonl").write_text("")
        (case_dir / "judge_items.jsonl").write_text("".join(
            json.dumps({"task_id": f"t{n}", "sample_index": 0, "accept": bool(v)}) + "\n"
            for n, v in enumerate(verdicts)))
        key.update({f"{case}-t{n}": {"case": f"alg/{case}", "task_id": f"t{n}",
                                     "sample_index": 0} for n in range(len(verdicts))})
    sheet = tmp_path / "sheet"
    sheet.mkdir()
    (sheet / KEY_FILE).write_text(json.dumps(key))
    return SimpleNamespace(job_dir=job_dir)


def _sheet(tmp_path: Path, name: str, ratings: dict[str, list[int]], rater: str) -> Path:
    path = tmp_path / "sheet" / f"{name}.csv"
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["item", "rating", "note", "rater"])
        writer.writeheader()
        for case, values in ratings.items():
            for n, v in enumerate(values):
                writer.writerow({"item": f"{case}-t{n}", "rating": str(v), "note": "",
                                 "rater": rater})
    return path


def test_two_raters_are_kept_and_agreement_is_pooled(tmp_path: Path) -> None:
    job = _job(tmp_path)
    assert import_ratings(job, _sheet(tmp_path, "a", RATER_A, "A")) == 8
    assert import_ratings(job, _sheet(tmp_path, "b", RATER_B, "B")) == 8
    c1 = job.job_dir / "alg" / "c1"
    stored = read_ratings(c1 / HUMAN_FILE)
    assert len(stored) == 8 and {r for r, _t, _i in stored} == {"A", "B"}
    summary = json.loads((job.job_dir / AGREEMENT_FILE).read_text())
    assert summary["raters"] == ["A", "B"] and summary["items"] == 8
    # 16 judge-human pairs, 15 agree; judge 8/16 accepts, humans 9/16 -> p_e 0.5 -> 0.875
    assert summary["judge_pairs"] == 16 and summary["judge_kappa"] == 0.875
    assert summary["judge_kappa_low"] <= 0.875 <= summary["judge_kappa_high"] <= 1.0
    # A vs B: 7 of 8 agree, A 4/8 accepts, B 5/8 -> kappa 0.75; alpha 1 - 2/(126/15)
    assert summary["rater_kappa"] == 0.75
    assert summary["rater_alpha"] == pytest.approx(1 - 2 / (126 / 15), abs=1e-4)
    assert summary["rater_alpha_low"] <= summary["rater_alpha"] <= summary["rater_alpha_high"]

    row = human_judgment(None, None, SimpleNamespace(workspace=c1))
    assert row["human_rated"] == 4 and row["human_raters"] == 2
    assert row["human_acc"] == 0.625                    # per item: 1, 1, 0, 0.5
    assert row["judge_kappa"] == 0.75                   # this case: 7 of 8 pairs agree
    assert row["judge_kappa_pooled"] == 0.875           # both cases of the job
    assert row["rater_kappa"] == 0.75


def test_a_raters_reimport_replaces_only_their_ratings(tmp_path: Path) -> None:
    job = _job(tmp_path)
    import_ratings(job, _sheet(tmp_path, "a", RATER_A, "A"))
    import_ratings(job, _sheet(tmp_path, "b", RATER_B, "B"))
    fixed = {"c1": [0, 1, 0, 0], "c2": RATER_A["c2"]}
    import_ratings(job, _sheet(tmp_path, "a2", fixed, "A"))
    stored = read_ratings(job.job_dir / "alg" / "c1" / HUMAN_FILE)
    assert len(stored) == 8
    assert stored[("A", "t0", 0)] == 0 and stored[("B", "t0", 0)] == 1
    # an explicit rater overrides the column: a third rater is added
    import_ratings(job, _sheet(tmp_path, "c", RATER_A, "A"), rater="C")
    assert len(read_ratings(job.job_dir / "alg" / "c1" / HUMAN_FILE)) == 12
    summary = json.loads((job.job_dir / AGREEMENT_FILE).read_text())
    assert summary["raters"] == ["A", "B", "C"] and math.isnan(summary["rater_kappa"])
    assert not math.isnan(summary["rater_alpha"])       # alpha takes any number of raters


def test_sheet_rater_rules(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    job = _job(tmp_path)
    with caplog.at_level(logging.WARNING):
        import_ratings(job, _sheet(tmp_path, "anon", RATER_A, ""))
    assert "names no rater" in caplog.text
    assert {r for r, _t, _i in read_ratings(job.job_dir / "alg" / "c1" / HUMAN_FILE)} == {
        "unnamed"}
    mixed = _sheet(tmp_path, "mixed", RATER_A, "A")
    mixed.write_bytes(mixed.read_bytes().replace(b",A\r\n", b",Z\r\n", 1))
    with pytest.raises(DatasetError, match=r"one rater per sheet, found \['A', 'Z'\]"):
        import_ratings(job, mixed)
    with pytest.raises(DatasetError, match="rater 'a,b' must be"):
        import_ratings(job, _sheet(tmp_path, "a", RATER_A, "A"), rater="a,b")


def test_ratings_written_before_raters_were_kept_still_read(tmp_path: Path) -> None:
    old = tmp_path / HUMAN_FILE
    old.write_text('{"task_id": "t0", "sample_index": 0, "rating": 1}\n')
    assert read_ratings(old) == {("unnamed", "t0", 0): 1}
