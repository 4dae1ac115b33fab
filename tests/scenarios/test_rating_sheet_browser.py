"""The offline rating page in a real headless browser (Debian's Chromium via selenium, no
network): a rater enters a name and clicks a choice per answer, reloads the page and finds
everything still there (localStorage under the sheet's id; another sheet starts empty), and the
page's own CSV (what its "Download ratings.csv" button saves) is imported by ``ianvs judge
import`` as that rater's ratings. Skips without Chromium (``.ci/system-deps.sh`` installs it)."""
from __future__ import annotations

import csv
import json
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
    browser.find_element("id", "rater").send_keys("rater one")
    assert browser.find_element("id", "count").text == "6 of 6 rated"
    before = browser.execute_script("return csvText();")

    browser.refresh()                                   # a reload loses nothing
    assert browser.find_element("id", "count").text == "6 of 6 rated"
    assert browser.find_element("id", "rater").get_attribute("value") == "rater one"
    assert browser.find_elements("css selector", ".note")[0].get_attribute("value") == \
        'a "quoted", note'
    assert browser.execute_script("return csvText();") == before
    assert "kept in this browser" in browser.find_element("id", "kept").text

    other = tmp_path / "other"                          # another sheet: its own storage
    assert run_cli("judge", "export", "-f", str(job), "-o", str(other), "--seed", "1",
                   cwd=tmp_path).returncode == 0
    browser.get((other / "index.html").resolve().as_uri())
    assert browser.find_element("id", "count").text == "0 of 6 rated"
    browser.get((sheet / "index.html").resolve().as_uri())
    assert browser.find_element("id", "count").text == "6 of 6 rated"
    assert browser.find_element("id", "download").text == "Download ratings.csv"
    text = browser.execute_script("return csvText();")
    (sheet / "ratings.csv").write_text(text, newline="")

    rows = list(csv.DictReader(open(sheet / "ratings.csv", newline="")))
    assert sorted(r["rating"] for r in rows) == ["0", "0", "0", "1", "1", "1"]
    assert rows[0]["note"] == 'a "quoted", note'
    assert {r["rater"] for r in rows} == {"rater one"}
    res = run_cli("judge", "import", "-f", str(job), str(sheet / "ratings.csv"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "imported 6 ratings" in res.stdout
    stored = [json.loads(line) for path in tmp_path.glob("workspace/*/*/*/human_ratings.jsonl")
              for line in path.read_text().splitlines()]
    assert len(stored) == 6 and {r["rater"] for r in stored} == {"rater one"}
