"""The package type-checks: ``mypy`` over ``core/`` (settings in ``mypy.ini``) finds nothing."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # over 5 s: the fast tier stays under 5 minutes
def test_core_type_checks(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy comes with the [test] extra")
    res = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "Success" in res.stdout
