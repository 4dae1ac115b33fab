"""A test double of a cgroup v2 tree, for the v2 code paths this project's machine cannot host.

This machine is a hybrid cgroup host: ``memory`` and ``pids`` are bound to v1 hierarchies, so
its v2 hierarchy (``/sys/fs/cgroup/unified``) offers neither and no v2 memory or pids group
can be made here. The double stands in for a v2 mount with the same methods as
:class:`core.testenvmanager.sandbox.cgroups.HostFS` and enforces the kernel's v2 rules that
the placement code must respect (Documentation/admin-guide/cgroup-v2.rst, and
shared/design/cgroup-v2-machine.md for the machine the issue was found on):

* the root has ``cgroup.controllers``, ``cgroup.subtree_control`` and ``cgroup.procs`` but no
  ``cgroup.type`` and no resource files; a non-root group's ``cgroup.controllers`` is what its
  parent's ``cgroup.subtree_control`` enables, and only those controllers' files exist in it;
* *no internal processes*: enabling a controller in a non-root group's ``subtree_control``
  fails with ``EBUSY`` while it has member processes, and so does moving a process into a
  non-root group whose ``subtree_control`` enables any controller;
* a controller can be enabled only when the group's ``cgroup.controllers`` lists it;
* ``rmdir`` fails with ``EBUSY`` on a group with member processes or child groups;
* a group not writable by the caller refuses ``mkdir`` and writes (``EACCES``);
* ``cgroup.kill`` kills every process of the subtree; ``cgroup.procs`` lists the members;
* ``/proc/self/cgroup`` reads ``0::<group of the calling pid>`` relative to the mount, which
  is the namespace root for a container (``namespace_root=True``: the mount's root then has
  ``cgroup.type`` and obeys the no-internal-process rule like any non-root group).

Processes are plain integers; "killing" removes them from the tree.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field

from core.testenvmanager.sandbox.cgroups import HostFS

CONTROLLER_FILES = {
    "memory": ("memory.max", "memory.swap.max", "memory.events", "memory.oom.group", "memory.current"),
    "pids": ("pids.max", "pids.current"),
    "cpu": ("cpu.max",),
    "io": ("io.max",),
    "cpuset": ("cpuset.cpus",),
    "hugetlb": (),
}


@dataclass
class Group:
    path: str
    parent: "Group | None"
    subtree: list[str] = field(default_factory=list)
    procs: list[int] = field(default_factory=list)
    values: dict[str, str] = field(default_factory=dict)
    writable: bool = True
    delegated: bool = False

    def controllers(self, available: list[str]) -> list[str]:
        return list(available) if self.parent is None else list(self.parent.subtree)


class CgroupV2Double(HostFS):
    """A cgroup v2 mount at ``mount`` whose root offers ``controllers``; ``self_pid`` is the
    process whose ``/proc/self/cgroup`` is read. Every method of :class:`HostFS` is replaced:
    nothing reaches the real file system."""

    def __init__(self, mount: str = "/sys/fs/cgroup", controllers: tuple[str, ...] = (
            "cpuset", "cpu", "io", "memory", "hugetlb", "pids"), root_subtree: tuple[str, ...] = (),
                 namespace_root: bool = False, self_pid: int = 100) -> None:
        self.mount = mount
        self.available = list(controllers)
        self.namespace_root = namespace_root
        self.self_pid = self_pid
        self.groups: dict[str, Group] = {mount: Group(mount, None, list(root_subtree))}
        self.killed: list[int] = []
        self.log: list[tuple[str, str, str]] = []  # (op, path, value) of every change

    # -- building the scene -----------------------------------------------------------------
    def add(self, rel: str, procs: tuple[int, ...] = (), subtree: tuple[str, ...] = (),
            writable: bool = True, delegated: bool = False) -> Group:
        """Make group ``rel`` (and its missing parents) directly, as a supervisor would have."""
        path = os.path.normpath(os.path.join(self.mount, rel.lstrip("/")))
        if path not in self.groups:
            parent = os.path.dirname(path)
            if parent not in self.groups:
                self.add(os.path.relpath(parent, self.mount))
            self.groups[path] = Group(path, self.groups[parent])
        group = self.groups[path]
        group.subtree = list(subtree)
        group.writable, group.delegated = writable, delegated
        for pid in procs:
            self._detach(pid)
            group.procs.append(pid)
        return group

    def group_of(self, pid: int) -> str:
        for group in self.groups.values():
            if pid in group.procs:
                return group.path
        raise KeyError(pid)

    # -- HostFS ------------------------------------------------------------------------------
    def _split(self, path: str) -> tuple[Group | None, str]:
        path = os.path.normpath(path)
        if path in self.groups:
            return self.groups[path], ""
        group = self.groups.get(os.path.dirname(path))
        return group, os.path.basename(path)

    def _is_root(self, group: Group) -> bool:
        return group.parent is None and not self.namespace_root

    def _files(self, group: Group) -> set[str]:
        names = {"cgroup.controllers", "cgroup.subtree_control", "cgroup.procs"}
        if not self._is_root(group):
            names |= {"cgroup.type", "cgroup.kill", "cgroup.events"}
            for ctrl in group.controllers(self.available):
                names |= set(CONTROLLER_FILES.get(ctrl, ()))
        return names

    def exists(self, path: str) -> bool:
        group, name = self._split(path)
        return group is not None and (name == "" or name in self._files(group))

    def read(self, path: str) -> str:
        if path == "/proc/self/cgroup":
            rel = os.path.relpath(self.group_of(self.self_pid), self.mount)
            return "0::/" + ("" if rel == "." else rel) + "\n"
        group, name = self._split(path)
        if group is None or name not in self._files(group):
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        if name == "cgroup.controllers":
            return " ".join(group.controllers(self.available)) + "\n"
        if name == "cgroup.subtree_control":
            return " ".join(group.subtree) + "\n"
        if name == "cgroup.procs":
            return "".join(f"{pid}\n" for pid in group.procs)
        if name == "cgroup.type":
            return "domain\n"
        if name == "memory.events":
            return "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"
        return group.values.get(name, "max") + "\n"

    def write(self, path: str, value: str) -> None:
        group, name = self._split(path)
        if group is None or name not in self._files(group):
            raise FileNotFoundError(errno.ENOENT, "no such file", path)
        if not group.writable:
            raise PermissionError(errno.EACCES, "permission denied", path)
        value = value.strip()
        if name == "cgroup.subtree_control":
            self._subtree(group, value, path)
        elif name == "cgroup.procs":
            self._move(group, int(value), path)
        elif name == "cgroup.kill":
            for member in self._subtree_groups(group):
                self.killed.extend(member.procs)
                member.procs.clear()
        else:
            group.values[name] = value
        self.log.append(("write", path, value))

    def _subtree(self, group: Group, value: str, path: str) -> None:
        for word in value.split():
            ctrl = word[1:]
            if word[0] == "+":
                if ctrl not in group.controllers(self.available):
                    raise OSError(errno.ENOENT, f"controller {ctrl} not available", path)
                if group.procs and not self._is_root(group):
                    raise OSError(errno.EBUSY, "no internal processes", path)
                if ctrl not in group.subtree:
                    group.subtree.append(ctrl)
            elif word[0] == "-":
                if any(ctrl in child.subtree for child in self._children(group)):
                    raise OSError(errno.EBUSY, "a child group uses it", path)
                if ctrl in group.subtree:
                    group.subtree.remove(ctrl)
            else:
                raise OSError(errno.EINVAL, "invalid", path)

    def _move(self, group: Group, pid: int, path: str) -> None:
        pid = self.self_pid if pid == 0 else pid
        if not any(pid in g.procs for g in self.groups.values()):
            raise ProcessLookupError(errno.ESRCH, "no such process", path)
        if group.subtree and not self._is_root(group):
            raise OSError(errno.EBUSY, "no internal processes", path)
        self._detach(pid)
        group.procs.append(pid)

    def _detach(self, pid: int) -> None:
        for g in self.groups.values():
            if pid in g.procs:
                g.procs.remove(pid)

    def _children(self, group: Group) -> list[Group]:
        return [g for g in self.groups.values() if g.parent is group]

    def _subtree_groups(self, group: Group) -> list[Group]:
        found = [group]
        for child in self._children(group):
            found.extend(self._subtree_groups(child))
        return found

    def mkdir(self, path: str) -> None:
        path = os.path.normpath(path)
        parent = self.groups.get(os.path.dirname(path))
        if parent is None:
            raise FileNotFoundError(errno.ENOENT, "no parent", path)
        if path in self.groups:
            raise FileExistsError(errno.EEXIST, "exists", path)
        if not parent.writable:
            raise PermissionError(errno.EACCES, "permission denied", path)
        self.groups[path] = Group(path, parent)
        self.log.append(("mkdir", path, ""))

    def rmdir(self, path: str) -> None:
        group = self.groups.get(os.path.normpath(path))
        if group is None:
            raise FileNotFoundError(errno.ENOENT, "no such group", path)
        if group.procs or self._children(group):
            raise OSError(errno.EBUSY, "busy", path)
        del self.groups[group.path]
        self.log.append(("rmdir", path, ""))

    def listdir(self, path: str) -> list[str]:
        group = self.groups[os.path.normpath(path)]
        return sorted(os.path.basename(g.path) for g in self._children(group))

    def writable(self, path: str) -> bool:
        group, _ = self._split(path)
        return group is not None and group.writable

    def delegated(self, path: str) -> bool:
        group, _ = self._split(path)
        return group is not None and group.delegated

    def chown(self, path: str, uid: int) -> None:
        self.log.append(("chown", path, str(uid)))
