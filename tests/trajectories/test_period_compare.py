"""``python -m core.scenarios.trajectories.period_compare``: a clear shift between the periods
gets an interval that excludes 0 and a small p; no shift an interval around 0 and a large p;
the numbers repeat (fixed seed); bad files get one line naming the line."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from core.common.errors import ConfigError
from core.scenarios.trajectories.period_compare import adjusted_difference, compare_periods, task_sizes


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


def _confounded(tmp_path: Path, shift: float) -> tuple[Path, Path]:
    """40 tasks a period; the later ones have larger diffs, and the score falls with the diff's
    size alone (plus ``shift`` for the later period)."""
    tasks, rows = [], []
    for i in range(80):
        later = i >= 40
        size = 200 + 20 * (i % 40) + (300 if later else 0)  # overlapping ranges
        tasks.append({"id": f"t{i}", "diff": "x" * size})
        score = 80 - 8 * math.log1p(size) + (i % 5) + (shift if later else 0)
        rows.append({"task_id": f"t{i}", "period": "from 2024-10-01" if later
                     else "before 2024-10-01", "chrf": score})
    data, scores = tmp_path / "tasks.jsonl", tmp_path / "scores.jsonl"
    data.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    scores.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data, scores


def test_a_difference_made_by_larger_tasks_goes_away_when_adjusted(tmp_path: Path) -> None:
    """Harder later tasks, no change of the model: the raw difference is large and significant,
    the size-adjusted one is near 0 with a large p; a real shift within sizes is still found."""
    data, scores = _confounded(tmp_path, 0.0)
    sizes = task_sizes(data, "diff")
    assert sizes["t0"] == 200 and sizes["t79"] == 1280
    (raw,) = compare_periods(scores, "chrf")
    assert raw.difference < -3 and raw.p_value < 0.001
    adj = adjusted_difference(scores, "chrf", sizes, "diff", bins=4)
    assert abs(adj.difference) < 1 and adj.low < 0 < adj.high and adj.p_value > 0.05
    assert sum(b[2] + b[3] for b in adj.bins) == 80
    data, scores = _confounded(tmp_path, -4.0)
    adj = adjusted_difference(scores, "chrf", task_sizes(data, "diff"), "diff", bins=4)
    assert adj.difference < -3 and adj.high < 0 and adj.p_value < 0.01
    assert adjusted_difference(scores, "chrf", task_sizes(data, "diff"), "diff") == adj


def test_adjusting_needs_every_task_and_the_field(tmp_path: Path) -> None:
    data, scores = _confounded(tmp_path, 0.0)
    sizes = task_sizes(data, "diff")
    del sizes["t3"]
    with pytest.raises(ConfigError, match="t3 not in the task file"):
        adjusted_difference(scores, "chrf", sizes, "diff")
    with pytest.raises(ConfigError, match="tasks.jsonl:1: task t0 has no measurable 'files'"):
        task_sizes(data, "files")
    cli = [sys.executable, "-m", "core.scenarios.trajectories.period_compare", str(scores),
           "--metric", "chrf"]
    res = subprocess.run([*cli, "--adjust-for", "diff"], capture_output=True, text=True)
    assert res.returncode == 2 and "--adjust-for and --tasks go together" in res.stderr
    res = subprocess.run([*cli, "--adjust-for", "diff", "--tasks", str(data)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "chrf adjusted for log(1 + diff)" in res.stdout and res.stdout.count("  diff bin ") == 4
