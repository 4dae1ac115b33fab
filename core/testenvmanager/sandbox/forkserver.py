"""Warm fork server of the ``local`` backend, also run inside the ``docker`` backend's containers
(stdlib + ctypes; started as ``python -I -S -B boot.py CONFIG``, which runs this file as
``__main__`` from a compact heap; ``python -I -S -B forkserver.py CONFIG`` works too).

The caller starts this script once per executor with a scrubbed environment and one end of a
``SOCK_SEQPACKET`` socket pair. At start-up the server enters private network, mount and IPC
namespaces, builds its private file-system view (:mod:`mounts`), prepares the Landlock policy and
seccomp programs (:mod:`walls`), reports the mechanisms it achieved in a ``hello`` message and
then serves requests.

Protocol (one JSON object per socket message; file descriptors ride along as ``SCM_RIGHTS``):

* messages are ``marshal``-encoded dicts (both ends are this project's trusted code; marshal is
  much cheaper than JSON for the server, which handles every request serially);
* caller -> server: ``{"op": "run", "seq": n, "meta": {...}, "fds": [names]}`` with one memfd per
  name: ``single`` (in-process tier: program, test, files), or ``cand`` + ``judge`` (boundary
  tier: the program for the candidate, the test and helpers for the judge), and optionally
  ``stdin``; ``{"op": "shutdown"}`` (or EOF) stops the server after running children are killed.
* server -> caller: ``{"op": "hello", ...}`` once, then one ``{"op": "result", "seq": n, ...}``
  per request in completion order, carrying the memfds ``out``, ``err`` and ``verdict``.

The server never reads a program, a test or a sample's output: they reach the children as
descriptors, so a forked child cannot find another request's test or solution in the memory it
inherits from the server.

Per request the slot's *spawner* (a fork of the server made when serving starts, one per slot,
see :class:`_Spawner`) forks one child (in-process tier), or the candidate while the slot's
long-lived *judge* (forked by the server) runs the test (boundary tier, see :mod:`boundary`). The
server itself never forks per request. Each child starts a new session, arranges its
descriptors, reads its payload, enters its private working directory, applies rlimits, drops to
its own unprivileged uid, and applies Landlock and seccomp before any untrusted code runs. The
spawner reaps its children and reports how each ended; the server enforces the wall-clock
timeout (SIGKILL to every process group of the request, through the spawner), kills escaped
descendants (uid sweep), grades from kernel facts (exit status, signals, rusage, cgroup OOM
counts) and the judge's record, and drops the working directory with its slot's tmpfs when it
is not empty. Neither runs untrusted code; each is single-threaded.
"""

from __future__ import annotations

import collections
import errno
import fcntl
import json
import os
import resource
import select
import signal
import struct

import _signal
import _socket
import marshal
import sys
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

_HERE = os.path.dirname(os.path.abspath(__file__))
_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWNET, _CLONE_NEWUSER = 0x20000, 0x8000000, 0x40000000, 0x10000000
_PR_SET_CHILD_SUBREAPER, _PR_SET_DUMPABLE = 36, 4
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1
_SOL_SOCKET, _SCM_RIGHTS, _MSG_DONTWAIT, _MSG_CMSG_CLOEXEC = 1, 1, 0x40, 0x40000000
_LEVELS = ("none", "process", "netns", "kernel", "full")
_VERDICTS = frozenset({"passed", "failed", "error", "syntax_error", "memory_exceeded",
                       "sandbox_violation", "infra_error", "candidate_died"})
_RESERVED_FD = 1000  # long-lived descriptors of the server (Landlock rules) live above this
_LINGER = 0.5  # seconds a sample may take to exit by itself once its verdict is in
_LOW_FD = 64  # a child parks the descriptors it passes on above this while arranging 0, 1, 2, ...
_SLOT_FD = 900  # the per-slot memory groups' ``cgroup.procs`` descriptors live above this
#: a verdict record's header: "<nonce, 32 hex> <status> <seconds>\n" fits in this many bytes
_RECORD_HEAD = 96
_RECORD_ZEROS = bytes(_RECORD_HEAD)
#: stdlib modules imported once by the server so children get them for free. Kept lean on purpose:
#: every preloaded page makes each fork (page-table copy) and each exit slower.
DEFAULT_PRELOAD = (
    "bisect", "collections", "copy", "fractions", "functools", "hashlib", "heapq", "itertools",
    "math", "operator", "random", "re", "string", "typing", "unicodedata",
)
#: one thread per sample for native thread pools (OpenMP, OpenBLAS, MKL, numexpr, BLIS): the
#: executor already runs ``workers`` samples side by side, about one per core, and a library that
#: sizes its pool to the machine in each of them oversubscribes the cores; OpenMP's spinning
#: barriers then turn a test of seconds into minutes (eli5's LightGBM tests: 2 s alone, about
#: 110 s each with two samples at once). Part of every child's environment, and set in the
#: server before it preloads, since these libraries read it when they load.
THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "NUMEXPR_NUM_THREADS": "1", "BLIS_NUM_THREADS": "1", "VECLIB_MAXIMUM_THREADS": "1"}
#: modules the harness itself needs in every child: always preloaded
REQUIRED_PRELOAD = ("_posixsubprocess", "signal", "json")
#: directories every sandboxed process may read (and execute from); everything else is hidden by
#: Landlock. The interpreter's prefixes are added at start-up; site-packages stay covered.
READ_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc")


#: code objects compiled outside this process by boot.py (name -> code), set in this module's
#: namespace before it runs; empty when this file is run directly
_PRECOMPILED: dict = globals().get("_PRECOMPILED") or {}
_BOOTED = bool(_PRECOMPILED)
#: the sibling modules the server loads by path (boot.py's MODULES must list them too: a module
#: it did not compile is compiled here, and ``compact_boot`` then reports False)
SANDBOX_MODULES = ("cgroups", "mounts", "walls", "codec", "runner", "boundary")
_COMPILED_HERE: list[str] = []  # modules _load had to compile in this process


def _load(name: str):
    """Import a sibling module by path (the server runs with -I -S: no sys.path games), from
    the code boot.py compiled when there is one (see boot.py: no compiler garbage here)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"_sandbox_{name}", os.path.join(_HERE, f"{name}.py"))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the sandbox module {name!r} from {_HERE}")
    module = importlib.util.module_from_spec(spec)
    # harness code resolves builtins through its own pristine copy: a program that monkeypatches
    # ``builtins`` cannot change how the harness classifies or reports
    import builtins

    module.__dict__["__builtins__"] = dict(builtins.__dict__)
    sys.modules[spec.name] = module  # dataclasses resolve their module through sys.modules
    code = _PRECOMPILED.pop(name, None)
    if code is not None:
        exec(code, module.__dict__)
    else:
        _COMPILED_HERE.append(name)
        spec.loader.exec_module(module)
    return module


def _preload(names: list[str], facts: dict) -> None:
    import importlib

    os.environ.update(THREAD_ENV)  # before any native library loads (THREAD_ENV)
    failed = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - optional module missing on this build
            failed.append(name)
    if failed:
        facts["notes"].append(f"could not preload: {', '.join(failed)}")


def _log(msg: str) -> None:
    try:
        os.write(2, f"forkserver[{os.getpid()}]: {msg}\n".encode("utf-8", "replace"))
    except OSError:
        pass


# ----------------------------------------------------------------------------------- isolation
def _setup_namespaces(cfg: dict, libc) -> dict:
    """Enter private network, mount and IPC namespaces (a user namespace first when not root);
    become a child subreaper. Returns facts; never raises."""
    import ctypes

    notes: list[str] = []
    facts: dict = {"netns": False, "mountns": False, "ipcns": False, "userns": False,
                   "subreaper": False, "drop_uid": False, "notes": notes}
    want = _CLONE_NEWIPC
    if cfg.get("netns", True):
        want |= _CLONE_NEWNET
    if cfg.get("mountns", True):
        want |= _CLONE_NEWNS
    if libc.unshare(want) != 0:
        notes.append(f"unshare failed: {os.strerror(ctypes.get_errno())}")
        uid, gid = os.geteuid(), os.getegid()
        if uid != 0 and libc.unshare(_CLONE_NEWUSER | want) == 0:
            try:
                for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                                   ("gid_map", f"{gid} {gid} 1")):
                    with open(f"/proc/self/{name}", "w") as fh:
                        fh.write(text)
                facts["userns"] = True
                notes.append("namespaces via an unprivileged user namespace")
            except OSError as exc:
                notes.append(f"user namespace mapping failed: {exc}")
                want = 0
        else:  # take what the kernel grants one by one
            want = sum(flag for flag in (_CLONE_NEWNET, _CLONE_NEWNS, _CLONE_NEWIPC)
                       if want & flag and libc.unshare(flag) == 0)
    facts["netns"] = bool(want & _CLONE_NEWNET)
    facts["mountns"] = bool(want & _CLONE_NEWNS)
    facts["ipcns"] = bool(want & _CLONE_NEWIPC)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0:
        facts["subreaper"] = True
    if facts["netns"]:
        _loopback_up(facts)
    return facts


def _loopback_up(facts: dict) -> None:
    """Bring ``lo`` up inside the new namespace so localhost servers in tests still work."""
    import fcntl

    try:
        sock = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
        try:
            ifreq = struct.pack("16sH14s", b"lo", 0, b"\0" * 14)
            flags = struct.unpack("16sH14s", fcntl.ioctl(sock.fileno(), _SIOCGIFFLAGS, ifreq))[1]
            fcntl.ioctl(sock.fileno(), _SIOCSIFFLAGS,
                        struct.pack("16sH14s", b"lo", flags | _IFF_UP, b"\0" * 14))
        finally:
            sock.close()
    except OSError as exc:
        facts["notes"].append(f"loopback not up: {exc}")


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _setup_cgroups(cfg: dict, facts: dict, cgroups) -> Any:
    """Put the server (and so every child, at zero per-request cost) into the executor's cgroups
    and make the per-slot memory groups (:mod:`cgroups`: v1, v2 or hybrid). Optional: what
    could not be made becomes a note, and the isolation level says so (:func:`_level`).
    Returns the host's ``cgroups.Layout`` as read before the server moved."""
    facts["cgroups"], facts["slot_memory"] = {}, []
    layout = cgroups.Layout(cgroups.HostFS())
    facts["cgroup"] = {"layout": layout.describe()}
    if not cfg.get("cgroups", True):
        if not cfg.get("container"):  # a container's groups are the host's to make
            facts["notes"].append("cgroups: switched off (cgroups=False)")
        return layout
    groups = cgroups.setup(cfg, facts["notes"], layout)
    facts["cgroups"] = dict(groups.executor)
    facts["slot_memory"] = list(groups.slots)
    facts["cgroup"].update(groups.facts())
    return layout


