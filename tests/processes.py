"""Process checks shared by tests that kill things."""
from __future__ import annotations

import subprocess


def running(pid: int) -> bool:
    """Whether ``pid`` runs: exists and is not a zombie waiting to be reaped (a killed child
    of a killed parent stays a zombie until init reaps it, which is not "left running")."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped (a real, recently used pid)."""
    child = subprocess.Popen(["true"])
    child.wait(timeout=10)
    return child.pid
