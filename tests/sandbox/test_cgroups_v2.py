"""The executor's cgroup walls on cgroup v2 hosts: placement, limits, the no-internal-process
rule, delegation, and removal.

Most of these run against :class:`tests.sandbox.cgroup_v2_double.CgroupV2Double`, a double of a
v2 tree that enforces v2's rules, because this machine cannot host them: it is a hybrid host
whose ``memory`` and ``pids`` controllers are bound to v1, so its v2 hierarchy offers neither
(the hostile memory and process suites run on the walls it does have, v1). The last tests use
that real v2 hierarchy (``/sys/fs/cgroup/unified``) for what it can show without controllers:
moving processes, ``cgroup.kill`` and removal by the real kernel.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from core.testenvmanager.sandbox import cgroups
from core.testenvmanager.sandbox.cgroups import LEAF, SERVER_LEAF

from .cgroup_v2_double import CgroupV2Double

MOUNT = "/sys/fs/cgroup"
SERVER = 100  # the fork server's pid in the double
CFG = {"workers": 2, "limits": {"processes": 64}, "cgroup_memory_mb": 1024}


def _setup(fs: CgroupV2Double, cfg: dict | None = None) -> tuple[cgroups.Groups, list[str]]:
    notes: list[str] = []
    groups = cgroups.setup(cfg or CFG, notes, cgroups.Layout(fs, MOUNT), fs=fs, pid=SERVER)
    return groups, notes


def _assert_walls(fs: CgroupV2Double, groups: cgroups.Groups, parent: str) -> str:
    """The full set of v2 walls under ``parent``; returns the executor group."""
    group = groups.v2_group
    assert os.path.dirname(group) == os.path.join(MOUNT, parent.lstrip("/")).rstrip("/")
    assert os.path.basename(group).startswith(f"ianvs-sandbox-{SERVER}-")
    assert groups.executor == {"pids": group, "memory": group}
    assert fs.read(f"{group}/cgroup.subtree_control").split() == ["pids", "memory"]
    assert fs.read(f"{group}/pids.max").strip() == str(2 * (64 + 2) + 16)
    assert fs.read(f"{group}/memory.max").strip() == str(1024 << 20)
    assert fs.read(f"{group}/memory.swap.max").strip() == "0"
    assert fs.group_of(SERVER) == f"{group}/{SERVER_LEAF}"  # a leaf: v2 allows no inner members
    assert groups.slots == [f"{group}/slot0", f"{group}/slot1"]
    for slot in groups.slots:
        assert fs.read(f"{slot}/memory.swap.max").strip() == "0"
        assert fs.read(f"{slot}/memory.oom.group").strip() == "1"
        assert fs.exists(f"{slot}/memory.max")  # set per request by the server
    assert groups.oom_file == f"{group}/{SERVER_LEAF}/memory.events"
    assert groups.mounts == [MOUNT]
    facts = {"cgroups": groups.executor, "slot_memory": groups.slots}
    assert cgroups.walls(facts) == {"pids": True, "memory": True, "slots": True}
    assert cgroups.slot_files(groups.slots[0], fs=fs) == {
        "limits": ["memory.max"], "swap": "", "oom": "memory.events"}
    return group


def _assert_left(fs: CgroupV2Double, groups: cgroups.Groups, home: str) -> None:
    fs.add(os.path.relpath(groups.slots[0], MOUNT), procs=(555,))  # a sample left running
    cgroups.leave(groups.facts(), pid=SERVER, fs=fs)
    assert 555 in fs.killed and SERVER not in fs.killed
    assert fs.group_of(SERVER) == os.path.normpath(os.path.join(MOUNT, home.lstrip("/")))
    assert not [path for path in fs.groups if path.startswith(groups.v2_group)]


def test_host_root_as_on_the_v2_machine() -> None:
    """shared/design/cgroup-v2-machine.md: the server starts in ``/process_api/<id>`` beside
    other processes; the root enables every controller for its children. The executor group
    goes under the root (the nearest group whose subtree already has the controllers), and
    nothing of the supervisor's groups changes."""
    fs = CgroupV2Double(root_subtree=("cpuset", "cpu", "io", "memory", "hugetlb", "pids"))
    fs.add("process_api/abc", procs=(7, 8, SERVER))
    groups, notes = _setup(fs)
    assert not notes, notes
    _assert_walls(fs, groups, "/")
    assert groups.placement == "root"
    assert fs.read(f"{MOUNT}/process_api/cgroup.subtree_control").split() == []
    assert sorted(fs.groups[f"{MOUNT}/process_api/abc"].procs) == [7, 8]
    _assert_left(fs, groups, "/process_api/abc")