def _leave_cgroups(facts: dict) -> None:
    """Leave and remove the executor's groups (those this server made; a container's host-made
    slot groups stay for the host to remove)."""
    made = facts.get("cgroup") or {}
    if made.get("executor"):
        sys.modules["_sandbox_cgroups"].leave(made)


def _oom_kills(counter: str) -> int:
    """The OOM kill count in ``counter`` (v1 ``memory.oom_control``, v2 ``memory.events``: both
    hold an ``oom_kill N`` line), -1 when unreadable."""
    try:
        fd = os.open(counter, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return -1
    try:
        return _oom_count(fd)
    finally:
        os.close(fd)


def _oom_count(fd: int) -> int:
    """The OOM kill count from an open ``memory.oom_control`` or ``memory.events`` (re-read from
    offset 0, so one descriptor serves every request), -1 when unreadable."""
    try:
        data = os.pread(fd, 4096, 0)
        start = data.index(b"oom_kill ") + 9
        return int(data[start:data.index(b"\n", start)])
    except (OSError, ValueError):
        return -1


# ------------------------------------------------------------------------ container privileges
# capability numbers (include/uapi/linux/capability.h) and prctl(2) options
_CAP_DAC_OVERRIDE, _CAP_FOWNER, _CAP_KILL, _CAP_SETGID, _CAP_SETUID = 1, 3, 5, 6, 7
#: what a container's fork server keeps (the docker backend adds exactly these to the container),
#: the part of a root server's powers that the server of ``local`` uses: SETUID/SETGID to give
#: every child its own uid and for :func:`sweep_uid`; KILL to stop its children (timeouts,
#: verdicts, escapees, shutdown), which now have other uids; DAC_OVERRIDE and FOWNER to remove
#: what samples left in their working directories.
_SERVER_CAPS = ((1 << _CAP_SETUID) | (1 << _CAP_SETGID) | (1 << _CAP_KILL)
                | (1 << _CAP_DAC_OVERRIDE) | (1 << _CAP_FOWNER))
_PR_SET_KEEPCAPS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 8, 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
#: set by :func:`_container_privileges` in a container's server: its children clear every
#: capability with it once they have their own uid (None everywhere else)
_CAPS: "_Capabilities | None" = None
#: ``capget`` for every server (set in :func:`main`): :func:`sweep_uid` checks its effective set
#: before each ``kill(-1)`` with one system call instead of parsing ``/proc`` (the server is
#: single-threaded and does this once per request)
_CAPGET: "_Capabilities | None" = None


class _Capabilities:
    """``capget``/``capset`` of the calling thread (header version 3: 64 capability bits).

    The ctypes objects are made once, at start-up: a forked child uses them after ``ctypes`` has
    left ``sys.modules``. Sets are 64-bit masks (bit ``n`` = capability ``n``)."""

    def __init__(self, libc) -> None:
        import ctypes

        class Header(ctypes.Structure):
            _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

        class Data(ctypes.Structure):
            _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                        ("inheritable", ctypes.c_uint32)]

        self._libc, self._get_errno = libc, ctypes.get_errno
        self._header, self._data = Header(_LINUX_CAPABILITY_VERSION_3, 0), (Data * 2)()
        self._header_ref, self._data_ref = ctypes.byref(self._header), ctypes.byref(self._data)

    def _fail(self, call: str) -> None:
        err = self._get_errno()
        raise OSError(err, f"{call}: {os.strerror(err)}")

    def get(self) -> tuple[int, int, int]:
        """``(effective, permitted, inheritable)`` of this thread; raises ``OSError``."""
        self._header.version, self._header.pid = _LINUX_CAPABILITY_VERSION_3, 0
        if self._libc.capget(self._header_ref, self._data_ref) != 0:
            self._fail("capget")
        low, high = self._data
        return tuple((getattr(high, name) << 32) | getattr(low, name)  # type: ignore[return-value]
                     for name in ("effective", "permitted", "inheritable"))

    def set(self, effective: int, permitted: int, inheritable: int) -> None:
        """Replace this thread's three sets (the kernel refuses to grow ``permitted``)."""
        self._header.version, self._header.pid = _LINUX_CAPABILITY_VERSION_3, 0
        for index, half in enumerate(self._data):
            shift = 32 * index
            half.effective = (effective >> shift) & 0xFFFFFFFF
            half.permitted = (permitted >> shift) & 0xFFFFFFFF
            half.inheritable = (inheritable >> shift) & 0xFFFFFFFF
        if self._libc.capset(self._header_ref, self._data_ref) != 0:
            self._fail("capset")

    def clear(self) -> None:
        """Drop every capability: effective, permitted, inheritable and ambient (the ambient set
        is a subset of permitted, so it is empty once permitted is). The bounding set stays as
        the container got it: shrinking it needs CAP_SETPCAP, which the server does not hold,
        and with an empty permitted set, ``no_new_privs`` and a non-zero uid nothing can ever
        raise a capability from it again. Raises ``PermissionError`` when anything is left."""
        self.set(0, 0, 0)
        self._libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
        left = self.get()
        if any(left):
            raise PermissionError("capabilities left after dropping them: effective %#x, "
                                  "permitted %#x, inheritable %#x" % left)


