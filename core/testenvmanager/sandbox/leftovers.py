"""What sandbox runs leave on a host, who owns it, and removing what dead owners left.

Shared by ``ianvs sandbox doctor`` (lists), ``ianvs sandbox clean`` (removes) and executors at
start (each sweeps its own kind). One small function per kind returns :class:`Leftover` items;
:func:`remove` removes one item and refuses an item whose owner is alive. The sandbox's own
kinds are below; a task kind that leaves something of its own on a machine registers a lister
and a remover with :func:`register_leftovers` (the ``repo`` kind does so for ``postgres``,
``repo-views`` and ``repo-builds``: :mod:`core.scenarios.repo.leftovers`), so this module
knows no task kind. Every kind names its
owner by pid and judges liveness with :mod:`.owners` (pid plus start time, so a reused pid does
not keep a dead owner's leftovers alive):

=============== ======================================================= ======================
kind            where / how it is named                                 owner
=============== ======================================================= ======================
``cgroup``      ``/sys/fs/cgroup/{pids,memory}/ianvs-sandbox-<pid>-<hex>`` the fork server (alive
                (cgroup v1; under cgroup v2 up to six levels below      = in ``cgroup.procs``)
                the root, see :mod:`.cgroups`)
``scratch``     ``{/dev/shm,$TMPDIR,/tmp}/ianvs-sandbox-<pid>-<hex>``   the fork server
``docker-ctl``  ``<tmp>/ianvs-docker-ctl-<pid>-<random>``               the ``ianvs`` process
``container``   containers labelled ``io.ianvs.sandbox`` (owner label)  the ``ianvs`` process
``volume``      volumes labelled ``io.ianvs.sandbox``                   none (kept while a
                                                                        container uses it)
``edge``        processes with ``IANVS_EDGE_OWNER=<pid>:<start>`` in    the process that ran
                their environment (:class:`core.edge.processes.EdgeCluster`) the cluster
``netns``       ``/run/netns/ianvs-<pid>-<label>``                      the process that made it
``uid-lease``   ``/run/ianvs/uid-leases/<block>.lock`` (:mod:`.leases`) whoever holds the flock
=============== ======================================================= ======================

Items whose owner cannot be told (e.g. ``run-<random>`` view folders of older versions) are
listed with owner ``unknown`` and never removed. uid leases are only reported: a lease ends by
itself when its holders die.
"""
from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .owners import alive_since, pid_alive, token_alive

__all__ = ["Leftover", "KINDS", "cgroups", "scratch_dirs", "docker_control_dirs",
           "docker_objects", "edge_processes", "netns", "uid_leases", "discover", "remove",
           "remove_cgroup", "remove_tree", "register_leftovers", "scan",
           "sweep_executor_leftovers", "EDGE_OWNER_ENV", "netns_name"]

LOGGER = logging.getLogger(__name__)

CGROUP_ROOT = "/sys/fs/cgroup"
NETNS_DIR = "/run/netns"
#: environment variable naming the owner (``pid:start ticks``) of edge cluster processes
EDGE_OWNER_ENV = "IANVS_EDGE_OWNER"
_SANDBOX_RE = re.compile(r"^ianvs-sandbox-(\d+)-[0-9a-f]+$")
_CTL_RE = re.compile(r"^ianvs-docker-ctl-(\d+)-")
_NETNS_RE = re.compile(r"^ianvs-(\d+)-[A-Za-z0-9_.-]+$")


@dataclass
class Leftover:
    """One thing a sandbox run left: its ``kind``, ``name`` (a path or an identifier), the
    owner's pid (``None``: unknown) and whether the owner is alive. Only items with
    ``alive=False`` and ``removable=True`` are ever removed."""

    kind: str
    name: str
    owner: int | None
    alive: bool
    detail: str = ""
    removable: bool = True
    handle: Any = field(default=None, repr=False, compare=False)

    @property
    def owner_text(self) -> str:
        """``"pid 123 alive"``, ``"pid 123 dead"`` or ``"owner unknown"``."""
        if self.owner is None:
            return "owner unknown"
        return f"pid {self.owner} {'alive' if self.alive else 'dead'}"


def _mtime(path: str) -> float:
    try:
        return os.lstat(path).st_mtime
    except OSError:
        return 0.0