def test_an_ancestor_that_already_delegates_the_controllers_is_preferred() -> None:
    """A systemd host, a login session (not delegated): the user's slice enables memory and
    pids for its children, so the executor group becomes the session scope's sibling."""
    fs = CgroupV2Double(root_subtree=("cpu", "io", "memory", "pids"))
    fs.add("user.slice", subtree=("cpu", "memory", "pids"))
    fs.add("user.slice/user-0.slice", subtree=("memory", "pids"))
    fs.add("user.slice/user-0.slice/session-3.scope", procs=(50, SERVER))
    groups, notes = _setup(fs)
    assert not notes, notes
    _assert_walls(fs, groups, "/user.slice/user-0.slice")
    assert groups.placement == "ancestor"
    _assert_left(fs, groups, "/user.slice/user-0.slice/session-3.scope")


def test_a_delegated_scope_is_arranged_as_v2_requires() -> None:
    """``systemd-run --scope -p Delegate=yes``: the scope is ours. Its member processes (the
    caller and the server) move to a leaf first, then its subtree gets the controllers; the
    server returns to that leaf when the executor closes. A second executor started from the
    leaf nests beside the first without moving anything again."""
    fs = CgroupV2Double(root_subtree=("memory", "pids"))
    fs.add("system.slice", subtree=("memory", "pids"))
    fs.add("system.slice/run-u7.scope", procs=(60, SERVER), delegated=True)
    groups, notes = _setup(fs)
    assert not notes, notes
    scope = "/system.slice/run-u7.scope"
    _assert_walls(fs, groups, scope)
    assert groups.placement == "nest"
    assert fs.groups[f"{MOUNT}{scope}/{LEAF}"].procs == [60]
    assert fs.read(f"{MOUNT}{scope}/cgroup.procs") == ""
    fs.self_pid = 101
    fs.add(f"{scope}/{LEAF}", procs=(60, 101))
    second = cgroups.setup(CFG, [], cgroups.Layout(fs, MOUNT), fs=fs, pid=101)
    assert os.path.dirname(second.v2_group) == f"{MOUNT}{scope}" and second.placement == "ancestor"
    fs.self_pid = SERVER
    _assert_left(fs, groups, f"{scope}/{LEAF}")
    cgroups.leave(second.facts(), pid=101, fs=fs)
    assert not [path for path in fs.groups if "ianvs-sandbox-" in path]


def test_a_container_with_its_own_writable_cgroup_namespace() -> None:
    """``0::/`` inside a container: the mount's root is the namespace's root, not the host's
    (it has ``cgroup.type`` and obeys the no-internal-process rule). Its processes, the
    container's init among them, move to a leaf and the executor nests in the root."""
    fs = CgroupV2Double(namespace_root=True, controllers=("cpu", "memory", "pids"))
    fs.add("/", procs=(1, 40, SERVER))
    groups, notes = _setup(fs)
    assert not notes, notes
    _assert_walls(fs, groups, "/")
    assert groups.placement == "nest"
    assert sorted(fs.groups[f"{MOUNT}/{LEAF}"].procs) == [1, 40]
    _assert_left(fs, groups, f"/{LEAF}")


def test_a_read_only_cgroup_namespace_leaves_no_wall_and_says_how_to_get_one() -> None:
    """A container whose engine mounted the cgroup file system read-only (the default): no
    group can be made. Nothing raises; the notes say what was tried and the fix, and
    :func:`cgroups.walls` reports every wall missing (so the tier is not ``full``)."""
    fs = CgroupV2Double(namespace_root=True, controllers=("memory", "pids"))
    root = fs.add("/", procs=(1, SERVER))
    root.writable = False
    groups, notes = _setup(fs)
    assert groups.executor == {} and groups.slots == []
    assert any("Delegate=yes" in note and "cgroup_parent" in note for note in notes), notes
    assert cgroups.walls({"cgroups": {}, "slot_memory": []}) == {
        "pids": False, "memory": False, "slots": False}
    assert fs.group_of(SERVER) == MOUNT and fs.groups[MOUNT].procs == [1, SERVER]


def test_a_missing_controller_is_named_and_the_rest_is_made() -> None:
    """A v2 host whose root does not offer ``pids`` (e.g. a kernel without it): the memory
    walls stand, the pids wall is reported missing."""
    fs = CgroupV2Double(controllers=("cpu", "memory"), root_subtree=("cpu", "memory"))
    fs.add("work", procs=(SERVER,))
    groups, notes = _setup(fs)
    assert any("no 'pids' controller" in note for note in notes), notes
    assert set(groups.executor) == {"memory"} and len(groups.slots) == 2
    walls = cgroups.walls({"cgroups": groups.executor, "slot_memory": groups.slots})
    assert walls == {"pids": False, "memory": True, "slots": True}


