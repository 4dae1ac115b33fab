"""uid leases, leftovers of dead runs, ``ianvs sandbox doctor`` and ``ianvs sandbox clean``.

Leftovers are made for real: an owner process group holding a real fork server is SIGKILLed
(orphaning its cgroups and host scratch folder), a PostgreSQL harness is SIGKILLed, a network
namespace and an edge-marked process are given an owner that is dead. ``clean`` runs through the
real CLI and must remove exactly those, while a live executor's cgroups and scratch folder (and
the live-owned items) stay. Every subprocess call has a timeout.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.testenvmanager.sandbox import ExecRequest, leftovers  # noqa: E402
from core.testenvmanager.sandbox.leases import UidLeaseError, acquire, lease_status  # noqa: E402
from core.testenvmanager.sandbox.local import LocalExecutor  # noqa: E402
from core.testenvmanager.sandbox.owners import owner_token  # noqa: E402
from tests.processes import dead_pid  # noqa: E402

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="uid leases, cgroups and netns need root")

#: a child that starts an executor without a mount namespace (so its scratch folder is on the
#: host), prints what it made and waits to be killed
_ORPHAN = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from core.testenvmanager.sandbox.local import LocalExecutor
ex = LocalExecutor(workers=1, mountns=False, sweep_leftovers=False)
print(json.dumps({"server": ex._proc.pid, "cgroups": sorted(ex.facts.get("cgroups", {}).values()),
                  "scratch": ex.facts.get("scratch"), "uid_base": ex.uid_base}), flush=True)
time.sleep(120)
"""

_LEASER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from core.testenvmanager.sandbox.leases import acquire
lease = acquire(4)
print(lease.base, flush=True)
time.sleep(120)
"""


def _spawn(code: str) -> tuple[subprocess.Popen[str], str]:
    """Run ``code`` in its own process group; return it and its first line of output."""
    proc = subprocess.Popen([sys.executable, "-c", code, str(ROOT)], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    import selectors

    sel = selectors.DefaultSelector()
    assert proc.stdout is not None
    sel.register(proc.stdout, selectors.EVENT_READ)
    if not sel.select(timeout=60):
        _kill_group(proc)
        pytest.fail("child printed nothing within 60 s")
    return proc, proc.stdout.readline()


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def _wait_gone(pid: int, timeout: float = 60.0) -> None:
    """Wait until ``pid`` has exited (a server shutting down in order takes longer on a loaded
    machine: 10 s was not enough beside another test worker); fail naming it if it does not."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
        time.sleep(0.02)
    assert not os.path.exists(f"/proc/{pid}"), f"process {pid} still runs after {timeout:.0f} s"


def _orphan() -> dict:
    """A real fork server's cgroups and scratch folder whose owners (the executor's process and
    the server) were SIGKILLed together."""
    proc, line = _spawn(_ORPHAN)
    made = json.loads(line)
    _kill_group(proc)
    _wait_gone(made["server"])
    return made


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "core.cmd.benchmarking", "sandbox", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


# ------------------------------------------------------------------------------------ leases
@root_only
def test_two_live_executors_get_disjoint_uid_ranges() -> None:
    with LocalExecutor(workers=2) as a, LocalExecutor(workers=3) as b:
        ranges = sorted([(a.uid_base, a.uid_base + 4), (b.uid_base, b.uid_base + 6)])
        assert ranges[0][1] <= ranges[1][0], ranges
        held = {info.block for info in lease_status() if info.held}
        assert a.uid_base // 64 in held and b.uid_base // 64 in held


@root_only
def test_explicit_base_of_a_live_lease_is_a_clear_error() -> None:
    with LocalExecutor(workers=1) as ex:
        with pytest.raises(UidLeaseError, match=rf"leased by a live executor \(owner pid:start {os.getpid()}:"):
            LocalExecutor(workers=1, uid_base=ex.uid_base + 1)
        with pytest.raises(UidLeaseError, match="omit uid_base"):
            acquire(2, ex.uid_base)
    lease = acquire(2, ex.uid_base)  # released on close: free again at once
    lease.release()


@root_only
def test_a_lease_of_a_sigkilled_process_is_free_at_once() -> None:
    proc, line = _spawn(_LEASER)
    base = int(line)
    try:
        with pytest.raises(UidLeaseError):
            acquire(4, base)
    finally:
        _kill_group(proc)
    lease = acquire(4, base)  # no wait, no sweep: the kernel dropped the flock with the process
    lease.release()


