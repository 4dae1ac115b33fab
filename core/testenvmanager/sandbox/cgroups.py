"""The executor's cgroup walls on cgroup v1, v2 and hybrid hosts (stdlib only: the fork server
loads this file by path, the host side imports it as a module).

What an executor gets, whatever the cgroup version (:func:`setup`):

* an **executor group** ``ianvs-sandbox-<server pid>-<hex>`` holding the fork server and so every
  process it starts, capped by ``pids.max`` (fork bombs) and a memory limit with swap closed;
* one **slot group** per worker slot (``<executor group>/slot<i>``) whose memory limit follows
  each request's ``memory_mb``; a sample joins its slot's group before its code runs, so what
  it makes the kernel hold (anonymous memory, memfd and tmpfs pages, pipe and socket buffers)
  counts there, and an OOM kill there is graded ``memory_exceeded``.

cgroup v1 (and the v1 controllers of a hybrid host): one executor group per controller at the
root of the ``pids`` and ``memory`` hierarchies; the slots are children of the memory group;
the server sits in the executor groups themselves (v1 has no rule against it); limits are
``memory.limit_in_bytes`` and ``memory.memsw.limit_in_bytes`` (and
``memory.kmem.tcp.limit_in_bytes``, which turns TCP buffer accounting on).

cgroup v2 (one hierarchy; a controller bound to a v1 hierarchy on a hybrid host is not
available there): the executor group is made under a *parent* whose ``cgroup.subtree_control``
enables ``memory`` and ``pids`` for its children. v2 forbids processes in a group whose
subtree has controllers enabled (the root excepted), so the server lives in a leaf of its own,
``<executor group>/server``, beside the slots; the limits are ``pids.max``, ``memory.max`` and
``memory.swap.max`` 0; each slot sets ``memory.oom.group`` 1 (an OOM kill takes the whole
sample); socket and kernel memory are charged by default. The parent, first that works:

1. ``cgroup_parent`` when the executor is given one (a group an operator prepared and
   delegated, e.g. ``systemd-run -p Delegate=yes``'s or one made by hand);
2. the server's own group when it is *ours to arrange*: the root of a cgroup namespace
   (a container with a writable cgroup file system: ``0::/`` but not the host's root) or a
   group systemd delegated (extended attribute ``trusted.delegate`` or ``user.delegate`` = 1).
   Its member processes move to a leaf ``ianvs-leaf`` first (v2's no-internal-process rule;
   what systemd's delegation docs and container init scripts do), then its subtree gets the
   controllers;
3. the nearest ancestor of the server's group whose subtree has (or accepts) the controllers,
   up to the hierarchy's root (as root on a host: the server's group is usually a leaf of a
   supervisor or a login session; the executor group becomes its sibling or the root's child).

Nothing here raises: what could not be made becomes a note, and :func:`walls` says which walls
stand (the fork server reports ``full`` only when all do). The groups go when the executor
closes (:func:`leave`), and ``ianvs sandbox clean`` removes those of a dead server (the
leftovers module finds ``ianvs-sandbox-*`` groups anywhere in the hierarchy, a few levels deep).

File-system access goes through :class:`HostFS`; the tests drive the v2 placement against a
double of a cgroup v2 tree that enforces v2's rules (this project's own machine is cgroup v1).
"""

from __future__ import annotations

import errno
import os
import time

CGROUP_ROOT = "/sys/fs/cgroup"
#: controllers the walls need
NEEDED = ("pids", "memory")
PREFIX = "ianvs-sandbox-"
#: v2, nesting in the server's own group: where that group's member processes move
LEAF = "ianvs-leaf"
#: v2: the executor group's leaf for the server, its spawners and judges
SERVER_LEAF = "server"
#: the walls ``full`` needs: name -> what it stops (for reports)
WALLS = {
    "pids": "an executor-wide process cap (cgroup pids)",
    "memory": "an executor-wide memory cap with swap closed (cgroup memory)",
    "slots": "a memory group per worker slot limited to each request's memory_mb",
}