def _container_privileges(cfg: dict, facts: dict, libc) -> None:
    """Inside a ``docker`` container: leave uid 0 for the server's own uid, keeping only the
    capabilities children need to get their own uids (:data:`_SERVER_CAPS`).

    Called once by :func:`main` when ``cfg["container"]``, after the namespaces and before any
    module is loaded or any request read. The container starts as uid 0 with every capability
    dropped except those of :data:`_SERVER_CAPS` (and ``no-new-privileges``).

    * Started as a non-root uid (an old caller): nothing changes; ``facts["container_uids"]``
      is False, and server, judges and samples share that uid (a note says so).
    * Started as uid 0: needs ``cfg["server_uid"]`` (a leased, non-zero uid other than every
      child's). Afterwards real, effective and saved uid and gid are ``server_uid``, there are
      no supplementary groups, effective = permitted = what the container granted of
      :data:`_SERVER_CAPS` (CAP_SETUID and CAP_SETGID at least), inheritable and ambient are
      empty, :data:`_CAPS` is set (children clear every capability with it) and
      ``facts["container_uids"]`` is True. Any failure raises: a server must never serve as
      uid 0.
    """
    global _CAPS
    facts["container_uids"] = False
    if os.geteuid() != 0:
        facts["notes"].append(f"the container runs as uid {os.geteuid()}: the server, its judges "
                              "and its samples share it")
        return
    server = int(cfg.get("server_uid") or 0)
    if server <= 0:
        raise RuntimeError("a container started as uid 0 needs a non-zero server_uid")
    caps = _Capabilities(libc)
    _effective, permitted, _inheritable = caps.get()
    needed = (1 << _CAP_SETUID) | (1 << _CAP_SETGID)
    if permitted & needed != needed:
        raise PermissionError(f"the container lacks CAP_SETUID/CAP_SETGID (permitted {permitted:#x})")
    keep = permitted & _SERVER_CAPS
    if libc.prctl(_PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0:
        raise OSError("prctl(PR_SET_KEEPCAPS) failed")
    os.setgroups([])
    os.setresgid(server, server, server)
    os.setresuid(server, server, server)  # permitted kept (KEEPCAPS), effective cleared
    libc.prctl(_PR_SET_KEEPCAPS, 0, 0, 0, 0)
    caps.set(keep, keep, 0)
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    state = (os.getresuid(), os.getresgid(), os.getgroups(), caps.get())
    if state != ((server,) * 3, (server,) * 3, [], (keep, keep, 0)):
        raise PermissionError(f"dropping to the server's uid {server} left {state}")
    _CAPS = caps
    facts["container_uids"] = True
    facts["server_uid"] = server


def sweep_uid(uid: int) -> None:
    """SIGKILL every process whose real or saved uid is ``uid`` (in the server's pid namespace:
    the container's, or the host's for ``local``) in one ``kill(-1, SIGKILL)``, which the kernel
    applies under its task-list lock, so a fork bomb cannot outrun it. (Its return value cannot
    tell whether anything was hit: the kernel skips, without error, processes it may not signal.)

    Called by the fork server only, which must be either root (ruid = euid = suid = 0: the
    ``local`` backend) or a container's server (its own non-zero uid with CAP_SETUID effective,
    as :func:`_container_privileges` leaves it). ``uid`` must be non-zero and not one of the
    server's own. The server's uids and capabilities are restored before this returns, also
    when the kill fails; ``OSError`` if they cannot be switched (then nothing was signalled).

    How: without CAP_KILL, ``kill(-1)`` reaches the processes whose real or saved uid equals
    the caller's real or effective uid. A root server takes ``(uid, uid, 0)``: its effective
    capabilities (CAP_KILL) go with the effective uid 0, and the saved uid 0 brings them back on
    ``setresuid(0, 0, 0)``; its real uid must leave 0 (or every root process of the host would
    be hit), so for those microseconds a process of ``uid`` could signal the server (Landlock's
    signal scope, ABI >= 6, still stops the samples). A container's server takes CAP_KILL out of
    its effective set (it stays permitted) and takes ``(uid, uid, own)``: its real uid must
    leave its own too, because children forked a moment ago still have the server's uids until
    their set-up gives them theirs, and ``kill(-1)`` matches the sender's real uid as well (a
    reproduced race: every request being set up while another slot was swept was killed). The
    saved uid keeps its own, and CAP_SETUID, which no uid change between non-zero uids clears,
    switches it back.
    """
    uid = int(uid)
    ruid, euid, suid = os.getresuid()
    if uid <= 0 or uid in (ruid, euid, suid):
        raise ValueError(f"sweep_uid({uid}): not a sample's uid")
    if (ruid, euid, suid) == (0, 0, 0):
        _kill_all_as((uid, uid, -1), (0, 0, 0))
    elif _CAPS is not None and 0 not in (ruid, euid, suid):
        effective, permitted, inheritable = _CAPS.get()
        _CAPS.set(effective & ~(1 << _CAP_KILL), permitted, inheritable)
        try:
            # the real uid changes too: a child forked a moment ago still has the server's
            # uids until its set-up takes its own, and kill(-1) also matches the sender's real
            # uid, so keeping it would kill every child that is being set up right now
            _kill_all_as((uid, uid, -1), (ruid, euid, suid))
        finally:
            _CAPS.set(effective, permitted, inheritable)
    else:
        raise PermissionError("sweep_uid needs a root server or a container's server with CAP_SETUID")


def _kill_all_as(switch: tuple[int, int, int], restore: tuple[int, int, int]) -> None:
    """``kill(-1, SIGKILL)`` with the uids ``setresuid(*switch)``; ``setresuid(*restore)`` after.
    Checked first: with an effective uid 0 or CAP_KILL effective, ``kill(-1)`` would reach every
    process of the pid namespace (the host's, for ``local``), so it raises ``PermissionError``
    instead and signals nothing."""
    os.setresuid(*switch)
    try:
        if os.geteuid() == 0 or _effective_caps() & (1 << _CAP_KILL):
            raise PermissionError("sweep_uid: still privileged after switching uids; nothing signalled")
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:  # no other process at all
        pass
    finally:
        os.setresuid(*restore)


def _effective_caps() -> int:
    """This thread's effective capabilities (all bits set when they cannot be read)."""
    probe = _CAPS or _CAPGET
    if probe is not None:
        return probe.get()[0]
    try:
        with open("/proc/thread-self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"CapEff:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return -1


def _level(facts: dict) -> int:
    """Isolation level reached (index into ``_LEVELS``): a level is reported only when every
    wall docs/sandbox.md lists for it stands (``kernel``: the private, read-only mount view with
    ``hidepid`` and the IPC namespace, Landlock and seccomp). Inside a container of the
    ``docker`` backend (``facts["container"]``) the container provides the private network
    namespace (only loopback) and the private, read-only mount namespace with a private
    ``/tmp`` and its own IPC namespace, and its own limits are the executor-wide caps. ``full`` also needs every cgroup wall
    (``cgroups.walls``): without them a sample's memory outside its address space (memfds,
    tmpfs files, pipe and socket buffers) and a fork bomb's reach are unbounded."""
    container = bool(facts.get("container"))
    if not (facts["netns"] or container):
        return 1
    mounts = facts.get("mounts") or {}
    view = container or (facts["mountns"] and facts["ipcns"] and bool(mounts.get("readonly_root"))
                         and bool(mounts.get("hidepid")))
    kernel = view and facts["landlock_abi"] > 0 and facts["seccomp"]
    if not kernel:
        return 2
    walls = sys.modules["_sandbox_cgroups"].walls(facts)
    return 4 if facts["drop_uid"] and facts["subreaper"] and all(walls.values()) else 3


# ----------------------------------------------------------------------------------- messages
class _Channel:
    """A SOCK_SEQPACKET link between this project's processes (the caller's socket, and a
    spawner's to the server): one ``marshal``-encoded message per packet, fds as SCM_RIGHTS."""

    def __init__(self, fd: int) -> None:
        from array import array

        self.sock = _socket.socket(fileno=fd)
        self.array = array
        self.cmsg_space = _socket.CMSG_SPACE(16 * 4)

    def send(self, obj: dict | tuple, fds: list[int] = ()) -> None:  # type: ignore[assignment]
        data = marshal.dumps(obj)
        anc = [(_SOL_SOCKET, _SCM_RIGHTS, self.array("i", fds).tobytes())] if fds else []
        self.sock.sendmsg([data], anc)

    def receive(self) -> tuple[Any, list[int]] | None:
        """Next message, ``({}, [])`` when none is waiting, None at EOF."""
        try:
            data, anc, _flags, _addr = self.sock.recvmsg(65536, self.cmsg_space,
                                                         _MSG_DONTWAIT | _MSG_CMSG_CLOEXEC)
        except BlockingIOError:
            return {}, []
        fds: list[int] = []
        for level, kind, payload in anc:
            if level == _SOL_SOCKET and kind == _SCM_RIGHTS:
                arr = self.array("i")
                arr.frombytes(payload[:len(payload) - len(payload) % arr.itemsize])
                fds.extend(arr)
        if not data and not fds:
            return None
        return marshal.loads(data), fds


def _waiting(sock: "_socket.socket", size: int) -> Iterator[bytes]:
    """The messages waiting on a non-blocking socket, then stop; ``b""`` when the peer is gone
    (end of file, or the socket was closed meanwhile), after which nothing more is read."""
    while True:
        try:
            data = sock.recv(size)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        yield data
        if not data:
            return


def _ended() -> Iterator[tuple[int, int, Any]]:
    """(pid, wait status, rusage) of every child of this process that has ended, reaped
    without blocking, until none is left."""
    while True:
        try:
            pid, status, rusage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, status, rusage


class _Job:
    """Book-keeping for one request (server side only)."""

    __slots__ = ("seq", "meta", "fds", "running", "slot", "workdir", "nonce", "start", "deadline",
                 "mem", "status", "rusage", "timed_out", "killed", "setup_fd", "judge", "linger",
                 "oom0")

    def __init__(self, seq: int, meta: dict, fds: dict[str, int]) -> None:
        self.seq, self.meta, self.fds = seq, meta, fds
        self.running: set[str] = set()      # roles ("single" | "cand") whose process runs
        self.slot = 0
        self.workdir = self.nonce = ""
        self.start = self.deadline = 0.0
        self.mem: dict[str, int] = {}       # "out" | "err" | "verdict" -> memfd
        self.status: dict[str, int] = {}    # role -> wait status ("judge": only if it died)
        self.rusage: dict[str, object] = {}
        self.timed_out = False
        self.killed: set[str] = set()       # roles the server killed itself
        self.setup_fd = -1
        self.judge = ""                     # boundary tier: "running", "done" or "died"
        self.linger = 0.0                   # verdict in: the sample may still exit by itself until
        self.oom0 = -1                      # the slot group's OOM kill count when the job started


class _Spawner:
    """A slot's long-lived spawner: the one process that forks the slot's sample processes.

    The server hands it each request's descriptors; it forks the child (which walls itself in
    exactly as before), reaps it and reports how it ended. The server itself then never forks
    per request, so it takes no copy-on-write faults for the pages it writes while children
    run, and the slots fork in parallel instead of one after the other in the server."""

    __slots__ = ("pid", "channel")

    def __init__(self, pid: int, channel: _Channel) -> None:
        self.pid, self.channel = pid, channel


class _Judge:
    """A slot's long-lived judge process (boundary tier): it runs one request's test at a time
    and reports on its socket; it never runs sample code."""

    __slots__ = ("pid", "sock", "setup_fd", "job", "served")

    def __init__(self, pid: int, sock: "_socket.socket", setup_fd: int) -> None:
        self.pid, self.sock, self.setup_fd = pid, sock, setup_fd
        self.job: _Job | None = None
        self.served = 0


class Server:
    """Single-threaded event loop: control messages, judge reports, SIGCHLD, deadlines."""

    def __init__(self, cfg: dict, facts: dict, modules: dict, channel: _Channel,
                 slots: list, walls: dict) -> None:
        self.cfg, self.facts, self.modules, self.channel = cfg, facts, modules, channel
        self.slots, self.walls = slots, walls
        self.workers = max(1, int(cfg.get("workers", 1)))
        self.uid_base = int(cfg.get("uid_base", 61000))
        self.limits = cfg.get("limits", {})
        self.boundary_limits = cfg.get("boundary_limits", {})
        self.judge_requests = max(1, int(cfg.get("judge_requests", 500)))
        self.slot_cpus: list[int] = list(facts.get("slot_cpus") or [])
        # first in, first out: requests that arrive one at a time take turns over the slots,
        # and so over the slots' CPUs (_slot_cpus), instead of all landing on the last one
        self.free_slots: collections.deque[int] = collections.deque(range(self.workers))
        # the executor's OOM kill counter (in a container: the container's own memory group's,
        # which counts the OOM kills of its limit)
        made = facts.get("cgroup") or {}
        self.oom_file: str = made.get("oom_file") or facts.get("container_oom_file") or ""
        self.oom_seen = _oom_kills(self.oom_file) if self.oom_file else -1
        # per-slot memory groups: a child joins its slot's by writing "0" to this descriptor
        self.slot_groups: list[str] = list(facts.get("slot_memory") or [])
        self.slot_procs: list[int] = []
        self.slot_oom: list[int] = []  # their OOM kill counters, read before and after each sample
        files: dict[str, Any] = sys.modules["_sandbox_cgroups"].slot_files(self.slot_groups[0]) \
            if self.slot_groups else {"limits": [], "swap": "", "oom": ""}
        self.slot_limit_files: list[str] = files["limits"]
        self.slot_swap_file: str = files["swap"]
        for path in self.slot_groups:
            for name, flags, fds in (("cgroup.procs", os.O_WRONLY, self.slot_procs),
                                     (files["oom"], os.O_RDONLY, self.slot_oom)):
                fd = os.open(os.path.join(path, name), flags | os.O_CLOEXEC)
                fds.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _SLOT_FD))
                os.close(fd)
        self.slot_limit: dict[int, int] = {}  # slot -> memory limit now set on its group
        self.in_spawner = False  # True in a spawner (and the children it forks)
        # set in a spawner before each fork: the slot's prepared Landlock ruleset when the child
        # may use it (see _spawner_ruleset), and the spawner's oom_score_adj descriptor
        self.child_ruleset: int | None = None
        self.slot_ruleset: tuple[int, int] | None = None  # a spawner's: (mount generation, fd)
        self.oom_adj: tuple[int, bytes] | None = None
        self.record_buf = bytearray(_RECORD_HEAD)  # see _record
        self.pending: collections.deque[tuple[int, dict, dict[str, int]]] = collections.deque()
        self.active: dict[int, _Job] = {}  # seq -> job whose sample process runs
        self.spawners: dict[int, _Spawner] = {}  # slot -> its spawner
        self.spawner_fds: dict[int, int] = {}  # socket fd -> slot
        self.judges: dict[int, _Judge] = {}  # slot -> its judge
        self.judge_fds: dict[int, int] = {}  # socket fd -> slot
        self.retired: dict[int, _Judge] = {}  # judges killed or exited, reaped later
        self.counter = 0
        self.ep = select.epoll()
        self.hard_limits = {rlim: resource.getrlimit(rlim)[1] for rlim in (
            resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_CORE, resource.RLIMIT_FSIZE,
            resource.RLIMIT_NOFILE, resource.RLIMIT_NPROC)}
        self.shutting_down = False
        self.devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        self.scratch = cfg["scratch"]
        self.child_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
                          "LC_ALL": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
                          "PYTHONIOENCODING": "utf-8", **THREAD_ENV}
        os.environ.clear()
        os.environ.update(self.child_env)
        self.wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        self.ctl_fd = channel.sock.fileno()
        self.ep.register(self.ctl_fd, select.EPOLLIN)
        self.ep.register(self.wake_r, select.EPOLLIN)

    # -- control ---------------------------------------------------------------------------
    def _read_control(self) -> None:
        while True:
            got = self.channel.receive()
            if got is None:
                self.shutting_down = True
                try:
                    self.ep.unregister(self.ctl_fd)
                except OSError:
                    pass
                return
            msg, fds = got
            if not msg:
                return
            if msg.get("op") == "run":
                names = msg.get("fds") or []
                if len(names) != len(fds):
                    for fd in fds:
                        os.close(fd)
                    continue
                self.pending.append((msg["seq"], msg.get("meta") or {}, dict(zip(names, fds))))
            elif msg.get("op") == "shutdown":
                self.shutting_down = True
            else:
                for fd in fds:
                    os.close(fd)

    # -- judges ----------------------------------------------------------------------------
    def _judge_for(self, slot: int) -> _Judge:
        """The slot's judge, started (walled, its own uid) when there is none."""
        judge = self.judges.get(slot)
        if judge is not None:
            return judge
        mine, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        setup_fd = os.memfd_create("judge-setup", os.MFD_CLOEXEC)
        try:
            pid = os.fork()
        except OSError:
            mine.close()
            theirs.close()
            os.close(setup_fd)
            raise
        if pid == 0:  # ----------------------------------------------------------- judge
            code = 70
            try:
                self._pin(slot)
                if self._wall("judge", slot, "/", {"timeout": 0, "memory_mb": 0},
                              [self.devnull, self.devnull, self.devnull, theirs.fileno()],
                              setup_fd) is not None:
                    code = self.modules["boundary"].judge_loop(self.modules["codec"], self.boundary_limits)
            finally:
                os._exit(code)
        theirs.close()
        mine.setblocking(False)
        judge = _Judge(pid, mine, setup_fd)
        self.judges[slot] = judge
        self.judge_fds[mine.fileno()] = slot
        self.ep.register(mine.fileno(), select.EPOLLIN)
        return judge

    def _pin(self, slot: int) -> None:
        """In a slot's new spawner or judge: pin this process to the slot's CPU
        (:func:`_slot_cpus`). A failure (the CPU went offline, a cpuset changed) only costs
        speed."""
        if self.slot_cpus:
            try:
                os.sched_setaffinity(0, (self.slot_cpus[slot],))
            except OSError as exc:
                _log(f"could not pin slot {slot} to CPU {self.slot_cpus[slot]}: {exc}")

    def _retire_judge(self, slot: int, kill: bool) -> None:
        judge = self.judges.pop(slot, None)
        if judge is None:
            return
        self._drop_socket(judge.sock, self.judge_fds)
        os.close(judge.setup_fd)
        if kill:
            try:
                os.kill(judge.pid, signal.SIGKILL)
            except OSError:
                pass
        self.retired[judge.pid] = judge

    def _drop_socket(self, sock: "_socket.socket", index: dict[int, int]) -> None:
        """Stop watching ``sock`` (its entry in ``index`` and in the event loop), close it."""
        fd = sock.fileno()
        index.pop(fd, None)
        try:
            self.ep.unregister(fd)
        except OSError:
            pass
        sock.close()

    def _judge_report(self, slot: int) -> None:
        judge = self.judges.get(slot)
        if judge is None:
            return
        for data in _waiting(judge.sock, 256):
            if not data:  # the judge is gone; its exit is handled when it is reaped
                return
            job = judge.job
            if job is None or data != f"done {job.seq}".encode("ascii"):
                continue
            judge.job = None
            judge.served += 1
            job.judge = "done"
            if judge.served >= self.judge_requests:
                self._retire_judge(slot, kill=True)  # bounded lifetime: a fresh judge next time
            if job.running:  # the judge hung up: an honest sample exits on that end of file
                job.linger = time.monotonic() + _LINGER
            else:
                self._finished([job])

    def _verdict_in(self, job: _Job) -> None:
        """The judge is finished with ``job`` (or gone): kill what still runs of the sample
        (its spawner reports the exit, and it counts as killed by the server), or finish the job
        when nothing runs."""
        if job.running:
            job.killed.update(job.running)
            self._kill_sample(job)
        else:
            self._finished([job])

    # -- spawners --------------------------------------------------------------------------
    def _spawner_for(self, slot: int) -> _Spawner:
        """The slot's spawner, started when there is none (a fork of this server made before
        the slot's first request; it keeps this process's walls and modules)."""
        spawner = self.spawners.get(slot)
        if spawner is not None:
            return spawner
        mine, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:  # --------------------------------------------------------- spawner
            code = 70
            try:
                mine.close()
                self._pin(slot)  # its samples inherit the CPU
                code = self._spawner_main(_Channel(theirs.detach()))
            finally:
                os._exit(code)
        theirs.close()
        mine.setblocking(False)
        spawner = self.spawners[slot] = _Spawner(pid, _Channel(mine.detach()))
        self.spawner_fds[spawner.channel.sock.fileno()] = slot
        self.ep.register(spawner.channel.sock.fileno(), select.EPOLLIN)
        return spawner

    def _spawner_main(self, channel: _Channel) -> int:
        """A spawner's loop (in the forked spawner; root like the server, never runs sample
        code). Messages from the server: ``("run", seq, role, slot, workdir, nonce, mount, meta)``
        (``mount``: the slot mount's generation) with the child's descriptors plus its setup
        descriptor last, and ``("kill", seq)``; to the
        server: ``("exit", seq, role, wait status, rusage tuple)`` once per child it reaped.
        Ends, killing its children, when the server hangs up."""
        self._forget_server()
        for other in self.spawners.values():
            other.channel.sock.detach()
        for judge in self.judges.values():
            judge.sock.detach()
        # every descriptor below the slot groups' but the ones it hands on: the caller's channel
        # (the caller must see EOF when the server dies), other slots' and requests' pipes and
        # memfds (a reader must see EOF when a sample dies), the server's wake-up pipe
        keep = sorted({channel.sock.fileno(), self.devnull})
        start = 3
        for fd in [*keep, _SLOT_FD]:
            if fd > start:
                os.closerange(start, fd)
            start = max(start, fd + 1)
        self.in_spawner = True
        self._static_limits()  # once here instead of in every child
        self.boundary_limits = self.modules["codec"].Limits(**self.boundary_limits)  # built once
        self._spawner_oom_adj()
        wake_r, wake_w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        children: dict[int, tuple[int, str]] = {}  # pid -> (seq, role)
        poller = select.poll()
        poller.register(channel.sock.fileno(), select.POLLIN)
        poller.register(wake_r, select.POLLIN)
        while True:
            events = poller.poll()
            for fd, _mask in events:
                if fd == wake_r:
                    try:
                        while os.read(wake_r, 256):
                            pass
                    except BlockingIOError:
                        pass
                    continue
                got = channel.receive()
                if got is None:  # the server hung up
                    for pid in children:
                        self._kill_group(pid)
                    return 0
                msg, fds = got
                if not msg:  # nothing was waiting after all
                    continue
                if msg[0] == "kill":
                    for pid, (seq, _role) in children.items():
                        if seq == msg[1]:
                            self._kill_group(pid)
                    continue
                _op, seq, role, slot, workdir, nonce, mount, meta = msg
                job = _Job(seq, meta, {})
                job.slot, job.workdir, job.nonce, job.setup_fd = slot, workdir, nonce, fds[-1]
                self.child_ruleset = self._spawner_ruleset(slot, mount, meta)
                oom = self.oom_adj
                if oom is not None:  # the child inherits the OOM killer's first pick
                    os.pwrite(oom[0], b"1000", 0)
                try:
                    pid = os.fork()
                except OSError as exc:
                    os.pwrite(job.setup_fd, f"fork failed: {exc}".encode(), 0)
                    pid = -1
                if oom is not None and pid:
                    os.pwrite(oom[0], oom[1], 0)
                if pid == 0:  # ------------------------------------------------------ child
                    code = 70
                    try:
                        code = self._child(role, job, fds[:-1])
                    finally:
                        os._exit(code)
                for fd in fds:
                    os.close(fd)
                if pid < 0:
                    channel.send(("exit", seq, role, -1, ()))
                else:
                    children[pid] = (seq, role)
            for pid, status, rusage in _ended():  # report every child that ended
                owner = children.pop(pid, None)
                if owner is not None:
                    self._kill_group(pid)  # leftovers in its process group
                    channel.send(("exit", owner[0], owner[1], status, tuple(rusage)))

    def _spawner_oom_adj(self) -> None:
        """In a spawner: keep its ``oom_score_adj`` open, so each child inherits 1000 (written
        just before the fork, the spawner's own value restored just after) instead of opening
        a procfs file itself (one procfs open, write and close less per sample, and their
        copy-on-write faults). For the length of a fork the spawner itself is as likely a pick
        of the OOM killer as a sample; a dead spawner costs its slot's running request an
        ``infra_error`` and is replaced. Left unset (children write it themselves) when
        unavailable."""
        try:
            fd = os.open("/proc/self/oom_score_adj", os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            return
        try:
            own = os.pread(fd, 16, 0).strip() or b"0"
            os.pwrite(fd, own, 0)  # writable: a failure here leaves the children to do it
        except OSError:
            os.close(fd)
            return
        try:  # above the numbers a child arranges (0, 1, 2, ...), under its open-files limit
            self.oom_adj = (fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, _LOW_FD), own)
        except OSError:
            pass
        os.close(fd)

    def _spawner_ruleset(self, slot: int, mount: int, meta: dict) -> int | None:
        """In a spawner: the Landlock ruleset a child of ``slot`` enforces as it is, or None
        when the child must build its own (:meth:`LandlockPolicy.apply`).

        Prepared once per slot mount and reused: the base read rules plus read-write access
        beneath the slot's tmpfs root instead of beneath the request's working directory.
        That is the same reach, because the root is the server's (mode 0711) and the sample
        has a uid of its own, so the only place below the root it can create or change
        anything is its working directory (a root-owned sticky directory), and the slot holds
        one request at a time. Hence only when uids are dropped and slots are mounts, and not
        for a request with ``read_paths`` (those get their own rules). A reset slot is a new
        mount (its root a new inode, though a fresh tmpfs may reuse the old device and inode
        numbers): the server sends the slot's mount generation, and a new one rebuilds."""
        policy = self.walls.get("landlock")
        if policy is None or not self.slots or not self.facts["drop_uid"] or meta.get("read_paths"):
            return None
        root = self.slots[slot].path
        held = self.slot_ruleset  # a spawner serves one slot
        if held is not None and held[0] == mount:
            return held[1]
        if held is not None:
            os.close(held[1])
            self.slot_ruleset = None
        try:
            fd = policy.ruleset([root], min_fd=_LOW_FD)  # _LOW_FD: see _spawner_oom_adj
        except OSError as exc:
            _log(f"no prepared Landlock ruleset for slot {slot}: {exc}")
            return None
        self.slot_ruleset = (mount, fd)
        return fd

    def _forget_server(self) -> None:
        """In a process forked from the server: let go of what only the server uses (the
        event loop, the signal wake-up) and make the caller's channel object forget its
        descriptor, so collecting it never closes a reused number."""
        signal.set_wakeup_fd(-1)
        _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)  # the C function: no enum conversions
        self.ep.close()
        fd = self.channel.sock.fileno()
        if fd >= 0:
            self.channel.sock.detach()

    def _spawner_report(self, slot: int) -> None:
        """Exit reports of the slot's spawner."""
        spawner = self.spawners.get(slot)
        if spawner is None:
            return
        for data in _waiting(spawner.channel.sock, 4096):
            if not data:  # the spawner is gone; handled when it is reaped
                return
            _op, seq, role, status, rusage = marshal.loads(data)
            job = self.active.get(seq)
            if job is None or role not in job.running:
                continue
            job.running.discard(role)
            if status < 0:  # it could not fork: the setup descriptor says why
                job.killed.add(role)
            else:
                job.status[role], job.rusage[role] = status, resource.struct_rusage(rusage)
            if role == "single" or job.judge != "running":
                self._verdict_in(job)

    def _kill_sample(self, job: _Job) -> None:
        """Ask the job's spawner to kill the job's process groups (it alone can do so without
        racing the reuse of a pid it has reaped)."""
        spawner = self.spawners.get(job.slot)
        if spawner is not None:
            try:
                spawner.channel.send(("kill", job.seq))
            except OSError:
                pass

    def _spawner_exited(self, slot: int, pid: int) -> None:
        """A spawner ended (it never should): its slot's running job is an infrastructure
        failure; its sample processes (now the server's, a subreaper) die in the uid sweep or
        as escapees. The slot gets a fresh spawner next time."""
        spawner = self.spawners.pop(slot)
        self._drop_socket(spawner.channel.sock, self.spawner_fds)
        for job in [j for j in self.active.values() if j.slot == slot]:
            os.pwrite(job.setup_fd, f"the slot's spawner (pid {pid}) died".encode(), 0)
            job.killed.update(job.running)
            job.running.clear()
            if job.judge == "running":
                self._expire(job)
            else:
                self._verdict_in(job)

    # -- launching -------------------------------------------------------------------------
    def _start(self, seq: int, meta: dict, fds: dict[str, int]) -> None:
        job = _Job(seq, meta, fds)
        job.slot = self.free_slots.popleft()
        job.nonce = os.urandom(16).hex()
        pipes: list[int] = []
        judge = None
        try:
            job.workdir = self._make_workdir(job.slot)
            for name in ("out", "err", "verdict"):
                job.mem[name] = os.memfd_create(f"sandbox-{name}", os.MFD_CLOEXEC)
            job.setup_fd = os.memfd_create("sandbox-setup", os.MFD_CLOEXEC)
            if "single" in fds:
                role, child_fds = "single", [fds.get("stdin", self.devnull), job.mem["out"],
                                             job.mem["err"], job.mem["verdict"], fds["single"]]
            else:
                judge = self._judge_for(job.slot)
                c2j_r, c2j_w = os.pipe2(os.O_CLOEXEC)
                j2c_r, j2c_w = os.pipe2(os.O_CLOEXEC)
                pipes = [c2j_r, c2j_w, j2c_r, j2c_w]
                role, child_fds = "cand", [fds.get("stdin", self.devnull), job.mem["out"],
                                           job.mem["err"], c2j_w, j2c_r, fds["cand"]]
        except (OSError, KeyError) as exc:
            self._abandon(job, pipes, f"could not prepare request: {exc!r}")
            return
        if self.slot_groups:
            try:
                self._slot_limit(job)
            except OSError as exc:
                self._abandon(job, pipes, f"could not set the slot's memory limit: {exc}")
                return
        job.start = time.monotonic()
        job.deadline = job.start + float(meta.get("timeout", 10.0))
        try:
            spawner = self._spawner_for(job.slot)
            mount = self.slots[job.slot].generation if self.slots else 0
            spawner.channel.send(("run", seq, role, job.slot, job.workdir, job.nonce, mount, meta),
                                 [*child_fds, job.setup_fd])
        except OSError as exc:
            self._abandon(job, pipes, f"could not start the sample process: {exc}")
            return
        job.running.add(role)
        self.active[seq] = job
        if judge is not None:
            request = marshal.dumps({"seq": seq, "nonce": job.nonce, "timeout": job.meta.get("timeout", 10.0),
                                     "memory_mb": job.meta.get("memory_mb", 1024)})
            try:
                judge.sock.sendmsg([request], [(_SOL_SOCKET, _SCM_RIGHTS, self.channel.array(
                    "i", [fds["judge"], pipes[0], pipes[3], job.mem["verdict"]]).tobytes())])
                judge.job = job
                job.judge = "running"
            except OSError as exc:  # the judge died before it could take the request: the
                # harness failed, whatever the sample does (it cannot reach the judge)
                job.judge = "died"
                why = os.pread(judge.setup_fd, 2000, 0).strip() or \
                    f"the slot's judge could not take the request: {exc}".encode()
                os.pwrite(job.setup_fd, why, 0)
                self._retire_judge(job.slot, kill=True)
                self._verdict_in(job)
        for fd in [*pipes, *job.fds.values()]:
            os.close(fd)
        job.fds = {}

    def _slot_limit(self, job: _Job) -> None:
        """Set the slot group's limit to the request's ``memory_mb`` (only when it changes) and
        note the group's OOM kill count. v1: the swap limit is kept equal, so nothing escapes
        to swap (order matters because the kernel keeps ``memsw >= limit``), and the TCP limit
        too (it turns TCP buffer accounting on); v2: ``memory.max`` (``memory.swap.max`` is 0
        from the start; socket memory is charged by default)."""
        group = self.slot_groups[job.slot]
        limit = int(job.meta.get("memory_mb", 1024)) << 20
        if self.slot_limit.get(job.slot) != limit:
            names = list(self.slot_limit_files)
            if self.slot_swap_file:
                raising = limit > self.slot_limit.get(job.slot, 1 << 62)  # new groups: unlimited
                names = [self.slot_swap_file, *names] if raising else [*names, self.slot_swap_file]
            for name in names:
                _write(os.path.join(group, name), str(limit))
            self.slot_limit[job.slot] = limit
        job.oom0 = _oom_count(self.slot_oom[job.slot])

    def _abandon(self, job: _Job, pipes: list[int], detail: str) -> None:
        for fd in [*pipes, *job.fds.values()]:
            try:
                os.close(fd)
            except OSError:
                pass
        job.fds = {}
        self._finish_dir(job)
        self.free_slots.append(job.slot)
        self._emit(job, "infra_error", None, 0.0, detail)

    def _make_workdir(self, slot: int) -> str:
        self.counter += 1
        root = self.slots[slot].path if self.slots else self.scratch
        path = os.path.join(root, f"w{self.counter}")
        os.mkdir(path, 0o700)
        if self.facts["drop_uid"]:
            # root-owned sticky dir: the worker can create files but cannot delete or rewrite
            # the provided ones; other workers cannot guess the name (scratch is 0711)
            os.chmod(path, 0o1777)
        return path

    def _wall(self, role: str, slot: int, workdir: str, meta: dict, fds: list[int],
              setup_fd: int) -> dict | None:
        """In a forked child: arrange ``fds`` as 0, 1, 2, ..., read the payload (the last
        descriptor, except for a judge), write its files, enter ``workdir``, apply rlimits, drop
        to the role's uid, apply Landlock and seccomp, close everything else. Returns the payload
        (``{}`` for a judge). On failure (no untrusted code has run yet) writes the reason to
        ``setup_fd`` and returns None; on success ``setup_fd`` is closed, so the sample can never
        claim an infra failure."""
        try:
            if self.in_spawner:  # the spawner let go of the server's state already
                signal.set_wakeup_fd(-1)
                _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
            else:  # objects owning descriptors must not close a reused number when collected later
                self._forget_server()
            os.setsid()
            # move every descriptor we pass out of the way, then into place as 0, 1, 2, 3, ...
            moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, _LOW_FD) for fd in fds]
            setup_fd = fcntl.fcntl(setup_fd, fcntl.F_DUPFD, _LOW_FD)
            for target, fd in enumerate(moved):
                os.dup2(fd, target)
            payload: dict = {}
            if role != "judge":
                payload_fd = len(fds) - 1
                size = os.fstat(payload_fd).st_size
                payload = marshal.loads(os.pread(payload_fd, size, 0)) if size else {}
                self._write_files(workdir, payload.get("files") or {})
            reads = self._request_reads(meta) if role != "judge" else []
            os.chdir(workdir)
            self._limits(meta)
            if role != "judge":
                self._private_state(slot, meta)
            if self.facts["drop_uid"]:
                uid = self.uid_base + slot + (self.workers if role == "judge" else 0)
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                if _CAPS is not None:  # a container's server: setuid between non-zero uids
                    _CAPS.clear()      # keeps capabilities, so they are dropped (and checked)
            else:
                self.walls["libc"].prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
            environ = os.environ  # already reduced to child_env once at server start
            environ["HOME"] = environ["TMPDIR"] = environ["PWD"] = workdir
            policy = self.walls.get("landlock")
            if policy is not None:
                if self.child_ruleset is not None and role != "judge" and not reads:
                    policy.restrict(self.child_ruleset)  # the spawner's (see _spawner_ruleset)
                else:
                    policy.apply(rw_dirs=[workdir] if role != "judge" else [], extra_read_dirs=reads)
            allow = bool(meta.get("allow_subprocess")) and role != "judge"
            inet = meta.get("network") == "loopback" and role != "judge"
            program = self.walls.get("seccomp", {}).get((allow, inet))
            if program is not None:
                self.walls["apply_seccomp"](program, self_pid=os.getpid())
            # the payload, the setup channel, Landlock's descriptors and everything else
            os.closerange(len(fds) - (0 if role == "judge" else 1), 1 << 30)
            sys.argv[:] = ["sandbox"]
            return payload
        except BaseException as exc:  # noqa: BLE001 - no untrusted code has run yet: infra
            try:
                os.write(setup_fd, f"{role} setup failed: {type(exc).__name__}: {exc}\n".encode(
                    "utf-8", "replace"))
            except OSError:
                pass
            return None

    def _private_state(self, slot: int, meta: dict) -> None:
        """In a sample's child, still privileged: join the slot's memory group, and enter a
        network namespace of its own when the request may use the network (``network:
        loopback``), or when no seccomp filter can refuse ``AF_INET`` sockets. Kernel network
        state a sample makes (listening ports, ``TIME_WAIT`` entries, socket buffers) then
        dies with its namespace instead of reaching the next sample. Raises on failure."""
        if self.slot_procs:
            os.write(self.slot_procs[slot], b"0")
        loopback = meta.get("network") == "loopback"
        if loopback and self.cfg.get("one_request"):
            return  # a container made for this request alone: its network namespace is the request's
        if loopback or not self.facts["seccomp"]:
            if self.walls["libc"].unshare(_CLONE_NEWNET) != 0:
                if loopback:
                    raise OSError("no private network namespace for a network: loopback request")
            else:
                notes: list[str] = []
                _loopback_up({"notes": notes})
                if notes and loopback:
                    raise OSError(notes[0])

    def _request_reads(self, meta: dict) -> list[str]:
        """The request's ``read_paths`` resolved in this namespace (symlinks followed), each
        under one of the executor's ``request_read_roots``; raises ValueError otherwise (in
        ``_wall``: the request is refused as ``infra_error`` before anything untrusted runs)."""
        roots = self.cfg.get("request_read_roots") or []
        reads = []
        for path in meta.get("read_paths") or []:
            real = os.path.realpath(path) if isinstance(path, str) and path.startswith("/") else ""
            if not real or not any(real == r or real.startswith(r.rstrip("/") + "/") for r in roots):
                raise ValueError(f"read path {path!r} is not under the executor's request read roots")
            reads.append(real)
        return reads

    def _child(self, role: str, job: _Job, fds: list[int]) -> int:
        """Runs in a forked sample process: wall it in, then hand over to the harness."""
        payload = self._wall(role, job.slot, job.workdir, job.meta, fds, job.setup_fd)
        if payload is None:
            return 70
        nonce, modules, workdir = job.nonce, self.modules, job.workdir
        payload["audit_hook"] = bool(self.cfg.get("audit_hook", True))
        sys.modules.pop("__main__", None)
        del job, fds
        if role == "single":
            return modules["runner"].run_request(payload, nonce, 3, workdir)
        payload["limits"] = self.boundary_limits
        return modules["boundary"].candidate_main(payload, modules["codec"],
                                                  modules["runner"].install_policy, workdir)

    def _write_files(self, workdir: str, files: dict) -> None:
        for rel, text in files.items():
            target = os.path.join(workdir, rel)
            parent = os.path.dirname(target)
            if parent != workdir:
                os.makedirs(parent, exist_ok=True)
                if self.facts["drop_uid"]:
                    os.chmod(parent, 0o1777)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with open(fd, "w", encoding="utf-8") as fh:
                fh.write(text)

    def _static_limits(self) -> None:
        """The rlimits that are the same for every child (core dumps, file size, open files,
        processes). Set in each judge, and once in each spawner, whose children
        inherit them (a spawner never needs more than these)."""
        lim = self.limits
        for rlim, value in ((resource.RLIMIT_CORE, 0),
                            (resource.RLIMIT_FSIZE, int(lim.get("file_size_mb", 64)) << 20),
                            (resource.RLIMIT_NOFILE, int(lim.get("open_files", 256))),
                            (resource.RLIMIT_NPROC, int(lim.get("processes", 64)))):
            hard = self.hard_limits[rlim]
            if hard != resource.RLIM_INFINITY and value > hard:
                value = hard
            resource.setrlimit(rlim, (value, value))

    def _limits(self, meta: dict) -> None:
        """rlimits of a child: the request's memory (address space) and CPU limits, the static
        ones (:meth:`_static_limits`) unless a spawner set them already, and the OOM score. A
        judge (``timeout`` 0) gets open CPU and memory hard limits: it lowers the soft ones
        for each request it runs."""
        timeout = float(meta.get("timeout", 10.0))
        memory = int(meta.get("memory_mb", 1024)) << 20
        for rlim, value in ((resource.RLIMIT_AS, memory),
                            (resource.RLIMIT_CPU, int(timeout) + 2 if timeout else 0)):
            hard = self.hard_limits[rlim]
            if not value:
                resource.setrlimit(rlim, (hard, hard))
                continue
            if hard != resource.RLIM_INFINITY and value > hard:
                value = hard
            resource.setrlimit(rlim, (value, value))
        if not self.in_spawner:
            self._static_limits()
        os.umask(0o077)  # after the request's files were written (they stay readable)
        if self.in_spawner and self.oom_adj is not None:
            return  # inherited from the spawner (_spawner_oom_adj)
        try:  # children are the OOM killer's first victims, before the server or the host's jobs
            fd = os.open("/proc/self/oom_score_adj", os.O_WRONLY)
            try:
                os.write(fd, b"1000")
            finally:
                os.close(fd)
        except OSError:
            pass

    # -- collecting ------------------------------------------------------------------------
    def _kill_group(self, pid: int) -> None:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass

    def _reap(self) -> None:
        for pid, status, rusage in _ended():
            for slot, spawner in list(self.spawners.items()):
                if spawner.pid == pid:
                    self._spawner_exited(slot, pid)
                    break
            else:  # a judge, or an escaped descendant of a sample re-parented to us
                self._judge_exited(pid, status, rusage)

    def _judge_exited(self, pid: int, status: int, rusage: object) -> None:
        """A judge ended (killed by us, a limit, or a crash): the request it was running, if
        any, is graded from how it ended; the slot gets a fresh judge next time."""
        if self.retired.pop(pid, None) is not None:
            return
        for slot, judge in list(self.judges.items()):
            if judge.pid != pid:
                continue
            setup = os.pread(judge.setup_fd, 2000, 0).decode("utf-8", "replace").strip()
            job = judge.job
            self._retire_judge(slot, kill=False)
            self.retired.pop(pid, None)
            if job is not None:
                job.judge = "died"
                job.status["judge"], job.rusage["judge"] = status, rusage
                if setup:
                    os.pwrite(job.setup_fd, setup.encode("utf-8"), 0)
                self._verdict_in(job)
            return

    def _finished(self, jobs: list[_Job]) -> None:
        for job in jobs:
            self.active.pop(job.seq, None)
        # escapees first: the freed slot's uids are about to be reused by the next request
        # (without a subprocess-allowing request, the seccomp filter forbids creating any)
        swept = self.facts["drop_uid"]
        if swept:
            for job in jobs:  # every process of the slot's sample uid, wherever it went
                if self._slot_empty(job.slot):
                    continue  # nothing of it is left to sweep
                try:
                    sweep_uid(self.uid_base + job.slot)
                except (OSError, ValueError, OverflowError) as exc:  # e.g. a uid the kernel
                    _log(f"uid sweep failed: {exc!r}")               # refused at set-up
                    swept = False
        if not swept and (any(job.meta.get("allow_subprocess") for job in jobs)
                          or not self.facts["seccomp"] or self.facts["drop_uid"]):
            self._kill_escapees()
        for job in jobs:
            self._finish_dir(job)
            self.free_slots.append(job.slot)
        self._launch()  # keep the cores busy; book-keeping of finished jobs comes after
        for job in jobs:
            self._grade(job)

    def _slot_empty(self, slot: int) -> bool:
        """True when no process is left in the slot's memory group, read from its
        ``cgroup.procs`` (an open, a read and a close instead of the uid sweep's six system
        calls and its walk over every process of the machine). Every process a sample makes is
        born in the group its parent is in, and a sample (its own uid, no capabilities) cannot
        move one out of it: no group's ``cgroup.procs`` is writable by a sample's uid (they
        are root's; the ``docker`` backend's slot groups' are its container server's uid).
        So once the spawner has reaped the sample, an empty group means that nothing of it runs
        anywhere, and it stays empty until the slot's next sample joins. False (sweep) when
        the slot has no group or the read fails.

        Opened afresh each time: cgroup v1 keeps the process list an open file read first,
        and a later read of the same open file within a second or so may get that list again
        (a reproduced stale "empty" while an escaped grandchild ran)."""
        if slot >= len(self.slot_groups):
            return False
        try:
            fd = os.open(os.path.join(self.slot_groups[slot], "cgroup.procs"), os.O_RDONLY | os.O_CLOEXEC)
            try:
                return not os.read(fd, 16).strip()
            finally:
                os.close(fd)
        except OSError:
            return False

    def _launch(self) -> None:
        while self.pending and self.free_slots and not self.shutting_down:
            seq, meta, fds = self.pending.popleft()
            self._start(seq, meta, fds)

    def _kill_escapees(self) -> None:
        """Kill direct children that are neither current jobs nor judges: descendants that
        escaped their process group and were re-parented to us (the server is a subreaper)."""
        if not self.facts["subreaper"]:
            return
        try:
            with open(f"/proc/self/task/{os.getpid()}/children", "rb") as fh:
                pids = [int(p) for p in fh.read().split()]
        except OSError:
            return
        ours = {j.pid for j in self.judges.values()} | set(self.retired) | \
            {s.pid for s in self.spawners.values()}
        for pid in pids:
            if pid not in ours:
                for kill in (os.killpg, os.kill):
                    try:
                        kill(pid, signal.SIGKILL)
                    except OSError:
                        pass

    def _finish_dir(self, job: _Job) -> None:
        """Remove the working directory: one ``rmdir`` when the sample left nothing behind,
        otherwise the slot's whole tmpfs is replaced (no tree walk the sample could steer)."""
        if not job.workdir:
            return
        try:
            os.rmdir(job.workdir)
            return
        except OSError:
            pass
        if self.slots:
            try:
                self.slots[job.slot].reset()
                return
            except OSError as exc:
                _log(f"slot reset failed: {exc}")
        self.modules["mounts"].remove_tree(job.workdir)

    # -- grading ---------------------------------------------------------------------------
    def _record(self, job: _Job) -> tuple[str, float, int] | None:
        """(status, exec_time, header length) from the verdict memfd, or None.

        Only the header line is ever copied into this process's heap: the record is read into
        one fixed buffer, the header is taken from it and the buffer is zeroed again, so no
        byte of a detail (an assertion message may name an expected value) stays in memory
        that later forked children inherit."""
        buf = self.record_buf
        try:
            size = os.preadv(job.mem["verdict"], [buf], 0)
        except OSError:
            return None
        end = buf.find(b"\n", 0, size)
        line, sep = (bytes(buf[:end]), b"\n") if end >= 0 else (b"", b"")
        buf[:] = _RECORD_ZEROS
        parts = line.split(b" ")
        if not sep or len(parts) != 3 or parts[0] != job.nonce.encode("ascii"):
            return None
        try:
            status = parts[1].decode("ascii")
            elapsed = float(parts[2])
        except (UnicodeDecodeError, ValueError):
            return None
        if status not in _VERDICTS:
            return None
        return status, elapsed, len(line) + 1

    def _verdict_size(self, job: _Job) -> int:
        try:
            return os.fstat(job.mem["verdict"]).st_size
        except (OSError, KeyError):
            return 0

    def _death(self, job: _Job, role: str, subject: str) -> tuple[str, str] | None:
        """Outcome implied by how ``role`` ended (kernel facts), or None for a clean exit."""
        status = job.status.get(role)
        if status is None or role in job.killed:
            return None
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            maxrss = getattr(job.rusage.get(role), "ru_maxrss", 0) or 0
            if sig == signal.SIGSYS:
                return "sandbox_violation", f"{subject} was killed by the kernel's seccomp filter " \
                                            "(a forbidden system call, e.g. starting a process)"
            if sig == signal.SIGXCPU:
                return "timeout", "CPU time limit exceeded"
            if sig == signal.SIGKILL and role != "judge" and job.oom0 >= 0 and \
                    _oom_count(self.slot_oom[job.slot]) > job.oom0:
                return "memory_exceeded", f"killed by the out-of-memory killer at the request's " \
                                          f"{job.meta.get('memory_mb', 1024)} MB (slot memory group)"
            if sig == signal.SIGKILL and self.oom_file and _oom_kills(self.oom_file) > self.oom_seen:
                self.oom_seen = _oom_kills(self.oom_file)
                return "memory_exceeded", "killed by the out-of-memory killer (executor cgroup limit)"
            if role != "judge" and maxrss >= 0.9 * (int(job.meta.get("memory_mb", 1024)) << 10):
                return "memory_exceeded", f"{subject} was killed by signal {sig} near the memory limit"
            return "error", f"{subject} was killed by signal {sig}"
        code = os.waitstatus_to_exitcode(status)
        return None if code == 0 else ("error", f"{subject} exited with status {code}")

    @staticmethod
    def _exit_status(status: int) -> int:
        return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.waitstatus_to_exitcode(status)

    def _grade(self, job: _Job) -> None:
        duration = time.monotonic() - job.start
        sample = "single" if "single" in job.status else "cand"
        exit_status = None
        if sample in job.status and sample not in job.killed:
            exit_status = self._exit_status(job.status[sample])
        maxrss = getattr(job.rusage.get(sample), "ru_maxrss", None)
        setup = os.pread(job.setup_fd, 2000, 0).decode("utf-8", "replace").strip()
        record = self._record(job)
        exec_time, from_record = None, 0
        sample_death = self._death(job, sample, "the sample's process")
        if setup:
            outcome, detail = "infra_error", setup
        elif job.timed_out:
            outcome, detail = "timeout", f"killed after {job.meta.get('timeout')}s wall-clock limit"
        elif sample_death is not None and sample_death[0] == "sandbox_violation":
            outcome, detail = sample_death
        elif sample == "single":
            if record is not None and exit_status == 0 and record[0] != "candidate_died":
                outcome, exec_time, from_record = record
                detail = ""
            elif self._verdict_size(job):
                outcome, detail = "sandbox_violation", "the verdict channel holds bytes the harness did not write"
            elif sample_death is not None:
                outcome, detail = sample_death
            elif exit_status == 0:
                outcome, detail = "error", "exited with status 0 before the harness reported a result"
            else:
                outcome, detail = "error", f"exited with status {exit_status} without a harness verdict"
        elif job.judge != "done" or record is None:
            outcome, detail = self._death(job, "judge", "the judge") or ("error", "the judge ended without a verdict")
        elif record[0] == "candidate_died":
            outcome, detail = sample_death or ("error", "the sample's process ended during the test")
            exec_time = record[1]
        else:
            outcome, exec_time, from_record = record
            detail = ""
        self._emit(job, outcome, exit_status, duration, detail, exec_time, maxrss, from_record)

    def _emit(self, job: _Job, outcome: str, exit_status, duration: float, detail: str,
              exec_time=None, maxrss=None, from_record: int = 0) -> None:
        fds = [job.mem[name] for name in ("out", "err", "verdict") if name in job.mem]
        frame = {"op": "result", "seq": job.seq, "outcome": outcome,
                 "exit_status": exit_status, "duration_s": duration, "detail": detail,
                 "detail_offset": from_record, "exec_time_s": exec_time,
                 "max_rss_kb": maxrss, "timeout_s": float(job.meta.get("timeout", 10.0)),
                 "memory_mb": int(job.meta.get("memory_mb", 1024)),
                 "fds": [name for name in ("out", "err", "verdict") if name in job.mem]}
        limit = int(self.cfg.get("inline_limit") or 0)
        if limit:  # a caller that cannot receive descriptors (gVisor): the bytes, capped
            inline = {}
            for name in frame["fds"]:
                fd = job.mem[name]
                start = from_record if name == "verdict" else 0
                inline[name] = (os.pread(fd, 2000 if name == "verdict" else limit, start),
                                max(0, os.fstat(fd).st_size - start))
            frame["fds"], frame["inline"], frame["detail_offset"] = [], inline, 0
            if "verdict" in inline and from_record:
                frame["detail"] = inline["verdict"][0].decode("utf-8", "replace")
            self.channel.send(frame)
        else:
            self.channel.send(frame, fds)
        for fd in [*fds, job.setup_fd]:
            if fd >= 0:
                os.close(fd)
        job.mem, job.setup_fd = {}, -1

    # -- loop ------------------------------------------------------------------------------
    def _expire(self, job: _Job) -> None:
        """Wall-clock limit reached (or shutdown): kill the sample and, when it was running
        this request's test, the slot's judge (its state is unknown; a fresh one follows)."""
        job.timed_out = True
        if job.running:
            self._kill_sample(job)
        if job.judge == "running":
            judge = self.judges.get(job.slot)
            if judge is not None and judge.job is job:
                judge.job = None
                self._retire_judge(job.slot, kill=True)
            job.judge = "died"
            if not job.running:
                self._finished([job])

    def serve(self) -> None:
        for slot in range(self.workers):  # before any request's descriptor exists
            self._spawner_for(slot)
        while True:
            self._launch()
            if self.shutting_down and not self.active and not any(j.job for j in self.judges.values()):
                for slot in list(self.judges):
                    self._retire_judge(slot, kill=True)
                for spawner in self.spawners.values():
                    spawner.channel.sock.close()  # it kills what still runs and exits
                return
            now = time.monotonic()
            timeout = None
            running = {id(job): job for job in self.active.values()}
            running.update({id(j.job): j.job for j in self.judges.values() if j.job is not None})
            for job in running.values():
                if job.timed_out:
                    continue
                if job.linger:
                    if now >= job.linger:
                        job.linger = 0.0
                        self._verdict_in(job)  # stop what is left of it
                    else:
                        timeout = min(timeout or _LINGER, job.linger - now)
                    continue
                left = job.deadline - now
                if left <= 0 or self.shutting_down:
                    self._expire(job)
                else:
                    timeout = left if timeout is None else min(timeout, left)
            if self.shutting_down:
                timeout = 0.05
            for fd, _mask in self.ep.poll(-1 if timeout is None else timeout):
                if fd == self.ctl_fd:
                    self._read_control()
                elif fd == self.wake_r:
                    try:
                        while os.read(self.wake_r, 4096):
                            pass
                    except BlockingIOError:
                        pass
                elif fd in self.spawner_fds:
                    self._spawner_report(self.spawner_fds[fd])
                elif fd in self.judge_fds:
                    self._judge_report(self.judge_fds[fd])
            self._reap()


