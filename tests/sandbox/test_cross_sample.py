"""No state outlives a sample: pairs of samples, one channel each.

For every channel a sample could use to leave something for a later sample (ports, ``TIME_WAIT``
entries, abstract and path unix sockets, SysV and POSIX IPC, files in every writable-looking
place, cgroups, processes that escape their group, timers), a *writer* sample tries to leave a
mark and a *reader* sample, run after it on the same executor (same slot and the other slot),
looks for it. The reader reports what it found through its return value, so the judge grades it
``passed`` only when it found nothing. Writers run with and without ``network: loopback`` and
``allow_subprocess``. The suite runs against every backend from the one parametrised definition
in ``conftest.BACKEND_PARAMS``.
"""

from __future__ import annotations

import time

import pytest

from core.testenvmanager.sandbox import ExecRequest
from core.testenvmanager.sandbox.types import IsolationLevel, Outcome

from .conftest import own_sample_uids, uid_processes

PORT = 47_611

#: channel -> (writer code, reader code). Writer code may fail (refused by a wall): that is fine,
#: it is wrapped in try/except. Reader code appends what it saw to ``found``.
CHANNELS: dict[str, tuple[str, str]] = {
    "listening_port": (
        f"s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(('127.0.0.1', {PORT})); s.listen(); KEEP.append(s)\n",
        f"c = socket.create_connection(('127.0.0.1', {PORT}), timeout=0.5)\nfound.append('port')\n",
    ),
    "time_wait": (
        # the side that closes first keeps the connection in TIME_WAIT for 60 s: here the client,
        # whose port a later bind() without SO_REUSEADDR then finds in use
        f"srv = socket.socket(); srv.bind(('127.0.0.1', 0)); srv.listen()\n"
        f"c = socket.socket(); c.bind(('127.0.0.1', {PORT + 1})); c.connect(srv.getsockname())\n"
        f"a, _x = srv.accept(); c.close(); a.close(); srv.close()\n",
        f"s = socket.socket()\n"
        f"try:\n    s.bind(('127.0.0.1', {PORT + 1}))\n"
        f"except OSError as exc:\n    found.append('time_wait' if exc.errno == errno.EADDRINUSE else 'bind')\n",
    ),
    "abstract_unix_socket": (
        "u = socket.socket(socket.AF_UNIX); u.bind('\\0ianvs-cross'); u.listen(); KEEP.append(u)\n",
        "u = socket.socket(socket.AF_UNIX); u.connect('\\0ianvs-cross'); found.append('abstract')\n",
    ),
    "path_unix_socket": (
        "u = socket.socket(socket.AF_UNIX); u.bind('/tmp/ianvs-cross.sock'); u.listen(); KEEP.append(u)\n",
        "u = socket.socket(socket.AF_UNIX); u.connect('/tmp/ianvs-cross.sock'); found.append('unix')\n",
    ),
    "sysv_shm": (
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "KEEP.append(libc.shmget(0x1A2B3C, 4096, 0o1666))\n",
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "if libc.shmget(0x1A2B3C, 0, 0o666) >= 0: found.append('shm')\n",
    ),
    "sysv_msg": (
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "KEEP.append(libc.msgget(0x1A2B3D, 0o1666))\n",
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "if libc.msgget(0x1A2B3D, 0o666) >= 0: found.append('msg')\n",
    ),
    "posix_mqueue": (
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "KEEP.append(libc.mq_open(b'/ianvs-cross', 0o100 | 0o2, 0o666, None))\n",
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "if libc.mq_open(b'/ianvs-cross', 0o2) >= 0: found.append('mqueue')\n",
    ),
    "files": (
        "for p in ('left.txt', '/tmp/left', '/var/tmp/left', '/dev/shm/left', '/run/left',\n"
        "          os.path.expanduser('~/left'), os.path.join(os.environ.get('TMPDIR', '.'), 'left2'),\n"
        "          '/dev/mqueue/left', '/sys/fs/cgroup/left'):\n"
        "    try:\n        open(p, 'w').write('x')\n    except OSError:\n        pass\n",
        "if os.listdir('.'): found.append('cwd')\n"
        "for p in ('/tmp/left', '/var/tmp/left', '/dev/shm/left', '/run/left', '/dev/mqueue/left',\n"
        "          '/sys/fs/cgroup/left'):\n"
        "    if os.path.exists(p): found.append(p)\n",
    ),
    "cgroup": (
        "for p in ('/sys/fs/cgroup/memory/ianvs-cross', '/sys/fs/cgroup/pids/ianvs-cross',\n"
        "          '/sys/fs/cgroup/ianvs-cross'):\n"
        "    try:\n        os.mkdir(p)\n    except OSError:\n        pass\n",
        "for p in ('/sys/fs/cgroup/memory/ianvs-cross', '/sys/fs/cgroup/pids/ianvs-cross',\n"
        "          '/sys/fs/cgroup/ianvs-cross'):\n"
        "    if os.path.exists(p): found.append(p)\n",
    ),
    "escaped_process": (
        # a grandchild in a session of its own that outlives the request, holding a port and
        # writing a mark file after a delay (the sweep runs when the request ends)
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        try:\n"
        f"            s = socket.socket(); s.bind(('127.0.0.1', {PORT + 2})); s.listen()\n"
        "        except OSError:\n            pass\n"
        "        time.sleep(1.0)\n"
        # (a relative path: getcwd would raise once the working directory is gone, and a
        # grandchild that dies by itself could not show that the sweep is what ends it)
        "        for p in ('/tmp/late', 'late'):\n"
        "            try:\n                open(p, 'w').write('x')\n            except OSError:\n                pass\n"
        "        time.sleep(30)\n"
        "    os._exit(0)\n",
        "time.sleep(1.5)\n"
        "if os.listdir('.'): found.append('cwd')\n"
        "if os.path.exists('/tmp/late'): found.append('late')\n"
        f"c = socket.create_connection(('127.0.0.1', {PORT + 2}), timeout=0.5)\nfound.append('port')\n",
    ),
    "timer": (
        "signal.setitimer(signal.ITIMER_REAL, 0.8)\n",
        "time.sleep(1.2)\n",  # a timer left by the writer would kill the reader (SIGALRM)
    ),
}