#: how to get the cgroup walls, by what stands in the way (see :func:`cgroup_fix`)
DELEGATE_FIX = ("run under a delegated cgroup v2 group: 'systemd-run --scope -p Delegate=yes "
                "<command>', or prepare one as root (mkdir /sys/fs/cgroup/ianvs; echo '+memory "
                "+pids' > /sys/fs/cgroup/ianvs/cgroup.subtree_control) and pass "
                "cgroup_parent=/sys/fs/cgroup/ianvs")


class HostFS:
    """The real file system (the test double of a v2 tree has the same methods)."""

    def read(self, path: str) -> str:
        with open(path) as fh:
            return fh.read()

    def write(self, path: str, value: str) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def mkdir(self, path: str) -> None:
        os.mkdir(path)

    def rmdir(self, path: str) -> None:
        os.rmdir(path)

    def listdir(self, path: str) -> list[str]:
        return sorted(e.name for e in os.scandir(path) if e.is_dir(follow_symlinks=False))

    def writable(self, path: str) -> bool:
        return os.access(path, os.W_OK)

    def delegated(self, path: str) -> bool:
        for name in ("trusted.delegate", "user.delegate"):
            try:
                if os.getxattr(path, name).strip() == b"1":
                    return True
            except (OSError, AttributeError):
                pass
        return False

    def chown(self, path: str, uid: int) -> None:
        os.chown(path, uid, uid)


def _words(fs: HostFS, path: str) -> list[str]:
    try:
        return fs.read(path).split()
    except OSError:
        return []


class Layout:
    """What this host offers: the v1 hierarchies of the needed controllers, the v2 mount and
    the controllers it has, and this process's v2 group."""

    def __init__(self, fs: HostFS, root: str = CGROUP_ROOT) -> None:
        self.root = root
        #: controller -> its v1 hierarchy (only the needed ones, only when mounted)
        self.v1 = {c: os.path.join(root, c) for c in NEEDED
                   if fs.exists(os.path.join(root, c, "cgroup.procs"))
                   and not fs.exists(os.path.join(root, c, "cgroup.controllers"))}
        self.v2_mount = ""
        for mount in (root, os.path.join(root, "unified")):
            if fs.exists(os.path.join(mount, "cgroup.controllers")):
                self.v2_mount = mount
                break
        self.v2_controllers = _words(fs, os.path.join(self.v2_mount, "cgroup.controllers")) \
            if self.v2_mount else []
        self.own_v2 = ""  # this process's group relative to the v2 mount ("/..."), "" unknown
        try:
            for line in fs.read("/proc/self/cgroup").splitlines():
                if line.startswith("0::"):
                    self.own_v2 = line[3:].strip()
        except OSError:
            pass

    @property
    def version(self) -> str:
        """``v2`` (one hierarchy at the root), ``hybrid`` (v1 hierarchies and a v2 one),
        ``v1`` or ``none``."""
        if self.v2_mount == self.root:
            return "v2"
        if self.v2_mount:
            return "hybrid"
        return "v1" if self.v1 else "none"

    def backend(self, controller: str) -> str:
        """Where ``controller`` lives here: ``v1``, ``v2`` or ``""`` (nowhere)."""
        if controller in self.v1:
            return "v1"
        return "v2" if controller in self.v2_controllers else ""

    def describe(self) -> dict:
        return {"version": self.version, "v2_mount": self.v2_mount,
                "v2_controllers": list(self.v2_controllers), "v1": sorted(self.v1),
                "own_v2": self.own_v2}


class Groups:
    """The groups one executor made (see :func:`setup`); plain data, sent in the hello facts."""

    def __init__(self) -> None:
        self.executor: dict[str, str] = {}  # controller -> executor group
        self.slots: list[str] = []
        self.v2_group = ""  # the v2 executor group, "" when none
        self.home = ""  # v2: where the server returns before the groups go
        self.mounts: list[str] = []  # hierarchies the server keeps writable (mount points)
        self.oom_file = ""  # the executor's OOM kill counter ("oom_kill N" inside); the slots'
        #                     files are found by :func:`slot_files`
        self.placement = ""  # v2: how the parent was chosen (given, nest, ancestor, root)

    def facts(self) -> dict:
        return dict(self.__dict__)


