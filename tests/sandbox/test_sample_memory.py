"""Memory is bounded per sample, whatever holds it.

``RLIMIT_AS`` counts only the address space; memfd pages written with ``write()``, files on the
slot's tmpfs, pipe buffers and socket buffers live outside it. Each sample tries to hold far
more than its ``memory_mb`` in one of these and reports success; it is graded
``memory_exceeded`` (the slot's memory group OOM-kills it; anonymous memory meets ``RLIMIT_AS``
first), never ``passed``.
"""

from __future__ import annotations

import pytest

from core.testenvmanager.sandbox import ExecRequest
from core.testenvmanager.sandbox.types import IsolationLevel, Outcome

from .conftest import assert_alive

CHUNK = "B = b'x' * (1 << 20)\n"

#: name -> (memory_mb, program defining hold() -> megabytes held)
HOGS: dict[str, tuple[int, str]] = {
    # many files, each under RLIMIT_FSIZE (64 MiB), so only the memory group can stop them
    "memfd": (128, CHUNK + "KEEP = []\n"
                   "def hold():\n"
                   "    total = 0\n"
                   "    for n in range(16):\n"
                   "        fd = os.memfd_create('hog'); KEEP.append(fd)\n"
                   "        for i in range(32):\n"
                   "            total += os.write(fd, B)\n"
                   "    return total >> 20\n"),
    "tmpfs_files": (96, CHUNK + "def hold():\n"
                         "    total = 0\n"
                         "    for n in range(8):\n"
                         "        with open(f'big{n}', 'wb') as fh:\n"
                         "            for i in range(25):\n"
                         "                total += fh.write(B)\n"
                         "    return total >> 20\n"),
    "pipe_buffers": (48, "import fcntl\nKEEP = []\n"
                         "def hold():\n"
                         "    total = 0\n"
                         "    for i in range(100):\n"
                         "        r, w = os.pipe(); KEEP.extend((r, w))\n"
                         "        fcntl.fcntl(w, 1031, 1 << 20)\n"  # F_SETPIPE_SZ
                         "        os.set_blocking(w, False)\n"
                         "        try:\n"
                         "            while True:\n"
                         "                total += os.write(w, b'x' * 65536)\n"
                         "        except BlockingIOError:\n"
                         "            pass\n"
                         "    return total >> 20\n"),
    "socketpair_buffers": (128, "import socket\nKEEP = []\n"
                                "def hold():\n"
                                "    total = 0\n"
                                "    for i in range(100):\n"
                                "        a, b = socket.socketpair(); KEEP.extend((a, b))\n"
                                "        for s in (a, b):\n"
                                "            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 30)\n"
                                "            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 30)\n"
                                "            s.setblocking(False)\n"
                                "            try:\n"
                                "                while True:\n"
                                "                    total += s.send(b'x' * 65536)\n"
                                "            except BlockingIOError:\n"
                                "                pass\n"
                                "    return total >> 20\n"),
    "anonymous": (128, "def hold():\n    b = bytearray(512 << 20)\n    return len(b) >> 20\n"),
}


@pytest.mark.parametrize("name", sorted(HOGS))
def test_memory_outside_the_address_space_counts(bare_backend, name: str) -> None:
    if bare_backend.isolation < IsolationLevel.FULL:
        pytest.skip("per-sample memory groups need root (the host's memory controller)")
    memory_mb, program = HOGS[name]
    test = f"def check(candidate):\n    held = candidate()\n    assert held > {memory_mb}, held\n"
    (res,) = list(bare_backend.run([ExecRequest(
        id=name, program="import os\n" + program, test=test, entry_point="hold",
        memory_mb=memory_mb, timeout=30)]))
    assert res.outcome is Outcome.MEMORY_EXCEEDED, (name, res.outcome, res.detail)
    assert_alive(bare_backend)
