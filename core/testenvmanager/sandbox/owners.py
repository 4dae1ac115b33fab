"""Whether the process that owns a sandbox resource is still alive (one helper for everything).

Sandbox resources left on the host (cgroups, scratch and control folders, PostgreSQL run
directories, network namespaces, containers, uid leases, edge processes) carry the pid of the
process that made them. A pid alone is not an identity: the kernel reuses pids. These helpers
resist reuse cheaply:

* :func:`alive_since` says an owner is alive only if a process with that pid exists *and* it
  started no later than the resource was last changed (a reused pid belongs to a process that
  started after its predecessor's resources were made);
* :func:`owner_token` / :func:`token_alive` identify a process exactly by ``pid:start ticks``
  (``/proc/<pid>/stat`` field 22), for markers written where a string fits (environment
  variables, lease records).

A process we may not signal (another user's) counts as alive. Nothing here kills or removes.
"""
from __future__ import annotations

import os

__all__ = ["pid_alive", "start_ticks", "start_time", "alive_since", "owner_token", "token_alive"]

#: seconds of tolerance when comparing a start time with a file time (the boot time the start
#: time is derived from has one-second resolution)
_SLACK = 2.0


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (one we may not signal counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


def start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks after boot, or ``None`` if it is gone/unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    try:  # the command name may contain spaces and parentheses: fields follow the last ')'
        return int(data[data.rindex(b")") + 2:].split()[19])
    except (ValueError, IndexError):
        return None


def _boot_time() -> float:
    try:
        with open("/proc/stat", "rb") as fh:
            for line in fh:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return 0.0


def start_time(pid: int) -> float | None:
    """Start time of ``pid`` as seconds since the epoch, or ``None`` if unknown."""
    ticks = start_ticks(pid)
    if ticks is None:
        return None
    return _boot_time() + ticks / os.sysconf("SC_CLK_TCK")


def alive_since(pid: int, changed: float) -> bool:
    """Whether ``pid`` is alive and started no later than ``changed`` (an epoch time, e.g. the
    mtime of a folder it made): ``False`` for a dead pid and for a reused one."""
    if not pid_alive(pid):
        return False
    started = start_time(pid)
    if started is None:  # exists but unreadable (hidepid): keep it, conservatively
        return True
    return started <= changed + _SLACK


def owner_token(pid: int | None = None) -> str:
    """``"<pid>:<start ticks>"`` of ``pid`` (default: this process): an exact identity."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}:{start_ticks(pid) or 0}"


def token_alive(token: str) -> bool:
    """Whether the process named by an :func:`owner_token` still runs (same pid, same start)."""
    pid, _, ticks = token.partition(":")
    if not pid.isdigit() or not pid_alive(int(pid)):
        return False
    now = start_ticks(int(pid))
    if now is None or not ticks.isdigit() or int(ticks) == 0:
        return True  # alive, start unknown: conservatively the owner
    return now == int(ticks)
