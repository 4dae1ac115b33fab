"""``docker`` backend: the project's fork server, run inside locked-down containers.

Each container runs :mod:`.forkserver` (the same server as the ``local`` backend, from this
directory, bind-mounted read-only) with no network (``--network none``: only loopback), a
read-only root file system, private tmpfs ``/tmp`` and ``/dev/shm``, ``no-new-privileges``, and
pids, memory and CPU limits. Every capability is dropped except :data:`SERVER_CAPS`: the
container starts as uid 0 only so that its fork server can give itself, each slot's judge and
each slot's sample uids of their own (see "uids" below). The server connects
back to a ``SOCK_SEQPACKET`` socket this process listens on (bind-mounted into the container;
removed as soon as the server is connected), so requests and results travel exactly as with
``local``: programs and tests as memfds, verdicts computed by the harness inside the container
(a judge process, or the fork server from kernel facts), never by parsing what a sample prints.

Two modes:

* warm pool (default): ``pool_size`` long-lived containers per image, each serving
  ``workers`` requests in parallel; per-sample cost is a fork inside the container.
* ``fresh_container=True``: every request gets a container of its own, started for it and
  removed afterwards (about 0.4 s more per sample here).

Images: the executor's ``image`` (default: the locally built base image, see :mod:`.images`),
or per request ``metadata["run_env"]`` (an image name) and ``metadata["packages"]`` (``import
name -> pip requirement``), which selects a task image derived from it with those packages
(built once, cached by content hash). :meth:`DockerExecutor.prepare` resolves them up front so
an unknown image or package is one clear error before anything runs.

Service sockets: ``socket_mounts`` (``{host directory: container path}``) bind-mounts directories
holding a host service's unix socket read-only into every container (the repo kind's PostgreSQL
server) and lets the fork server's seccomp filter pass ``socket(AF_UNIX)``, as ``socket_dirs``
does on ``local``. The container keeps ``--network none``: a pathname socket needs no network,
so the service is the one thing outside the container its samples can reach.

Outcomes: a request whose container cannot be started or dies under it is ``infra_error``;
samples killed by the container's OOM killer are ``memory_exceeded`` (the server reads the
container's memory cgroup); in fresh mode a request that outlives its timeout (plus a grace
period) has its container killed and is ``timeout``.

uids: each container leases ``2 * workers + 1`` host uids (:mod:`.leases`, the same machine-wide
blocks as ``local``: container uids are host uids, no user namespace maps them) for as long as it
exists. Slot ``i``'s sample runs as ``base + i``, its judge as ``base + workers + i``, the server
as ``base + 2 * workers``. The server leaves uid 0 at once, keeping only :data:`SERVER_CAPS`;
each child takes its uid and drops every capability before any untrusted code runs (a child
left with one fails its set-up: ``infra_error``). So a sample can neither signal, ``prlimit``,
renice nor read the server, the judges or the other slots' samples (under ``runsc``, gVisor's own
``setpriority`` and ``/proc/<pid>/environ`` skip the uid check: see docs/sandbox.md), and the
level reported inside a container is ``full``.

Leftovers: every container is labelled (:data:`.images.LABEL`, owner host and pid) and started
with auto-remove; when this process dies the server sees end-of-file on its socket and exits, so
the container goes away by itself; executors also sweep containers of dead owners at start, and
``ianvs sandbox sweep`` removes everything labelled.
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import socket
import tempfile
import threading
import time
from dataclasses import replace
from typing import Any, Iterable, Iterator, Mapping

from .base import Executor, check_read_paths, under_any
from .images import (BASE_IMAGE, DEFAULT_DOCKER_HOST, LABEL, OWNER_LABEL, PACKAGES_DIR,
                     ImageError, connect, owner, owner_alive, sweep, task_image)
from .leases import UidLease
from .leases import acquire as acquire_uids
from .local import LocalExecutor
from . import slotgroups
from .types import (ExecRequest, ExecResult, ExecutorClosedError, IsolationLevel,
                    IsolationUnavailableError, Outcome)

__all__ = ["DockerExecutor"]

LOGGER = logging.getLogger(__name__)
_HARNESS = os.path.dirname(os.path.abspath(__file__))
_HARNESS_IN = "/opt/ianvs/harness"
_CTL_IN = "/run/ianvs"
_GRACE = 2.0  # seconds past a request's timeout before fresh mode kills its container
RUNTIMES = ("runc", "runsc")
#: host-side folders holding a container's control socket: ``<tmp>/<prefix><owner pid>-<random>``
_CTL_PREFIX = "ianvs-docker-ctl-"
#: user a container starts as: root, but holding only :data:`SERVER_CAPS`, and only until its
#: fork server has switched to its own leased uid (``forkserver._container_privileges``)
START_USER = "0:0"
#: the only capabilities a container gets (``--cap-drop ALL --cap-add ...``): what the root
#: server of ``local`` uses of root's powers. The fork server keeps them as its own uid, its
#: children drop them all. SETUID/SETGID: the children's uids and the server's uid sweep; KILL:
#: stopping children of other uids (timeouts, shutdown, escapees); DAC_OVERRIDE/FOWNER: removing
#: what a sample of another uid left in its working directory.
SERVER_CAPS = ("SETUID", "SETGID", "KILL", "DAC_OVERRIDE", "FOWNER")


def _sweep_control_dirs() -> int:
    """Remove control-socket folders of ``ianvs`` processes that died without closing their
    executor (SIGKILL); returns how many. Folders of live processes are left alone."""
    from .leftovers import docker_control_dirs, remove

    return sum(1 for item in docker_control_dirs() if not item.alive and remove(item))


class _ContainerProcess:
    """``Popen``-like handle of one container (what :class:`LocalExecutor` needs)."""

    def __init__(self, container: Any) -> None:
        self.container = container
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        try:
            self.container.reload()
        except Exception:  # noqa: BLE001 - NotFound: auto-removed after it exited
            self.returncode = -9
            return self.returncode
        state = self.container.attrs.get("State", {})
        if state.get("Status") in ("exited", "dead"):
            self.returncode = int(state.get("ExitCode", -9))
        return self.returncode

    def kill(self) -> None:
        """Remove the container (killing it); returns once the engine no longer lists it
        (auto-remove may be removing it concurrently), after 10 s at the most."""
        try:
            self.container.remove(force=True)
        except Exception as exc:  # noqa: BLE001 - already gone, or auto-remove in progress
            LOGGER.debug("remove %s: %s", self.container.short_id, exc)
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline:
                try:
                    self.container.reload()
                except Exception:  # noqa: BLE001 - NotFound: gone
                    break
                time.sleep(0.05)
        if self.returncode is None:
            self.returncode = -9

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError("container still running")
            time.sleep(0.05)
        return int(self.returncode or 0)


class _ContainerServer(LocalExecutor):
    """One container running the fork server; speaks the ``local`` protocol."""

    name = "docker"

    def __init__(self, client: Any, image: str, runtime: str, limits: Mapping[str, Any],
                 read_mounts: Mapping[str, str] | None = None,
                 request_read_roots: list[str] | None = None, one_request: bool = False,
                 socket_mounts: Mapping[str, str] | None = None, **options: Any) -> None:
        self._client, self._image, self._runtime, self._limits = client, image, runtime, limits
        self._one_request = bool(one_request)  # the container serves one request, then goes
        self._mounts = dict(read_mounts or {})
        self._sockets = dict(socket_mounts or {})
        self._ctl_dir = ""
        self._container_lease: UidLease | None = None
        self._slot_groups: slotgroups.SlotGroups | None = None
        roots = list(request_read_roots or [])
        # a mount at or beneath a request read root is readable only by the requests naming it
        super().__init__(netns=False, mountns=False, cgroups=False, drop_uid=False,
                         sweep_leftovers=False,
                         hide_packages=False, scratch_parent="/tmp",
                         read_paths=sorted(v for v in self._mounts.values() if under_any(v, roots) is None),
                         request_read_roots=roots, socket_dirs=sorted(self._sockets.values()), **options)

    def _start_server(self, cfg: dict, python: str | None,
                      start_timeout: float) -> tuple[_ContainerProcess, socket.socket]:
        import json

        workers = int(cfg.get("workers", 1))
        # this container's uids: samples, judges, then the server (released in _remove_leftovers,
        # once the engine no longer lists the container)
        lease = self._container_lease = acquire_uids(2 * workers + 1)
        self.uid_base = lease.base
        # the server connects as the container's uid 0 (before it drops to its own uid): the
        # folder and socket stay root's, mode 0700, like any other file this process makes
        self._ctl_dir = tempfile.mkdtemp(prefix=f"{_CTL_PREFIX}{os.getpid()}-")
        path = os.path.join(self._ctl_dir, "ctl.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            listener.bind(path)
            listener.listen(1)
            cfg = {**cfg, "ctl_path": f"{_CTL_IN}/ctl.sock", "container": True,
                   "sys_path": [PACKAGES_DIR],
                   "drop_uid": True, "uid_base": lease.base, "server_uid": lease.base + 2 * workers,
                   # the container's own network namespace is then the request's
                   "one_request": self._one_request}
            if self._runtime == "runsc":  # gVisor cannot hand its memfds to the host
                cfg["inline_limit"] = self.output_limit
            limits = self._limits
            memory_mb = int(limits["memory_mb"])
            tmpfs = f"rw,nosuid,nodev,size={int(limits['tmpfs_mb'])}m,mode=1777"
            # per-slot memory groups made by this (root) process, under the container's limit
            groups = None if self._runtime == "runsc" else slotgroups.make(
                workers, memory_mb, cfg["server_uid"],
                cgroup_driver=lambda: str(self._client.info().get("CgroupDriver", "")))
            self._slot_groups = groups
            extra: dict[str, Any] = {}
            volumes = {**{host: {"bind": inside, "mode": "ro"}
                          for host, inside in [*self._mounts.items(), *self._sockets.items()]},
                       _HARNESS: {"bind": _HARNESS_IN, "mode": "ro"},
                       self._ctl_dir: {"bind": _CTL_IN, "mode": "rw"}}
            if groups is not None:
                cfg["slot_memory"] = groups.in_container()
                extra["cgroup_parent"] = groups.cgroup_parent
                if groups.cgroupns:
                    extra["cgroupns"] = groups.cgroupns
                volumes[groups.parent] = {"bind": slotgroups.IN_CONTAINER, "mode": "rw"}
            try:
                container = self._client.containers.run(
                    self._image, ["python3", "-I", "-S", "-B", f"{_HARNESS_IN}/boot.py",
                                  json.dumps(cfg)],
                    detach=True, auto_remove=True, network_mode="none", read_only=True,
                    tmpfs={"/tmp": tmpfs, "/dev/shm": tmpfs}, cap_drop=["ALL"],
                    cap_add=list(SERVER_CAPS),
                    security_opt=["no-new-privileges"] + list(limits.get("security_opt", [])),
                    user=START_USER, working_dir="/tmp",
                    pids_limit=int(limits.get("pids_limit") or workers * 70 + 32),
                    mem_limit=f"{memory_mb}m", memswap_limit=f"{memory_mb}m",
                    nano_cpus=int(float(limits["cpus"]) * 1e9), runtime=self._runtime,
                    environment={"LANG": "C.UTF-8"}, labels={LABEL: "1", "io.ianvs.kind": "server",
                                                             OWNER_LABEL: owner()},
                    volumes=volumes, **extra)
            except Exception as exc:  # noqa: BLE001 - ImageNotFound, APIError, transport
                raise ExecutorClosedError(f"cannot start a container from {self._image!r}: {exc}") from None
            handle = _ContainerProcess(container)
            listener.settimeout(start_timeout)
            try:
                conn, _ = listener.accept()
            except OSError:
                logs = _logs(container)
                handle.kill()
                raise ExecutorClosedError(f"the fork server in a container of {self._image!r} did "
                                          f"not connect within {start_timeout:.0f}s: {logs}") from None
            conn.settimeout(None)
            return handle, conn
        finally:
            listener.close()
            try:
                os.unlink(path)  # nobody can connect again, whatever runs in the container
            except OSError:
                pass

    @property
    def container(self) -> Any:
        return self._proc.container  # type: ignore[attr-defined]

    @property
    def mechanisms(self) -> dict[str, object]:
        """As for ``local``, with what the container itself provides: a private network
        namespace with only loopback, private mount and IPC namespaces with a read-only root
        and private tmpfs, every capability dropped but :data:`SERVER_CAPS` (the server's
        only: its children hold none), no-new-privileges, container limits."""
        return {**super().mechanisms, "netns": True, "mountns": True, "ipcns": True,
                "readonly_root": True, "container": True, "cap_drop": "ALL",
                "cap_add": list(SERVER_CAPS) if self.facts.get("container_uids") else [],
                "no_new_privileges": True, "runtime": self._runtime,
                "socket_mounts": sorted(self._sockets.values()),
                "container_limits": {k: v for k, v in self._limits.items() if k != "security_opt"}}

    def close(self) -> None:
        """Remove the container (the server and every child die with it). No orderly
        shutdown: nothing inside the container outlives it."""
        self._closed = True
        if getattr(self, "_proc", None) is None:
            return
        try:
            self._sock.close()
        except OSError:
            pass
        self._remove_leftovers()

    def _to_result(self, req: ExecRequest, frame: dict, fds: dict[str, int]) -> ExecResult:
        return replace(super()._to_result(req, frame, fds), runtime=self._runtime)

    def _infra(self, req: ExecRequest, detail: str) -> ExecResult:
        return replace(super()._infra(req, detail), runtime=self._runtime)

    def _remove_leftovers(self) -> None:
        proc = getattr(self, "_proc", None)
        if proc is not None:
            proc.kill()
        if self._ctl_dir:
            shutil.rmtree(self._ctl_dir, ignore_errors=True)
        groups, self._slot_groups = getattr(self, "_slot_groups", None), None
        if groups is not None:
            groups.remove()
        self._release_lease()

    def _release_lease(self) -> None:
        """End this container's uid lease (idempotent). Called once the container is removed;
        should a process of it still run (removal timed out), the next lease of these uids
        skips them anyway: :func:`.leases.acquire` checks that no process has them."""
        lease, self._container_lease = getattr(self, "_container_lease", None), None
        if lease is not None:
            lease.release()
        super()._release_lease()


def _logs(container: Any) -> str:
    try:
        return container.logs(tail=20).decode("utf-8", "replace").strip()[-800:]
    except Exception:  # noqa: BLE001 - already removed
        return "(no logs: the container is gone)"


class DockerExecutor(Executor):
    """Run requests in locked-down containers (see the module docstring).

    Parameters
    ----------
    image:
        default image (``run_env`` of requests that name none); must exist on the engine.
    runtime:
        ``runc`` (default) or ``runsc`` (gVisor; must be registered with the engine).
    docker_host:
        the engine's address (default :data:`.images.DEFAULT_DOCKER_HOST`).
    workers / pool_size:
        requests served in parallel by one container, and containers kept warm per image.
    fresh_container:
        a new container for every request (stricter, slower); ``workers`` of them at a time.
    container_memory_mb / cpus / pids_limit / tmpfs_mb:
        limits of each container (default: ``workers * 1024 + 256`` MB, ``workers`` CPUs,
        ``workers * 70 + 32`` processes, 256 MB per tmpfs).
    min_isolation:
        refuse to start (``IsolationUnavailableError``) when the fork server inside the
        container reaches less.
    seccomp_profile:
        ``default`` (the engine's profile) or ``unconfined``; the fork server applies its own
        seccomp filter to every sample either way.
    audit_hook, judge_requests, processes, open_files, file_size_mb, boundary_limit_mb,
    output_limit, preload, landlock, seccomp, start_timeout:
        as for the ``local`` backend.
    read_mounts:
        ``{host directory: path in the container}``: each bind-mounted read-only into every
        container and readable by every sample (Landlock) unless it lies at or beneath one of
        ``request_read_roots``. The container paths must be absolute and outside ``/tmp``,
        ``/dev/shm``, ``/run`` and the harness's ``/opt/ianvs/harness``.
    request_read_roots:
        container paths, each at or beneath a ``read_mounts`` path, readable by no request by
        default: a request reads beneath them only the paths it names in
        :attr:`ExecRequest.read_paths` (container paths; ``ValueError`` from :meth:`run`, before
        anything runs, for a path outside every root; the fork server in the container checks
        again and adds a Landlock read rule for exactly those paths), as for the ``local``
        backend. The repo kind mounts its run's views directory at
        ``/opt/ianvs/views`` and names it here; each sample names its own view. A root beneath a
        mount every sample reads is refused (``ValueError``): it would hide nothing.
    socket_mounts:
        ``{host directory: path in the container}`` of directories holding a host service's
        unix socket (the repo kind's PostgreSQL server): each bind-mounted read-only into every
        container, and the samples' seccomp filter lets ``socket(AF_UNIX)`` through (as
        ``socket_dirs`` on ``local``). Not made readable by Landlock: connecting to a named
        socket needs no read access. The container paths are checked like ``read_mounts`` and
        must not overlap them. The engine must run on this machine (a bind mount names a host
        path); the service must authenticate every client.
    uid_base:
        accepted for compatibility with ``local`` and ignored: every container leases its own
        ``2 * workers + 1`` uids (see the module docstring), since warm pools and fresh mode
        run several containers at once.
    """

    name = "docker"

    def __init__(self, image: str = BASE_IMAGE, runtime: str = "runc",
                 docker_host: str = DEFAULT_DOCKER_HOST, workers: int | None = None,
                 pool_size: int = 1, fresh_container: bool = False,
                 container_memory_mb: int | None = None, cpus: float | None = None,
                 pids_limit: int | None = None, tmpfs_mb: int = 256,
                 min_isolation: IsolationLevel | str | int = IsolationLevel.NONE,
                 seccomp_profile: str = "default", audit_hook: bool = True,
                 judge_requests: int = 500, processes: int = 64, open_files: int = 256,
                 file_size_mb: int = 64, boundary_limit_mb: int = 16,
                 output_limit: int = 64 * 1024, preload: list[str] | None = None,
                 landlock: bool = True, seccomp: bool = True, start_timeout: float = 60.0,
                 read_mounts: Mapping[str, str] | None = None,
                 request_read_roots: Iterable[str] | None = None, uid_base: int | None = None,
                 socket_mounts: Mapping[str, str] | None = None) -> None:
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
        if seccomp_profile not in ("default", "unconfined"):
            raise ValueError(f"seccomp_profile must be 'default' or 'unconfined', got {seccomp_profile!r}")
        if workers is None:
            workers = max(1, len(os.sched_getaffinity(0)))
        if workers < 1 or pool_size < 1:
            raise ValueError("workers and pool_size must be >= 1")
        del uid_base  # every container leases its own uids
        self.read_mounts = _check_mounts(read_mounts or {})
        self.request_read_roots = _check_request_roots(self.read_mounts, request_read_roots or ())
        self.socket_mounts = _check_mounts(socket_mounts or {}, "socket_mounts")
        clash = next((inside for inside in self.socket_mounts.values()
                      if under_any(inside, list(self.read_mounts.values()))
                      or any(under_any(m, [inside]) for m in self.read_mounts.values())), None)
        if clash is not None:
            raise ValueError(f"socket_mounts: {clash!r} overlaps a read_mounts path "
                             f"({', '.join(self.read_mounts.values())})")
        self.image, self.runtime, self.docker_host = image, runtime, docker_host
        self.workers, self.pool_size, self.fresh = int(workers), int(pool_size), bool(fresh_container)
        self.min_isolation = IsolationLevel.parse(min_isolation)
        per_container = 1 if self.fresh else self.workers
        self.limits: dict[str, Any] = {
            "memory_mb": int(container_memory_mb or per_container * 1024 + 256),
            "cpus": float(cpus or per_container), "pids_limit": pids_limit,
            "tmpfs_mb": int(tmpfs_mb),
            "security_opt": ["seccomp=unconfined"] if seccomp_profile == "unconfined" else []}
        self.server_options: dict[str, Any] = {
            "audit_hook": audit_hook, "judge_requests": judge_requests, "processes": processes,
            "open_files": open_files, "file_size_mb": file_size_mb,
            "boundary_limit_mb": boundary_limit_mb, "output_limit": output_limit,
            "preload": preload, "landlock": landlock, "seccomp": seccomp,
            "start_timeout": start_timeout}
        self._closed = False
        self._lock = threading.Lock()
        self._pools: dict[str, list[_ContainerServer]] = {}
        self._images: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
        self._modules: dict[str, set[str]] = {}  # image -> its declared import names
        self.facts: dict[str, Any] = {}
        self._client = connect(docker_host)
        try:
            removed = sweep(self._client, owner_alive=owner_alive, containers_only=True)
            if removed["containers"]:
                LOGGER.info("docker: removed %d container(s) left by dead runs", removed["containers"])
            dirs = _sweep_control_dirs()
            if dirs:
                LOGGER.info("docker: removed %d control folder(s) left by dead runs", dirs)
            runtimes = self._client.info().get("Runtimes", {})
            if runtime not in runtimes:
                raise ImageError(f"the Docker engine at {docker_host} has no runtime {runtime!r} "
                                 f"(it has: {', '.join(sorted(runtimes))}); install Debian's runsc "
                                 "and restart it with .ci/docker-engine.sh")
            self.prepare([(None, {})])
            probe = self._server(image)  # learn the isolation the container gives
            self._isolation = probe.isolation
            self.facts = {**probe.facts, "runtime": runtime, "image": image}
            if self.fresh:
                probe.close()
            else:
                self._pools[image] = [probe]
        except BaseException:
            self.close()
            raise
        LOGGER.info("docker executor: image=%s runtime=%s %s, isolation=%s", image, runtime,
                    "fresh containers" if self.fresh else f"{pool_size}x{workers} warm",
                    self._isolation)
        if self._isolation < self.min_isolation:
            self.close()
            raise IsolationUnavailableError(
                f"docker executor achieved isolation '{self._isolation}' but min_isolation is "
                f"'{self.min_isolation}'. Notes: {'; '.join(self.facts.get('notes', []))}")

    # ------------------------------------------------------------------------------ images
    @property
    def isolation(self) -> IsolationLevel:
        return self._isolation

    def alive(self) -> bool:
        """Whether every warm container's fork server still runs."""
        return not self._closed and all(server.alive() for pool in self._pools.values()
                                        for server in pool)

    def prepare(self, envs: Iterable[tuple[str | None, Mapping[str, str]]]) -> list[str]:
        """Resolve ``(run_env, packages)`` pairs to image tags, building task images as needed.

        Raises :class:`~.images.ImageError` (one clear message) for an image that does not
        exist or a package that cannot be fetched or imported.
        """
        tags = []
        for run_env, packages in envs:
            key = (run_env or self.image, tuple(sorted(packages.items())))
            if key not in self._images:
                tag = task_image(self._client, key[0], dict(packages))
                self._images[key] = tag
                self._modules.setdefault(tag, set()).update(packages)
            tags.append(self._images[key])
        return tags

    def _image_of(self, req: ExecRequest) -> str:
        meta = req.metadata
        return self.prepare([(meta.get("run_env"), dict(meta.get("packages") or {}))])[0]

    def _server(self, image: str, workers: int | None = None, one_request: bool = False) -> _ContainerServer:
        """A container of ``image`` running the fork server. The image's declared packages
        are preloaded by the server (before any sample runs, so their own use of modules
        the interpreter-level policy refuses to samples, such as numpy's of ``ctypes``, is
        not charged to the sample, and each sample imports them for free)."""
        options = dict(self.server_options)
        modules = sorted(self._modules.get(image, ()))
        if modules:
            from .forkserver import DEFAULT_PRELOAD

            options["preload"] = [*(options.get("preload") or DEFAULT_PRELOAD), *modules]
        return _ContainerServer(self._client, image, self.runtime, self.limits,
                                read_mounts=self.read_mounts, request_read_roots=self.request_read_roots,
                                socket_mounts=self.socket_mounts,
                                workers=workers or self.workers, one_request=one_request, **options)

    # ------------------------------------------------------------------------------ run
    def run(self, requests: Iterable[ExecRequest]) -> Iterator[ExecResult]:
        if self._closed:
            raise ExecutorClosedError("executor is closed")
        return self._run(requests)

    def _infra(self, req: ExecRequest, detail: str, outcome: Outcome = Outcome.INFRA_ERROR) -> ExecResult:
        return ExecResult(id=req.id, outcome=outcome, exit_status=None, duration_s=0.0,
                          backend=self.name, isolation=self._isolation, timeout_s=float(req.timeout),
                          memory_mb=req.memory_mb, detail=detail, grading=req.tier,
                          runtime=self.runtime)

    def _run(self, requests: Iterable[ExecRequest]) -> Iterator[ExecResult]:
        reqs = list(requests)
        seen: set[str] = set()
        for req in reqs:
            if req.id in seen:
                raise ValueError(f"duplicate request id {req.id!r}")
            check_read_paths(req, self.request_read_roots, self.name)
            seen.add(req.id)
        groups: dict[str, list[ExecRequest]] = {}
        for req in reqs:
            try:
                tag = self._image_of(req)
            except ImageError as exc:
                yield self._infra(req, str(exc))
                continue
            groups.setdefault(tag, []).append(req)
        with self._lock:
            for tag, group in groups.items():
                # ``network: loopback`` needs a network namespace of the request's own, which a
                # process in a container cannot make: such requests get a container each
                fresh = group if self.fresh else [r for r in group if r.network == "loopback"]
                warm = [] if self.fresh else [r for r in group if r.network != "loopback"]
                streams = [self._fresh_stream(tag, fresh[i::self.workers])
                           for i in range(min(self.workers, len(fresh)))]
                if warm:
                    pool = self._pool(tag)
                    streams += [self._warm_stream(tag, k, warm[k::len(pool)])
                                for k in range(min(len(pool), len(warm)))]
                yield from _merge(streams)

    def _pool(self, tag: str) -> list[_ContainerServer]:
        pool = self._pools.setdefault(tag, [])
        while len(pool) < self.pool_size:
            pool.append(self._server(tag))
        return pool

    def _warm_stream(self, tag: str, index: int, group: list[ExecRequest]) -> Iterator[ExecResult]:
        """Run ``group`` on warm container ``index`` of ``tag``'s pool; a container that dies
        is replaced once and the requests it had not answered are retried there."""
        todo = {req.id: req for req in group}
        for attempt in range(2):
            pool = self._pools[tag]
            try:
                if pool[index]._closed:
                    pool[index] = self._server(tag)
                for res in pool[index].run(list(todo.values())):
                    if res.outcome is Outcome.INFRA_ERROR and res.detail == "fork server died":
                        continue  # retried below on a fresh container
                    todo.pop(res.id, None)
                    yield res
                return
            except ExecutorClosedError as exc:
                LOGGER.warning("docker: a warm container of %s died (%s); %s", tag, exc,
                               "replacing it" if attempt == 0 else "giving up")
                pool[index].close()
        for req in todo.values():
            yield self._infra(req, f"the container of {tag} died twice under this request")

    def _fresh_stream(self, tag: str, group: list[ExecRequest]) -> Iterator[ExecResult]:
        """One new container per request; the next one starts while the current one runs."""
        from concurrent.futures import Future, ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="docker-start") as starter:
            upcoming: Future | None = None
            try:
                for i, req in enumerate(group):
                    current = upcoming or starter.submit(self._server, tag, 1, True)
                    upcoming = starter.submit(self._server, tag, 1, True) if i + 1 < len(group) else None
                    yield self._fresh_one(req, current)
            finally:
                if upcoming is not None:
                    try:
                        upcoming.result().close()
                    except (ExecutorClosedError, ImageError):
                        pass

    def _fresh_one(self, req: ExecRequest, starting: Any) -> ExecResult:
        try:
            server: _ContainerServer = starting.result()
        except (ExecutorClosedError, ImageError) as exc:
            return self._infra(req, f"container start failed: {exc}")
        fired = threading.Event()

        def watchdog() -> None:
            fired.set()
            server._proc.kill()

        timer = threading.Timer(float(req.timeout) + _GRACE, watchdog)
        timer.start()
        try:
            started = time.monotonic()
            try:
                results = [r for r in server.run([req]) if r.id == req.id]
            except ExecutorClosedError:
                results = []
            if fired.is_set():
                return replace(self._infra(req, "the container was killed at the timeout",
                                           Outcome.TIMEOUT), duration_s=time.monotonic() - started)
            if not results or results[0].detail == "fork server died":
                oom = _oom_killed(server)
                if oom:
                    return self._infra(req, "the container was killed by its OOM killer",
                                       Outcome.MEMORY_EXCEEDED)
                return self._infra(req, "the container died under this request")
            return results[0]
        finally:
            timer.cancel()
            server.close()

    # ------------------------------------------------------------------------------ close
    def close(self) -> None:
        """Stop every container this executor started (idempotent)."""
        self._closed = True
        for pool in self._pools.values():
            for server in pool:
                server.close()
        self._pools.clear()
        client = getattr(self, "_client", None)
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001
                pass

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass


def _check_mounts(mounts: Mapping[str, str], option: str = "read_mounts") -> dict[str, str]:
    """``read_mounts`` (or ``socket_mounts``: ``option`` names it in errors) checked: existing
    host directories, absolute container paths that do not cover what the container needs for
    itself (its private tmpfs, the control socket, the harness). Raises ``ValueError`` naming
    the entry."""
    reserved = ("/tmp", "/dev", "/run", "/proc", "/sys", _HARNESS_IN, "/usr", "/etc", "/lib", "/bin")
    out: dict[str, str] = {}
    for host, inside in mounts.items():
        if not os.path.isdir(host):
            raise ValueError(f"{option}: {host!r} is not a directory on this host")
        norm = os.path.normpath(str(inside))
        if not norm.startswith("/") or norm == "/" or any(
                norm == r or norm.startswith(r + "/") or r.startswith(norm + "/") for r in reserved):
            raise ValueError(f"{option}: {inside!r} must be an absolute path outside "
                             f"{', '.join(reserved)}")
        out[os.path.abspath(host)] = norm
    return out


def _check_request_roots(mounts: Mapping[str, str], roots: Iterable[str]) -> list[str]:
    """``request_read_roots`` checked against the (checked) ``read_mounts``: each a container
    path at or beneath a mount, and not beneath a mount every sample reads (one that is not
    itself at or beneath a root). Raises ``ValueError`` naming the entry; returns the
    normalised roots."""
    out = [os.path.normpath(str(r)) for r in roots]
    readable = [inside for inside in mounts.values() if under_any(inside, out) is None]
    for root in out:
        if not root.startswith("/") or under_any(root, list(mounts.values())) is None:
            raise ValueError(f"request_read_roots: {root!r} is not at or beneath a read_mounts path "
                             f"({', '.join(mounts.values()) or 'none'})")
        wider = under_any(root, readable)
        if wider is not None:
            raise ValueError(f"request_read_roots: {root!r} lies beneath {wider!r}, which every "
                             "sample may read: it would hide nothing")
    return out


def _oom_killed(server: _ContainerServer) -> bool:
    try:
        server.container.reload()
        return bool(server.container.attrs.get("State", {}).get("OOMKilled"))
    except Exception:  # noqa: BLE001 - removed already
        return False


def _merge(streams: list[Iterator[ExecResult]]) -> Iterator[ExecResult]:
    """Interleave result streams in completion order (one thread per stream)."""
    if len(streams) == 1:
        yield from streams[0]
        return
    out: queue.Queue[tuple[str, Any]] = queue.Queue()
    stop = threading.Event()

    def pump(stream: Iterator[ExecResult]) -> None:
        try:
            for item in stream:
                out.put(("item", item))
                if stop.is_set():
                    break
        except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
            out.put(("error", exc))
        finally:
            out.put(("done", None))

    threads = [threading.Thread(target=pump, args=(s,), daemon=True) for s in streams]
    for thread in threads:
        thread.start()
    done = 0
    try:
        while done < len(threads):
            kind, value = out.get()
            if kind == "item":
                yield value
            elif kind == "error":
                raise value
            else:
                done += 1
    finally:
        stop.set()
        for thread in threads:
            thread.join()
