"""The offline rating page in a real headless browser (Debian's Chromium via selenium, no
network): a rater clicks a choice per answer, the page's own CSV (what its "Download
ratings.csv" button saves) is imported by ``ianvs judge import``. Skips without Chromium
(``.ci/system-deps.sh`` installs it)."""
from __future__ import annotations

import csv
from pathlib import Path

from tests.runner.conftest import run_cli
from tests.scenarios.conftest import BENCH, read_jsonl, write_jsonl
from tests.storymanager.test_report_browser import browser, pytestmark  # noqa: F401


def test_rating_page_produces_an_importable_sheet(browser, scenario_job,  # noqa: F811
                                                  tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "issues.jsonl",
                       read_jsonl(BENCH / "issue/data/issues_subset.jsonl")[:3])
    job = scenario_job("issue", ["reference", "broken"], test_index=data, judge="")
    assert run_cli("-f", str(job), "--no-progress", "--no-report", cwd=tmp_path,
                   timeout=300).returncode == 0
    sheet = tmp_path / "sheet"
    assert run_cli("judge", "export", "-f", str(job), "-o", str(sheet),
                   cwd=tmp_path).returncode == 0

    browser.get((sheet / "index.html").resolve().as_uri())
    sections = browser.find_elements("css selector", "section")
    assert len(sections) == 6
    for sec in sections:
        answer = sec.find_elements("css selector", "pre")[2].text
        choice = "0" if "weather report" in answer else "1"
        sec.find_element("css selector", f"input[type=radio][value='{choice}']").click()
    sections[0].find_element("css selector", ".note").send_keys('a "quoted", note')
    assert browser.find_element("id", "count").text == "6 of 6 rated"
    assert browser.find_element("id", "download").text == "Download ratings.csv"
    text = browser.execute_script("return csvText();")
    (sheet / "ratings.csv").write_text(text, newline="")

    rows = list(csv.DictReader(open(sheet / "ratings.csv", newline="")))
    assert sorted(r["rating"] for r in rows) == ["0", "0", "0", "1", "1", "1"]
    assert rows[0]["note"] == 'a "quoted", note'
    res = run_cli("judge", "import", "-f", str(job), str(sheet / "ratings.csv"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "imported 6 ratings" in res.stdout