def scan(parent: str, pattern: re.Pattern[str], kind: str,
          alive: Callable[[int, str], bool] | None = None) -> list[Leftover]:
    """Entries of ``parent`` whose name matches ``pattern`` (group 1: the owner pid)."""
    try:
        names = sorted(os.listdir(parent))
    except OSError:
        return []
    found = []
    for name in names:
        match = pattern.match(name)
        if not match:
            continue
        path = os.path.join(parent, name)
        if match.group(1) is None:
            found.append(Leftover(kind, path, None, True, removable=False))
            continue
        pid = int(match.group(1))
        is_alive = alive(pid, path) if alive else alive_since(pid, _mtime(path))
        found.append(Leftover(kind, path, pid, is_alive))
    return found


# ------------------------------------------------------------------------------------- kinds
def _cgroup_dirs(root: str) -> list[str]:
    if os.path.isfile(os.path.join(root, "cgroup.controllers")):  # cgroup v2: one hierarchy
        return [root]
    # every v1 hierarchy: the docker backend's container groups (``cgroup_parent``) are made by
    # the engine in all of them, the fork server's own in ``pids`` and ``memory``
    try:
        return sorted(entry.path for entry in os.scandir(root) if entry.is_dir(follow_symlinks=False)
                      and os.path.isfile(os.path.join(entry.path, "cgroup.procs")))
    except OSError:
        return []


def _cgroup_procs(path: str) -> list[int]:
    """Processes in group ``path`` and in its direct child groups (a fork server's per-slot
    memory groups ``slot<i>``)."""
    pids: list[int] = []
    for group in [path, *_child_groups(path)]:
        try:
            with open(os.path.join(group, "cgroup.procs")) as fh:
                pids.extend(int(p) for p in fh.read().split())
        except (OSError, ValueError):
            pass
    return pids