def test_a_given_parent_is_used_and_a_busy_one_is_refused() -> None:
    """``cgroup_parent``: an operator's prepared group. One with member processes cannot
    enable controllers for children (EBUSY), and the executor does not move processes out of a
    group it was not given to arrange."""
    fs = CgroupV2Double(root_subtree=("memory", "pids"))
    fs.add("ianvs.slice")
    fs.add("elsewhere", procs=(SERVER,))
    groups, notes = _setup(fs, {**CFG, "cgroup_parent": f"{MOUNT}/ianvs.slice"})
    assert not notes, notes
    _assert_walls(fs, groups, "/ianvs.slice")
    assert groups.placement == "given"
    _assert_left(fs, groups, "/elsewhere")
    fs.add("busy.slice", procs=(77,))
    groups, notes = _setup(fs, {**CFG, "cgroup_parent": f"{MOUNT}/busy.slice"})
    assert groups.executor == {} and any("busy.slice" in note for note in notes), notes
    assert fs.groups[f"{MOUNT}/busy.slice"].procs == [77]


def test_the_double_enforces_the_rules_it_stands_for() -> None:
    """The double refuses what the kernel refuses, so the tests above could fail."""
    fs = CgroupV2Double(root_subtree=("memory",))
    fs.add("a", procs=(1,))
    with pytest.raises(OSError, match="no internal processes"):
        fs.write(f"{MOUNT}/a/cgroup.subtree_control", "+memory")
    with pytest.raises(OSError, match="not available"):
        fs.write(f"{MOUNT}/a/cgroup.subtree_control", "+pids")
    fs.add("b", subtree=("memory",))
    with pytest.raises(OSError, match="no internal processes"):
        fs.write(f"{MOUNT}/b/cgroup.procs", "1")
    with pytest.raises(OSError, match="busy"):
        fs.rmdir(f"{MOUNT}/a")
    assert not fs.exists(f"{MOUNT}/memory.max") and fs.exists(f"{MOUNT}/a/memory.max")
    assert not fs.exists(f"{MOUNT}/a/pids.max")


def test_the_tier_is_not_full_without_the_cgroup_walls() -> None:
    """On this machine (root, v1 memory and pids): switching the groups off costs ``full``;
    the executor names the missing walls, and ``min_isolation: full`` refuses to start."""
    from core.testenvmanager.sandbox.local import LocalExecutor
    from core.testenvmanager.sandbox.types import IsolationLevel, IsolationUnavailableError

    if os.geteuid() != 0:
        pytest.skip("the cgroup walls need root here")
    ex = LocalExecutor(workers=1, cgroups=False)
    try:
        assert ex.isolation is IsolationLevel.KERNEL, ex.facts.get("notes")
        missing = " ".join(text for level, text in ex.missing() if level is IsolationLevel.FULL)
        assert "process cap" in missing and "memory group per worker slot" in missing, missing
        assert "cgroups=False switched them off" in missing
    finally:
        ex.close()
    with pytest.raises(IsolationUnavailableError, match="memory group per worker slot"):
        LocalExecutor(workers=1, cgroups=False, min_isolation="full")
    ex = LocalExecutor(workers=1)
    try:
        assert ex.isolation is IsolationLevel.FULL
        assert ex.facts["cgroup"]["layout"]["version"] in ("v1", "v2", "hybrid")
    finally:
        ex.close()


UNIFIED = "/sys/fs/cgroup/unified"
#: this hybrid host's real v2 hierarchy offers hugetlb, a domain controller: v2's rules (no
#: internal processes, controllers through subtree_control) hold there as for memory and pids
REAL_V2 = os.geteuid() == 0 and "hugetlb" in (open(f"{UNIFIED}/cgroup.controllers").read().split()
                                              if os.path.isfile(f"{UNIFIED}/cgroup.controllers") else [])
needs_real_v2 = pytest.mark.skipif(not REAL_V2, reason="needs root and a v2 hierarchy offering "
                                                       "hugetlb (this hybrid host's unified one)")


