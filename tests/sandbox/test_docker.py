"""The ``docker`` backend beyond the shared conformance suites (which run against it from
``conftest.BACKENDS``): container lock-down, outcome mapping, images, leftovers.

Real Docker engine (``.ci/docker-engine.sh``), real containers and images; skipped with the
reason only where the engine cannot run (no root).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from core.testenvmanager.sandbox import ExecRequest, IsolationLevel, Outcome, get_executor
from core.testenvmanager.sandbox.container import SERVER_CAPS, START_USER
from core.testenvmanager.sandbox.images import (BASE_IMAGE, DEFAULT_DOCKER_HOST, LABEL, ImageError,
                                                connect, sweep, task_image)
from core.testenvmanager.sandbox.leases import FIRST_UID, lease_status

from .conftest import CHECK_ADD, GOOD_PROGRAM, run_one
from .docker_env import require_docker

ROOT = Path(__file__).resolve().parents[2]
NUMPY = {"numpy": "numpy"}


@pytest.fixture(scope="module")
def client():
    require_docker()
    cl = connect(DEFAULT_DOCKER_HOST)
    yield cl
    cl.close()


@pytest.fixture(scope="module")
def warm(client):
    with get_executor("docker", workers=2, docker_host=DEFAULT_DOCKER_HOST) as ex:
        yield ex


def _ours(client) -> list:
    """Running or stopped containers labelled as owned by this test process."""
    owner = f"io.ianvs.owner={os.uname().nodename}:{os.getpid()}"
    return client.containers.list(all=True, filters={"label": owner}, ignore_removed=True)


def test_warm_containers_are_locked_down(client, warm) -> None:
    (server,) = warm._pools[BASE_IMAGE]
    cfg = client.api.inspect_container(server.container.id)
    host = cfg["HostConfig"]
    assert host["NetworkMode"] == "none" and list(cfg["NetworkSettings"]["Networks"]) == ["none"]
    assert host["ReadonlyRootfs"] is True
    # root only to hand out uids: the capabilities to do so and to clean up after other uids
    assert host["CapDrop"] == ["ALL"] and sorted(host["CapAdd"]) == sorted(SERVER_CAPS)
    assert not {"SYS_ADMIN", "SYS_PTRACE", "SYS_RESOURCE", "SYS_NICE", "SETPCAP"} & set(host["CapAdd"])
    assert "no-new-privileges" in host["SecurityOpt"]
    assert cfg["Config"]["User"] == START_USER
    assert host["PidsLimit"] and host["PidsLimit"] > 0
    assert host["Memory"] == host["MemorySwap"] == (2 * 1024 + 256) << 20
    assert host["NanoCpus"] == 2 * 10**9
    assert set(host["Tmpfs"]) == {"/tmp", "/dev/shm"}
    assert not host.get("Privileged") and cfg["Config"]["Labels"][LABEL] == "1"
    mounts = {m["Destination"]: m for m in cfg["Mounts"]}
    assert mounts["/opt/ianvs/harness"]["RW"] is False
    # the control socket is gone once the server is connected: nothing inside can reach it
    assert os.listdir(mounts["/run/ianvs"]["Source"]) == []


def _status(pid: int) -> dict[str, str]:
    """``/proc/<pid>/status`` of a host process as ``{field: value}``."""
    with open(f"/proc/{pid}/status") as fh:
        return dict(line.rstrip("\n").split(":\t", 1) for line in fh if ":\t" in line)


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as fh:
        return [int(p) for p in fh.read().split()]


def _server_pid(server) -> int:
    """Host pid of a warm container's fork server (the container's first process)."""
    server.container.reload()
    return int(server.container.attrs["State"]["Pid"])


def test_server_judge_and_sample_run_as_distinct_uids_without_capabilities(warm) -> None:
    """Seen from the host while a boundary request runs: the server, the slot's judge and the
    sample are three uids of the container's lease (server ``base + 2 * workers``, judges
    ``base + workers + slot``, samples ``base + slot``); the judge and the sample hold no
    capability, the server and the slot's spawner (the server's uid; it forks the sample) only
    SERVER_CAPS; and the sample sees its own uid as the host does."""
    (server,) = warm._pools[BASE_IMAGE]
    base, workers, pid = server.uid_base, warm.workers, _server_pid(server)
    assert FIRST_UID <= base and workers == 2
    probe = ("import os, time\nprint(os.getresuid(), os.getresgid(), os.getgroups())\n"
             "time.sleep(1.5)\n" + GOOD_PROGRAM)
    seen: dict[int, dict[str, str]] = {}
    spawners: dict[int, dict[str, str]] = {}

    def role(status: dict[str, str]) -> str:
        uid = int(status["Uid"].split()[0])
        return ("cand" if base <= uid < base + workers else
                "judge" if base + workers <= uid < base + 2 * workers else "?")

    def watch() -> None:
        # A spawner's child is the server's uid for the moment between its fork and its uid
        # drop; each pass overwrites what the last one saw, so the watch ends on a settled view
        # (a sample that never drops stays "?" and fails below, as does its stdout check).
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and {role(st) for st in seen.values()} != {"cand", "judge"}:
            for child in _children(pid):  # judges and spawners; samples are a spawner's
                try:
                    status = _status(child)
                    if int(status["Uid"].split()[0]) == base + 2 * workers:
                        spawners[child] = status
                        for sample in _children(child):
                            seen[sample] = _status(sample)
                    else:
                        seen[child] = status
                except OSError:
                    pass
            time.sleep(0.05)

    thread = threading.Thread(target=watch)
    thread.start()
    res = run_one(warm, program=probe, test=CHECK_ADD, entry_point="add", grading="boundary",
                  timeout=10)
    thread.join()
    assert res.passed, res.detail
    status = _status(pid)
    uid_of = {child: int(st["Uid"].split()[0]) for child, st in seen.items()}
    assert {role(st) for st in seen.values()} == {"cand", "judge"}, (base, seen)
    server_uid = base + 2 * workers
    assert status["Uid"].split() == [str(server_uid)] * 4 and status["Gid"].split() == [str(server_uid)] * 4
    assert len({server_uid, *uid_of.values()}) == 3
    caps = {key: int(status[key], 16) for key in ("CapEff", "CapPrm", "CapInh", "CapAmb")}
    wanted = sum(1 << n for n in (1, 3, 5, 6, 7))  # DAC_OVERRIDE, FOWNER, KILL, SETGID, SETUID
    assert caps == {"CapEff": wanted, "CapPrm": wanted, "CapInh": 0, "CapAmb": 0}
    assert spawners, "the sample was not a spawner's child"
    for st in spawners.values():
        assert {key: int(st[key], 16) for key in caps} == caps, st
    for st in seen.values():
        assert st["Uid"].split()[1:] == st["Uid"].split()[:1] * 3  # real = effective = saved = fs
        assert st["Gid"].split() == st["Uid"].split() and st["Groups"].strip() == ""
        assert all(int(st[key], 16) == 0 for key in ("CapEff", "CapPrm", "CapInh", "CapAmb")), st
        assert st["NoNewPrivs"].strip() == "1"
    (sample_uid,) = [uid for uid in uid_of.values() if uid < base + workers]
    assert res.stdout.startswith(f"({sample_uid}, {sample_uid}, {sample_uid}) "
                                 f"({sample_uid}, {sample_uid}, {sample_uid}) []"), res.stdout


def test_isolation_is_full_with_the_container_walls(warm) -> None:
    assert warm.isolation is IsolationLevel.FULL, warm.facts.get("notes")
    assert warm.facts["landlock_abi"] > 0 and warm.facts["seccomp"]
    assert warm.facts["container"] is True and warm.facts["container_uids"] is True
    assert warm.facts["drop_uid"] is True


def test_each_container_leases_its_uids_until_it_is_removed(client) -> None:
    """Two containers of one executor get disjoint leased uid ranges (container uids are host
    uids); closing the executor ends both leases."""
    def mine() -> list[tuple[int, int]]:
        return sorted((int(i.record["uid_base"]), int(i.record["count"])) for i in lease_status()
                      if i.held and str(i.record.get("owner", "")).split(":")[0] == str(os.getpid()))

    before = mine()
    with get_executor("docker", workers=1, pool_size=2) as ex:
        pool = ex._pool(BASE_IMAGE)
        held = sorted(set(mine()) - set(before))
        assert held == sorted((server.uid_base, 3) for server in pool), (held, before)
        assert len({server.uid_base for server in pool}) == 2
    assert mine() == before


#: an attack on everything else in the container, run by the sample itself or by a process it
#: starts: ``attack(own pids)`` prints one line ``ATTACK <json>``. Every existing pid (found with
#: ``kill(pid, 0)``: ESRCH means none) but its own is hit with prlimit (lowering the open-files,
#: processes and memory limits), setpriority (nice 19), SIGSTOP, SIGINT (pid 1, the server, has
#: Python's handler for it) and SIGKILL, and its ``/proc/<pid>/environ`` is read.
ATTACK = textwrap.dedent("""
    import json, os, resource, signal
    def attack(own):
        own = set(own) | {os.getpid()}
        existing = [pid for pid in range(1, 4096) if pid not in own and _exists(pid)]
        hits, errors = [], {}
        actions = [
            ("prlimit_nofile", lambda p: resource.prlimit(p, resource.RLIMIT_NOFILE, (4, 4))),
            ("prlimit_nproc", lambda p: resource.prlimit(p, resource.RLIMIT_NPROC, (1, 1))),
            ("prlimit_as", lambda p: resource.prlimit(p, resource.RLIMIT_AS, (1 << 20, 1 << 20))),
            ("setpriority", lambda p: os.setpriority(os.PRIO_PROCESS, p, 19)),
            ("environ", lambda p: open(f"/proc/{p}/environ", "rb").read()),
            ("sigstop", lambda p: os.kill(p, signal.SIGSTOP)),
            ("sigint", lambda p: os.kill(p, signal.SIGINT)),
            ("sigkill", lambda p: os.kill(p, signal.SIGKILL)),
        ]
        for pid in existing:
            for name, action in actions:
                try:
                    action(pid)
                    hits.append([name, pid])
                except OSError as exc:
                    errors[exc.errno] = errors.get(exc.errno, 0) + 1
        print("ATTACK " + json.dumps({"existing": existing, "hits": hits, "errors": errors}), flush=True)
    def _exists(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:
            return True
        return True
""")
ATTACK_SELF = ATTACK + "attack([])\n" + GOOD_PROGRAM
ATTACK_CHILD = ("import os, subprocess, sys\n"
                f"subprocess.run([sys.executable, '-c', {ATTACK + 'import sys; attack(map(int, sys.argv[1:]))'!r}, "
                "str(os.getpid())], check=True)\n" + GOOD_PROGRAM)


def _nice_and_limits(pid: int) -> tuple[str, str]:
    with open(f"/proc/{pid}/stat") as fh:
        nice = fh.read().rsplit(")", 1)[1].split()[16]
    with open(f"/proc/{pid}/limits") as fh:
        return nice, fh.read()


@pytest.fixture(scope="module", params=["walls", "no_landlock"])
def bare_docker(request, client):
    """Executors without the interpreter-level policy (the kernel answers every attempt): with
    the container's full walls, and without Landlock, whose signal scope would otherwise stop
    the signals before the uids are even compared."""
    options = {"audit_hook": False, **({"landlock": False} if request.param == "no_landlock" else {})}
    with get_executor("docker", workers=2, docker_host=DEFAULT_DOCKER_HOST, **options) as ex:
        yield ex


@pytest.mark.slow
@pytest.mark.parametrize("how", ["sample", "subprocess"])
@pytest.mark.parametrize("tier", ["boundary", "in_process"])
def test_sample_cannot_touch_the_server_or_the_judges(bare_docker, how: str, tier: str) -> None:
    """The attack on the fork server and the judges (the reproduced one: prlimit on the server
    made every later request of the container ``infra_error``) achieves nothing: every attempt
    on another process fails, the server's limits and nice value are unchanged, and the next
    honest request of the same container passes."""
    (server,) = bare_docker._pools[BASE_IMAGE]
    run_one(bare_docker, program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add", grading="boundary")
    pid = _server_pid(server)
    before = _nice_and_limits(pid)
    res = run_one(bare_docker, program=ATTACK_SELF if how == "sample" else ATTACK_CHILD,
                  test=CHECK_ADD, entry_point="add", grading=tier, timeout=20,
                  allow_subprocess=how == "subprocess")
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("ATTACK ")]
    if line:
        report = json.loads(line[0][len("ATTACK "):])
        assert report["hits"] == [], report
        # it did find its targets: the server (pid 1) and at least the slot's judge
        assert 1 in report["existing"] and len(report["existing"]) >= 2, report
        assert res.passed, (res.outcome, res.detail, res.stderr[-800:])
    else:  # a stricter seccomp filter may kill such a sample outright: never a pass
        assert res.outcome is Outcome.SANDBOX_VIOLATION, (res.outcome, res.detail, res.stderr[-800:])
    assert _server_pid(server) == pid and _nice_and_limits(pid) == before
    for judge in _children(pid):  # born with the server's nice value, never reniced
        assert _nice_and_limits(judge)[0] == before[0]
    for tier_after in ("boundary", "in_process"):
        after = run_one(bare_docker, program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add",
                        grading=tier_after)
        assert after.passed, (after.outcome, after.detail)
    assert bare_docker.alive()


def test_container_oom_kill_is_memory_exceeded(client) -> None:
    """The container's memory limit (200 MB) is below the sample's own limit (1 GB): the
    container's OOM killer stops the sample, graded ``memory_exceeded``; the server lives."""
    hog = ("import mmap\nbufs = []\nfor _ in range(30):\n    m = mmap.mmap(-1, 20 << 20)\n"
           "    m.write(b'x' * (20 << 20))\n    bufs.append(m)\n" + GOOD_PROGRAM)
    with get_executor("docker", workers=1, container_memory_mb=200) as ex:
        res = run_one(ex, program=hog, test=CHECK_ADD, entry_point="add", memory_mb=1024, timeout=20)
        assert res.outcome is Outcome.MEMORY_EXCEEDED, (res.outcome, res.detail)
        assert ex.alive()
        assert run_one(ex, program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add").passed


def test_fresh_container_per_sample(client) -> None:
    before = {c.id for c in _ours(client)}
    with get_executor("docker", workers=2, fresh_container=True) as ex:
        reqs = [ExecRequest(id=f"f{i}", program="import os\nprint(os.uname().nodename)\n" + GOOD_PROGRAM,
                            test=CHECK_ADD, entry_point="add") for i in range(4)]
        loop = ExecRequest(id="loop", program="while True:\n    pass\n", test=CHECK_ADD,
                           entry_point="add", timeout=1.0)
        results = {r.id: r for r in ex.run([*reqs, loop])}
    assert all(results[f"f{i}"].passed for i in range(4)), [r.detail for r in results.values()]
    # the host name of a container is its id: four samples, four containers
    assert len({results[f"f{i}"].stdout for i in range(4)}) == 4
    assert results["loop"].outcome is Outcome.TIMEOUT
    time.sleep(1.0)
    assert {c.id for c in _ours(client)} <= before, "fresh containers were left behind"


def test_unknown_image_is_one_clear_error_before_anything_runs(client) -> None:
    with pytest.raises(ImageError, match="no-such-image:1.*does not exist.*ianvs sandbox image build"):
        get_executor("docker", image="no-such-image:1")


def test_unknown_run_env_of_a_request_is_infra_error(warm) -> None:
    res = run_one(warm, program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add",
                  metadata={"run_env": "no-such-image:2"})
    assert res.outcome is Outcome.INFRA_ERROR and "no-such-image:2" in res.detail


def test_task_image_with_numpy_is_cached_by_content(client, warm) -> None:
    first = time.monotonic()
    tag = task_image(client, BASE_IMAGE, NUMPY)
    again = task_image(client, BASE_IMAGE, NUMPY)
    assert tag == again and tag.startswith("ianvs-sandbox/task:")
    labels = client.images.get(tag).labels
    assert labels[LABEL] == "1" and labels["io.ianvs.kind"] == "task"
    assert time.monotonic() - first < 120
    prog = "import numpy as np\ndef add(a, b):\n    return int(np.add(a, b))\n"
    res = run_one(warm, program=prog, test=CHECK_ADD, entry_point="add",
                  metadata={"packages": NUMPY})
    assert res.passed, res.detail
    plain = run_one(warm, program=prog, test=CHECK_ADD, entry_point="add")
    assert plain.outcome is Outcome.ERROR and "numpy" in plain.detail  # not in the base image


def test_unknown_package_is_a_clear_error(client) -> None:
    with pytest.raises(ImageError, match="ianvs-no-such-package-0xdead"):
        task_image(client, BASE_IMAGE, {"nosuch": "ianvs-no-such-package-0xdead"})


def test_packages_are_not_installable_at_test_time(warm) -> None:
    """No network inside: pip cannot reach any index (and the sample cannot start it)."""
    prog = ("def add(a, b):\n    import socket\n"
            "    try:\n        s = socket.socket()\n        s.settimeout(2)\n        s.connect(('127.0.0.1', 9))\n"
            "    except OSError:\n        pass\n"
            "    import urllib.request\n    try:\n"
            "        urllib.request.urlopen('http://localhost:9/', timeout=2)\n"
            "    except OSError:\n        return a + b\n    return -1\n")
    assert run_one(warm, program=prog, test=CHECK_ADD, entry_point="add").passed


# SIGINT gets Python's own handler back: a shell starts background jobs with SIGINT ignored, and
# a child that inherits that would never see the Ctrl-C this test sends
SCRIPT = textwrap.dedent("""
    import signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.path.insert(0, {root!r})
    from core.testenvmanager.sandbox import ExecRequest, get_executor
    ex = get_executor("docker", workers=1)
    req = ExecRequest(id="long", program="import time\\ntime.sleep(60)\\n", test="x = 1\\n",
                      mode="script", timeout=60)
    print("running", flush=True)
    list(ex.run([req]))
""")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_no_container_is_left_after_a_crash_or_ctrl_c(client, tmp_path, sig) -> None:
    def control_dirs(pid: int) -> set[str]:
        """The crashed run's own control folders (other runs on this machine make theirs)."""
        return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(f"ianvs-docker-ctl-{pid}-")}

    proc = subprocess.Popen([sys.executable, "-c", SCRIPT.format(root=str(ROOT))],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"running"
        owner = f"io.ianvs.owner={os.uname().nodename}:{proc.pid}"
        assert client.containers.list(filters={"label": owner}, ignore_removed=True), "its container is not running"
        time.sleep(0.5)
        proc.send_signal(sig)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 20
        while client.containers.list(all=True, filters={"label": owner}, ignore_removed=True):
            assert time.monotonic() < deadline, "the container outlived ianvs"
            time.sleep(0.2)
        # its host-side control folder goes too: at once on Ctrl-C, at the next executor's
        # start after SIGKILL (nothing runs in a killed process to remove it)
        get_executor("docker", workers=1).close()
        assert not control_dirs(proc.pid)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for c in client.containers.list(all=True, filters={"label": f"io.ianvs.owner={os.uname().nodename}:{proc.pid}"}, ignore_removed=True):
            c.remove(force=True)


def test_sweep_removes_labelled_leftovers(client) -> None:
    left = client.containers.create(BASE_IMAGE, ["sleep", "60"], network_mode="none",
                                    labels={LABEL: "1", "io.ianvs.owner": "gone-host:1"})
    try:
        counts = sweep(client, owner_alive=lambda labels: labels.get("io.ianvs.owner") != "gone-host:1")
        assert counts["containers"] >= 1
        assert not client.containers.list(all=True, filters={"id": left.id}, ignore_removed=True)
    finally:
        try:
            left.remove(force=True)
        except Exception:  # noqa: BLE001 - already swept
            pass


def test_sandbox_sweep_cli_removes_dead_runs_containers_and_never_a_live_ones(client) -> None:
    """Two runs on one machine are normal: ``ianvs sandbox sweep`` from one must not break the
    other (it once removed every labelled container)."""
    from tests.processes import dead_pid

    owner = f"{os.uname().nodename}:{dead_pid()}"
    dead = client.containers.create(BASE_IMAGE, ["sleep", "60"], network_mode="none",
                                    labels={LABEL: "1", "io.ianvs.owner": owner})
    try:
        with get_executor("docker", workers=1) as live:
            res = subprocess.run([sys.executable, "-m", "core.cmd.benchmarking", "sandbox", "sweep"],
                                 cwd=ROOT, capture_output=True, text=True, timeout=120)
            assert res.returncode == 0 and res.stdout.startswith("removed "), res.stderr
            assert not client.containers.list(all=True, filters={"id": dead.id}, ignore_removed=True)
            assert _ours(client), "the live run's container was removed"
            assert run_one(live, program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add").passed
    finally:
        try:
            dead.remove(force=True)
        except Exception:  # noqa: BLE001 - already swept
            pass


def test_gvisor_runtime_is_reported(client) -> None:
    if "runsc" not in client.info().get("Runtimes", {}):
        pytest.skip("the engine has no runsc runtime (Debian's runsc package is not installed)")
    with get_executor("docker", workers=1, runtime="runsc") as ex:
        res = run_one(ex, program="print('hi')\n" + GOOD_PROGRAM, test=CHECK_ADD, entry_point="add")
        facts = ex.facts
    assert res.passed and res.runtime == "runsc" and res.stdout == "hi\n", res
    assert res.isolation_label.endswith("+gvisor")
    assert facts["container_uids"] is True and facts["drop_uid"] is True  # gVisor switches uids too


def test_fresh_container_that_stops_answering_is_removed_at_the_timeout(client) -> None:
    """A frozen container (``docker pause`` right after its server said hello, so not even the
    in-container deadline can fire): the executor removes it at timeout + grace and grades the
    request ``timeout``; nothing is left behind."""
    with get_executor("docker", workers=1, fresh_container=True) as ex:
        start_server = ex._server
        frozen: list = []

        def paused(tag: str, workers: int | None = None, one_request: bool = False):
            server = start_server(tag, workers, one_request)
            server.container.pause()
            frozen.append(server.container.id)
            return server

        ex._server = paused  # type: ignore[method-assign]
        started = time.monotonic()
        res = run_one(ex, program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add", timeout=1.0)
        elapsed = time.monotonic() - started
    assert res.outcome is Outcome.TIMEOUT and "killed at the timeout" in res.detail, res
    assert 2.5 < elapsed < 15, elapsed
    assert frozen and not client.containers.list(all=True, filters={"id": frozen[0]}, ignore_removed=True)


def test_pool_of_several_warm_containers_and_replacement_of_a_dead_one(client) -> None:
    """``pool_size`` containers serve one batch together; a warm container killed from outside
    is replaced and the next batch still passes (never a sample's fault)."""
    probe = "import os\nNODE = os.uname().nodename\nprint(NODE)\n" + GOOD_PROGRAM
    with get_executor("docker", workers=1, pool_size=2) as ex:
        reqs = [ExecRequest(id=f"p{i}", program=probe, test=CHECK_ADD, entry_point="add")
                for i in range(6)]
        first = {r.id: r for r in ex.run(reqs)}
        assert all(r.passed for r in first.values())
        assert len({r.stdout for r in first.values()}) == 2  # both containers served
        victim = ex._pools[BASE_IMAGE][0].container
        victim.kill()
        again = {r.id: r for r in ex.run(reqs)}
        assert all(r.passed for r in again.values()), [r.detail for r in again.values()]
        assert victim.short_id not in {r.stdout.strip()[:12] for r in again.values()}
        assert ex.alive()


def test_slot_memory_groups_are_made_under_the_container_limit_and_removed(client) -> None:
    """Each container's slot groups sit beside the container under one parent whose limit is
    the container's; a request's limit is set on its slot; closing removes the parent from
    every hierarchy the engine made it in."""
    import glob

    from core.testenvmanager.sandbox import slotgroups

    mine = f"ianvs-sandbox-{os.getpid()}-"
    before = set(glob.glob(f"{slotgroups.CGROUP_ROOT}/*/{mine}*"))  # other executors of this session
    with get_executor("docker", workers=2, container_memory_mb=700) as ex:
        res = run_one(ex, program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add", memory_mb=200)
        assert res.passed, res.detail
        parents = [p for p in glob.glob(f"{slotgroups.CGROUP_ROOT}/memory/{mine}*") if p not in before]
        assert len(parents) == 1, parents
        with open(f"{parents[0]}/memory.limit_in_bytes") as fh:
            assert int(fh.read()) == 700 << 20
        slots = sorted(glob.glob(f"{parents[0]}/slot*/memory.limit_in_bytes"))
        assert len(slots) == 2
        assert any(int(open(path).read()) == 200 << 20 for path in slots)
    assert set(glob.glob(f"{slotgroups.CGROUP_ROOT}/*/{mine}*")) <= before