def _prepare_walls(cfg: dict, facts: dict, walls_module, libc) -> dict:
    """Landlock policy and seccomp programs, built once; facts say what is available."""
    walls: dict = {"libc": libc, "apply_seccomp": walls_module.apply_seccomp}
    # readable only by the requests that name a path under them (Server._request_reads)
    cfg["request_read_roots"] = [os.path.realpath(p) for p in cfg.get("request_read_roots") or []]
    facts["landlock_abi"] = 0
    facts["seccomp"] = False
    if cfg.get("landlock", True):
        try:
            abi = walls_module.landlock_abi()
            if abi > 0:
                read_dirs: list[str] = []
                for path in [*READ_DIRS, *facts.get("interpreter_dirs", []), *(cfg.get("read_paths") or [])]:
                    real = os.path.realpath(path)  # /lib -> /usr/lib on merged-/usr systems
                    if os.path.exists(real) and not any(real == d or real.startswith(d + "/") for d in read_dirs):
                        read_dirs = [d for d in read_dirs if not d.startswith(real + "/")] + [real]
                # its descriptors live above the numbers children arrange (0, 1, 2, ...)
                walls["landlock"] = walls_module.LandlockPolicy(read_dirs, min_fd=_RESERVED_FD)
                facts["landlock_abi"] = abi
        except OSError as exc:
            facts["notes"].append(f"Landlock unavailable: {exc}")
    if cfg.get("seccomp", True):
        try:
            if walls_module.seccomp_available():
                unix = bool(cfg.get("socket_dirs"))  # the explicit service-socket allowance
                # (allow_subprocess, allow_inet) -> program; AF_INET only for network: loopback
                walls["seccomp"] = {(sub, inet): walls_module.seccomp_program(
                    allow_subprocess=sub, allow_unix=unix, allow_inet=inet)
                    for sub in (False, True) for inet in (False, True)}
                facts["seccomp"] = True
        except (OSError, ValueError) as exc:
            facts["notes"].append(f"seccomp unavailable: {exc}")
    return walls


