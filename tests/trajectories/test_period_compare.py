"""``python -m core.scenarios.trajectories.period_compare``: a clear shift between the periods
gets an interval that excludes 0 and a small p; no shift an interval around 0 and a large p;
the numbers repeat (fixed seed); bad files get one line naming the line."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.common.errors import ConfigError
from core.scenarios.trajectories.period_compare import compare_periods


def _scores(path: Path, before: list[float], after: list[float]) -> Path:
    rows = [{"period": "before 2024-10-01", "chrf": v} for v in before] + \
           [{"period": "from 2024-10-01", "chrf": v} for v in after]
    path.write_text("".join(json.dumps(r) + "\n" for r in reversed(rows)))
    return path


def test_a_shift_is_found_and_no_shift_is_not(tmp_path: Path) -> None:
    base = [float(x % 7) for x in range(40)]
    (drop,) = compare_periods(_scores(tmp_path / "a.jsonl", [v + 10 for v in base], base), "chrf")
    assert (drop.earlier, drop.later, drop.n_earlier, drop.n_later) == \
        ("before 2024-10-01", "from 2024-10-01", 40, 40)
    assert drop.difference == pytest.approx(-10.0) and drop.high < 0 and drop.p_value < 0.001
    (same,) = compare_periods(_scores(tmp_path / "b.jsonl", base, base[::-1]), "chrf")
    assert same.difference == pytest.approx(0.0) and same.low < 0 < same.high
    assert same.p_value > 0.9
    assert compare_periods(tmp_path / "b.jsonl", "chrf") == [same]  # fixed seed


def test_bad_files_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"period": "before 2024-10-01", "chrf": 1}\n{"period": "from 2024-10-01"}\n')
    with pytest.raises(ConfigError, match="bad.jsonl:2: no numeric 'chrf'"):
        compare_periods(bad, "chrf")
    one = _scores(tmp_path / "one.jsonl", [1.0, 2.0], [])
    with pytest.raises(ConfigError, match="one period only"):
        compare_periods(one, "chrf")
    res = subprocess.run([sys.executable, "-m", "core.scenarios.trajectories.period_compare",
                          str(tmp_path / "none.jsonl"), "--metric", "chrf"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "none.jsonl: scores file not found" in res.stderr
    assert "Traceback" not in res.stderr
    ok = _scores(tmp_path / "ok.jsonl", [1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
    res = subprocess.run([sys.executable, "-m", "core.scenarios.trajectories.period_compare",
                          str(ok), "--metric", "chrf"], capture_output=True, text=True)
    assert res.returncode == 0 and "difference +1" in res.stdout