PRELUDE = "import ctypes, errno, os, signal, socket, time\nKEEP = []\n"


def _writer(channel: str) -> str:
    body = CHANNELS[channel][0]
    indented = "".join("    " + line + "\n" for line in body.splitlines())
    return PRELUDE + "try:\n" + indented + "except Exception:\n    pass\n" \
        "def probe():\n    return 'written'\n"


def _reader(channel: str) -> str:
    body = CHANNELS[channel][1]
    indented = "".join("        " + line + "\n" for line in body.splitlines())
    return PRELUDE + "def probe():\n    found = []\n    try:\n" + indented + \
        "    except Exception:\n        pass\n    return found\n"


CHECK_WRITER = "def check(candidate):\n    candidate()\n"
CHECK_READER = "def check(candidate):\n    assert candidate() == []\n"


def _request(rid: str, program: str, test: str, network: str, subprocess: bool) -> ExecRequest:
    return ExecRequest(id=rid, program=program, test=test, entry_point="probe", timeout=15.0,
                       network=network, allow_subprocess=subprocess)


@pytest.mark.parametrize("network", ["none", "loopback"])
@pytest.mark.parametrize("channel", sorted(CHANNELS))
def test_a_later_sample_sees_nothing_of_an_earlier_one(bare_backend, channel: str, network: str) -> None:
    """A writer, then two readers at once (the executor has two slots: one reader runs in the
    writer's slot, the other in the other slot). The interpreter-level policy is off: what is
    refused here is refused by the kernel and the server."""
    subprocess = channel == "escaped_process"
    writer = _request("w", _writer(channel), CHECK_WRITER, network, subprocess)
    (wres,) = list(bare_backend.run([writer]))
    assert wres.outcome in (Outcome.PASSED, Outcome.SANDBOX_VIOLATION), (wres.outcome, wres.detail)
    readers = [_request(f"r{i}", _reader(channel), CHECK_READER, network, False) for i in range(2)]
    for res in bare_backend.run(readers):
        assert res.outcome is Outcome.PASSED, (channel, network, res.outcome, res.detail)