class _As(cgroups.HostFS):
    """The real file system, read as process ``pid`` (its ``/proc/<pid>/cgroup``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def read(self, path: str) -> str:
        return super().read(f"/proc/{self.pid}/cgroup" if path == "/proc/self/cgroup" else path)


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def _place(pid: int, group: str) -> None:
    with open(f"{group}/cgroup.procs", "w") as fh:
        fh.write(str(pid))


def _cleanup(procs: list[subprocess.Popen], dirs: list[str]) -> None:
    for proc in procs:
        proc.kill()
        proc.wait()
    for _ in range(50):
        for path in sorted(dirs, key=len, reverse=True):
            for sub in sorted((os.path.join(r, d) for r, ds, _f in os.walk(path) for d in ds),
                              key=len, reverse=True) if os.path.isdir(path) else []:
                try:
                    os.rmdir(sub)
                except OSError:
                    pass
            try:
                os.rmdir(path)
            except OSError:
                pass
        if not any(os.path.isdir(p) for p in dirs):
            return
        time.sleep(0.05)


@needs_real_v2
def test_placement_on_the_real_v2_hierarchy() -> None:
    """The real kernel: a server in the v2 root gets an executor group whose subtree enables
    the controller, and sits in its ``server`` leaf (the kernel refuses it in the group itself:
    no internal processes); leaving moves it back and removes the groups."""
    server = _sleeper()
    try:
        fs = _As(server.pid)
        layout = cgroups.Layout(fs)
        assert layout.v2_mount == UNIFIED and layout.own_v2 == "/"
        groups, notes = cgroups.Groups(), list[str]()
        cgroups._setup_v2(fs, layout, ["hugetlb"], f"ianvs-sandbox-{server.pid}-abc123", server.pid,
                          1, 1, {}, groups, notes)
        assert not notes, notes
        group = groups.v2_group
        assert groups.placement == "root" and os.path.dirname(group) == UNIFIED
        assert open(f"{group}/cgroup.subtree_control").read().split() == ["hugetlb"]
        assert open(f"{group}/{SERVER_LEAF}/cgroup.procs").read().split() == [str(server.pid)]
        with pytest.raises(OSError) as refused:
            _place(server.pid, group)
        assert refused.value.errno == 16  # EBUSY: the kernel's no-internal-process rule
        cgroups.leave(groups.facts(), pid=server.pid, fs=fs)
        assert not os.path.exists(group) and server.poll() is None
        assert open(f"/proc/{server.pid}/cgroup").read().strip().endswith("0::/")
    finally:
        _cleanup([server], [f"{UNIFIED}/ianvs-sandbox-{server.pid}-abc123"])


@needs_real_v2
def test_a_delegated_group_on_the_real_v2_hierarchy() -> None:
    """The real kernel: a group marked delegated (``trusted.delegate``, as systemd marks a
    ``Delegate=yes`` scope) holding the caller and the server. Enabling a controller for its
    children fails while they are members; the executor moves them to a leaf first, and its
    group nests inside. A sample left in a slot is killed with ``cgroup.kill`` on removal."""
    scope = f"{UNIFIED}/ianvs-test-scope-{os.getpid()}"
    caller, server, sample = _sleeper(), _sleeper(), _sleeper()
    try:
        os.mkdir(scope)
        os.setxattr(scope, "trusted.delegate", b"1")
        for proc in (caller, server):
            _place(proc.pid, scope)
        with pytest.raises(OSError):
            with open(f"{scope}/cgroup.subtree_control", "w") as fh:
                fh.write("+hugetlb")
        fs = _As(server.pid)
        groups, notes = cgroups.Groups(), list[str]()
        cgroups._setup_v2(fs, cgroups.Layout(fs), ["hugetlb"], f"ianvs-sandbox-{server.pid}-abc123",
                          server.pid, 1, 1, {}, groups, notes)
        assert not notes, notes
        assert groups.placement == "nest" and os.path.dirname(groups.v2_group) == scope
        assert open(f"{scope}/{LEAF}/cgroup.procs").read().split() == [str(caller.pid)]
        assert open(f"{scope}/cgroup.procs").read() == ""
        os.mkdir(f"{groups.v2_group}/slot0")
        _place(sample.pid, f"{groups.v2_group}/slot0")
        groups.slots = [f"{groups.v2_group}/slot0"]
        cgroups.leave(groups.facts(), pid=server.pid, fs=fs)
        assert sample.wait(timeout=5) == -9 and server.poll() is None and caller.poll() is None
        assert sorted(open(f"{scope}/{LEAF}/cgroup.procs").read().split(), key=int) == sorted(
            [str(caller.pid), str(server.pid)], key=int)
        assert not os.path.exists(groups.v2_group)
    finally:
        _cleanup([caller, server, sample], [scope])


@needs_real_v2
def test_clean_finds_a_dead_servers_nested_v2_group() -> None:
    """``ianvs sandbox clean`` on the real kernel: a dead server's v2 executor group two levels
    below the root (as under a delegated scope), with a sample still running in a slot, is
    listed with its dead owner, and removing it kills the sample and removes every group."""
    from core.testenvmanager.sandbox import leftovers

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    parent = f"{UNIFIED}/ianvs-test-parent-{os.getpid()}"
    group = f"{parent}/ianvs-sandbox-{dead.pid}-abc123"
    sample = _sleeper()
    try:
        os.makedirs(f"{group}/slot0")
        os.mkdir(f"{group}/{SERVER_LEAF}")
        _place(sample.pid, f"{group}/slot0")
        (item,) = [i for i in leftovers.cgroups() if i.name == group]
        assert item.owner == dead.pid and not item.alive and "1 process" in item.detail
        assert leftovers.remove(item)
        assert sample.wait(timeout=5) == -9 and not os.path.exists(group)
    finally:
        _cleanup([sample], [parent])


def test_docker_slot_groups_on_v2() -> None:
    """The docker backend's host-made groups on v2: the parent goes where a local executor's
    would, with the container's limit, swap closed and the controllers enabled for the
    container's group and the slots; the server uid may write the slots' files and the
    common ancestor's ``cgroup.procs``; the container shares the host's cgroup namespace
    (nsdelegate forbids moves across a namespace's boundary). An engine with systemd's driver
    gets none; removal takes every group."""
    from core.testenvmanager.sandbox import slotgroups

    fs = CgroupV2Double(root_subtree=("cpu", "memory", "pids"))
    fs.add("user.slice/session-1.scope", procs=(SERVER,))
    fs.self_pid = SERVER
    groups = slotgroups.make(2, 512, 4242, fs=fs, root=MOUNT)
    assert groups is not None
    assert os.path.dirname(groups.parent) == MOUNT and groups.cgroup_parent == "/" + groups.name
    assert groups.cgroupns == "host" and groups.in_container() == [
        f"{slotgroups.IN_CONTAINER}/slot0", f"{slotgroups.IN_CONTAINER}/slot1"]
    assert fs.read(f"{groups.parent}/memory.max").strip() == str(512 << 20)
    assert fs.read(f"{groups.parent}/memory.swap.max").strip() == "0"
    assert fs.read(f"{groups.parent}/cgroup.subtree_control").split() == ["pids", "memory"]
    chowned = {path for op, path, uid in fs.log if op == "chown" and uid == "4242"}
    assert f"{groups.parent}/cgroup.procs" in chowned
    for slot in groups.slots:
        assert {f"{slot}/cgroup.procs", f"{slot}/memory.max"} <= chowned
        assert fs.read(f"{slot}/memory.swap.max").strip() == "0"
        assert fs.read(f"{slot}/memory.oom.group").strip() == "1"
    fs.add(os.path.relpath(f"{groups.parent}/abc123", MOUNT))  # the engine's container group
    assert not groups.remove(timeout=0)  # the engine has not removed its group yet
    fs.rmdir(f"{groups.parent}/abc123")
    assert groups.remove(timeout=0) and not [p for p in fs.groups if groups.name in p]
    assert slotgroups.make(2, 512, 4242, fs=fs, root=MOUNT, cgroup_driver=lambda: "systemd") is None


def test_the_doctor_names_the_version_the_controllers_and_the_fix() -> None:
    """``ianvs sandbox doctor``'s cgroup lines for a v2 host where no parent took the group
    (the facts a fork server reports there), and for one whose kernel lacks ``pids``."""
    from core.cmd.sandbox import _cgroup_lines

    layout = {"version": "v2", "v2_mount": MOUNT, "v2_controllers": ["cpu", "memory", "pids"],
              "v1": [], "own_v2": "/process_api/abc"}
    facts = {"cgroups": {}, "slot_memory": [], "cgroup": {"layout": layout}, "notes": []}
    text = "\n".join(_cgroup_lines(facts))
    assert "cgroup version: v2 (v1: none; v2 at /sys/fs/cgroup: cpu memory pids)" in text
    assert text.count("MISSING") == 3
    assert "fix: run as root" in text or "Delegate=yes" in text
    if os.geteuid() == 0:
        assert "systemd-run --scope -p Delegate=yes" in text and "cgroup_parent=" in text
    layout["v2_controllers"] = ["cpu", "memory"]
    text = "\n".join(_cgroup_lines(facts))
    assert "offers no pids controller" in text and "CONFIG_CGROUP_PIDS" in text
