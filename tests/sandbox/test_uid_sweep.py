"""The fork server's uid handling outside any container: ``sweep_uid`` as a root server
(``local``) and as a container's server (its own uid holding CAP_SETUID, as
``_container_privileges`` leaves it), and the capability drop of that server's children.

Each case runs in a child Python process (it changes its uids) as root, on uids leased like an
executor's, and in a pid namespace of its own (``unshare --pid --fork --mount-proc``), where it
is process 1 and refuses to run otherwise: a broken ``kill(-1)`` can then only hit the test's own
processes, never the machine's. Skipped without root or without ``unshare``.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNSHARE = shutil.which("unshare")

pytestmark = [pytest.mark.skipif(os.geteuid() != 0, reason="switches uids: needs root"),
              pytest.mark.skipif(UNSHARE is None, reason="needs util-linux's unshare (a private pid namespace)")]

#: the child: victims of one uid (one of them escaped into its own session), a bystander of
#: another, then ``sweep_uid(victim uid)``; prints what survived and the uids and capabilities
#: it was left with
SCRIPT = textwrap.dedent("""
    import ctypes, importlib.util, json, os, sys, time
    if os.getpid() != 1:  # only ever in a pid namespace of its own
        sys.exit("not process 1 of a private pid namespace: refusing to kill(-1)")
    spec = importlib.util.spec_from_file_location("_fs", {server!r})
    fs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fs)
    sys.path.insert(0, {root!r})
    from core.testenvmanager.sandbox.leases import acquire
    from tests.processes import running

    mode = sys.argv[1]
    lease = acquire(3)
    victim, bystander, server = lease.base, lease.base + 1, lease.base + 2
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)  # subreaper (as process 1 it gets orphans anyway)

    def spawn(uid):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):  # never keep the test's pipes open
                os.dup2(null, fd)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            if os.fork() == 0:  # escapes: its own session and process group
                os.setsid()
                os.write(w, str(os.getpid()).encode())
                time.sleep(60)
                os._exit(0)
            time.sleep(60)
            os._exit(0)
        os.close(w)
        grandchild = int(os.read(r, 32))
        os.close(r)
        return [pid, grandchild]

    def caps():
        return {{line.split(":")[0]: int(line.split()[1], 16) for line in open("/proc/self/status")
                 if line.startswith("Cap")}}

    victims, bystanders = spawn(victim), spawn(bystander)
    out = {{"server": server, "victim": victim}}
    if mode == "container":
        facts = {{"notes": []}}
        fs._container_privileges({{"server_uid": server}}, facts, libc)
        out["facts"] = facts
        out["after_privileges"] = [list(os.getresuid()), list(os.getresgid()), os.getgroups(), caps()]
        r, w = os.pipe()
        child = os.fork()
        if child == 0:  # what a child of the server does in _wall, then what it is left with
            os.setgroups([])
            os.setgid(victim)
            os.setuid(victim)
            before = caps()
            fs._CAPS.clear()
            os.write(w, json.dumps([before, caps(), list(os.getresuid())]).encode())
            os._exit(0)
        os.close(w)
        out["child"] = json.loads(os.read(r, 4096))
        os.waitpid(child, 0)
        r, w = os.pipe()
        child = os.fork()
        if child == 0:  # a capset that silently did nothing: the check refuses to go on
            os.setgroups([])
            os.setgid(victim)
            os.setuid(victim)
            fs._CAPS.set = lambda *sets: None
            try:
                fs._CAPS.clear()
                os.write(w, b"cleared")
            except PermissionError as exc:
                os.write(w, str(exc).encode())
            os._exit(0)
        os.close(w)
        out["unchecked_child"] = os.read(r, 4096).decode()
        os.waitpid(child, 0)
    try:
        fs.sweep_uid(victim)
    except OSError as exc:
        out["error"] = repr(exc)
    deadline = time.monotonic() + (0.5 if "error" in out else 5)
    while any(running(p) for p in victims) and time.monotonic() < deadline:
        time.sleep(0.02)
    out["victims_running"] = [running(p) for p in victims]
    out["bystanders_running"] = [running(p) for p in bystanders]
    for pid in victims:  # reap them (the grandchild comes back to this subreaper once orphaned)
        while time.monotonic() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG if running(pid) else 0)
                break
            except ChildProcessError:
                time.sleep(0.02)
    out["uids"], out["caps"] = list(os.getresuid()), caps()
    for uid in (0, server):
        try:
            fs.sweep_uid(uid)
            out[f"sweep_{{uid == 0 and 'root' or 'own'}}"] = "accepted"
        except ValueError:
            out[f"sweep_{{uid == 0 and 'root' or 'own'}}"] = "refused"
    if "error" not in out:  # the bystanders go the same way
        fs.sweep_uid(bystander)
        time.sleep(0.2)
        out["bystanders_swept"] = not any(running(p) for p in bystanders)
    print(json.dumps(out))
    if "error" in out:  # root, or the container's server with CAP_KILL, cleans up
        for pid in victims + bystanders:
            os.kill(pid, 9)
""")

SERVER = ROOT / "core/testenvmanager/sandbox/forkserver.py"
#: SETUID, SETGID, KILL, DAC_OVERRIDE, FOWNER
SERVER_CAPS = (1 << 7) | (1 << 6) | (1 << 5) | (1 << 1) | (1 << 3)


def _run(*args: str) -> dict:
    proc = subprocess.run([UNSHARE, "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                           SCRIPT.format(server=str(SERVER), root=str(ROOT)), *args],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_root_server_sweeps_one_uid_and_gets_root_back() -> None:
    out = _run("root")
    assert out["victims_running"] == [False, False], out  # the escaped grandchild too
    assert out["bystanders_running"] == [True, True], out
    assert out["uids"] == [0, 0, 0]
    assert out["caps"]["CapEff"] == out["caps"]["CapPrm"] != 0  # effective set restored
    assert out["sweep_root"] == "refused"  # uid 0 would be every root process of the host
    assert out["bystanders_swept"] is True


def test_container_server_keeps_its_uid_and_capabilities_and_sweeps() -> None:
    """As a container's server (CAP_KILL among its capabilities: with it effective, ``kill(-1)``
    would hit the bystanders too)."""
    out = _run("container")
    server = out["server"]
    assert out["facts"]["container_uids"] is True and out["facts"]["server_uid"] == server
    uids, gids, groups, caps = out["after_privileges"]
    assert uids == gids == [server] * 3 and groups == []
    assert caps["CapEff"] == caps["CapPrm"] == SERVER_CAPS and caps["CapInh"] == caps["CapAmb"] == 0
    before, after, child_uids = out["child"]
    # a setuid between two non-zero uids keeps every capability: the explicit drop is needed
    assert before["CapEff"] == SERVER_CAPS, before
    assert child_uids == [out["victim"]] * 3
    assert all(after[key] == 0 for key in ("CapEff", "CapPrm", "CapInh", "CapAmb")), after
    assert out["unchecked_child"].startswith("capabilities left after dropping them"), out["unchecked_child"]
    assert out["victims_running"] == [False, False], out
    assert out["bystanders_running"] == [True, True], out
    assert out["uids"] == [server] * 3 and out["caps"]["CapEff"] == SERVER_CAPS
    assert out["sweep_root"] == out["sweep_own"] == "refused"
    assert out["bystanders_swept"] is True