def _child_groups(path: str) -> list[str]:
    try:
        return [entry.path for entry in os.scandir(path)
                if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _server_alive(pid: int, path: str) -> bool:
    """A group's fork server is alive if it is inside the group, or (joining or leaving it)
    alive and started before the group was made."""
    return pid in _cgroup_procs(path) or alive_since(pid, _mtime(path))


#: how deep below a hierarchy's root executor groups are looked for: a v2 executor group sits
#: under the nearest parent that delegates its controllers (a login session's slice, a
#: delegated scope, a supervisor's group; see :mod:`.cgroups`)
CGROUP_DEPTH = 6


def _group_parents(top: str, depth: int = CGROUP_DEPTH) -> list[str]:
    """``top`` and the groups below it, ``depth`` levels down, never inside an executor group."""
    found, level = [top], [top]
    for _ in range(depth):
        level = [child for parent in level for child in _child_groups(parent)
                 if not _SANDBOX_RE.match(os.path.basename(child))]
        found.extend(level)
    return found


def cgroups(root: str = CGROUP_ROOT) -> list[Leftover]:
    """Executor cgroups (``ianvs-sandbox-<server pid>-<hex>``) in every hierarchy (cgroup v1
    ``pids``/``memory`` and the others the docker backend's engine uses; cgroup v2, where they
    may sit a few levels below the root)."""
    found = []
    for top in _cgroup_dirs(root):
        for parent in _group_parents(top):
            for item in scan(parent, _SANDBOX_RE, "cgroup", _server_alive):
                procs = _cgroup_procs(item.name)
                item.detail = f"{len(procs)} process(es) inside" if procs else ""
                found.append(item)
    return found


def _scratch_parents() -> list[str]:
    parents = ["/dev/shm", os.environ.get("TMPDIR") or "", "/tmp", tempfile.gettempdir()]
    seen: list[str] = []
    for parent in parents:
        if parent and os.path.realpath(parent) not in [os.path.realpath(p) for p in seen]:
            seen.append(parent)
    return seen


def scratch_dirs() -> list[Leftover]:
    """Host scratch folders of fork servers without a mount namespace."""
    return [item for parent in _scratch_parents() for item in scan(parent, _SANDBOX_RE, "scratch")]


def docker_control_dirs() -> list[Leftover]:
    """The docker backend's control-socket folders (owner: the ``ianvs`` process)."""
    return scan(tempfile.gettempdir(), _CTL_RE, "docker-ctl")


def docker_objects(docker_host: str | None = None, timeout: float = 5.0) -> list[Leftover]:
    """Labelled containers and volumes of the docker backend. Empty (never an error) when the
    engine's socket is missing or does not answer."""
    from .images import DEFAULT_DOCKER_HOST, LABEL, OWNER_LABEL

    host = docker_host or DEFAULT_DOCKER_HOST
    if host.startswith("unix://") and not os.path.exists(host[len("unix://"):]):
        return []
    try:
        from .images import owner_alive
        from .images import connect

        client = connect(host, timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - no SDK, no engine: nothing to list
        LOGGER.debug("docker engine at %s: %s", host, exc)
        return []
    found = []
    try:
        for container in client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True):
            labels = container.labels or {}
            owner = str(labels.get(OWNER_LABEL, "")).rpartition(":")[2]
            found.append(Leftover("container", f"{container.short_id} ({container.name})",
                                  int(owner) if owner.isdigit() else None,
                                  owner_alive(labels), detail=container.status, handle=container))
        for volume in client.volumes.list(filters={"label": LABEL}):
            users = client.containers.list(all=True, filters={"volume": volume.name}, ignore_removed=True)
            found.append(Leftover("volume", volume.name, None, bool(users), handle=volume,
                                  detail=f"used by {len(users)} container(s)" if users else "unused"))
    except Exception as exc:  # noqa: BLE001 - engine went away while listing
        LOGGER.debug("docker listing: %s", exc)
    return found


def edge_processes() -> list[Leftover]:
    """Dask scheduler/worker processes started by :class:`core.edge.processes.EdgeCluster`
    (they carry ``IANVS_EDGE_OWNER`` in their environment)."""
    marker = EDGE_OWNER_ENV.encode() + b"="
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        token = next((item[len(marker):].decode("ascii", "replace")
                      for item in env.split(b"\0") if item.startswith(marker)), None)
        if token is None:
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            cmd = ""
        owner = token.partition(":")[0]
        found.append(Leftover("edge", f"pid {entry}", int(owner) if owner.isdigit() else None,
                              token_alive(token), detail=cmd[:100], handle=int(entry)))
    return found


def netns_name(label: str, pid: int | None = None) -> str:
    """Name for a network namespace the project creates: ``ianvs-<owner pid>-<label>``, so
    leftovers of a dead owner are recognisable."""
    return f"ianvs-{os.getpid() if pid is None else pid}-{label}"


def netns(directory: str = NETNS_DIR) -> list[Leftover]:
    """Named network namespaces ``ianvs-<pid>-<label>`` (``ip netns add``)."""
    return scan(directory, _NETNS_RE, "netns")


def uid_leases() -> list[Leftover]:
    """uid lease blocks (reported, never removed: a lease ends when its holders die)."""
    from .leases import lease_status

    found = []
    for info in lease_status():
        owner = str(info.record.get("owner", "")).partition(":")[0]
        first, last = info.uids
        found.append(Leftover("uid-lease", f"uids {first}..{last}",
                              int(owner) if owner.isdigit() and info.held else None, info.held,
                              detail="held" if info.held else "free", removable=False))
    return found


#: every kind, in the order doctor and clean report them
KINDS: dict[str, Callable[[], list[Leftover]]] = {
    "cgroup": cgroups, "scratch": scratch_dirs, "docker-ctl": docker_control_dirs,
    "docker": docker_objects, "edge": edge_processes, "netns": netns, "uid-lease": uid_leases,
}
#: removers of registered kinds (:func:`register_leftovers`), by kind
_REMOVERS: dict[str, Callable[[str], bool]] = {}


def register_leftovers(kind: str, lister: Callable[[], list[Leftover]],
                       remover: Callable[[str], bool]) -> None:
    """Add a leftover kind of a task kind: ``lister()`` returns its items (named ``kind``),
    ``remover(name)`` removes one whose owner is dead. Registering a kind again replaces it;
    the sandbox's own kinds cannot be replaced.

    Raises:
        ValueError: ``kind`` is one of the sandbox's own.
    """
    if kind in KINDS and kind not in _REMOVERS:
        raise ValueError(f"leftover kind {kind!r} is the sandbox's own")
    KINDS[kind] = lister
    _REMOVERS[kind] = remover


def discover(kinds: Iterable[str] | None = None, docker_host: str | None = None) -> list[Leftover]:
    """Every leftover of the given kinds (default all; ``docker_host`` for the ``docker``
    kind); a kind that fails to list is logged and skipped."""
    found: list[Leftover] = []
    for kind in kinds or KINDS:
        try:
            found.extend(docker_objects(docker_host) if kind == "docker" else KINDS[kind]())
        except OSError as exc:
            LOGGER.warning("cannot list %s leftovers: %s", kind, exc)
    return found


# ------------------------------------------------------------------------------------ removal
def remove_cgroup(path: str, timeout: float = 3.0) -> bool:
    """Kill what runs in cgroup ``path`` and remove it, retrying for up to ``timeout`` seconds
    (a killed process leaves the group a moment later); True when it is gone."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:  # cgroup v2: the kernel kills the whole subtree at once (forks meanwhile included)
            with open(os.path.join(path, "cgroup.kill"), "w") as fh:
                fh.write("1")
        except OSError:
            pass
        for pid in _cgroup_procs(path):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            for child in _child_groups(path):  # child groups first: rmdir needs an empty group
                os.rmdir(child)
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.02)
    return False


def remove_tree(path: str) -> bool:
    """Remove a leftover folder (no recursion, never through a symlink)."""
    if os.path.islink(path) or not os.path.isdir(path):
        return False
    from .mounts import remove_tree as remove_folder  # no recursion, never follows symlinks

    return remove_folder(path)


def _remove_edge(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and pid_alive(pid):
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
        except ChildProcessError:
            pass
        time.sleep(0.02)
    return True


def _remove_netns(name: str) -> bool:
    try:
        subprocess.run(["ip", "netns", "del", os.path.basename(name)], capture_output=True,
                       timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return not os.path.lexists(name)


def _remove_docker(item: Leftover) -> bool:
    try:
        item.handle.remove(force=True)
        return True
    except Exception as exc:  # noqa: BLE001 - in use (volume), already gone (auto-remove)
        item.detail = f"not removed: {str(exc)[:120]}"
        return False


def _gone(item: Leftover, wait_s: float = 5.0) -> bool:
    """Whether ``item`` no longer exists (waiting up to ``wait_s`` for a removal in progress):
    another run on this machine may sweep the same dead owner's leftovers at the same time, and
    its win is not this removal's failure."""
    deadline = time.monotonic() + wait_s
    while True:
        if item.kind in ("container", "volume"):
            try:
                item.handle.reload()
                exists = True
            except Exception as exc:  # noqa: BLE001 - NotFound: gone; anything else: unknown
                exists = "404" not in str(exc) and "not found" not in str(exc).lower()
        elif item.kind == "edge":
            exists = pid_alive(int(item.handle))
        else:
            exists = os.path.lexists(item.name)
        if not exists or time.monotonic() >= deadline:
            return not exists
        time.sleep(0.1)


def remove(item: Leftover) -> bool:
    """Remove one leftover of a dead owner; ``False`` (nothing done) when its owner is alive
    or unknown, it is not removable, or it still exists after removing failed (gone by another
    run's hand counts as removed)."""
    if item.alive or not item.removable or item.owner is None and item.kind != "volume":
        return False
    return _remove(item) or _gone(item)


def _remove(item: Leftover) -> bool:
    if item.kind == "cgroup":
        return remove_cgroup(item.name)
    if item.kind in ("scratch", "docker-ctl"):
        return remove_tree(item.name)
    if item.kind in _REMOVERS:
        return _REMOVERS[item.kind](item.name)
    if item.kind in ("container", "volume"):
        return _remove_docker(item)
    if item.kind == "edge":
        return _remove_edge(int(item.handle))
    if item.kind == "netns":
        return _remove_netns(item.name)
    return False


def sweep_executor_leftovers() -> list[Leftover]:
    """What a starting ``local`` executor removes: dead fork servers' cgroups (killing what
    still runs in them) and host scratch folders. Returns the items removed."""
    return [item for item in cgroups() + scratch_dirs() if not item.alive and remove(item)]
