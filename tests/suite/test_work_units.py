"""The suite's pytest-xdist scheduling (tests/conftest.py): the long once-per-content gold
controls are work units of their own and go out first; everything else runs by file."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import OWN_UNITS, work_unit

ROOT = Path(__file__).resolve().parents[2]


def _collected(*paths: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:randomly", *paths],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_every_own_unit_names_collected_tests_and_they_come_first() -> None:
    """A renamed gold-control test would silently fall back into its file's unit: each prefix
    must match a collected test; and the collection puts those tests before all others."""
    files = sorted({prefix.split("::", 1)[0] for prefix in OWN_UNITS})
    ids = _collected(*files)
    for prefix in OWN_UNITS:
        assert any(i.startswith(prefix) for i in ids), f"OWN_UNITS names no test: {prefix}"
    own = [i.startswith(OWN_UNITS) for i in ids]
    assert own == sorted(own, reverse=True), "the own units are not first in the collection"


def test_units_are_files_except_the_own_ones() -> None:
    gold = "tests/scenarios/repo/test_gold_controls.py::test_gold_controls[toolz]"
    assert work_unit(gold) == gold
    records = "tests/scenarios/repo/test_gold_controls.py::test_shipped_records[toolz]"
    assert work_unit(records) == "tests/scenarios/repo/test_gold_controls.py"
    assert work_unit("tests/sandbox/test_local.py::test_x[local]") == "tests/sandbox/test_local.py"
