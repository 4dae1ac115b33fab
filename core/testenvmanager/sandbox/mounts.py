"""Private mount namespace for the ``local`` fork server (stdlib + ctypes; loaded by file path).

Called once by the fork server right after it unshared a mount namespace (``CLONE_NEWNS``),
before it forks any child. Everything here changes only the server's private view of the file
system; the host's mounts are never touched (``/`` is made recursively private first).

What :func:`setup` builds, each step optional and reported in the returned facts:

* ``/tmp``, ``/dev/shm``, ``/run``, ``/var/tmp`` (and ``/var/run`` when it is a real directory):
  fresh, empty tmpfs mounts. Host sockets under ``/run`` (docker, dbus) and files other jobs left
  in ``/tmp`` are invisible; nothing a child writes there reaches the host.
* the interpreter's prefix (``sys.base_prefix`` and ``sys.prefix``) made reachable for
  unprivileged worker uids when an ancestor directory is not searchable by others (pyenv under
  ``/root``): a tmpfs is mounted over that ancestor and only the prefix is bound back at its own
  path, so the rest of e.g. ``/root`` (keys, caches, the project) disappears from the view;
* every ``site-packages``/``dist-packages`` directory of the interpreter covered by an empty
  read-only tmpfs: third-party packages (and data they ship, such as benchmark problem files)
  are not readable by sandboxed code (except a directory named in ``expose``);
* ``/proc`` remounted with ``hidepid=invisible`` (other uids' processes disappear);
* the whole tree read-only and ``nosuid`` (``mount_setattr`` recursive), except the scratch
  tmpfs, ``/proc`` (children write their ``oom_score_adj`` before Landlock hides it) and the
  cgroup mounts the server still writes to.

Edge cases: a step that fails (old kernel, no privilege in a user namespace) is skipped and named
in ``facts["notes"]``; :func:`setup` never raises.
"""

from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["setup", "SlotMount", "remove_tree"]

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MNT_DETACH = 2
_AT_FDCWD = -100
_AT_RECURSIVE = 0x8000
_MOUNT_ATTR_RDONLY, _MOUNT_ATTR_NOSUID = 0x1, 0x2
_SYS_MOUNT_SETATTR = 442  # same number on x86_64 and aarch64

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong,
                        ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.syscall.restype = ctypes.c_long


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def _enc(value: str | None) -> bytes | None:
    return None if value is None else os.fsencode(value)


