"""Per-slot memory groups for the ``docker`` backend's containers (host side, cgroup v1).

A process in a container cannot create cgroups (the engine mounts the cgroup file system
read-only), so the host makes them: a parent group ``P`` (``ianvs-sandbox-<owner pid>-<hex>``,
the naming the leftovers module already sweeps) whose limit is the container's, the container
itself placed under it (``cgroup_parent``), and one group per worker slot beside it
(``P/slot<i>``) whose ``cgroup.procs`` and limit files belong to the container's server uid.
``P`` is bind-mounted into the container (:data:`IN_CONTAINER`); the server sets a slot's limit
to each request's ``memory_mb`` and a sample joins its slot's group before its code runs,
exactly as on ``local``. Everything in ``P`` stays under the container's limit.

The engine creates ``P`` in every v1 hierarchy (``cgroup_parent`` applies to all controllers);
:meth:`SlotGroups.remove` removes it from each once the container is gone. A killed owner's
groups are swept like any ``ianvs-sandbox-*`` group (``leftovers.cgroups``).
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

LOGGER = logging.getLogger(__name__)

CGROUP_ROOT = "/sys/fs/cgroup"
#: where the parent group is bind-mounted inside the container
IN_CONTAINER = "/run/ianvs-memory"
#: files of a slot group the container's server writes
_SERVER_FILES = ("cgroup.procs", "memory.limit_in_bytes", "memory.memsw.limit_in_bytes",
                 "memory.kmem.tcp.limit_in_bytes")


@dataclass
class SlotGroups:
    """The groups of one container: ``name`` (relative to each hierarchy's root) and the host
    paths of the memory parent and its slots."""

    name: str
    parent: str
    slots: list[str] = field(default_factory=list)

    @property
    def cgroup_parent(self) -> str:
        """The engine's ``cgroup_parent`` value (cgroupfs driver)."""
        return "/" + self.name

    def in_container(self) -> list[str]:
        """The slot groups' paths inside the container."""
        return [f"{IN_CONTAINER}/{os.path.basename(path)}" for path in self.slots]

    def remove(self, timeout: float = 5.0) -> bool:
        """Remove the slots and the parent from every hierarchy (the container must be gone;
        waits up to ``timeout`` s for the engine to remove its own group). True when all went."""
        deadline = time.monotonic() + timeout
        while True:
            left = []
            for path in [*self.slots, *_parents(self.name)]:
                try:
                    os.rmdir(path)
                except FileNotFoundError:
                    pass
                except OSError:
                    left.append(path)
            if not left or time.monotonic() >= deadline:
                if left:
                    LOGGER.warning("docker: cgroups left behind (removed by `ianvs sandbox clean` "
                                   "once this process has ended): %s", ", ".join(left))
                return not left
            time.sleep(0.05)


def _parents(name: str) -> list[str]:
    """``name`` in every v1 hierarchy that has it (memory last: it holds the slots)."""
    try:
        dirs = sorted(entry.path for entry in os.scandir(CGROUP_ROOT)
                      if entry.is_dir(follow_symlinks=False) and entry.name != "memory")
    except OSError:
        dirs = []
    return [p for p in (os.path.join(d, name) for d in [*dirs, os.path.join(CGROUP_ROOT, "memory")])
            if os.path.isdir(p)]


def make(workers: int, limit_mb: int, server_uid: int) -> SlotGroups | None:
    """The groups for a container of ``workers`` slots whose memory limit is ``limit_mb``, or
    None when this host has no writable cgroup v1 memory controller (not root, cgroup v2)."""
    memory = os.path.join(CGROUP_ROOT, "memory")
    if not (os.path.isfile(os.path.join(memory, "cgroup.procs")) and os.access(memory, os.W_OK)):
        return None
    name = f"ianvs-sandbox-{os.getpid()}-{os.urandom(3).hex()}"
    groups = SlotGroups(name, os.path.join(memory, name))
    try:
        os.mkdir(groups.parent)
        limit = str(int(limit_mb) << 20)
        for file in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
            path = os.path.join(groups.parent, file)
            if os.path.exists(path):
                with open(path, "w") as fh:
                    fh.write(limit)
        for slot in range(workers):
            path = os.path.join(groups.parent, f"slot{slot}")
            os.mkdir(path)
            groups.slots.append(path)
            for file in _SERVER_FILES:
                target = os.path.join(path, file)
                if os.path.exists(target):
                    os.chown(target, server_uid, server_uid)
    except OSError as exc:
        LOGGER.info("docker: no per-slot memory groups (%s)", exc)
        groups.remove(timeout=0)
        return None
    return groups