def _slot_cpus(cfg: dict) -> list[int]:
    """The CPU each slot's spawner and judge (and so its samples) are pinned to, by slot; empty
    for no pinning. A sample and its judge answer each other call by call: on one CPU each
    answer is a context switch, on two it is a wake-up of the other CPU, often from idle (on a
    virtual machine an exit to the hypervisor), and the waiting CPU idles meanwhile. Pinned only
    when the slots cover the usable CPUs evenly (``workers`` a multiple of their number), so no
    CPU carries more slots than another, also with several executors on one machine; the
    server and the caller are never pinned. Off with ``pin_slots: false``."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []
    workers = max(1, int(cfg.get("workers", 1)))
    if not cfg.get("pin_slots", True) or len(cpus) < 2 or workers % len(cpus):
        return []
    return [cpus[slot % len(cpus)] for slot in range(workers)]


def main() -> int:
    import ctypes

    cfg = json.loads(sys.argv[1])
    channel = _Channel(_control_fd(cfg))
    libc = ctypes.CDLL(None, use_errno=True)
    facts = _setup_namespaces(cfg, libc)
    facts["container"] = bool(cfg.get("container"))
    if facts["container"]:
        _container_privileges(cfg, facts, libc)  # leave uid 0 before anything else runs
    global _CAPGET
    _CAPGET = _Capabilities(libc)
    # a container's task image keeps its packages outside site-packages (this server runs -S)
    sys.path.extend(p for p in cfg.get("sys_path") or [] if p not in sys.path)
    cgroups = _load("cgroups")
    layout = _setup_cgroups(cfg, facts, cgroups)
    if not facts.get("slot_memory") and cfg.get("slot_memory"):  # a container's: made by the host
        facts["slot_memory"] = [p for p in cfg["slot_memory"] if os.path.isdir(p)]
    if facts["container"]:
        facts["container_oom_file"] = cgroups.own_oom_file(layout)
    slots: list = []
    scratch = ""
    try:
        modules = {"cgroups": cgroups, **{name: _load(name) for name in SANDBOX_MODULES
                                          if name != "cgroups"}}
        # every module from boot.py's code, and nothing boot.py compiled left unused
        facts["compact_boot"] = _BOOTED and not _PRECOMPILED and not _COMPILED_HERE
        facts["interpreter_dirs"] = sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)})
        if facts["mountns"]:
            scratch = "/tmp/ianvs-sandbox"
            cgroup_mounts = sorted(set(facts["cgroup"].get("mounts") or []))
            mfacts = modules["mounts"].setup(scratch, cgroup_mounts,
                                             hide_packages=bool(cfg.get("hide_packages", True)),
                                             expose=[*(cfg.get("read_paths") or []),
                                                     *(cfg.get("request_read_roots") or [])],
                                             sockets=list(cfg.get("socket_dirs") or []))
            facts["notes"].extend(mfacts.pop("notes"))
            facts["mounts"] = mfacts
            if not mfacts["mountns"]:
                facts["mountns"] = False
        if facts["mountns"]:
            size_mb, inodes = int(cfg.get("workdir_mb", 256)), int(cfg.get("workdir_inodes", 16384))
            slots = [modules["mounts"].SlotMount(f"{scratch}/slot{i}", size_mb, inodes)
                     for i in range(max(1, int(cfg.get("workers", 1))))]
        else:
            parent = cfg.get("scratch_parent") or _default_scratch_parent()
            scratch = os.path.join(parent, f"ianvs-sandbox-{os.getpid()}-{os.urandom(4).hex()}")
            os.mkdir(scratch, 0o711)
        facts["scratch"] = scratch
        cfg["scratch"] = scratch
        walls = _prepare_walls(cfg, facts, modules["walls"], libc)
        hidden_stdlib = any(p not in facts.get("mounts", {}).get("exposed_prefixes", [])
                            and modules["mounts"]._hidden_ancestor(p) for p in facts["interpreter_dirs"])
        privileged = os.geteuid() == 0 or facts.get("container_uids", False)
        facts["drop_uid"] = bool(cfg.get("drop_uid", True)) and privileged and not hidden_stdlib
        if facts.get("container_uids") and not facts["drop_uid"]:  # children would keep capabilities
            raise RuntimeError("a container's server holds capabilities: its children must take their own uids")
        if hidden_stdlib and os.geteuid() == 0 and cfg.get("drop_uid", True):
            facts["notes"].append("the interpreter lives under a directory other users cannot search "
                                  "and no mount namespace could expose it: not dropping privileges")
        # what only set-up needed leaves (a smaller server forks faster); ctypes objects the
        # walls hold stay alive, but a child can no longer import the module by name
        for gone in ("ctypes", "_ctypes", "sysconfig", "glob", "fnmatch", "importlib.util",
                     "_sysconfigdata"):
            for name in [n for n in sys.modules if n == gone or n.startswith((gone + ".", gone + "_"))]:
                del sys.modules[name]
        _preload([*(cfg.get("preload") or DEFAULT_PRELOAD), *REQUIRED_PRELOAD], facts)

        facts["slot_cpus"] = _slot_cpus(cfg)
        level = _level(facts)
        channel.send({"op": "hello", "pid": os.getpid(), "isolation": _LEVELS[level], "facts": facts,
                      "python": sys.version.split()[0]})
        server = Server(cfg, facts, modules, channel, slots, walls)
        import gc

        gc.collect()
        gc.freeze()  # preloaded objects go to the permanent generation: children never scan or
        #             touch them during garbage collection (fewer copy-on-write faults)
        server.serve()
    except Exception as exc:  # noqa: BLE001 - report and die; the caller turns this into infra_error
        _log(f"fatal: {exc!r}")
        raise
    finally:
        if scratch and not facts["mountns"]:  # a private mount namespace vanishes by itself
            sys.modules["_sandbox_mounts"].remove_tree(scratch)
        _leave_cgroups(facts)
    return 0


def _control_fd(cfg: dict) -> int:
    """The caller's socket: an inherited descriptor (``ctl_fd``, the ``local`` backend) or a
    ``SOCK_SEQPACKET`` socket path to connect to (``ctl_path``: the ``docker`` backend, whose
    caller listens on a socket bind-mounted into the container)."""
    path = cfg.get("ctl_path")
    if not path:
        return int(cfg["ctl_fd"])
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    sock.connect(path)
    return sock.detach()


def _default_scratch_parent() -> str:
    """Prefer a tmpfs (``/dev/shm``): creating/removing a directory there costs microseconds,
    on a journaling disk file system it can cost milliseconds per request."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return os.environ.get("TMPDIR") or "/tmp"


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        sys.exit(0)
    except OSError as exc:
        if exc.errno not in (errno.EPIPE, errno.ECONNRESET):
            raise
