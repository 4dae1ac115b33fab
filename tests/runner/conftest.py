"""Shared fixtures: a copy of the toy job in a temporary folder, a CLI runner, and a CLI run
killed with SIGKILL mid-way."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
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


def start_cli(*args: str, cwd: Path, group: bool = False, stderr: int = subprocess.DEVNULL
              ) -> subprocess.Popen[str]:
    """Start the real ``ianvs`` entry point in the background (stdout discarded). ``group``: in a
    session of its own, so :func:`kill_when` kills its whole process group, not ``ianvs`` alone."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "core.cmd.benchmarking", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=stderr, text=True,
                            start_new_session=group)


def _line_count(path: Path) -> int:
    try:
        with path.open("rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return 0


def kill_when(proc: subprocess.Popen[str], root: Path, name: str, lines: int, limit: float = 600,
              poll: float = 0.05) -> Path:
    """SIGKILL the run ``proc`` once the first file named ``name`` under ``root`` has ``lines``
    lines (a torn last line counts), and return that file. The signal goes to ``proc``'s process
    group when ``proc`` leads one (:func:`start_cli` with ``group``), else to ``proc`` alone (its
    fork server exits when its socket closes). Fails the test when the run ends first (with its
    stderr when piped) or the file stays shorter for ``limit`` seconds (the run is killed then)."""
    def kill() -> None:
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.send_signal(signal.SIGKILL)
        proc.wait()

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        found = list(root.rglob(name))
        if found and _line_count(found[0]) >= lines:
            kill()
            return found[0]
        if proc.poll() is not None:
            pytest.fail(f"the run ended before {name} reached {lines} lines: "
                        f"{proc.stderr.read()[-2000:] if proc.stderr else ''}")
        time.sleep(poll)
    kill()
    pytest.fail(f"{name} never reached {lines} lines in {limit:.0f} s")