def setup(cfg: dict, notes: list[str], layout: Layout, fs: HostFS | None = None,
          pid: int | None = None) -> Groups:
    """Make the executor's groups on the host ``layout`` describes (read through ``fs``) and
    move this process (pid ``pid``) into them. ``cfg``: ``workers``, ``limits.processes``,
    ``cgroup_memory_mb``, ``cgroup_parent``. Never raises: failures become ``notes`` and leave
    fewer walls (see :func:`walls`)."""
    fs = fs or HostFS()
    pid = os.getpid() if pid is None else pid
    groups = Groups()
    workers = max(1, int(cfg.get("workers", 1)))
    nproc = int((cfg.get("limits") or {}).get("processes", 64))
    pids_max = workers * (nproc + 2) + 16
    memory = int(cfg.get("cgroup_memory_mb") or workers * 2048 + 512) << 20
    name = f"{PREFIX}{pid}-{os.urandom(3).hex()}"
    v1 = [c for c in NEEDED if layout.backend(c) == "v1"]
    v2 = [c for c in NEEDED if layout.backend(c) == "v2"]
    for c in NEEDED:
        if not layout.backend(c):
            notes.append(f"cgroups: no '{c}' controller on this host "
                         f"({layout.version}; v2 offers {' '.join(layout.v2_controllers) or 'none'})")
    if v1:
        _setup_v1(fs, layout, v1, name, pid, pids_max, memory, groups, notes)
    if v2:
        _setup_v2(fs, layout, v2, name, pid, pids_max, memory, cfg, groups, notes)
    if "memory" in groups.executor:
        _make_slots(fs, groups, workers, notes)
    return groups


def _setup_v1(fs: HostFS, layout: Layout, ctrls: list[str], name: str, pid: int, pids_max: int,
              memory: int, groups: Groups, notes: list[str]) -> None:
    made: dict[str, str] = {}
    try:
        for ctrl in ctrls:
            base = layout.v1[ctrl]
            if not fs.writable(base):
                notes.append(f"cgroups: the v1 '{ctrl}' hierarchy is not writable (run as root)")
                continue
            path = os.path.join(base, name)
            fs.mkdir(path)
            made[ctrl] = path
        if "pids" in made:
            fs.write(os.path.join(made["pids"], "pids.max"), str(pids_max))
        if "memory" in made:
            fs.write(os.path.join(made["memory"], "memory.limit_in_bytes"), str(memory))
            memsw = os.path.join(made["memory"], "memory.memsw.limit_in_bytes")
            if fs.exists(memsw):
                fs.write(memsw, str(memory))  # no escaping the limit through swap
            elif _swap_on():
                notes.append("cgroups: swap accounting is off (memory.memsw.*): a sample may "
                             "push pages to swap beyond its limit; boot with swapaccount=1")
        for path in made.values():
            fs.write(os.path.join(path, "cgroup.procs"), str(pid))
    except OSError as exc:
        notes.append(f"cgroups (v1) unavailable: {exc}")
        _remove(fs, list(made.values()), pid, [os.path.dirname(p) for p in made.values()])
        return
    groups.executor.update(made)
    groups.mounts.extend(layout.v1[c] for c in made)
    if "memory" in made:
        groups.oom_file = os.path.join(made["memory"], "memory.oom_control")


def _swap_on() -> bool:
    try:
        with open("/proc/swaps") as fh:
            return len(fh.read().strip().splitlines()) > 1
    except OSError:
        return False


def _v2_candidates(fs: HostFS, layout: Layout, cfg: dict) -> list[tuple[str, str]]:
    """Parents to try for the v2 executor group, with how each was chosen."""
    mount = layout.v2_mount
    given = cfg.get("cgroup_parent")
    if given:
        return [(str(given), "given")]
    if not layout.own_v2:
        return [(mount, "root")]
    own = os.path.normpath(mount + layout.own_v2)
    if own == mount and not fs.exists(os.path.join(mount, "cgroup.type")):
        return [(own, "root")]  # the host's root: exempt from the no-internal-process rule
    found: list[tuple[str, str]] = []
    if own == mount or fs.delegated(own):  # a cgroup namespace's root, or delegated to us
        found.append((own, "nest"))
    parent = os.path.dirname(own)
    while own != mount and parent.startswith(mount):
        found.append((parent, "root" if parent == mount else "ancestor"))
        if parent == mount:
            break
        parent = os.path.dirname(parent)
    return found


