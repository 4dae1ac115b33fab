"""Who stops the shared Docker engine: ``.ci/docker-engine.sh stop`` and ``release``.

Two test runs at once share one engine; the run that started it used to stop it at its end while
the other still had containers in it. The script now stops the engine only when no session holds
the users lock (``tests/sandbox/docker_env.py`` holds it while a session uses the engine).

The ``stop`` and ``release`` paths only look at the pid file, the users lock and the marker, so
these tests point the script at files of their own and stand a ``sleep`` process in for dockerd
(a second real engine on this machine would fight the suite's own over the same cgroups and
data root); the lock holders are real processes holding real ``flock`` locks.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "docker-engine.sh"

pytestmark = pytest.mark.skipif(shutil.which("flock") is None, reason="util-linux flock is missing")


class _Daemon:
    """A ``sleep`` detached like dockerd (not our child: its parent shell exits, so the
    system reaps it and ``kill -0`` in the script sees it gone once it dies)."""

    def __init__(self) -> None:
        out = subprocess.run(["setsid", "sh", "-c", "sleep 300 </dev/null >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, check=True)
        self.pid = int(out.stdout.strip())

    def poll(self) -> int | None:
        """None while it runs (a zombie counts as ended), like ``Popen.poll``."""
        try:
            with open(f"/proc/{self.pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return 0
        return 0 if state in ("Z", "X") else None

    def kill(self) -> None:
        try:
            os.kill(self.pid, 9)
        except OSError:
            pass


@pytest.fixture()
def engine(tmp_path: Path):
    """A stand-in daemon (``sleep``) with its pid file, and the script's environment pointing at
    this test's files; the daemon is killed at the end whatever happened."""
    daemon = _Daemon()
    env = {**os.environ,
           "IANVS_DOCKER_PIDFILE": str(tmp_path / "dockerd.pid"),
           "IANVS_DOCKER_USERS": str(tmp_path / "users"),
           "IANVS_DOCKER_STOP_WHEN_IDLE": str(tmp_path / "stop-when-idle"),
           "IANVS_DOCKER_SOCK": str(tmp_path / "none.sock")}
    (tmp_path / "dockerd.pid").write_text(str(daemon.pid))
    yield daemon, env, tmp_path
    daemon.kill()


def _run(env: dict, how: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), how], env=env, capture_output=True, text=True,
                          timeout=60, check=True)


def _alive(daemon: _Daemon) -> bool:
    return daemon.poll() is None


def _hold(env: dict) -> int:
    """This process takes a session's shared lock, as docker_env does."""
    fd = os.open(env["IANVS_DOCKER_USERS"], os.O_RDONLY | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def _wait_dead(daemon: _Daemon, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            return True
        time.sleep(0.05)
    return False


def test_stop_with_nobody_else_stops_the_engine(engine) -> None:
    daemon, env, tmp = engine
    out = _run(env, "stop")
    assert _wait_dead(daemon), out.stderr
    assert not (tmp / "stop-when-idle").exists()


def test_stop_while_another_session_uses_it_waits_for_the_last_release(engine) -> None:
    daemon, env, tmp = engine
    other = _hold(env)  # the other test run, still using the engine
    try:
        out = _run(env, "stop")
        assert "another session still uses the engine" in out.stderr
        time.sleep(0.3)
        assert _alive(daemon), "the engine was stopped under a session that still uses it"
        assert (tmp / "stop-when-idle").exists()
    finally:
        os.close(other)
    _run(env, "release")  # the other run ends
    assert _wait_dead(daemon)
    assert not (tmp / "stop-when-idle").exists()


def test_release_leaves_an_engine_nobody_asked_to_stop(engine) -> None:
    """An engine started by hand (or by a run that has not ended yet) survives a session's end."""
    daemon, env, _tmp = engine
    _run(env, "release")
    time.sleep(0.3)
    assert _alive(daemon)


def test_a_killed_session_does_not_keep_the_engine_alive(engine) -> None:
    """SIGKILL drops a session's lock with its process: the next release stops the engine."""
    daemon, env, _tmp = engine
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time\n"
         "fd = os.open(sys.argv[1], os.O_RDONLY | os.O_CREAT, 0o644)\n"
         "fcntl.flock(fd, fcntl.LOCK_SH)\nprint('held', flush=True)\ntime.sleep(300)\n",
         env["IANVS_DOCKER_USERS"]], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        _run(env, "stop")
        time.sleep(0.3)
        assert _alive(daemon)
    finally:
        holder.kill()
        holder.wait()
    _run(env, "release")
    assert _wait_dead(daemon)


def test_a_second_release_after_the_stop_is_harmless(engine) -> None:
    daemon, env, _tmp = engine
    _run(env, "stop")
    assert _wait_dead(daemon)
    assert _run(env, "release").returncode == 0
