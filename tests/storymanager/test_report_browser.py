"""The report as a person sees it (issue 13, point 7): ``index.html`` opened in a real headless
browser (Debian's Chromium through its chromedriver, driven by selenium; no downloaded
browser, no network), every image loaded, the tables with the expected rows, a screenshot saved.
Reports of a job with failed test cases, NaN metrics and a single ranked test case render too.

``.ci/system-deps.sh`` installs Chromium from Debian's packages; without it these tests skip
and say so."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.runner.conftest import run_cli, toy  # noqa: F401 - fixture
from tests.smart_coding.conftest import codegen_job  # noqa: F401
from tests.storymanager.toy_variants import break_most_cases

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="Debian's chromium and chromium-driver are not installed (.ci/system-deps.sh)")


@pytest.fixture
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium comes with [test]")
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # never let selenium fetch a browser or driver
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1800",
                "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _open(driver, page: Path, shot: Path) -> dict:
    driver.get(page.resolve().as_uri())
    facts = driver.execute_script("""
        const imgs = Array.from(document.images);
        const rows = {};
        for (const t of document.querySelectorAll('table')) rows[t.id] = t.rows.length;
        return {images: imgs.length,
                loaded: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
                rows: rows, title: document.title};""")
    assert driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    return facts


def test_codegen_report_in_a_real_browser(browser, codegen_job, tmp_path: Path) -> None:
    job = codegen_job('        - generator:\n            values: ["canonical", "broken"]\n')
    res = run_cli("-f", str(job), "--no-progress", cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    page = tmp_path / "workspace/smart_coding_codegen/report/index.html"
    facts = _open(browser, page, tmp_path / "report.png")
    assert facts["title"] == "Leaderboard"
    assert facts["images"] >= 3 and facts["loaded"] == facts["images"]
    assert facts["rows"]["leaderboard"] == 3 and facts["rows"]["comparisons"] == 3  # pass@1, latency_s


def test_report_with_failures_nan_and_one_case_in_a_real_browser(browser, toy,
                                                                 tmp_path: Path) -> None:
    break_most_cases(toy)
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=toy)
    assert res.returncode == 1
    facts = _open(browser, toy / "workspace/toyjob/report/index.html", tmp_path / "toy.png")
    assert facts["rows"]["leaderboard"] == 2 and facts["loaded"] == facts["images"]