def _v2_order(fs: HostFS, candidates: list[tuple[str, str]],
              ctrls: list[str]) -> list[tuple[str, str]]:
    """Ancestors whose subtree already has the controllers come first, nearest first (nothing
    of a group that is not ours changes); then those that would need them enabled. A given
    parent and the server's own group (``nest``) keep their place in front."""
    def enabled(parent: str) -> bool:
        return all(c in _words(fs, os.path.join(parent, "cgroup.subtree_control")) for c in ctrls)

    ours = [c for c in candidates if c[1] in ("given", "nest")]
    rest = [c for c in candidates if c[1] not in ("given", "nest")]
    return [*ours, *[c for c in rest if enabled(c[0])], *[c for c in rest if not enabled(c[0])]]


def v2_group(fs: HostFS, layout: Layout, ctrls: list[str], name: str, cfg: dict,
             notes: list[str], fill) -> tuple[str, str, str] | None:
    """Make the v2 group ``name`` under the first parent that takes it (see the module
    docstring), enable ``ctrls`` for its children and call ``fill(group, home)`` (which may
    raise OSError: the group is then removed and the next parent tried). Returns ``(group,
    how the parent was chosen, home)``, ``home`` being where this process belongs when it
    leaves; None (and a note with the fix) when no parent takes it."""
    tried: list[str] = []
    for parent, how in _v2_order(fs, _v2_candidates(fs, layout, cfg), ctrls):
        why = _usable_parent(fs, parent, how, ctrls)
        if why:
            tried.append(f"{parent} ({how}): {why}")
            continue
        group = os.path.join(parent, name)
        home = os.path.join(parent, LEAF) if how == "nest" else \
            os.path.normpath(layout.v2_mount + layout.own_v2) if layout.own_v2 else layout.v2_mount
        try:
            fs.mkdir(group)
        except OSError as exc:
            tried.append(f"{parent} ({how}): {exc}")
            continue
        try:
            fs.write(os.path.join(group, "cgroup.subtree_control"), " ".join(f"+{c}" for c in ctrls))
            fill(group, home)
        except OSError as exc:
            tried.append(f"{parent} ({how}): {exc}")
            try:
                fs.rmdir(group)
            except OSError:
                pass
            continue
        return group, how, home
    notes.append("cgroups (v2): no parent group takes the executor's group: " + "; ".join(tried)
                 + f". Fix: {DELEGATE_FIX}")
    return None


def _setup_v2(fs: HostFS, layout: Layout, ctrls: list[str], name: str, pid: int, pids_max: int,
              memory: int, cfg: dict, groups: Groups, notes: list[str]) -> None:
    def fill(group: str, home: str) -> None:
        try:
            if "pids" in ctrls:
                fs.write(os.path.join(group, "pids.max"), str(pids_max))
            if "memory" in ctrls:
                fs.write(os.path.join(group, "memory.max"), str(memory))
                _close_swap(fs, group, notes)
            leaf = os.path.join(group, SERVER_LEAF)
            fs.mkdir(leaf)
            fs.write(os.path.join(leaf, "cgroup.procs"), str(pid))
        except OSError:
            _remove(fs, [os.path.join(group, SERVER_LEAF), group], pid, [home])
            raise

    made = v2_group(fs, layout, ctrls, name, cfg, notes, fill)
    if made is None:
        return
    group, how, home = made
    for ctrl in ctrls:
        groups.executor[ctrl] = group
    groups.v2_group, groups.home, groups.placement = group, home, how
    groups.mounts.append(layout.v2_mount)
    if "memory" in ctrls:
        groups.oom_file = os.path.join(group, SERVER_LEAF, "memory.events")


