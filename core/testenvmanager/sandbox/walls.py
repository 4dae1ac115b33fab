"""Kernel walls for a freshly forked sandbox child: Landlock and a seccomp-BPF filter.

Standard library + :mod:`ctypes` only, no package imports: the fork server loads this file by
path (``importlib.util.spec_from_file_location``) under any module name.

Cost model
----------
Everything expensive happens once, in the parent (the fork server), at import time or when a
:class:`LandlockPolicy` / :func:`seccomp_program` is built: ctypes prototypes, ``O_PATH`` file
descriptors for the allowed hierarchies, packed ``landlock_path_beneath_attr`` records, the BPF
program and its ``sock_fprog``. The per-child functions (:meth:`LandlockPolicy.apply`,
:func:`apply_seccomp`) only issue the handful of syscalls that cannot be shared between children
(a Landlock ruleset is mutable and would be shared through an inherited descriptor, so each child
creates its own).

What a child pays is mostly (a) first-touch page faults: after ``fork`` every Python object whose
refcount changes and every not-yet-mapped page of interpreter/libffi text costs a minor fault, a
few microseconds each on a VM; and (b) the kernel's filter attach (cBPF to eBPF conversion, JIT,
and the seccomp action cache, which emulates the filter once per syscall number). Hence the hot
paths are written inline over one prepared tuple (no helper calls on success, few objects
touched), ctypes calls carry no ``argtypes`` converters, and the BPF program dispatches on the
syscall number with a binary search instead of a linear ``jeq`` chain.

Both walls are per-thread at installation time and inherited by every thread and process created
afterwards; install them while the child is still single-threaded (a child of a single-threaded
fork server always is).

Supported architectures: ``x86_64`` and ``aarch64`` (little endian). Anywhere else
:func:`landlock_abi` returns 0 and :func:`seccomp_available` returns ``False``.

Seccomp policy
--------------
See :data:`SECCOMP_POLICY_DOC` (generated from the table :data:`SECCOMP_TABLE` below). Decisions
beyond the brief, documented here once:

* ``personality``: only the query (``0xffffffff``) and plain ``PER_LINUX`` (0) are allowed, every
  other persona fails with ``EPERM``. Persona flags such as ``ADDR_NO_RANDOMIZE`` or
  ``READ_IMPLIES_EXEC`` only weaken exploit mitigations of later ``execve``s (and ``UNAME26`` has a
  history of info leaks); Python code never needs them, and an errno (instead of a kill) keeps
  tools that merely probe working.
* ``process_madvise`` and ``process_mrelease`` are killed like ``process_vm_readv``/
  ``process_vm_writev`` (they too act on another process's address space).
* ``clone``: the namespace mask includes ``CLONE_NEWTIME`` (0x80). For the legacy ``clone``
  syscall that bit lies inside the exit-signal byte, where it only encodes invalid signals
  (>= 128), so killing on it never hits a legitimate call.
* On x86_64 every syscall number from ``0x40000000`` up is killed: the x32 ABI, and also the
  pseudo syscall ``-1`` (only used by tracers, which cannot exist here).
* Default deny: syscall numbers outside the ranges the table was reviewed against
  (:data:`_REVIEWED`) return ``ENOSYS``, the answer of a kernel that lacks the syscall, so code
  that probes a new syscall falls back instead of dying. A kernel newer than the review thus
  adds no attack surface until its syscalls have rows here. The unknown numbers are segments
  of the dispatch tree like any run of syscalls decided alike (:func:`_emit_dispatch`), so the
  default costs no check in front of it.
* Refusal errnos: ``KILL`` for what only an attack does; ``EPERM`` for calls Python code may
  make and should see fail as ``PermissionError`` (file monitoring, confined pid arguments);
  ``ENOSYS`` for optional features callers probe and live without: ``statmount``/``listmount``
  (read-only queries that libmount tries before ``/proc/self/mountinfo``; killing them would
  kill ``df``/``findmnt`` run with ``allow_subprocess``, while ``open_tree_attr``, which creates
  a mount, is killed like the rest of the mount API), ``memfd_secret``, ``cachestat``,
  ``lsm_set_self_attr``.
* ``uretprobe`` and ``uprobe`` (x86_64 335, 336) are allowed: the kernel enters them from its
  uprobe trampolines and, since the fix that followed their introduction, exempts them from
  seccomp filters; refusing them would break tracing of the judge on kernels without that fix.
* Own pid: calls that name another process by pid (``prlimit64``, ``setpriority``, the
  ``sched_set*`` family, ...) are compared with the pid of the process that applied the
  filter; :func:`apply_seccomp` patches it into the prepared program. Only the low 32 bits of an
  argument are compared (``pid_t`` is ``int``; the kernel truncates the register the same
  way). Descendants inherit the filter with the pid of the process that applied it.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import struct
from typing import Callable, Final, NamedTuple, NoReturn, Sequence

__all__ = [
    "LandlockPolicy", "SECCOMP_POLICY_DOC", "SECCOMP_TABLE", "apply_seccomp", "bind_self_pid",
    "describe", "landlock_abi", "seccomp_available", "seccomp_program",
]

# --------------------------------------------------------------------------------------------
# Architectures and syscall numbers
# --------------------------------------------------------------------------------------------

#: architecture name -> (AUDIT_ARCH_* value, index into the tuples of :data:`_NR`, kill x32 numbers?)
#: AUDIT_ARCH = ELF machine | __AUDIT_ARCH_64BIT (0x80000000) | __AUDIT_ARCH_LE (0x40000000)
_ARCHES: Final[dict[str, tuple[int, int, bool]]] = {
    "x86_64": (0xC000003E, 0, True),    # EM_X86_64 = 62
    "aarch64": (0xC00000B7, 1, False),  # EM_AARCH64 = 183
}

#: syscall name -> (x86_64 number, aarch64 number); None where the arch has no such syscall.
#: x86_64: arch/x86/entry/syscalls/syscall_64.tbl; aarch64: include/uapi/asm-generic/unistd.h.
_NR: Final[dict[str, tuple[int | None, int | None]]] = {
    # infrastructure used by this module
    "prctl": (157, 167),
    "seccomp": (317, 277),
    "landlock_create_ruleset": (444, 444),
    "landlock_add_rule": (445, 445),
    "landlock_restrict_self": (446, 446),
    # cross-process inspection / modification
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "process_madvise": (440, 440),
    "pidfd_getfd": (438, 438),
    "kcmp": (312, 272),
    # large kernel attack surface
    "perf_event_open": (298, 241),
    "bpf": (321, 280),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    # mounts and namespaces
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "unshare": (272, 97),
    "setns": (308, 268),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265),
    # kernel modules, kexec, machine administration
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "acct": (163, 89),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "syslog": (103, 116),
    "iopl": (172, None),
    "ioperm": (173, None),
    "vhangup": (153, 58),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
    "uselib": (134, None),
    "lookup_dcookie": (212, 18),
    "fanotify_init": (300, 262),
    "personality": (135, 92),
    # processes
    "clone": (56, 220),
    "clone3": (435, 435),
    "fork": (57, None),
    "vfork": (58, None),
    "execve": (59, 221),
    "execveat": (322, 281),
    # sockets
    "socket": (41, 198),
    # SysV IPC and POSIX message queues
    "shmget": (29, 194),
    "shmat": (30, 196),
    "shmctl": (31, 195),
    "shmdt": (67, 197),
    "semget": (64, 190),
    "semop": (65, 193),
    "semctl": (66, 191),
    "semtimedop": (220, 192),
    "msgget": (68, 186),
    "msgsnd": (69, 189),
    "msgrcv": (70, 188),
    "msgctl": (71, 187),
    "mq_open": (240, 180),
    "mq_unlink": (241, 181),
    "mq_timedsend": (242, 182),
    "mq_timedreceive": (243, 183),
    "mq_notify": (244, 184),
    "mq_getsetattr": (245, 185),
    # calls that act on another process (confined to the caller by their pid argument)
    "prlimit64": (302, 261),
    "setpriority": (141, 140),
    "ioprio_set": (251, 30),
    "sched_setaffinity": (203, 122),
    "sched_setscheduler": (144, 119),
    "sched_setparam": (142, 118),
    "sched_setattr": (314, 274),
    "migrate_pages": (256, 238),
    "move_pages": (279, 239),
    "get_robust_list": (274, 100),
    "kill": (62, 129),
    "tkill": (200, 130),
    "tgkill": (234, 131),
    "rt_sigqueueinfo": (129, 138),
    "rt_tgsigqueueinfo": (297, 240),
    # file monitoring
    "inotify_init": (253, None),
    "inotify_init1": (294, 26),
    "inotify_add_watch": (254, 27),
    "inotify_rm_watch": (255, 28),
    "fanotify_mark": (301, 263),
    # x86_64 only, entered from the kernel's uprobe trampolines
    "uretprobe": (335, None),
    "uprobe": (336, None),
    # 424 and up: the same number on every architecture (the remaining ones are listed above)
    "pidfd_send_signal": (424, 424),
    "pidfd_open": (434, 434),
    "close_range": (436, 436),
    "openat2": (437, 437),
    "faccessat2": (439, 439),
    "epoll_pwait2": (441, 441),
    "memfd_secret": (447, 447),
    "process_mrelease": (448, 448),
    "futex_waitv": (449, 449),
    "set_mempolicy_home_node": (450, 450),
    "cachestat": (451, 451),
    "fchmodat2": (452, 452),
    "map_shadow_stack": (453, 453),
    "futex_wake": (454, 454),
    "futex_wait": (455, 455),
    "futex_requeue": (456, 456),
    "statmount": (457, 457),
    "listmount": (458, 458),
    "lsm_get_self_attr": (459, 459),
    "lsm_set_self_attr": (460, 460),
    "lsm_list_modules": (461, 461),
    "mseal": (462, 462),
    "setxattrat": (463, 463),
    "getxattrat": (464, 464),
    "listxattrat": (465, 465),
    "removexattrat": (466, 466),
    "open_tree_attr": (467, 467),
    "file_getattr": (468, 468),
    "file_setattr": (469, 469),
}

#: The syscall numbers whose every assigned syscall the policy has reviewed, per architecture, as
#: inclusive ranges. x86_64: 0 (read) .. 336 (uprobe), then 424 (pidfd_send_signal) ..
#: 469 (file_setattr); 337-423 are unassigned ("don't use numbers 387 through 423"). aarch64
#: (asm-generic): 0 .. 294 (kexec_file_load); 295-423 are unassigned on 64-bit (403-423 are the
#: time64 calls of 32-bit architectures only). Every number outside these ranges, including
#: syscalls added by kernels newer than the review (listns is 470), returns ``ENOSYS``.
_REVIEWED: Final[dict[str, tuple[tuple[int, int], ...]]] = {
    "x86_64": ((0, 336), (424, 469)),
    "aarch64": ((0, 294), (424, 469)),
}


def _native_arch() -> str | None:
    """Name of the running architecture if this module supports it, else ``None``."""
    try:
        machine = os.uname().machine
    except AttributeError:  # pragma: no cover - not a POSIX system
        return None
    return machine if machine in _ARCHES else None


def _nr(name: str, arch: str) -> int | None:
    return _NR[name][_ARCHES[arch][1]]


_ARCH: Final[str | None] = _native_arch()

# --------------------------------------------------------------------------------------------
# ctypes plumbing (prepared once at import)
# --------------------------------------------------------------------------------------------

_libc_syscall: Callable[..., int] | None = None
if _ARCH is not None:
    try:
        _fn = ctypes.CDLL(None, use_errno=True).syscall
        _fn.restype = ctypes.c_long
        # No argtypes on purpose: per-argument converters cost about 0.2 us each in a fresh child.
        # Callers pass every argument the kernel reads (unused ones as 0), as small ints (they fit
        # a C int and libffi widens them to the full register) or prebuilt ctypes.c_void_p objects.
        _libc_syscall = _fn
    except (OSError, AttributeError):  # pragma: no cover - libc without syscall(2)
        _libc_syscall = None


def _native_nr(name: str) -> int:
    """Native syscall number of *name*, -1 when the arch is unsupported or lacks the syscall."""
    if _ARCH is None:
        return -1
    value = _nr(name, _ARCH)
    return -1 if value is None else value


_SYS_PRCTL: Final = _native_nr("prctl")
_SYS_SECCOMP: Final = _native_nr("seccomp")
_SYS_LL_CREATE: Final = _native_nr("landlock_create_ruleset")
_SYS_LL_ADD: Final = _native_nr("landlock_add_rule")
_SYS_LL_RESTRICT: Final = _native_nr("landlock_restrict_self")


def _sys(nr: int, *args: int | ctypes.c_void_p | None) -> int:
    """Raw ``syscall(2)``; returns the result or ``-errno`` (never raises).

    ``nr`` < 0 (unsupported arch) gives ``-ENOSYS``. Integer arguments must fit a C int; pass
    pointers as ``ctypes.c_void_p`` (or ``None`` for NULL).
    """
    fn = _libc_syscall
    if fn is None or nr < 0:
        return -errno.ENOSYS
    res: int = fn(nr, *args)
    if res == -1:
        return -(ctypes.get_errno() or errno.EIO)
    return res


def _raise_errno(step: str) -> NoReturn:
    """Raise ``OSError`` for the errno of the ctypes call that just failed, naming *step*."""
    err = ctypes.get_errno() or errno.EIO
    raise OSError(err, f"{step}: {os.strerror(err)}")


# prctl(2) options and seccomp constants (include/uapi/linux/prctl.h, seccomp.h)
_PR_SET_SECCOMP = 22
_PR_GET_SECCOMP = 21
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_MODE_FILTER = 2
_SECCOMP_GET_ACTION_AVAIL = 2

_RET_KILL_PROCESS: Final = 0x80000000
_RET_ERRNO: Final = 0x00050000
_RET_ALLOW: Final = 0x7FFF0000

# --------------------------------------------------------------------------------------------
# Probes
# --------------------------------------------------------------------------------------------

_landlock_abi_cache: int | None = None


def landlock_abi() -> int:
    """Landlock ABI version of the running kernel, 0 when Landlock cannot be used.

    0 is returned for ``ENOSYS`` (kernel without Landlock), ``EOPNOTSUPP`` (built in but disabled
    at boot), any other error, and on unsupported architectures. The answer is cached per process
    (it cannot change while the kernel runs).
    """
    global _landlock_abi_cache
    if _landlock_abi_cache is None:
        res = _sys(_SYS_LL_CREATE, None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
        _landlock_abi_cache = res if res > 0 else 0
    return _landlock_abi_cache


_seccomp_cache: bool | None = None


def seccomp_available() -> bool:
    """True when seccomp filter mode with ``SECCOMP_RET_KILL_PROCESS`` works on this machine.

    Checks (once per process, cached): a supported architecture, ``prctl(PR_GET_SECCOMP)``
    succeeding (``CONFIG_SECCOMP``) and ``seccomp(SECCOMP_GET_ACTION_AVAIL, KILL_PROCESS)``
    succeeding (``CONFIG_SECCOMP_FILTER``, Linux >= 4.14). Installs nothing.
    """
    global _seccomp_cache
    if _seccomp_cache is None:
        ok = _ARCH is not None and _sys(_SYS_PRCTL, _PR_GET_SECCOMP, 0, 0, 0, 0) >= 0
        if ok:
            action = ctypes.c_uint32(_RET_KILL_PROCESS)
            ok = _sys(_SYS_SECCOMP, _SECCOMP_GET_ACTION_AVAIL, 0,
                      ctypes.c_void_p(ctypes.addressof(action))) == 0
        _seccomp_cache = ok
    return _seccomp_cache


def describe() -> dict[str, object]:
    """Summary for reports: ``{"landlock_abi": int, "seccomp": bool, "arch": str}``.

    ``arch`` is the machine name from ``uname`` even when unsupported (then the other two fields
    say 0 / False).
    """
    try:
        machine = os.uname().machine
    except AttributeError:  # pragma: no cover
        machine = "unknown"
    return {"landlock_abi": landlock_abi(), "seccomp": seccomp_available(), "arch": machine}


# --------------------------------------------------------------------------------------------
# Landlock
# --------------------------------------------------------------------------------------------

_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1

# filesystem access rights (include/uapi/linux/landlock.h) and the ABI that introduced them
_FS_EXECUTE = 1 << 0
_FS_WRITE_FILE = 1 << 1
_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_REMOVE_DIR = 1 << 4
_FS_REMOVE_FILE = 1 << 5
_FS_MAKE_CHAR = 1 << 6
_FS_MAKE_DIR = 1 << 7
_FS_MAKE_REG = 1 << 8
_FS_MAKE_SOCK = 1 << 9
_FS_MAKE_FIFO = 1 << 10
_FS_MAKE_BLOCK = 1 << 11
_FS_MAKE_SYM = 1 << 12
_FS_REFER = 1 << 13       # ABI 2
_FS_TRUNCATE = 1 << 14    # ABI 3
_FS_IOCTL_DEV = 1 << 15   # ABI 5
# scopes (ABI 6)
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
_SCOPE_SIGNAL = 1 << 1

#: rights that make sense on a non-directory (the kernel rejects the others for file rules)
_FS_FILE_RIGHTS = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
_FS_READ_RIGHTS = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
_FS_RW_FILE_RIGHTS = _FS_READ_FILE | _FS_WRITE_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV


def _fs_rights_for_abi(abi: int) -> int:
    """Every filesystem right known to this module that ABI *abi* supports (ABI 1..7 checked)."""
    if abi <= 0:
        return 0
    rights = (1 << 13) - 1          # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        rights |= _FS_REFER
    if abi >= 3:
        rights |= _FS_TRUNCATE
    if abi >= 5:
        rights |= _FS_IOCTL_DEV
    return rights


_ATTR = struct.Struct("=Qi")        # struct landlock_path_beneath_attr (packed, 12 bytes)
_RULESET_ATTR = struct.Struct("=QQQ")  # handled_access_fs, handled_access_net, scoped
_O_PATH_FLAGS = getattr(os, "O_PATH", 0o10000000) | os.O_CLOEXEC
DEFAULT_RW_FILES: Final[tuple[str, ...]] = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")


class LandlockPolicy:
    """Landlock filesystem (and IPC scope) policy, built once in the parent.

    * ``read_dirs``: hierarchies (or single files) granted ``EXECUTE | READ_FILE | READ_DIR``
      (for a non-directory: ``EXECUTE | READ_FILE``).
    * ``rw_files``: files (default ``/dev/null``, ``/dev/zero``, ``/dev/random``, ``/dev/urandom``)
      granted ``READ_FILE | WRITE_FILE`` plus ``TRUNCATE`` (ABI >= 3) and ``IOCTL_DEV`` (ABI >= 5).
    * ``scope_signals`` / ``scope_abstract_unix``: with ABI >= 6, forbid signalling processes and
      connecting to abstract unix sockets outside the child's own Landlock domain (silently not
      enforced on older ABIs; check :attr:`abi`).

    ``min_fd``: the descriptors are numbered at least this high, so a child that arranges its own
    descriptors as 0, 1, 2, ... before :meth:`apply` cannot overwrite them.

    Paths are resolved once, now, following symlinks (the rule applies to the target). Paths that
    do not exist (``ENOENT``/``ENOTDIR``) are skipped and listed in :attr:`skipped`; any other
    error closes what was opened and propagates. Each remaining path is held as an
    ``O_PATH | O_CLOEXEC`` descriptor listed in :attr:`fds`: a caller that closes every inherited
    descriptor in the child must keep these (same numbers) until :meth:`apply` has run. Afterwards
    the child SHOULD close them before running untrusted code: the domain no longer needs them,
    and an inherited directory descriptor lets ``openat(fd, ...)`` reach files beneath it without
    the search-permission checks on its ancestors (e.g. a stdlib under a 0700 ``/root`` becomes
    readable to the unprivileged uid; Landlock still limits it to what the rules allow).
    :meth:`apply` does not close them itself, so that a caller closing them never double-closes.

    When Landlock is unavailable (:func:`landlock_abi` == 0) the object is inert: ``abi`` is 0,
    nothing is opened, and :meth:`apply` raises ``OSError``. Network (TCP) rights are never
    handled: networking is the network namespace's job.

    Attributes:
        abi: Landlock ABI the policy was built for (0 = unavailable).
        fds: the ``O_PATH`` descriptors held open (read_dirs first, then rw_files).
        skipped: the given paths that did not exist.
    """

    abi: int
    fds: list[int]
    skipped: list[str]

    def __init__(self, read_dirs: Sequence[str], rw_files: Sequence[str] = DEFAULT_RW_FILES,
                 scope_signals: bool = True, scope_abstract_unix: bool = True,
                 min_fd: int = 0) -> None:
        if isinstance(read_dirs, str) or isinstance(rw_files, str):
            raise TypeError("read_dirs and rw_files are sequences of paths, not a single string")
        self.abi = landlock_abi()
        self.fds = []
        self.skipped = []
        self._handled = _fs_rights_for_abi(self.abi)
        scoped = 0
        if self.abi >= 6:
            scoped = ((_SCOPE_SIGNAL if scope_signals else 0)
                      | (_SCOPE_ABSTRACT_UNIX_SOCKET if scope_abstract_unix else 0))
        # landlock_ruleset_attr: only pass the fields the kernel must see (size 8 works on ABI 1+)
        self._ruleset_attr = ctypes.create_string_buffer(_RULESET_ATTR.pack(self._handled, 0, scoped))
        self._ruleset_ptr = ctypes.c_void_p(ctypes.addressof(self._ruleset_attr))
        self._ruleset_size = _RULESET_ATTR.size if scoped else 8
        # scratch path_beneath_attr for the per-child rules
        self._scratch = ctypes.create_string_buffer(_ATTR.size)
        self._scratch_ptr = ctypes.c_void_p(ctypes.addressof(self._scratch))
        self._rules_buf: ctypes.Array[ctypes.c_char] | None = None
        self._rule_paths: tuple[str, ...] = ()
        self._plan: tuple[Callable[..., int], int, int, int, int, ctypes.c_void_p, int,
                          tuple[ctypes.c_void_p, ...], int, int, ctypes.Array[ctypes.c_char],
                          ctypes.c_void_p, Callable[..., None], Callable[[str, int], int],
                          Callable[[int], None]] | None = None
        fn = _libc_syscall
        if self.abi == 0 or fn is None:
            return
        packed: list[bytes] = []
        paths: list[str] = []
        try:
            for path, wanted in ([(p, _FS_READ_RIGHTS) for p in read_dirs]
                                 + [(p, _FS_RW_FILE_RIGHTS) for p in rw_files]):
                try:
                    fd = os.open(path, _O_PATH_FLAGS)
                except (FileNotFoundError, NotADirectoryError):
                    self.skipped.append(path)
                    continue
                if fd < min_fd:  # out of the way of the low numbers a child arranges
                    import fcntl

                    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, min_fd)
                    os.close(fd)
                    fd = high
                self.fds.append(fd)
                access = wanted & self._handled
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    access &= _FS_FILE_RIGHTS
                packed.append(_ATTR.pack(access, fd))
                paths.append(path)
        except BaseException:
            self.close()
            raise
        blob = b"".join(packed)
        self._rules_buf = ctypes.create_string_buffer(blob, max(len(blob), 1))
        base = ctypes.addressof(self._rules_buf)
        self._rule_paths = tuple(paths)
        rule_ptrs = tuple(ctypes.c_void_p(base + i * _ATTR.size) for i in range(len(paths)))
        # Everything apply() needs, in one tuple: in a fresh child every object the hot path
        # touches costs a copy-on-write page fault (refcounts), a few microseconds each.
        self._plan = (fn, _SYS_LL_CREATE, _SYS_LL_ADD, _SYS_PRCTL, _SYS_LL_RESTRICT,
                      self._ruleset_ptr, self._ruleset_size, rule_ptrs, self._handled,
                      _FS_READ_RIGHTS & self._handled, self._scratch, self._scratch_ptr,
                      _ATTR.pack_into, os.open, os.close)

    @staticmethod
    def _open_failed(exc: OSError, path: str, step: str) -> NoReturn:
        """Cold path of :meth:`apply`: re-raise an ``open`` failure with the step and path."""
        raise OSError(exc.errno, f"{step}: open {path!r}: {os.strerror(exc.errno or 0)}") from None

    def _add_rule_failed(self, ruleset_fd: int, fd: int, path: str, access: int, step: str) -> None:
        """Cold path of :meth:`apply`: ``landlock_add_rule`` failed for a per-child path.

        ``EINVAL`` for a non-directory means directory-only rights were asked for a file: retry
        with the file rights. Anything else raises ``OSError`` naming the step and path.
        """
        err = ctypes.get_errno() or errno.EIO
        if err == errno.EINVAL and not stat.S_ISDIR(os.fstat(fd).st_mode):
            _ATTR.pack_into(self._scratch, 0, access & _FS_FILE_RIGHTS, fd)
            res = _sys(_SYS_LL_ADD, ruleset_fd, _LANDLOCK_RULE_PATH_BENEATH, self._scratch_ptr, 0)
            if res >= 0:
                return
            err = -res
        raise OSError(err, f"landlock_add_rule({step} {path!r}): {os.strerror(err)}")

    def apply(self, rw_dirs: Sequence[str] = (), extra_read_dirs: Sequence[str] = ()) -> None:
        """Enforce the policy on the calling thread (call it in the child, single-threaded).

        Creates a ruleset handling every filesystem right the ABI knows (plus the requested scopes
        when ABI >= 6), adds the parent's rules, *rw_dirs* with all handled rights (file targets:
        all file rights) and *extra_read_dirs* with the read rights, sets ``PR_SET_NO_NEW_PRIVS``,
        calls ``landlock_restrict_self`` and closes the ruleset descriptor.

        Edge cases: a missing *extra_read_dirs* entry is skipped (nothing to read there); a missing
        *rw_dirs* entry raises (the caller expects to write there). Calling ``apply`` again stacks
        another layer (Landlock allows 16), which can only restrict further.

        Raises:
            OSError: Landlock unavailable, the policy was closed, or a step failed; the message
                names the step (``landlock_create_ruleset``, ``landlock_add_rule(...)``,
                ``prctl(PR_SET_NO_NEW_PRIVS)``, ``landlock_restrict_self``). On failure the
                process is left unrestricted by this call (restrict_self is the last step).
        """
        if isinstance(rw_dirs, str) or isinstance(extra_read_dirs, str):
            raise TypeError("rw_dirs and extra_read_dirs are sequences of paths, not a single string")
        ruleset_fd = self._build(rw_dirs, extra_read_dirs)
        try:
            self.restrict(ruleset_fd)
        finally:
            os.close(ruleset_fd)

    def _live_plan(self) -> tuple:
        """The prepared plan; ``OSError`` when Landlock is unavailable or the policy was closed."""
        plan = self._plan
        if plan is None:
            if self.abi <= 0:
                raise OSError(errno.EOPNOTSUPP, "landlock_create_ruleset: Landlock is unavailable")
            raise OSError(errno.EBADF, "landlock: the policy was closed")
        return plan

    def _build(self, rw_dirs: Sequence[str], extra_read_dirs: Sequence[str]) -> int:
        """A new ruleset descriptor with the parent's rules, *rw_dirs* (every handled right)
        and *extra_read_dirs* (read rights; missing ones skipped). Nothing is left open when it
        raises (see :meth:`apply` for the errors)."""
        (fn, nr_create, nr_add, _prctl, _restrict, attr_ptr, attr_size, rule_ptrs, handled,
         read_rights, scratch, scratch_ptr, pack_into, os_open, os_close) = self._live_plan()
        ruleset_fd = fn(nr_create, attr_ptr, attr_size, 0)
        if ruleset_fd < 0:
            _raise_errno("landlock_create_ruleset")
        try:
            for ptr in rule_ptrs:
                if fn(nr_add, ruleset_fd, _LANDLOCK_RULE_PATH_BENEATH, ptr, 0) < 0:
                    _raise_errno(f"landlock_add_rule(parent rule "
                                 f"{self._rule_paths[rule_ptrs.index(ptr)]!r})")
            # the loops below are inlined (no helper calls on the success path: in a fresh child
            # every object touched costs a copy-on-write fault)
            for path in rw_dirs:
                try:
                    fd = os_open(path, _O_PATH_FLAGS)
                except OSError as exc:
                    self._open_failed(exc, path, "rw_dirs")
                try:
                    pack_into(scratch, 0, handled, fd)
                    if fn(nr_add, ruleset_fd, _LANDLOCK_RULE_PATH_BENEATH, scratch_ptr, 0) < 0:
                        self._add_rule_failed(ruleset_fd, fd, path, handled, "rw_dirs")
                finally:
                    os_close(fd)
            for path in extra_read_dirs:
                try:
                    fd = os_open(path, _O_PATH_FLAGS)
                except (FileNotFoundError, NotADirectoryError):
                    continue  # nothing to read there
                except OSError as exc:
                    self._open_failed(exc, path, "extra_read_dirs")
                try:
                    pack_into(scratch, 0, read_rights, fd)
                    if fn(nr_add, ruleset_fd, _LANDLOCK_RULE_PATH_BENEATH, scratch_ptr, 0) < 0:
                        self._add_rule_failed(ruleset_fd, fd, path, read_rights, "extra_read_dirs")
                finally:
                    os_close(fd)
        except BaseException:
            os.close(ruleset_fd)
            raise
        return ruleset_fd

    def ruleset(self, rw_dirs: Sequence[str], min_fd: int = 0) -> int:
        """A ruleset descriptor holding the parent's rules plus *rw_dirs* (every handled right),
        numbered at least *min_fd*, for :meth:`restrict` in children forked later.

        For a process that forks many children into the same domain: the ruleset is built
        once, and each child enforces it with two system calls instead of building its own
        (about 50 instead of 210 us per child on the development VM, most of the difference
        being the copy-on-write faults of the Python that builds a ruleset). The rules are
        bound to the inodes opened now: a directory replaced later (a fresh mount at the same
        path) needs a new ruleset. The caller owns the descriptor (close-on-exec).

        Raises:
            OSError: as :meth:`apply` (unavailable, closed, or a step failed; nothing is left
                open then).
        """
        if isinstance(rw_dirs, str):
            raise TypeError("rw_dirs is a sequence of paths, not a single string")
        ruleset_fd = self._build(rw_dirs, ())
        if ruleset_fd < min_fd:
            import fcntl

            try:
                high = fcntl.fcntl(ruleset_fd, fcntl.F_DUPFD_CLOEXEC, min_fd)
            finally:
                os.close(ruleset_fd)
            ruleset_fd = high
        return ruleset_fd

    def restrict(self, ruleset_fd: int) -> None:
        """Enforce a ruleset from :meth:`ruleset` on the calling thread (single-threaded child):
        ``PR_SET_NO_NEW_PRIVS``, then ``landlock_restrict_self``. Leaves the descriptor open
        (the caller closes it with everything else before untrusted code runs).

        Raises:
            OSError: the policy is unavailable or closed, or a step failed (naming it); the
                process is then left unrestricted by this call.
        """
        plan = self._live_plan()
        fn = plan[0]
        if fn(plan[3], _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0:
            _raise_errno("prctl(PR_SET_NO_NEW_PRIVS)")
        if fn(plan[4], ruleset_fd, 0) < 0:
            _raise_errno("landlock_restrict_self")

    def close(self) -> None:
        """Close the ``O_PATH`` descriptors (idempotent); :meth:`apply` raises afterwards."""
        self._plan = None
        fds, self.fds = self.fds, []
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass

    def __enter__(self) -> LandlockPolicy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


# --------------------------------------------------------------------------------------------
# Seccomp policy table
# --------------------------------------------------------------------------------------------

KILL: Final = "KILL_PROCESS"
EPERM: Final = "ERRNO(EPERM)"
ENOSYS: Final = "ERRNO(ENOSYS)"
ALLOW: Final = "ALLOW"
BY_ARGS: Final = "by arguments"
ALWAYS: Final = "always"
NO_SUBPROCESS: Final = "allow_subprocess=False"

#: The policy, one row per syscall: (syscall, action, when, why).
#:
#: * Numbers outside the reviewed ranges (:data:`_REVIEWED`: unassigned gaps and syscalls newer
#:   than the review) return ``ERRNO(ENOSYS)``; inside them a syscall without a row is allowed.
#:   ``ALLOW`` rows record the explicit decision for the syscalls added since the default-allow
#:   days (numbers >= 335); they generate no code.
#: * ``BY_ARGS`` rows are decided on their arguments by the code block named in
#:   :data:`_ARG_BLOCKS` (see :func:`_build_program`); "own pid" is the pid of the process that
#:   applied the filter, patched in by :func:`apply_seccomp`.
#: * ``when`` = ``NO_SUBPROCESS``: the row applies only to programs built with
#:   ``allow_subprocess=False``; with ``allow_subprocess=True`` the syscall is allowed.
#: * Syscalls the architecture lacks (e.g. ``fork`` on aarch64) are skipped.
SECCOMP_TABLE: Final[tuple[tuple[str, str, str, str], ...]] = (
    # syscall               action   when            why
    ("clone",               BY_ARGS, ALWAYS,        "namespace flags -> KILL; no CLONE_THREAD -> KILL "
                                                    "unless allow_subprocess"),
    ("socket",              BY_ARGS, ALWAYS,        "AF_INET/AF_INET6 only with allow_inet, AF_UNIX only "
                                                    "with allow_unix; else ERRNO(EACCES)"),
    ("personality",         BY_ARGS, ALWAYS,        "only query (0xffffffff) and PER_LINUX (0); "
                                                    "else ERRNO(EPERM)"),
    # calls that act on another process: confined to the caller (refusal: ERRNO(EPERM))
    ("prlimit64",           BY_ARGS, ALWAYS,        "pid 0 or own pid; else ERRNO(EPERM)"),
    ("setpriority",         BY_ARGS, ALWAYS,        "PRIO_PROCESS with who 0 or own pid; else ERRNO(EPERM)"),
    ("ioprio_set",          BY_ARGS, ALWAYS,        "IOPRIO_WHO_PROCESS with who 0 or own pid; "
                                                    "else ERRNO(EPERM)"),
    ("sched_setaffinity",   BY_ARGS, ALWAYS,        "pid 0 or own pid; else ERRNO(EPERM)"),
    ("sched_setscheduler",  BY_ARGS, ALWAYS,        "pid 0 or own pid; else ERRNO(EPERM)"),
    ("sched_setparam",      BY_ARGS, ALWAYS,        "pid 0 or own pid; else ERRNO(EPERM)"),
    ("sched_setattr",       BY_ARGS, ALWAYS,        "pid 0 or own pid; else ERRNO(EPERM)"),
    ("migrate_pages",       BY_ARGS, ALWAYS,        "pid 0 or own pid; else ERRNO(EPERM)"),
    ("move_pages",          BY_ARGS, ALWAYS,        "pid 0 or own pid; else ERRNO(EPERM)"),
    ("get_robust_list",     BY_ARGS, ALWAYS,        "pid 0 or own pid; else ERRNO(EPERM)"),
    ("kill",                BY_ARGS, NO_SUBPROCESS, "pid 0, own pid or -own pid (the child leads its "
                                                    "own process group); else ERRNO(EPERM)"),
    ("tgkill",              BY_ARGS, NO_SUBPROCESS, "tgid == own pid; else ERRNO(EPERM)"),
    ("rt_sigqueueinfo",     BY_ARGS, NO_SUBPROCESS, "tgid == own pid; else ERRNO(EPERM)"),
    ("rt_tgsigqueueinfo",   BY_ARGS, NO_SUBPROCESS, "tgid == own pid; else ERRNO(EPERM)"),
    ("pidfd_open",          BY_ARGS, NO_SUBPROCESS, "pid == own pid; else ERRNO(EPERM)"),
    ("tkill",               EPERM,   NO_SUBPROCESS, "a bare thread id may name any process; libc "
                                                    "signals threads with tgkill"),
    ("clone3",              ENOSYS,  ALWAYS,        "flags behind a pointer; libc falls back to clone"),
    ("ptrace",              KILL,    ALWAYS,        "other processes' memory and registers"),
    ("process_vm_readv",    KILL,    ALWAYS,        "other processes' memory"),
    ("process_vm_writev",   KILL,    ALWAYS,        "other processes' memory"),
    ("process_madvise",     KILL,    ALWAYS,        "other processes' memory"),
    ("process_mrelease",    KILL,    ALWAYS,        "other processes' memory"),
    ("pidfd_getfd",         KILL,    ALWAYS,        "steal descriptors"),
    ("kcmp",                KILL,    ALWAYS,        "probe other processes"),
    ("perf_event_open",     KILL,    ALWAYS,        "attack surface, side channels"),
    ("bpf",                 KILL,    ALWAYS,        "attack surface"),
    ("userfaultfd",         KILL,    ALWAYS,        "exploit primitive"),
    ("io_uring_setup",      KILL,    ALWAYS,        "attack surface, bypasses seccomp"),
    ("io_uring_enter",      KILL,    ALWAYS,        "attack surface, bypasses seccomp"),
    ("io_uring_register",   KILL,    ALWAYS,        "attack surface, bypasses seccomp"),
    ("keyctl",              KILL,    ALWAYS,        "kernel keyrings"),
    ("add_key",             KILL,    ALWAYS,        "kernel keyrings"),
    ("request_key",         KILL,    ALWAYS,        "kernel keyrings"),
    ("mount",               KILL,    ALWAYS,        "mounts"),
    ("umount2",             KILL,    ALWAYS,        "mounts"),
    ("pivot_root",          KILL,    ALWAYS,        "mounts"),
    ("chroot",              KILL,    ALWAYS,        "mounts"),
    ("unshare",             KILL,    ALWAYS,        "namespaces"),
    ("setns",               KILL,    ALWAYS,        "namespaces"),
    ("open_tree",           KILL,    ALWAYS,        "new mount API"),
    ("open_tree_attr",      KILL,    ALWAYS,        "new mount API (open_tree that also changes "
                                                    "mount attributes)"),
    ("move_mount",          KILL,    ALWAYS,        "new mount API"),
    ("fsopen",              KILL,    ALWAYS,        "new mount API"),
    ("fsconfig",            KILL,    ALWAYS,        "new mount API"),
    ("fsmount",             KILL,    ALWAYS,        "new mount API"),
    ("fspick",              KILL,    ALWAYS,        "new mount API"),
    ("mount_setattr",       KILL,    ALWAYS,        "new mount API"),
    ("statmount",           ENOSYS,  ALWAYS,        "mount table query; libmount probes it and falls "
                                                    "back to /proc/self/mountinfo (Landlock: denied)"),
    ("listmount",           ENOSYS,  ALWAYS,        "mount table query; libmount probes it and falls "
                                                    "back to /proc/self/mountinfo (Landlock: denied)"),
    ("name_to_handle_at",   KILL,    ALWAYS,        "file handles bypass path checks"),
    ("open_by_handle_at",   KILL,    ALWAYS,        "file handles bypass path checks"),
    ("init_module",         KILL,    ALWAYS,        "kernel modules"),
    ("finit_module",        KILL,    ALWAYS,        "kernel modules"),
    ("delete_module",       KILL,    ALWAYS,        "kernel modules"),
    ("kexec_load",          KILL,    ALWAYS,        "kexec"),
    ("kexec_file_load",     KILL,    ALWAYS,        "kexec"),
    ("reboot",              KILL,    ALWAYS,        "machine administration"),
    ("swapon",              KILL,    ALWAYS,        "machine administration"),
    ("swapoff",             KILL,    ALWAYS,        "machine administration"),
    ("acct",                KILL,    ALWAYS,        "machine administration"),
    ("quotactl",            KILL,    ALWAYS,        "machine administration"),
    ("quotactl_fd",         KILL,    ALWAYS,        "machine administration"),
    ("syslog",              KILL,    ALWAYS,        "kernel log"),
    ("iopl",                KILL,    ALWAYS,        "raw I/O ports (x86)"),
    ("ioperm",              KILL,    ALWAYS,        "raw I/O ports (x86)"),
    ("vhangup",             KILL,    ALWAYS,        "terminals"),
    ("settimeofday",        KILL,    ALWAYS,        "system clock"),
    ("clock_settime",       KILL,    ALWAYS,        "system clock"),
    ("clock_adjtime",       KILL,    ALWAYS,        "system clock"),
    ("adjtimex",            KILL,    ALWAYS,        "system clock"),
    ("sethostname",         KILL,    ALWAYS,        "host identity"),
    ("setdomainname",       KILL,    ALWAYS,        "host identity"),
    ("uselib",              KILL,    ALWAYS,        "obsolete loader (x86)"),
    ("lookup_dcookie",      KILL,    ALWAYS,        "obsolete profiling"),
    ("fanotify_init",       EPERM,   ALWAYS,        "file monitoring shows which files the judge opens"),
    ("fanotify_mark",       EPERM,   ALWAYS,        "file monitoring shows which files the judge opens"),
    ("inotify_init",        EPERM,   ALWAYS,        "file monitoring shows which files the judge opens"),
    ("inotify_init1",       EPERM,   ALWAYS,        "file monitoring shows which files the judge opens"),
    ("inotify_add_watch",   EPERM,   ALWAYS,        "file monitoring shows which files the judge opens"),
    ("inotify_rm_watch",    EPERM,   ALWAYS,        "file monitoring shows which files the judge opens"),
    ("memfd_secret",        ENOSYS,  ALWAYS,        "memory taken out of the kernel's direct map; what "
                                                    "a kernel without secretmem answers"),
    ("cachestat",           ENOSYS,  ALWAYS,        "page-cache residency side channel"),
    ("lsm_set_self_attr",   ENOSYS,  ALWAYS,        "changes the caller's LSM context; never needed"),
    ("shmget",              EPERM,   ALWAYS,        "SysV shared memory outlives the child"),
    ("shmat",               EPERM,   ALWAYS,        "SysV shared memory"),
    ("shmctl",              EPERM,   ALWAYS,        "SysV shared memory"),
    ("shmdt",               EPERM,   ALWAYS,        "SysV shared memory"),
    ("semget",              EPERM,   ALWAYS,        "SysV semaphores"),
    ("semop",               EPERM,   ALWAYS,        "SysV semaphores"),
    ("semctl",              EPERM,   ALWAYS,        "SysV semaphores"),
    ("semtimedop",          EPERM,   ALWAYS,        "SysV semaphores"),
    ("msgget",              EPERM,   ALWAYS,        "SysV message queues"),
    ("msgsnd",              EPERM,   ALWAYS,        "SysV message queues"),
    ("msgrcv",              EPERM,   ALWAYS,        "SysV message queues"),
    ("msgctl",              EPERM,   ALWAYS,        "SysV message queues"),
    ("mq_open",             EPERM,   ALWAYS,        "POSIX message queues"),
    ("mq_unlink",           EPERM,   ALWAYS,        "POSIX message queues"),
    ("mq_timedsend",        EPERM,   ALWAYS,        "POSIX message queues"),
    ("mq_timedreceive",     EPERM,   ALWAYS,        "POSIX message queues"),
    ("mq_notify",           EPERM,   ALWAYS,        "POSIX message queues"),
    ("mq_getsetattr",       EPERM,   ALWAYS,        "POSIX message queues"),
    ("fork",                KILL,    NO_SUBPROCESS, "new processes"),
    ("vfork",               KILL,    NO_SUBPROCESS, "new processes"),
    ("execve",              KILL,    NO_SUBPROCESS, "new programs"),
    ("execveat",            KILL,    NO_SUBPROCESS, "new programs"),
    # reviewed and allowed (syscalls from 335 on; older ones without a row are allowed too)
    ("uretprobe",           ALLOW,   ALWAYS,        "entered from the kernel's uretprobe trampoline "
                                                    "(x86_64); the kernel exempts it from seccomp"),
    ("uprobe",              ALLOW,   ALWAYS,        "entered from the kernel's uprobe trampoline "
                                                    "(x86_64); the kernel exempts it from seccomp"),
    ("pidfd_send_signal",   ALLOW,   ALWAYS,        "needs a pidfd: pidfd_open is confined, /proc is "
                                                    "outside Landlock; the kernel checks the uid"),
    ("close_range",         ALLOW,   ALWAYS,        "own descriptors"),
    ("openat2",             ALLOW,   ALWAYS,        "like openat; Landlock applies"),
    ("faccessat2",          ALLOW,   ALWAYS,        "like faccessat"),
    ("epoll_pwait2",        ALLOW,   ALWAYS,        "like epoll_pwait"),
    ("landlock_create_ruleset", ALLOW, ALWAYS,      "can only restrict the caller further"),
    ("landlock_add_rule",   ALLOW,   ALWAYS,        "can only restrict the caller further"),
    ("landlock_restrict_self", ALLOW, ALWAYS,       "can only restrict the caller further"),
    ("futex_waitv",         ALLOW,   ALWAYS,        "futexes in own memory"),
    ("set_mempolicy_home_node", ALLOW, ALWAYS,      "own memory policy, like mbind"),
    ("fchmodat2",           ALLOW,   ALWAYS,        "like fchmodat"),
    ("map_shadow_stack",    ALLOW,   ALWAYS,        "own shadow stack (x86 CET, arm64 GCS)"),
    ("futex_wake",          ALLOW,   ALWAYS,        "futexes in own memory"),
    ("futex_wait",          ALLOW,   ALWAYS,        "futexes in own memory"),
    ("futex_requeue",       ALLOW,   ALWAYS,        "futexes in own memory"),
    ("lsm_get_self_attr",   ALLOW,   ALWAYS,        "own LSM attributes, as in /proc/self/attr"),
    ("lsm_list_modules",    ALLOW,   ALWAYS,        "names of the active LSMs"),
    ("mseal",               ALLOW,   ALWAYS,        "seals own mappings (hardening)"),
    ("setxattrat",          ALLOW,   ALWAYS,        "like setxattr"),
    ("getxattrat",          ALLOW,   ALWAYS,        "like getxattr"),
    ("listxattrat",         ALLOW,   ALWAYS,        "like listxattr"),
    ("removexattrat",       ALLOW,   ALWAYS,        "like removexattr"),
    ("file_getattr",        ALLOW,   ALWAYS,        "like the FS_IOC_FSGETXATTR ioctl"),
    ("file_setattr",        ALLOW,   ALWAYS,        "like the FS_IOC_FSSETXATTR ioctl"),
)

#: ``BY_ARGS`` syscall -> label of the code block in :func:`_build_program` that decides it
_ARG_BLOCKS: Final[dict[str, str]] = {
    "clone": "clone",
    "socket": "socket",
    "personality": "personality",
    "prlimit64": "self_or_zero",
    "sched_setaffinity": "self_or_zero",
    "sched_setscheduler": "self_or_zero",
    "sched_setparam": "self_or_zero",
    "sched_setattr": "self_or_zero",
    "migrate_pages": "self_or_zero",
    "move_pages": "self_or_zero",
    "get_robust_list": "self_or_zero",
    "setpriority": "setpriority",
    "ioprio_set": "ioprio_set",
    "kill": "kill_pid",
    "tgkill": "self_only",
    "rt_sigqueueinfo": "self_only",
    "rt_tgsigqueueinfo": "self_only",
    "pidfd_open": "self_only",
}

# argument values (include/uapi/linux/sched.h, socket.h, personality.h, resource.h, ioprio.h)
_CLONE_THREAD = 0x00010000
_CLONE_NS_MASK = (0x00020000    # CLONE_NEWNS
                  | 0x02000000  # CLONE_NEWCGROUP
                  | 0x04000000  # CLONE_NEWUTS
                  | 0x08000000  # CLONE_NEWIPC
                  | 0x10000000  # CLONE_NEWUSER
                  | 0x20000000  # CLONE_NEWPID
                  | 0x40000000  # CLONE_NEWNET
                  | 0x00000080)  # CLONE_NEWTIME (see module docstring)
_AF_UNIX = 1
_AF_INET = 2
_AF_INET6 = 10
_PER_LINUX = 0
_PER_QUERY = 0xFFFFFFFF
_PRIO_PROCESS = 0
_IOPRIO_WHO_PROCESS = 1
_X32_SYSCALL_BIT = 0x40000000  # x86_64: every number from here up is killed (x32 ABI, -1)


def _ranges_text(arch: str) -> str:
    return ", ".join(f"{low}-{high}" for low, high in _REVIEWED[arch])


def _policy_doc() -> str:
    def names(action: str, when: str | None = ALWAYS) -> str:
        return ", ".join(name for name, act, wh, _ in SECCOMP_TABLE
                         if act == action and (when is None or wh == when))

    confined = ", ".join(name for name, _, _, _ in SECCOMP_TABLE if _ARG_BLOCKS.get(name) == "self_or_zero")
    return (
        "seccomp policy (default: ENOSYS for syscalls the policy does not know):\n"
        f"- reviewed syscall numbers: x86_64 {_ranges_text('x86_64')}; aarch64 "
        f"{_ranges_text('aarch64')}; every other number (unassigned gaps, syscalls newer than the "
        "review) -> ERRNO(ENOSYS); inside the ranges a syscall not listed here is allowed\n"
        "- foreign arch (e.g. i386 int 0x80) or, on x86_64, a number >= 0x40000000 (the x32 ABI) "
        "-> KILL_PROCESS\n"
        f"- always KILL_PROCESS: {names(KILL)}\n"
        "- clone with any namespace flag (NEWNS/NEWCGROUP/NEWUTS/NEWIPC/NEWUSER/NEWPID/NEWNET/"
        "NEWTIME) -> KILL_PROCESS\n"
        "- allow_subprocess=False: fork, vfork, execve, execveat and clone without CLONE_THREAD "
        "-> KILL_PROCESS (threads keep working)\n"
        f"- always ERRNO(ENOSYS): {names(ENOSYS)} (clone3: libc falls back to clone)\n"
        f"- always ERRNO(EPERM): {names(EPERM)}\n"
        f"- confined to the caller, else ERRNO(EPERM) (own pid = the pid that applied the filter, "
        f"inherited by descendants): {confined} take pid 0 or own pid; setpriority only "
        "PRIO_PROCESS and ioprio_set only IOPRIO_WHO_PROCESS, with who 0 or own pid\n"
        "- allow_subprocess=False, else ERRNO(EPERM): kill only pid 0, own pid or -own pid (own "
        "process group); tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo only tgid == own pid; "
        "pidfd_open only own pid; tkill always. With allow_subprocess these are allowed (the "
        "kernel's uid check confines them)\n"
        "- socket: AF_INET/AF_INET6 only with allow_inet, AF_UNIX only with allow_unix, every "
        "other family -> ERRNO(EACCES) (socketpair allowed)\n"
        "- personality other than query (0xffffffff) / PER_LINUX -> ERRNO(EPERM)\n"
        f"- reviewed and allowed: {names(ALLOW)}\n"
    )


#: Short human-readable summary of the seccomp policy (for docs and reports).
SECCOMP_POLICY_DOC: Final[str] = _policy_doc()

# --------------------------------------------------------------------------------------------
# BPF assembler
# --------------------------------------------------------------------------------------------

# classic BPF opcodes (include/uapi/linux/filter.h, bpf_common.h)
_BPF_LD_W_ABS = 0x00 | 0x00 | 0x20   # BPF_LD | BPF_W | BPF_ABS
_BPF_JEQ_K = 0x05 | 0x10 | 0x00      # BPF_JMP | BPF_JEQ | BPF_K
_BPF_JGE_K = 0x05 | 0x30 | 0x00      # BPF_JMP | BPF_JGE | BPF_K (unsigned >=)
_BPF_JSET_K = 0x05 | 0x40 | 0x00     # BPF_JMP | BPF_JSET | BPF_K
_BPF_RET_K = 0x06 | 0x00             # BPF_RET | BPF_K
_SOCK_FILTER = struct.Struct("<HBBI")  # struct sock_filter; both supported arches are LE
_U32 = struct.Struct("<I")
_BPF_MAXINSNS = 4096

# struct seccomp_data offsets (little endian: the low word of args[i] comes first)
_OFF_NR = 0
_OFF_ARCH = 4
_OFF_ARG0_LO = 16
_OFF_ARG1_LO = 24
_K_OFFSET = 4  # offset of the 32-bit constant k inside a struct sock_filter

#: What an own-pid constant holds until :func:`apply_seccomp` patches it: no pid can be this
#: large (PID_MAX_LIMIT is 2**22), so an unpatched program (which apply_seccomp refuses to
#: install anyway) would match no process. The negated form is ``(-_PID_PLACEHOLDER) & 0xffffffff``.
_PID_PLACEHOLDER: Final = 0x7FFFFFFF

_NEXT = ""  # jump target meaning "fall through to the next instruction"


class _Asm:
    """Tiny classic-BPF assembler with symbolic forward jumps (checked to fit in 8 bits).

    :meth:`jeq_pid` emits a comparison with the own pid (or its negation), whose constant is a
    placeholder; the byte offsets of those constants are in :attr:`self_slots` /
    :attr:`neg_slots` after :meth:`assemble`.
    """

    def __init__(self) -> None:
        self.code: list[tuple[int, str, str, int]] = []
        self.labels: dict[str, int] = {}
        self.pid_pcs: list[tuple[int, bool]] = []  # (pc, negated)

    def label(self, name: str) -> None:
        if name in self.labels:
            raise ValueError(f"duplicate BPF label {name!r}")
        self.labels[name] = len(self.code)

    def ld(self, offset: int) -> None:
        self.code.append((_BPF_LD_W_ABS, _NEXT, _NEXT, offset))

    def jeq(self, k: int, jt: str, jf: str = _NEXT) -> None:
        self.code.append((_BPF_JEQ_K, jt, jf, k))

    def jeq_pid(self, negated: bool, jt: str, jf: str = _NEXT) -> None:
        """``jeq own_pid`` (``negated``: ``jeq -own_pid``, 32-bit), patched at apply time."""
        self.pid_pcs.append((len(self.code), negated))
        self.jeq(-_PID_PLACEHOLDER & 0xFFFFFFFF if negated else _PID_PLACEHOLDER, jt, jf)

    def jge(self, k: int, jt: str, jf: str = _NEXT) -> None:
        self.code.append((_BPF_JGE_K, jt, jf, k))

    def jset(self, k: int, jt: str, jf: str = _NEXT) -> None:
        self.code.append((_BPF_JSET_K, jt, jf, k))

    def ret(self, value: int) -> None:
        self.code.append((_BPF_RET_K, _NEXT, _NEXT, value))

    def _offset(self, pc: int, target: str) -> int:
        if target == _NEXT:
            return 0
        off = self.labels[target] - (pc + 1)
        if not 0 <= off <= 255:
            raise ValueError(f"BPF jump from {pc} to {target!r} does not fit in 8 bits ({off})")
        return off

    @property
    def self_slots(self) -> tuple[int, ...]:
        return tuple(pc * _SOCK_FILTER.size + _K_OFFSET for pc, negated in self.pid_pcs if not negated)

    @property
    def neg_slots(self) -> tuple[int, ...]:
        return tuple(pc * _SOCK_FILTER.size + _K_OFFSET for pc, negated in self.pid_pcs if negated)

    def assemble(self) -> bytes:
        if not 0 < len(self.code) <= _BPF_MAXINSNS:
            raise ValueError(f"BPF program of {len(self.code)} instructions")
        return b"".join(_SOCK_FILTER.pack(code, self._offset(pc, jt), self._offset(pc, jf), k & 0xFFFFFFFF)
                        for pc, (code, jt, jf, k) in enumerate(self.code))


#: a dispatch leaf decides at most this many segments one after another
_LEAF_SIZE = 4
_U32_END = 1 << 32  # one past the largest syscall number seccomp_data can hold

#: consecutive syscall numbers decided alike: (first, last, label), inclusive
_Segment = tuple[int, int, str]


def _segments(rules: dict[int, str], ranges: tuple[tuple[int, int], ...], x32: bool) -> list[_Segment]:
    """The per-number *rules* merged into sorted segments, plus the numbers the policy does not
    know: the gaps between the reviewed *ranges* and everything above the last one go to
    ``enosys``, except that on x86_64 (*x32*) every number from ``0x40000000`` up (the x32 ABI,
    and "negative" numbers) goes to ``kill``. Numbers in no segment are allowed."""
    unknown: list[_Segment] = []
    next_free = 0
    for low, high in ranges:
        if low > next_free:
            unknown.append((next_free, low - 1, "enosys"))
        next_free = high + 1
    if x32:
        unknown += [(next_free, _X32_SYSCALL_BIT - 1, "enosys"), (_X32_SYSCALL_BIT, _U32_END - 1, "kill")]
    else:
        unknown.append((next_free, _U32_END - 1, "enosys"))
    merged: list[_Segment] = []
    for first, last, label in sorted([(n, n, label) for n, label in rules.items()] + unknown):
        if merged and merged[-1][1] + 1 == first and merged[-1][2] == label:
            merged[-1] = (merged[-1][0], last, label)
        else:
            merged.append((first, last, label))
    return merged


def _emit_dispatch(asm: _Asm, segments: list[_Segment], low: int = 0, high: int = _U32_END) -> None:
    """Emit a binary search over the sorted, disjoint *segments*; numbers in none are allowed.

    Why a tree and not a chain of ``jeq``: when a filter is attached the kernel emulates it for
    every syscall number to precompute which ones are always allowed (the seccomp action cache),
    and a linear chain made that cost ~150 us per child; the tree keeps every path to ~10 steps.
    Why segments: runs of numbers decided alike (SysV IPC, the mount API, the unknown numbers
    above the newest reviewed syscall, ...) cost two ``jge`` instead of one ``jeq`` per number,
    and the default deny needs no range checks in front of the tree, which every path would pay.

    Layout: ``jge pivot, <right>, <next>`` followed by the left half, then the right half.
    ``[low, high)`` is what the tree above has established about the number; a leaf checks its
    segments in ascending order, skipping bounds already known: a single number is a ``jeq``, a
    run a ``jge first, <next>, allow`` (a number below the run is below every later segment too)
    and a ``jge last + 1, <next>, <label>``. The last miss jumps to the shared ``allow`` return.
    """
    if len(segments) > _LEAF_SIZE:
        mid = len(segments) // 2
        pivot = segments[mid][0]
        right = f"ge_{pivot}"
        asm.jge(pivot, right)
        _emit_dispatch(asm, segments[:mid], low, pivot)
        asm.label(right)
        _emit_dispatch(asm, segments[mid:], pivot, high)
        return
    if not segments:
        asm.jge(0, "allow", "allow")
        return
    known_low = low  # the number is >= known_low here (earlier checks of this leaf failed)
    for i, (first, last, label) in enumerate(segments):
        miss = "allow" if i == len(segments) - 1 else _NEXT
        need_lower, need_upper = first > known_low, last + 1 < high
        if first == last and (need_lower or need_upper):
            asm.jeq(first, label, miss)
        elif need_lower and need_upper:
            asm.jge(first, _NEXT, "allow")
            asm.jge(last + 1, miss, label)
        elif need_lower:
            asm.jge(first, label, "allow")
        elif need_upper:
            asm.jge(last + 1, miss, label)
        else:  # the bounds leave only this segment
            asm.jge(0, label, label)
        if first == known_low or first != last:
            known_low = last + 1


class _Built(NamedTuple):
    """An assembled program and the byte offsets of its own-pid constants."""

    program: bytes
    self_slots: tuple[int, ...]
    neg_slots: tuple[int, ...]


def _build_program(allow_subprocess: bool, arch: str, allow_unix: bool = False,
                   allow_inet: bool = False) -> _Built:
    """Assemble :data:`SECCOMP_TABLE` for *arch* (see :func:`seccomp_program` for the flags).

    Layout: architecture check, one binary-search dispatch over the syscall number (which also
    sends the numbers outside :data:`_REVIEWED` to ``ENOSYS`` and, on x86_64, x32 numbers to
    ``KILL``; see :func:`_segments`), the argument blocks, then the shared returns (every jump
    is forward). The own-pid comparisons
    are shared: every confined call ends in the one ``is_self`` instruction (and ``kill`` in one
    ``-own pid`` comparison), so :func:`apply_seccomp` patches at most two constants.
    """
    audit_arch, _, x32 = _ARCHES[arch]
    ranges = _REVIEWED[arch]

    def nr(name: str) -> int:
        value = _nr(name, arch)
        assert value is not None, name
        return value

    families = ([_AF_UNIX] if allow_unix else []) + ([_AF_INET, _AF_INET6] if allow_inet else [])
    # syscall number -> label of the code that decides it; reviewed numbers without one are allowed
    targets = {KILL: "kill", EPERM: "eperm", ENOSYS: "enosys"}
    rules: dict[int, str] = {}
    for name, action, when, _ in SECCOMP_TABLE:
        if action == ALLOW or (when == NO_SUBPROCESS and allow_subprocess):
            continue
        number = _nr(name, arch)
        if number is None:
            continue
        if not any(low <= number <= high for low, high in ranges):
            raise ValueError(f"{name} ({arch} {number}) lies outside the reviewed ranges")
        rules[number] = _ARG_BLOCKS[name] if action == BY_ARGS else targets[action]
    if not families:
        rules[nr("socket")] = "eacces"

    asm = _Asm()
    asm.ld(_OFF_ARCH)
    asm.jeq(audit_arch, _NEXT, "kill")
    asm.ld(_OFF_NR)
    _emit_dispatch(asm, _segments(rules, ranges, x32))
    # clone(flags, ...): flags is argument 0 on both arches; the kernel uses its low 32 bits
    asm.label("clone")
    asm.ld(_OFF_ARG0_LO)
    asm.jset(_CLONE_NS_MASK, "kill")
    if allow_subprocess:
        asm.ret(_RET_ALLOW)
    else:
        asm.jset(_CLONE_THREAD, "allow", "kill")
    # socket(domain, ...)
    if families:
        asm.label("socket")
        asm.ld(_OFF_ARG0_LO)
        for family in families[:-1]:
            asm.jeq(family, "allow")
        asm.jeq(families[-1], "allow", "eacces")
    # personality(persona): unsigned int
    asm.label("personality")
    asm.ld(_OFF_ARG0_LO)
    asm.jeq(_PER_QUERY, "allow")
    asm.jeq(_PER_LINUX, "allow", "eperm")
    # pid arguments are pid_t (int): only their low 32 bits are compared, as the kernel uses them
    asm.label("self_or_zero")
    asm.ld(_OFF_ARG0_LO)
    asm.jeq(0, "allow", "is_self")
    asm.label("setpriority")  # setpriority(which, who, prio)
    asm.ld(_OFF_ARG0_LO)
    asm.jeq(_PRIO_PROCESS, _NEXT, "eperm")
    asm.ld(_OFF_ARG1_LO)
    asm.jeq(0, "allow", "is_self")
    asm.label("ioprio_set")  # ioprio_set(which, who, ioprio)
    asm.ld(_OFF_ARG0_LO)
    asm.jeq(_IOPRIO_WHO_PROCESS, _NEXT, "eperm")
    asm.ld(_OFF_ARG1_LO)
    asm.jeq(0, "allow", "is_self")
    if not allow_subprocess:
        asm.label("kill_pid")  # kill(pid, sig): 0, own pid, own process group (-own pid)
        asm.ld(_OFF_ARG0_LO)
        asm.jeq(0, "allow")
        asm.jeq_pid(True, "allow", "is_self")
        asm.label("self_only")  # tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo, pidfd_open
        asm.ld(_OFF_ARG0_LO)    # falls through into is_self
    asm.label("is_self")
    asm.jeq_pid(False, "allow", "eperm")
    # shared returns (all jumps are forward, so these come last)
    asm.label("allow")
    asm.ret(_RET_ALLOW)
    asm.label("kill")
    asm.ret(_RET_KILL_PROCESS)
    asm.label("eperm")
    asm.ret(_RET_ERRNO | errno.EPERM)
    asm.label("eacces")
    asm.ret(_RET_ERRNO | errno.EACCES)
    asm.label("enosys")
    asm.ret(_RET_ERRNO | errno.ENOSYS)
    return _Built(asm.assemble(), asm.self_slots, asm.neg_slots)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


#: (instruction buffer, sock_fprog, pointer to the sock_fprog, views of the own-pid constants,
#: views of the -own-pid constants): keeps the buffers alive. The views are ``c_uint32`` objects
#: over the buffer, built in the parent: in a fresh child, storing through them costs about a
#: third of what ``struct.pack_into`` on the buffer costs (fewer first-touch page faults).
_Prepared = tuple[ctypes.Array[ctypes.c_char], _SockFprog, ctypes.c_void_p,
                  tuple[ctypes.c_uint32, ...], tuple[ctypes.c_uint32, ...]]
#: program bytes -> prepared form, filled in the parent by :func:`seccomp_program`
_PREPARED: dict[bytes, _Prepared] = {}
#: (allow_subprocess, arch, allow_unix, allow_inet) -> program
_PROGRAMS: dict[tuple[bool, str, bool, bool], bytes] = {}
#: program -> (own-pid slots, -own-pid slots), for every program :func:`seccomp_program` built
_SLOTS: dict[bytes, tuple[tuple[int, ...], tuple[int, ...]]] = {}


def _prepare(program: bytes) -> _Prepared:
    if not isinstance(program, (bytes, bytearray)):
        raise TypeError("program must be bytes")
    count, rest = divmod(len(program), _SOCK_FILTER.size)
    if rest or not 0 < count <= _BPF_MAXINSNS:
        raise ValueError(f"not a sock_filter array: {len(program)} bytes")
    self_slots, neg_slots = _SLOTS.get(bytes(program), ((), ()))
    buf = ctypes.create_string_buffer(bytes(program), len(program))
    base = ctypes.addressof(buf)
    fprog = _SockFprog(count, base)
    return (buf, fprog, ctypes.c_void_p(ctypes.addressof(fprog)),
            tuple(ctypes.c_uint32.from_address(base + offset) for offset in self_slots),
            tuple(ctypes.c_uint32.from_address(base + offset) for offset in neg_slots))


def seccomp_program(allow_subprocess: bool, arch: str | None = None, allow_unix: bool = False,
                    allow_inet: bool = False) -> bytes:
    """The policy (:data:`SECCOMP_TABLE`) as a raw ``struct sock_filter`` array for *arch*.

    ``allow_unix`` lets ``socket(AF_UNIX, ...)`` through: the executor sets it when it was given
    ``socket_dirs`` (a service such as the repo kind's PostgreSQL), so a sample can connect to the
    service's socket bound into its mount namespace. ``allow_inet`` lets ``socket(AF_INET /
    AF_INET6, ...)`` through (for requests that declare loopback networking); without it those
    get ``EACCES`` like every other family. ``socketpair`` is never restricted.

    The program compares some arguments with the pid of the process that installs it: install it
    with ``apply_seccomp(program, self_pid=os.getpid())`` (see :func:`apply_seccomp`).

    *arch* is ``"x86_64"`` or ``"aarch64"``; ``None`` means the running machine. Deterministic and
    cached: repeated calls with the same arguments return the same object. Programs for the
    native arch are also prepared (``sock_fprog``) so that :func:`apply_seccomp` in a child does
    no allocation. Every jump is forward and fits BPF's 8-bit offsets (checked while assembling).

    Raises:
        ValueError: unsupported or unknown architecture.
    """
    target = arch if arch is not None else _ARCH
    if target is None or target not in _ARCHES:
        raise ValueError(f"seccomp_program: unsupported architecture {arch or os.uname().machine!r}")
    key = (bool(allow_subprocess), target, bool(allow_unix), bool(allow_inet))
    program = _PROGRAMS.get(key)
    if program is None:
        built = _build_program(*key)
        program = _PROGRAMS[key] = built.program
        _SLOTS[program] = (built.self_slots, built.neg_slots)
        if target == _ARCH:
            _PREPARED[program] = _prepare(program)
    return program


def bind_self_pid(program: bytes, self_pid: int) -> bytes:
    """*program* with its own-pid constants set for *self_pid* (what :func:`apply_seccomp`
    installs), for inspection and emulation. Programs without such constants come back unchanged.

    Raises:
        ValueError: *self_pid* is not a positive 32-bit pid.
    """
    self_slots, neg_slots = _SLOTS.get(bytes(program), ((), ()))
    if not self_slots and not neg_slots:
        return bytes(program)
    _check_pid(self_pid)
    out = bytearray(program)
    for offset in self_slots:
        _U32.pack_into(out, offset, self_pid)
    for offset in neg_slots:
        _U32.pack_into(out, offset, -self_pid & 0xFFFFFFFF)
    return bytes(out)


def _check_pid(self_pid: object) -> None:
    if type(self_pid) is not int or not 0 < self_pid <= 0x7FFFFFFF:
        raise ValueError(f"self_pid must be the caller's pid (a positive int), not {self_pid!r}")


def apply_seccomp(program: bytes, self_pid: int | None = None) -> None:
    """Install *program* as a seccomp filter on the calling thread (call it in the child).

    ``self_pid``: the caller's pid as its own pid namespace sees it (``os.getpid()``). The
    programs of :func:`seccomp_program` confine calls such as ``prlimit64`` or ``kill`` to "own
    pid"; that pid is written into the prepared program here, just before installing it (into
    the child's copy-on-write copy of the parent's buffer: two 4-byte stores through views
    prepared in the parent).
    Descendants inherit the filter and with it this pid, so a grandchild (``allow_subprocess``)
    gets ``EPERM`` for ``prlimit(getpid(), ...)`` of its own pid while ``prlimit(0, ...)`` works.
    Programs without own-pid comparisons ignore it.

    Sets ``PR_SET_NO_NEW_PRIVS`` (idempotent; required for unprivileged callers and wanted
    anyway), then ``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog)``. Filters stack: a second
    call adds another filter and the strictest verdict wins. Only the calling thread is filtered,
    so call it while single-threaded; children and threads created later inherit it. Programs
    returned by :func:`seccomp_program` are pre-packed in the parent; others are packed here.

    Raises:
        ValueError: the program compares with the own pid and *self_pid* is missing or not a
            positive int; or *program* is not a non-empty ``sock_filter`` array (<= 4096 insns).
        TypeError: *program* is not bytes.
        OSError: seccomp is unavailable or the kernel rejected the program; the message names the
            prctl that failed.
    """
    prepared = _PREPARED.get(program) if type(program) is bytes else None
    if prepared is None:
        prepared = _prepare(program)
    _, _, fprog_ptr, self_cells, neg_cells = prepared
    if self_cells or neg_cells:
        if type(self_pid) is not int or not 0 < self_pid <= 0x7FFFFFFF:
            if self_pid is None:
                raise ValueError("apply_seccomp: this program compares with the caller's pid; "
                                 "pass self_pid=os.getpid()")
            _check_pid(self_pid)
        for cell in self_cells:
            cell.value = self_pid
        for cell in neg_cells:
            cell.value = -self_pid  # c_uint32 keeps the low 32 bits: (-pid) & 0xffffffff
    fn = _libc_syscall
    if fn is None or _SYS_PRCTL < 0:
        raise OSError(errno.ENOSYS, "prctl(PR_SET_SECCOMP): seccomp is unavailable on this platform")
    # inlined (no helper calls on the success path): see LandlockPolicy.apply on fault costs
    if fn(_SYS_PRCTL, _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0:
        _raise_errno("prctl(PR_SET_NO_NEW_PRIVS)")
    if fn(_SYS_PRCTL, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, fprog_ptr, 0, 0) < 0:
        _raise_errno("prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)")
