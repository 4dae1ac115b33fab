"""A killed build (SIGTERM or SIGKILL, real signals to a real ``ianvs dataset repo`` process) leaves
no folder and no process behind, and the same command run again continues where it stopped and
writes the same tasks as an uninterrupted build.

The repository's tests start a "service" of their own (``sleep`` in a new session, so neither the
test run's process group nor its death signal reaches it): the kind of leftover only the builder's
folder sweep can end. Such tests cannot pass in the job's sandbox (it forbids starting processes),
so these builds skip the sandbox check (``--no-sandbox-check``). Each service writes its own pid to a
file before it becomes ``sleep`` (a service forked just as its test run is killed outlives the run,
which then never reports it); the test ends any that is still alive at the end (they are processes
this test started through the build)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from core.scenarios.repo.env import RepoEnv
from core.testenvmanager.sandbox.owners import pid_alive

REPO = Path(__file__).resolve().parents[3]
N_FUNCS = 6


def _repo(tmp_path: Path, pids: Path) -> Path:
    root = tmp_path / "slowrepo"
    (root / "slowlib").mkdir(parents=True)
    (root / "slowlib" / "__init__.py").write_text("")
    (root / "slowlib" / "core.py").write_text("".join(
        f"def f{i}(x):\n    y = x + {i}\n    return y\n\n\n" for i in range(N_FUNCS)))
    (root / "tests").mkdir()
    (root / "tests" / "conftest.py").write_text(textwrap.dedent(f'''
        import subprocess, time
        import pytest

        @pytest.fixture(scope="session", autouse=True)
        def service():
            subprocess.Popen(["sh", "-c", 'echo $$ >> "$1"; exec sleep 600', "service", {str(pids)!r}],
                             start_new_session=True)
            yield

        @pytest.fixture(autouse=True)
        def slow():
            time.sleep(0.4)
        '''))
    (root / "tests" / "test_core.py").write_text("from slowlib import core\n\n" + "".join(
        f"def test_f{i}():\n    assert core.f{i}(1) == {1 + i}\n\n\n" for i in range(N_FUNCS)))
    return root


def _command(root: Path, out: Path, env_root: Path) -> list[str]:
    return [sys.executable, "-m", "core.cmd.benchmarking", "dataset", "repo", "--repo", str(root), "-o", str(out),
            "--env", str(env_root), "--jobs", "1", "--no-sandbox-check"]


def _environ(tmp_path: Path) -> dict[str, str]:
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir(exist_ok=True)
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "TMPDIR": str(tmpdir),
            "PYTHONPATH": str(REPO)}


def _checks(progress: Path) -> int:
    if not progress.exists():
        return 0
    return sum(1 for line in progress.read_text().splitlines() if '"stage": "check"' in line)


def _processes_under(folder: Path) -> list[int]:
    real = os.path.realpath(folder)
    found = []
    for entry in os.listdir("/proc"):
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd").removesuffix(" (deleted)")
        except OSError:
            continue
        if cwd.startswith(real + os.sep):
            found.append(int(entry))
    return found


def _running(pids: list[int], wait: float = 5.0) -> list[int]:
    """Those of ``pids`` still running after up to ``wait`` seconds (a killed process may stay a
    zombie until its new parent reaps it: not running)."""
    deadline = time.monotonic() + wait
    while True:
        alive = []
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in (b"Z", b"X") and pid_alive(pid):
                alive.append(pid)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)


def _tasks(path: Path) -> list[tuple[str, list[str]]]:
    return sorted((t["task_id"].split("/", 1)[1], t["tests"]["fail_to_pass"])
                  for t in map(json.loads, path.read_text().splitlines()))


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killed_build_is_clean_and_resumes(sig: signal.Signals, tmp_path: Path, repo_env: RepoEnv) -> None:
    pids = tmp_path / "service-pids"
    root = _repo(tmp_path, pids)
    environ = _environ(tmp_path)
    builds = tmp_path / "cache" / "ianvs-smart-coding" / "repo-builds"
    try:
        whole = tmp_path / "whole.jsonl"
        done = subprocess.run(_command(root, whole, repo_env.root), env=environ, cwd=REPO,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert len(_tasks(whole)) == N_FUNCS and list(builds.iterdir()) == []

        out = tmp_path / "tasks.jsonl"
        progress = Path(str(out) + ".progress")
        proc = subprocess.Popen(_command(root, out, repo_env.root), env=environ, cwd=REPO,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while _checks(progress) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None and _checks(progress) >= 2
        folders = list(builds.iterdir())
        assert len(folders) == 1
        proc.send_signal(sig)
        rc = proc.wait(timeout=60)
        assert rc == (128 + sig if sig == signal.SIGTERM else -sig)
        assert not out.exists() and 2 <= _checks(progress) < N_FUNCS
        if sig == signal.SIGTERM:  # cleaned up on the way out
            assert list(builds.iterdir()) == [] and _processes_under(folders[0]) == []
        else:  # the kernel ends the test run (death signal); the folder and the services stay
            deadline = time.monotonic() + 10  # the run's processes go, a just-forked service records itself
            while True:
                left = _processes_under(folders[0])
                recorded = pids.read_text().split() if pids.exists() else []
                if (left and all(str(p) in recorded for p in left)) or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert folders[0].exists()
            assert left and all(str(p) in recorded for p in left), (left, recorded)
        assert list((tmp_path / "tmpdir").iterdir()) == []

        again = subprocess.run(_command(root, out, repo_env.root), env=environ, cwd=REPO,
                               capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr[-2000:]
        assert "already checked before the interruption" in again.stderr
        assert json.loads(again.stdout.splitlines()[0])["resumed_checks"] >= 2
        assert _tasks(out) == _tasks(whole)
        assert not progress.exists() and list(builds.iterdir()) == []
        assert not _processes_under(folders[0])
        assert not _running([int(p) for p in pids.read_text().split()])
        assert list((tmp_path / "tmpdir").iterdir()) == []
    finally:
        for pid in map(int, pids.read_text().split() if pids.exists() else []):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_clean_lists_and_removes_a_dead_build_folder(tmp_path: Path) -> None:
    """The ``repo-builds`` leftover kind: a folder named for a process that is gone is listed as
    dead and removed; one named for this (live) process is kept."""
    from core.scenarios import register_kind_leftovers
    from core.scenarios.repo.leftovers import repo_builds
    from core.testenvmanager.sandbox.leftovers import remove

    register_kind_leftovers()
    from core.testenvmanager.sandbox.owners import owner_token

    child = subprocess.Popen(["true"])
    child.wait()
    dead = tmp_path / f"{child.pid}-1-abcd1234"
    live = tmp_path / f"{owner_token().replace(':', '-')}-abcd1234"
    for folder in (dead, live):
        (folder / "src").mkdir(parents=True)
    items = {Path(i.name).name: i for i in repo_builds(str(tmp_path))}
    assert not items[dead.name].alive and items[live.name].alive
    assert remove(items[dead.name]) and not dead.exists()
    assert not remove(items[live.name]) and live.exists()