#: channels a sample can use within its own request: the reader finds the writer's mark when
#: both run in one request, so a clean reader above means the mark did not survive, not that
#: the reader cannot see
CONTROLS = {"listening_port": "loopback", "time_wait": "loopback", "files": "none"}


@pytest.mark.parametrize("channel", sorted(CONTROLS))
def test_readers_see_a_mark_left_in_their_own_request(bare_backend, channel: str) -> None:
    write, read = CHANNELS[channel]
    program = PRELUDE + "def probe():\n    found = []\n" + "".join(
        "    " + line + "\n" for line in (write + read).splitlines()) + "    return found\n"
    res = list(bare_backend.run([_request("ctl", program, CHECK_READER, CONTROLS[channel], False)]))[0]
    assert res.outcome is Outcome.FAILED, (channel, res.outcome, res.detail)


@pytest.mark.parametrize("network", ["none", "loopback"])
def test_no_process_of_a_sample_outlives_its_request(bare_backend, network: str) -> None:
    """An escaped grandchild (new session, re-parented) is gone as soon as its request's
    result is back: nothing of the executor's sample uids runs afterwards."""
    if bare_backend.isolation < IsolationLevel.FULL:
        pytest.skip("needs per-slot uids (root)")
    # a few requests first in both slots: a server that reads its slots' state from a stale
    # source (cgroup v1 hands a second read of an open cgroup.procs the first read's list) is
    # caught here too, not only on an executor's first request
    warm = [ExecRequest(id=f"warm{i}", program="def probe():\n    return 1\n", test=CHECK_WRITER,
                        entry_point="probe", network=network) for i in range(6)]
    assert all(r.passed for r in bare_backend.run(warm))
    writer = _request("esc", _writer("escaped_process"), CHECK_WRITER, network, True)
    (res,) = list(bare_backend.run([writer]))
    assert res.outcome is Outcome.PASSED, res.detail
    ranges = own_sample_uids()
    assert ranges, "no uid lease found for this test's executor"
    deadline = time.monotonic() + 2.0
    left = [pid for first, count in ranges for pid in uid_processes(first, count)]
    while left and time.monotonic() < deadline:  # killed: only reaping may lag a moment
        time.sleep(0.05)
        left = [pid for first, count in ranges for pid in uid_processes(first, count)]
    assert not left, f"sample processes outlived their request: {left}"


def test_inet_sockets_need_network_loopback(backend) -> None:
    """Without ``network: loopback`` a sample cannot create an AF_INET socket at all (so it
    cannot touch any kernel network state); with it, it has a working loopback of its own."""
    program = ("import socket\n"
               "def probe():\n"
               "    try:\n"
               "        s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
               "        c = socket.create_connection(s.getsockname(), timeout=1)\n"
               "        a, _ = s.accept(); c.sendall(b'hi'); return a.recv(2).decode()\n"
               "    except OSError as exc:\n"
               "        return type(exc).__name__\n")
    test = "def check(candidate):\n    got = candidate()\n    assert got == 'hi', got\n"
    results = {res.id: res for res in backend.run(
        [ExecRequest(id=net, program=program, entry_point="probe", test=test, network=net)
         for net in ("none", "loopback")])}
    assert results["loopback"].outcome is Outcome.PASSED, results["loopback"].detail
    if backend.isolation >= IsolationLevel.KERNEL:
        assert results["none"].outcome is Outcome.FAILED, results["none"].detail
        assert "PermissionError" in results["none"].detail, results["none"].detail
