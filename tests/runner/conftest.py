"""Shared fixtures: a copy of the toy job in a temporary folder, and a CLI runner."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    """A private copy of tests/fixtures/toy; returns its folder."""
    dst = tmp_path / "toy"
    shutil.copytree(FIXTURES / "toy", dst, ignore=shutil.ignore_patterns("workspace"))
    return dst


def run_cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run the real ``ianvs`` entry point in a child process."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "core.cmd.benchmarking", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, env=env)