@root_only
def test_the_fork_server_holds_the_lease_until_it_exits() -> None:
    """The executor's process is SIGKILLed alone: its server still holds the uids (children may
    still run as them) until it notices and exits; then they are free."""
    proc = subprocess.Popen([sys.executable, "-c", _ORPHAN, str(ROOT)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout is not None
        made = json.loads(proc.stdout.readline())
        proc.kill()  # the caller only; the server sees EOF and shuts down in order
        proc.wait(timeout=30)
        _wait_gone(made["server"])
        try:
            lease = acquire(2, made["uid_base"])
            lease.release()
        except UidLeaseError as exc:
            # the freed block may be leased at once by another session's executor (the
            # allocator hands out the first free block): free of the killed one is what counts
            holders = str(exc).split("owner pid:start ", 1)[1].split(";", 1)[0].split(", ")
            assert not any(h.startswith(f"{proc.pid}:") for h in holders), exc
        assert not os.path.exists(made["scratch"])  # an orderly shutdown cleans up itself
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


# ------------------------------------------------------------------------------- leftovers
@root_only
def test_a_starting_executor_sweeps_dead_servers_cgroups_and_scratch() -> None:
    made = _orphan()
    assert made["scratch"] and made["cgroups"]
    # they exist now unless another run on this machine has already swept them (every executor
    # sweeps at start); either way none may be left once this executor has started
    with LocalExecutor(workers=1) as ex:
        assert ex.alive()
    assert not os.path.exists(made["scratch"])
    assert not any(os.path.exists(p) for p in made["cgroups"])


def test_liveness_resists_pid_reuse(tmp_path: Path) -> None:
    """A folder named after a live pid whose process started after the folder was last
    changed belongs to a dead owner whose pid was reused."""
    old = tmp_path / f"ianvs-sandbox-{os.getpid()}-abc"
    old.mkdir()
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    fresh = tmp_path / f"ianvs-sandbox-{os.getpid()}-def"
    fresh.mkdir()
    found = {Path(i.name).name: i.alive for i in leftovers.scan(str(tmp_path), leftovers._SANDBOX_RE, "scratch")}
    started = leftovers.alive_since(os.getpid(), time.time() - 3600)
    assert found == {old.name: started, fresh.name: True}
    assert not leftovers.alive_since(dead_pid(), time.time())


@pytest.fixture
def netns_pair() -> Iterator[tuple[str, str]]:
    """A network namespace whose owner is dead and one owned by this (live) process."""
    import shutil

    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("network namespaces need root and iproute2 ('ip')")
    dead = leftovers.netns_name("t", pid=dead_pid())
    live = leftovers.netns_name("t")
    for name in (dead, live):
        subprocess.run(["ip", "netns", "add", name], check=True, capture_output=True, timeout=30)
    try:
        yield dead, live
    finally:
        for name in (dead, live):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def _stale_postgres() -> str | None:
    """A PostgreSQL run directory whose harness was SIGKILLed (None without the binaries)."""
    from core.scenarios.repo.postgres import PostgresUnavailable, find_binaries

    try:
        find_binaries()
        if os.geteuid() == 0:
            import pwd

            pwd.getpwnam("ianvs-postgres")
    except (PostgresUnavailable, KeyError):
        return None
    proc, line = _spawn("import sys, time\nsys.path.insert(0, sys.argv[1])\n"
                        "from core.scenarios.repo.postgres import PostgresService\n"
                        "pg = PostgresService().__enter__()\nprint(pg.run_dir, flush=True)\n"
                        "time.sleep(120)\n")
    _kill_group(proc)
    return line.strip()


@pytest.mark.slow  # over 5 s: the fast tier stays under 5 minutes
@root_only
def test_clean_removes_dead_owners_leftovers_and_keeps_live_ones(netns_pair: tuple[str, str],
                                                                 tmp_path: Path) -> None:
    dead_ns, live_ns = netns_pair
    live = LocalExecutor(workers=1, mountns=False)  # first: its start sweep would take the orphans
    edge_dead = edge_live = None
    ctl: Path | None = None
    try:
        made = _orphan()
        pg_dir = _stale_postgres()
        dead = dead_pid()
        ctl = Path(tempfile.gettempdir()) / f"ianvs-docker-ctl-{dead}-test"
        ctl.mkdir()
        cache = tmp_path / "cache"
        views = cache / "ianvs-smart-coding" / "repo-views"
        (views / f"run-{dead}-x").mkdir(parents=True)
        (views / "run-legacy").mkdir()  # no owner recorded: listed, never removed
        (views / f"run-{os.getpid()}-y").mkdir()
        env = {"XDG_CACHE_HOME": str(cache)}
        edge_dead = subprocess.Popen(["sleep", "120"], env={**os.environ, leftovers.EDGE_OWNER_ENV: f"{dead}:1"})
        edge_live = subprocess.Popen(["sleep", "120"], env={**os.environ, leftovers.EDGE_OWNER_ENV: owner_token()})
        live_groups = sorted(live.facts.get("cgroups", {}).values())
        live_scratch = live.facts["scratch"]
        doctor = _cli("doctor", env=env)
        assert doctor.returncode == 0, doctor.stderr
        out = doctor.stdout
        assert re.search(r"^isolation: (none|process|netns|kernel|full)$", out, re.M), out
        assert "  landlock_abi: " in out and "  uid_drop: " in out and "missing for " in out
        assert "uid leases:" in out and "held" in out
        # Items in shared places (/dev/shm, /tmp, cgroups, netns) may be swept meanwhile by
        # another run on this machine (every executor sweeps dead owners' leftovers at start):
        # each is listed as dead or already gone, never as alive; the views folder sits in this
        # test's own cache, so only this test's commands can see or remove it.
        for path in [made["scratch"], *made["cgroups"], str(ctl), dead_ns]:
            listed = [line for line in out.splitlines() if path in line]
            assert all("dead" in line for line in listed), (path, out)
            assert listed or not os.path.exists(path if "/" in path else f"/run/netns/{path}"), (path, out)
        assert any(f"run-{dead}-x" in line and "dead" in line for line in out.splitlines()), out
        for path in [live_scratch, *live_groups, live_ns]:
            assert any(path in line and "alive" in line for line in out.splitlines()), (path, out)

        dry = _cli("clean", "--dry-run", env=env)
        assert dry.returncode == 0, dry.stderr
        assert "would remove" in dry.stdout and (views / f"run-{dead}-x").is_dir()

        res = _cli("clean", env=env)
        assert res.returncode == 0, res.stdout + res.stderr
        lines = res.stdout.splitlines()
        assert lines[-1].startswith("removed ") and "kept" in lines[-1], lines[-1]
        gone = [made["scratch"], *made["cgroups"], str(ctl), str(views / f"run-{dead}-x"),
                f"/run/netns/{dead_ns}"] + ([pg_dir] if pg_dir else [])
        for path in gone:
            assert not os.path.exists(path), (path, res.stdout)
            # never kept or failed; another suite running at the same time may have removed a
            # dead owner's item in a shared place (/tmp, cgroups, netns) first, which is right
            assert all(line.startswith("removed") for line in lines if path in line), (path, lines)
        private = str(views / f"run-{dead}-x")  # in this test's own cache: only this clean sees it
        assert any(private in line and line.startswith("removed") for line in lines), lines
        kept = [live_scratch, *live_groups, f"/run/netns/{live_ns}", str(views / "run-legacy"),
                str(views / f"run-{os.getpid()}-y")]
        for path in kept:
            assert os.path.exists(path), (path, res.stdout)
        edge_dead.wait(timeout=10)  # killed by clean
        assert edge_dead.returncode == -signal.SIGKILL
        assert edge_live.poll() is None
        assert live.alive()  # the live executor still works
        (result,) = live.run([ExecRequest(id="ok", program="def f():\n    return 1\n",
                                          test="def check(c):\n    assert c() == 1\n", entry_point="f")])
        assert result.passed, result.detail
    finally:
        live.close()
        for proc in (edge_dead, edge_live):
            if proc is None:
                continue
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
        if ctl is not None and ctl.exists():
            ctl.rmdir()
    if pg_dir is None:
        pytest.skip("PostgreSQL binaries missing (.ci/postgres-deps.sh installs them): the rest passed")


def test_clean_reports_errors_in_one_line() -> None:
    res = subprocess.run([sys.executable, "-m", "core.cmd.benchmarking", "sandbox", "clean", "--bogus"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode != 0 and "Traceback" not in res.stderr


def test_docker_listing_never_fails_without_an_engine() -> None:
    assert leftovers.docker_objects("unix:///nonexistent/docker.sock") == []


def test_clean_removes_only_dead_owners_containers() -> None:
    """Labelled containers: a dead owner's goes, a live owner's stays (the project's engine)."""
    from tests.sandbox.docker_env import require_docker

    require_docker()
    import socket

    from core.testenvmanager.sandbox.images import (BASE_IMAGE, DEFAULT_DOCKER_HOST, LABEL,
                                                    OWNER_LABEL, connect)

    client = connect(DEFAULT_DOCKER_HOST, timeout=30)
    made = []
    try:
        for pid in (dead_pid(), os.getpid()):
            made.append(client.containers.run(
                BASE_IMAGE, ["sleep", "120"], detach=True, network_mode="none",
                labels={LABEL: "1", OWNER_LABEL: f"{socket.gethostname()}:{pid}"}))
        res = _cli("clean")
        assert res.returncode == 0, res.stdout + res.stderr
        dead, live = made
        if not any(dead.short_id in line and line.startswith("removed") for line in res.stdout.splitlines()):
            # another test session's docker executor swept it first (an executor's start also
            # removes dead owners' containers): then it must be gone all the same
            import docker

            with pytest.raises(docker.errors.NotFound):
                dead.reload()
            assert dead.short_id not in res.stdout
        assert any(live.short_id in line and line.startswith("kept") for line in res.stdout.splitlines())
        live.reload()
        assert live.status == "running"
    finally:
        for container in made:
            try:
                container.remove(force=True)
            except Exception:  # noqa: BLE001 - already removed by clean
                pass
        client.close()