def _usable_parent(fs: HostFS, parent: str, how: str, ctrls: list[str]) -> str:
    """Why ``parent`` cannot hold the executor group ('' when it can, after making it so:
    for ``nest`` its member processes move to :data:`LEAF`; then the controllers are enabled
    for its children)."""
    offered = _words(fs, os.path.join(parent, "cgroup.controllers"))
    lacking = [c for c in ctrls if c not in offered]
    if lacking:
        return f"its controllers lack {' '.join(lacking)}"
    if not fs.writable(parent):
        return "not writable"
    enabled = _words(fs, os.path.join(parent, "cgroup.subtree_control"))
    wanted = [c for c in ctrls if c not in enabled]
    if not wanted:
        return ""
    try:
        if how == "nest":
            _evacuate(fs, parent)
        fs.write(os.path.join(parent, "cgroup.subtree_control"), " ".join(f"+{c}" for c in wanted))
    except OSError as exc:
        return f"cannot enable {' '.join(wanted)} for its children ({exc})"
    return ""


def _evacuate(fs: HostFS, group: str) -> None:
    """Move every process of ``group`` into its leaf :data:`LEAF` (processes forked meanwhile
    are caught by the next pass); raises OSError when the group does not empty."""
    leaf = os.path.join(group, LEAF)
    if not fs.exists(leaf):
        fs.mkdir(leaf)
    for _ in range(20):
        procs = _words(fs, os.path.join(group, "cgroup.procs"))
        if not procs:
            return
        for proc in procs:
            try:
                fs.write(os.path.join(leaf, "cgroup.procs"), proc)
            except OSError as exc:
                if exc.errno != errno.ESRCH:  # gone meanwhile: fine
                    raise
    raise OSError(errno.EBUSY, f"{group} keeps gaining processes")


def _close_swap(fs: HostFS, group: str, notes: list[str]) -> None:
    swap = os.path.join(group, "memory.swap.max")
    if fs.exists(swap):
        fs.write(swap, "0")
    elif _swap_on():
        notes.append("cgroups: swap accounting is off (memory.swap.max missing): a sample may "
                     "push pages to swap beyond its limit")


def _make_slots(fs: HostFS, groups: Groups, workers: int, notes: list[str]) -> None:
    parent = groups.executor["memory"]
    made: list[str] = []
    try:
        for slot in range(workers):
            path = os.path.join(parent, f"slot{slot}")
            fs.mkdir(path)
            made.append(path)
            if groups.v2_group:
                _close_swap(fs, path, [])
                oom_group = os.path.join(path, "memory.oom.group")
                if fs.exists(oom_group):
                    fs.write(oom_group, "1")
    except OSError as exc:
        notes.append(f"per-slot memory groups unavailable: {exc}")
        for path in made:
            try:
                fs.rmdir(path)
            except OSError:
                pass
        return
    groups.slots = made


def slot_files(slot: str, fs: HostFS | None = None) -> dict:
    """The files of a slot group, by the version it belongs to (a container's server is handed
    groups the host made and tells v1 from v2 by what is there): ``limits`` written with each
    request's ``memory_mb``, ``swap`` (v1: kept equal to the limit; '' on v2, where
    ``memory.swap.max`` is 0 from the start) and ``oom``, the OOM kill counter."""
    fs = fs or HostFS()
    if fs.exists(os.path.join(slot, "memory.max")):
        return {"limits": ["memory.max"], "swap": "", "oom": "memory.events"}
    limits = [n for n in ("memory.limit_in_bytes", "memory.kmem.tcp.limit_in_bytes")
              if fs.exists(os.path.join(slot, n))]
    swap = "memory.memsw.limit_in_bytes"
    return {"limits": limits, "swap": swap if fs.exists(os.path.join(slot, swap)) else "",
            "oom": "memory.oom_control"}


def own_oom_file(layout: Layout, fs: HostFS | None = None) -> str:
    """This process's memory group's OOM kill counter (a container's server: the container's
    group counts the kills of the container's limit), '' when none is readable."""
    fs = fs or HostFS()
    if "memory" in layout.v1:
        path = os.path.join(layout.v1["memory"], "memory.oom_control")
    elif layout.v2_mount and layout.own_v2:
        path = os.path.join(os.path.normpath(layout.v2_mount + layout.own_v2), "memory.events")
    else:
        return ""
    return path if fs.exists(path) else ""


