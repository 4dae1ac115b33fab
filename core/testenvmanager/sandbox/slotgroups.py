"""Per-slot memory groups for the ``docker`` backend's containers (host side; cgroup v1, v2 or
hybrid, see :mod:`.cgroups`).

A process in a container cannot create cgroups (the engine mounts the cgroup file system
read-only), so the host makes them: a parent group ``P`` (``ianvs-sandbox-<owner pid>-<hex>``,
the naming the leftovers module already sweeps) whose limit is the container's, the container
itself placed under it (``cgroup_parent``), and one group per worker slot beside it
(``P/slot<i>``) whose ``cgroup.procs`` and limit files belong to the container's server uid.
``P`` is bind-mounted into the container (:data:`IN_CONTAINER`); the server sets a slot's limit
to each request's ``memory_mb`` and a sample joins its slot's group before its code runs,
exactly as on ``local``. Everything in ``P`` stays under the container's limit.

cgroup v1: the engine creates ``P`` in every v1 hierarchy (``cgroup_parent`` applies to all
controllers); :meth:`SlotGroups.remove` removes it from each once the container is gone.

cgroup v2: ``P`` is made where a local executor's group would go (:func:`.cgroups.v2_group`),
with ``memory`` and ``pids`` enabled for its children, ``memory.max`` the container's limit and
``memory.swap.max`` 0; each slot has ``memory.swap.max`` 0 and ``memory.oom.group`` 1. v2 lets a
writer move a process only when it may write the ``cgroup.procs`` of the source's and the
destination's common ancestor (``P``, also chowned to the server uid; ``P`` itself can take no
process: its subtree has controllers) and, with ``nsdelegate``, only inside its cgroup
namespace, so the container shares the host's cgroup namespace (:attr:`SlotGroups.cgroupns`;
its cgroup file system stays read-only, and samples cannot read ``/sys`` at all). The engine
must use the ``cgroupfs`` driver (``cgroup_parent`` is then a path; systemd's wants a slice).

A killed owner's groups are swept like any ``ianvs-sandbox-*`` group (``leftovers.cgroups``).
Not exercised on a real cgroup v2 engine here (this project's machine is a hybrid host); the v2
path is tested against the double of a v2 tree in ``tests/sandbox/test_cgroups_v2.py``.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Callable

from . import cgroups as _cgroups

LOGGER = logging.getLogger(__name__)

CGROUP_ROOT = "/sys/fs/cgroup"
#: where the parent group is bind-mounted inside the container
IN_CONTAINER = "/run/ianvs-memory"
#: files of a slot group the container's server writes (v1 and v2 names; those present)
_SERVER_FILES = ("cgroup.procs", "memory.limit_in_bytes", "memory.memsw.limit_in_bytes",
                 "memory.kmem.tcp.limit_in_bytes", "memory.max")


@dataclass
class SlotGroups:
    """The groups of one container: ``name`` (relative to each hierarchy's root), the host
    path of the memory parent and its slots, and the v2 group's path in the cgroup tree
    (``v2_path``, '' on v1)."""

    name: str
    parent: str
    slots: list[str] = field(default_factory=list)
    v2_path: str = ""
    fs: _cgroups.HostFS = field(default_factory=_cgroups.HostFS, repr=False, compare=False)

    @property
    def cgroup_parent(self) -> str:
        """The engine's ``cgroup_parent`` value (cgroupfs driver)."""
        return self.v2_path or "/" + self.name

    @property
    def cgroupns(self) -> str | None:
        """The container's cgroup namespace mode: ``host`` on v2 (see the module docstring),
        the engine's default on v1."""
        return "host" if self.v2_path else None

    def in_container(self) -> list[str]:
        """The slot groups' paths inside the container."""
        return [f"{IN_CONTAINER}/{os.path.basename(path)}" for path in self.slots]

    def remove(self, timeout: float = 5.0) -> bool:
        """Remove the slots and the parent from every hierarchy (the container must be gone;
        waits up to ``timeout`` s for the engine to remove its own group). True when all went."""
        deadline = time.monotonic() + timeout
        parents = [self.parent] if self.v2_path else _parents(self.name)
        while True:
            left = []
            for path in [*self.slots, *parents]:
                try:
                    self.fs.rmdir(path)
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


def make(workers: int, limit_mb: int, server_uid: int, fs: _cgroups.HostFS | None = None,
         root: str = CGROUP_ROOT, cgroup_driver: Callable[[], str] = lambda: "cgroupfs",
         ) -> SlotGroups | None:
    """The groups for a container of ``workers`` slots whose memory limit is ``limit_mb``, or
    None when this host has no writable memory controller (not root; v2 without a parent that
    takes the group; an engine whose cgroup driver, asked of ``cgroup_driver()`` on v2 only,
    is not ``cgroupfs``)."""
    fs = fs or _cgroups.HostFS()
    layout = _cgroups.Layout(fs, root)
    name = f"{_cgroups.PREFIX}{os.getpid()}-{os.urandom(3).hex()}"
    backend = layout.backend("memory")
    if backend == "v2":
        driver = cgroup_driver()
        if driver != "cgroupfs":
            LOGGER.warning("docker: no per-slot memory groups (cgroup v2 with the engine's %s cgroup "
                           "driver; start dockerd with --exec-opt native.cgroupdriver=cgroupfs)", driver)
            return None
        return _make_v2(fs, layout, name, workers, limit_mb, server_uid)
    memory = layout.v1.get("memory", "")
    if backend != "v1" or not fs.writable(memory):
        return None
    groups = SlotGroups(name, os.path.join(memory, name), fs=fs)
    try:
        fs.mkdir(groups.parent)
        limit = str(int(limit_mb) << 20)
        for file in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
            path = os.path.join(groups.parent, file)
            if fs.exists(path):
                fs.write(path, limit)
        _slots(fs, groups, workers, server_uid)
    except OSError as exc:
        LOGGER.info("docker: no per-slot memory groups (%s)", exc)
        groups.remove(timeout=0)
        return None
    return groups


def _slots(fs: _cgroups.HostFS, groups: SlotGroups, workers: int, server_uid: int) -> None:
    for slot in range(workers):
        path = os.path.join(groups.parent, f"slot{slot}")
        fs.mkdir(path)
        groups.slots.append(path)
        if groups.v2_path:
            fs.write(os.path.join(path, "memory.swap.max"), "0")
            if fs.exists(os.path.join(path, "memory.oom.group")):
                fs.write(os.path.join(path, "memory.oom.group"), "1")
        for file in _SERVER_FILES:
            target = os.path.join(path, file)
            if fs.exists(target):
                fs.chown(target, server_uid)


def _make_v2(fs: _cgroups.HostFS, layout: _cgroups.Layout, name: str, workers: int, limit_mb: int,
             server_uid: int) -> SlotGroups | None:
    notes: list[str] = []
    made: list[SlotGroups] = []

    def fill(group: str, _home: str) -> None:
        groups = SlotGroups(name, group, v2_path="/" + os.path.relpath(group, layout.v2_mount), fs=fs)
        made[:] = [groups]
        try:
            fs.write(os.path.join(group, "memory.max"), str(int(limit_mb) << 20))
            fs.write(os.path.join(group, "memory.swap.max"), "0")
            fs.chown(os.path.join(group, "cgroup.procs"), server_uid)  # the common ancestor
            _slots(fs, groups, workers, server_uid)
        except OSError:
            for path in groups.slots:
                try:
                    fs.rmdir(path)
                except OSError:
                    pass
            groups.slots.clear()
            raise

    ctrls = [c for c in _cgroups.NEEDED if layout.backend(c) == "v2"]
    if _cgroups.v2_group(fs, layout, ctrls, name, {}, notes, fill) is None:
        LOGGER.info("docker: no per-slot memory groups (%s)", "; ".join(notes))
        return None
    return made[0]