def mount(source: str | None, target: str, fstype: str | None, flags: int,
          data: str | None = None) -> None:
    """``mount(2)``; raises OSError naming the target."""
    if _libc.mount(_enc(source), _enc(target), _enc(fstype), flags, _enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {fstype or source} on {target}: {os.strerror(err)}")


def umount(target: str) -> None:
    """Lazy unmount (``MNT_DETACH``); raises OSError."""
    if _libc.umount2(os.fsencode(target), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"umount {target}: {os.strerror(err)}")


def _setattr(path: str, attr_set: int, attr_clr: int, recursive: bool) -> None:
    attr = _MountAttr(attr_set, attr_clr, 0, 0)
    flags = _AT_RECURSIVE if recursive else 0
    if _libc.syscall(_SYS_MOUNT_SETATTR, _AT_FDCWD, os.fsencode(path), flags,
                     ctypes.byref(attr), ctypes.sizeof(attr)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount_setattr {path}: {os.strerror(err)}")


def _hidden_ancestor(path: str) -> str | None:
    """Outermost ancestor of ``path`` (below ``/``) that others cannot search, or None."""
    parts = [p for p in path.split("/") if p]
    current = ""
    for part in parts[:-1]:
        current += "/" + part
        try:
            if not os.stat(current).st_mode & 0o001:
                return current
        except OSError:
            return None
    return None


def _expose_prefixes(prefixes: list[str], staging: str, notes: list[str]) -> list[str]:
    """Bind each prefix back under a tmpfs that replaces its unsearchable ancestor."""
    by_ancestor: dict[str, list[str]] = {}
    for prefix in prefixes:
        ancestor = _hidden_ancestor(prefix)
        if ancestor is not None:
            by_ancestor.setdefault(ancestor, [])
            if prefix not in by_ancestor[ancestor]:
                by_ancestor[ancestor].append(prefix)
    exposed: list[str] = []
    for ancestor, inner in by_ancestor.items():
        # nested prefixes (a venv inside the base prefix) are covered by the outer bind
        inner = [p for p in inner if not any(p != q and p.startswith(q + "/") for q in inner)]
        staged: list[tuple[str, str]] = []
        try:
            for i, prefix in enumerate(inner):
                stage = os.path.join(staging, f"prefix{len(exposed) + i}")
                os.mkdir(stage, 0o755)
                mount(prefix, stage, None, _MS_BIND | _MS_REC)
                staged.append((prefix, stage))
            mount("tmpfs", ancestor, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=1m")
            for prefix, stage in staged:
                os.makedirs(prefix, 0o755, exist_ok=True)
                mount(stage, prefix, None, _MS_BIND | _MS_REC)
                exposed.append(prefix)
        except OSError as exc:
            notes.append(f"cannot expose {inner} under {ancestor}: {exc}")
        finally:
            for _prefix, stage in staged:
                try:
                    umount(stage)
                    os.rmdir(stage)
                except OSError:
                    pass
    return exposed


def _hold(paths: list[str], notes: list[str]) -> list[tuple[str, int]]:
    """``O_PATH`` descriptors of ``paths`` taken before the private tmpfs mounts hide them."""
    held: list[tuple[str, int]] = []
    for path in paths:
        try:
            held.append((os.path.realpath(path), os.open(path, os.O_PATH | os.O_DIRECTORY)))
        except OSError as exc:
            notes.append(f"socket dir {path}: {exc}")
    return held


def _bind_held(held: list[tuple[str, int]], notes: list[str]) -> list[str]:
    """Bind each held directory back at its own path, read-only; close the descriptors."""
    bound: list[str] = []
    for path, fd in held:
        try:
            os.makedirs(path, 0o755, exist_ok=True)
            mount(f"/proc/self/fd/{fd}", path, None, _MS_BIND)
            mount(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
            bound.append(path)
        except OSError as exc:
            notes.append(f"cannot bind socket dir {path}: {exc}")
        finally:
            os.close(fd)
    return bound


def _package_dirs() -> list[str]:
    """site-/dist-packages directories of this interpreter and of the system Pythons."""
    import glob
    import sysconfig

    found: set[str] = set()
    for scheme_vars in ({"base": sys.base_prefix, "platbase": sys.base_prefix},
                        {"base": sys.prefix, "platbase": sys.prefix}):
        for key in ("purelib", "platlib"):
            try:
                found.add(sysconfig.get_path(key, vars=scheme_vars))
            except (KeyError, ValueError):
                pass
    for pattern in ("/usr/lib/python3*/*-packages", "/usr/local/lib/python3*/*-packages",
                    "/usr/lib/python3/dist-packages"):
        found.update(glob.glob(pattern))
    return sorted(p for p in found if p and os.path.isdir(p))


def setup(scratch: str, keep_writable: list[str], hide_packages: bool = True,
          expose: list[str] | None = None, sockets: list[str] | None = None) -> dict:
    """Build the server's private view (see the module docstring); returns facts.

    ``scratch`` is where the fresh scratch tmpfs goes (created if missing; it stays writable),
    ``keep_writable`` lists mounts to leave writable besides it (cgroup directories in use).
    Must run in a fresh mount namespace, before any child is forked. ``expose`` lists extra
    read-only paths (the executor's ``read_paths``) that are bound back like the interpreter's
    prefixes when they sit under a directory other users cannot search (``/root/...``); a
    package directory named there is not covered by ``hide_packages`` (a repository
    environment's own site-packages, while the interpreter's and the system's stay hidden).
    ``sockets`` lists directories holding a service's unix socket (the executor's
    ``socket_dirs``): each is bound back read-only at its own path even under the private
    ``/tmp``/``/run`` tmpfs (held by an ``O_PATH`` descriptor while the tmpfs goes on).
    """
    notes: list[str] = []
    facts: dict = {"mountns": False, "private_tmp": [], "exposed_prefixes": [],
                   "hidden_packages": [], "hidepid": False, "readonly_root": False, "notes": notes}
    try:
        mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    except OSError as exc:
        notes.append(f"private mount namespace unavailable: {exc}")
        return facts
    facts["mountns"] = True
    prefixes = sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.prefix, *(expose or []))
                       if os.path.isdir(p)})
    held = _hold(sockets or [], notes)
    for path in ("/tmp", "/dev/shm", "/run", "/var/tmp", "/var/run"):
        if os.path.isdir(path) and not os.path.islink(path):
            try:
                mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=1777,size=64m")
                facts["private_tmp"].append(path)
            except OSError as exc:
                notes.append(str(exc))
    os.makedirs(scratch, 0o711, exist_ok=True)
    mount("tmpfs", scratch, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0711")
    staging = os.path.join(scratch, ".staging")
    os.mkdir(staging, 0o700)
    facts["exposed_prefixes"] = _expose_prefixes(prefixes, staging, notes)
    os.rmdir(staging)
    facts["socket_dirs"] = _bind_held(held, notes)
    if hide_packages:
        asked = {os.path.realpath(p) for p in expose or []}
        for path in _package_dirs():
            if os.path.realpath(path) in asked:  # named explicitly: readable, not covered
                continue
            try:
                mount("tmpfs", path, "tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV, "mode=0555,size=4k")
                facts["hidden_packages"].append(path)
            except OSError as exc:
                notes.append(str(exc))
    try:
        mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "hidepid=invisible")
        facts["hidepid"] = True
    except OSError as exc:
        notes.append(str(exc))
    try:
        _setattr("/", _MOUNT_ATTR_RDONLY | _MOUNT_ATTR_NOSUID, 0, recursive=True)
        # /proc stays writable: a child raises its own oom_score_adj before its walls go up
        for path in [scratch, "/proc", *keep_writable]:
            _setattr(path, 0, _MOUNT_ATTR_RDONLY, recursive=True)
        facts["readonly_root"] = True
    except OSError as exc:
        notes.append(str(exc))
    return facts


class SlotMount:
    """A tmpfs per worker slot, so a request's files are capped (``size_mb``, ``inodes``) and its
    clean-up never walks a tree the sample built: an empty workdir is one ``rmdir``; anything
    else is dropped with the whole mount (``umount`` + a fresh ``mount``, O(1) for the server)."""

    def __init__(self, path: str, size_mb: int, inodes: int) -> None:
        self.path = path
        self.options = f"mode=0711,size={int(size_mb)}m,nr_inodes={int(inodes)}"
        #: counts the mounts made at ``path``: rules bound to the root's inode (Landlock) are
        #: stale when it changes (a fresh tmpfs may reuse the device number and inode number)
        self.generation = 0
        os.makedirs(path, 0o711, exist_ok=True)
        mount("tmpfs", path, "tmpfs", _MS_NOSUID | _MS_NODEV, self.options)

    def reset(self) -> None:
        """Drop everything below the slot (lazy unmount) and mount a fresh tmpfs."""
        umount(self.path)
        self.generation += 1
        mount("tmpfs", self.path, "tmpfs", _MS_NOSUID | _MS_NODEV, self.options)


def remove_tree(path: str, max_entries: int = 1_000_000) -> bool:
    """Delete ``path`` without recursion and without following symlinks (fallback when no mount
    namespace is available). Subdirectories are renamed up into ``path`` itself and emptied
    there one at a time, so depth never matters and no path grows longer than two components.
    Gives up after ``max_entries`` removals; returns True when ``path`` is gone."""
    try:
        root = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return not os.path.lexists(path)
    removed, counter = 0, 0
    try:
        pending = ["."]
        while pending and removed < max_entries:
            name = pending.pop()
            try:
                dfd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root)
            except OSError:
                continue
            try:
                os.fchmod(dfd, 0o700)
            except OSError:
                pass
            try:
                with os.scandir(dfd) as entries:
                    listing = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
            except OSError:
                listing = []
            for entry, is_dir in listing:
                try:
                    if is_dir:
                        counter += 1
                        moved = f".rm{counter}"
                        os.rename(entry, moved, src_dir_fd=dfd, dst_dir_fd=root)
                        pending.append(moved)
                    else:
                        os.unlink(entry, dir_fd=dfd)
                    removed += 1
                except OSError:
                    pass
            os.close(dfd)
            if name != ".":
                try:  # its subdirectories were renamed out above, so it is empty now
                    os.rmdir(name, dir_fd=root)
                except OSError:
                    pass
    finally:
        os.close(root)
    try:
        os.rmdir(path)
    except OSError:
        pass
    return not os.path.lexists(path)