def walls(facts: dict) -> dict[str, bool]:
    """Which cgroup walls stand (keys of :data:`WALLS`). Inside a container of the docker
    backend the container's own limits are the executor-wide caps."""
    made = facts.get("cgroups") or {}
    container = bool(facts.get("container"))
    return {"pids": container or "pids" in made, "memory": container or "memory" in made,
            "slots": bool(facts.get("slot_memory"))}


def leave(groups: dict, pid: int | None = None, fs: HostFS | None = None) -> None:
    """Move this process out of the groups (``Groups.facts()``: back to its v2 home, to each
    v1 hierarchy's root), kill what is left inside and remove them, slots first."""
    fs = fs or HostFS()
    pid = os.getpid() if pid is None else pid
    v2 = groups.get("v2_group") or ""
    v1 = sorted({p for p in (groups.get("executor") or {}).values() if p != v2})
    paths = [*groups.get("slots", []), *([os.path.join(v2, SERVER_LEAF), v2] if v2 else []), *v1]
    exits = [os.path.dirname(p) for p in v1] + ([groups.get("home") or os.path.dirname(v2)] if v2 else [])
    _remove(fs, paths, pid, exits)


def _remove(fs: HostFS, paths: list[str], pid: int, exits: list[str]) -> None:
    """Move ``pid`` into each group of ``exits`` (out of the groups), kill the processes left
    in ``paths`` (``cgroup.kill`` where v2 has it) and remove them (children listed before
    parents)."""
    for target in exits:
        try:
            fs.write(os.path.join(target, "cgroup.procs"), str(pid))
        except OSError:
            pass
    for _ in range(50):
        alive = False
        for path in paths:
            procs = _words(fs, os.path.join(path, "cgroup.procs"))
            if not procs:
                continue
            alive = True
            kill = os.path.join(path, "cgroup.kill")
            if fs.exists(kill):
                try:
                    fs.write(kill, "1")
                    continue
                except OSError:
                    pass
            for proc in procs:
                try:
                    os.kill(int(proc), 9)
                except (OSError, ValueError):
                    pass
        if not alive:
            break
        time.sleep(0.01)
    for path in paths:
        try:
            fs.rmdir(path)
        except OSError:
            pass


def cgroup_fix(facts: dict) -> str:
    """The one command or setting that would give the missing cgroup walls, as a parenthesis
    for a message ('' when every wall stands), from a fork server's hello facts."""
    if all(walls(facts).values()):
        return ""
    made = facts.get("cgroup") or {}
    layout = made.get("layout") or {}
    notes = " ".join(facts.get("notes") or [])
    if facts.get("container"):
        fix = ("the host makes a container's slot groups: run ianvs as root on the host, with "
               "a writable cgroup v1 memory hierarchy or cgroup v2 (not with runtime runsc)")
    elif "switched off" in notes:
        fix = "cgroups=False switched them off"
    elif layout.get("version") == "v2" and not all(c in layout.get("v2_controllers", []) for c in NEEDED):
        lacking = [c for c in NEEDED if c not in layout.get("v2_controllers", [])]
        fix = (f"this kernel's cgroup v2 root offers no {' '.join(lacking)} controller: use a "
               f"kernel built with it (CONFIG_MEMCG, CONFIG_CGROUP_PIDS)")
    elif layout.get("version") in ("v1", "hybrid") and not all(c in layout.get("v1", []) or
                                                              c in layout.get("v2_controllers", [])
                                                              for c in NEEDED):
        fix = ("mount the cgroup v1 'memory' and 'pids' hierarchies under /sys/fs/cgroup, or boot "
               "with systemd.unified_cgroup_hierarchy=1 for cgroup v2")
    elif layout.get("version") in ("v1", "hybrid") or os.geteuid() != 0:
        fix = "run as root" + (f", or {DELEGATE_FIX}" if layout.get("version") == "v2" else "")
    else:
        fix = DELEGATE_FIX
    return f" (fix: {fix})"

