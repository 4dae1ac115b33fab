"""Uid leases: every ``local`` executor on a machine gets uids no other live executor uses.

A root ``local`` executor with ``workers=n`` runs slot ``i``'s sample as ``base + i`` and its
judge as ``base + n + i``. If two executors (two ``ianvs`` runs, two test suites, two edge
nodes on one host) used the same uids, a sample of one could signal, ``prlimit`` or read the
files of the other's processes. So uids come in *blocks* of :data:`BLOCK_SIZE`, and a block is
leased by an exclusive, non-blocking ``flock`` on ``<state dir>/<block>.lock``.

**Release without clean-up.** The lock's descriptor is held by the executor and inherited by
its fork server (``pass_fds``). ``flock`` locks belong to the open file description, so the
lease ends exactly when the last holder closes it or dies, SIGKILL included: there are no stale
leases and nothing to sweep. Lock files are never deleted (deleting a lock file races with a
process that just opened it); they are empty-ish records (owner, range) on a tmpfs.

**The range.** Allocation uses :data:`FIRST_UID` (1 900 000 000) to ``FIRST_UID + BLOCK_SIZE *
BLOCK_COUNT`` (262 144 uids). Chosen to stay clear of every range a Linux host hands out:
system and regular users (0-60000, ``login.defs``), systemd-homed and DynamicUser
(60001-65519), ``nobody`` (65534), the 16-bit boundary, the default subordinate uid/gid ranges
that ``useradd`` assigns for rootless containers (100000-600100000, ``SUB_UID_MIN``/``MAX``),
systemd-nspawn's container ranges (524288-1879048191) and systemd's "foreign" range
(2147352576-2147418111), and below 2^31 (tools that print uids as signed 32-bit numbers). Blocks
overlapping any range listed in ``/etc/subuid`` or ``/etc/subgid`` are skipped anyway, and so
are blocks whose uids a running process still has (e.g. a sample orphaned by a SIGKILLed
server, until the start sweep kills it).

An explicit ``uid_base`` (any value) takes the leases of the blocks its uids fall into, and
fails with :class:`UidLeaseError` naming the holder if a live executor has one of them.

State directory: :data:`STATE_DIR` (``/run`` is a tmpfs that vanishes at reboot on most
systems). Leases are only needed as root: without root no uid is ever dropped to.
"""
from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
from dataclasses import dataclass, field

from .owners import owner_token
from .types import SandboxError

__all__ = ["FIRST_UID", "BLOCK_SIZE", "BLOCK_COUNT", "STATE_DIR", "UidLease", "UidLeaseError",
           "LeaseInfo", "acquire", "lease_status"]

LOGGER = logging.getLogger(__name__)

FIRST_UID = 1_900_000_000
BLOCK_SIZE = 64
BLOCK_COUNT = 4096
STATE_DIR = "/run/ianvs/uid-leases"


class UidLeaseError(SandboxError):
    """No free uid block, or an explicit ``uid_base`` overlaps a live executor's lease."""


@dataclass
class UidLease:
    """Leased uids ``[base, base + count)``; ``fds`` hold the block locks (pass them to every
    process that uses the uids). :meth:`release` closes this process's descriptors."""

    base: int
    count: int
    blocks: list[int]
    fds: list[int] = field(default_factory=list)

    def release(self) -> None:
        """Close this process's lock descriptors (idempotent). The lease ends once every
        process that inherited them has closed them or died."""
        fds, self.fds = self.fds, []
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass


@dataclass(frozen=True)
class LeaseInfo:
    """One lock file's state: its block, whether a live process holds it and the record
    (``owner`` token, ``uid_base``, ``count``) its last holder wrote."""

    block: int
    held: bool
    record: dict

    @property
    def uids(self) -> tuple[int, int]:
        """First and last uid of the block."""
        return self.block * BLOCK_SIZE, self.block * BLOCK_SIZE + BLOCK_SIZE - 1


def _lock_path(state_dir: str, block: int) -> str:
    return os.path.join(state_dir, f"{block}.lock")


def _try_lock(state_dir: str, block: int) -> int | None:
    """An fd holding ``block``'s lock, or ``None`` if another open file holds it."""
    fd = os.open(_lock_path(state_dir, block), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return None
        raise
    return fd


def _read_record(state_dir: str, block: int) -> dict:
    try:
        with open(_lock_path(state_dir, block), "rb") as fh:
            data = json.loads(fh.read() or b"{}")
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_record(fd: int, record: dict) -> None:
    data = json.dumps(record).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def _reserved_ranges() -> list[tuple[int, int]]:
    """Subordinate uid/gid ranges configured on this host (``/etc/subuid``, ``/etc/subgid``)."""
    ranges = []
    for path in ("/etc/subuid", "/etc/subgid"):
        try:
            with open(path) as fh:
                for line in fh:
                    parts = line.strip().split(":")
                    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                        ranges.append((int(parts[1]), int(parts[1]) + int(parts[2])))
        except OSError:
            continue
    return ranges


def _uids_in_use(low: int, high: int) -> set[int]:
    """Real uids in ``[low, high)`` of processes running now."""
    used: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"Uid:"):
                        uid = int(line.split()[1])
                        if low <= uid < high:
                            used.add(uid)
                        break
        except (OSError, ValueError, IndexError):
            continue
    return used


def acquire(count: int, base: int | None = None, state_dir: str = STATE_DIR) -> UidLease:
    """Lease ``count`` consecutive uids: from the allocation range when ``base`` is ``None``,
    otherwise exactly ``[base, base + count)``. Raises :class:`UidLeaseError` when no range is
    free or when ``base`` overlaps a live lease (the message names the holder)."""
    if count < 1:
        raise ValueError("count must be >= 1")
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    record = {"owner": owner_token(), "count": count}
    if base is not None:
        if base < 0:
            raise ValueError("uid_base must be >= 0")
        blocks = list(range(base // BLOCK_SIZE, (base + count - 1) // BLOCK_SIZE + 1))
        lease = _lock_blocks(state_dir, blocks, base, count)
        if lease is None:
            holders = sorted({str(_read_record(state_dir, b).get("owner", "?")) for b in blocks})
            raise UidLeaseError(f"uids {base}..{base + count - 1} are leased by a live executor "
                                f"(owner pid:start {', '.join(holders)}; lock files in {state_dir}); "
                                "omit uid_base to get a free range")
        _record(lease, record)
        return lease
    need = (count + BLOCK_SIZE - 1) // BLOCK_SIZE
    reserved = _reserved_ranges()
    first, last = FIRST_UID // BLOCK_SIZE, FIRST_UID // BLOCK_SIZE + BLOCK_COUNT
    in_use: set[int] | None = None
    start = first
    while start + need <= last:
        blocks = list(range(start, start + need))
        low, high = start * BLOCK_SIZE, (start + need) * BLOCK_SIZE
        if any(a < high and low < b for a, b in reserved):
            start += 1
            continue
        lease = _lock_blocks(state_dir, blocks, low, count)
        if lease is None:
            start += 1
            continue
        if in_use is None:
            in_use = _uids_in_use(FIRST_UID, last * BLOCK_SIZE)
        if any(low <= uid < high for uid in in_use):  # orphans of a killed server still run
            LOGGER.info("uid block %d..%d: processes still run with its uids; skipped", low, high - 1)
            lease.release()
            start += need
            continue
        _record(lease, record)
        return lease
    raise UidLeaseError(f"no free block of {count} uids in {FIRST_UID}..{last * BLOCK_SIZE - 1} "
                        f"(lock files in {state_dir})")


def _lock_blocks(state_dir: str, blocks: list[int], base: int, count: int) -> UidLease | None:
    lease = UidLease(base=base, count=count, blocks=blocks)
    for block in blocks:
        fd = _try_lock(state_dir, block)
        if fd is None:
            lease.release()
            return None
        lease.fds.append(fd)
    return lease


def _record(lease: UidLease, record: dict) -> None:
    for fd in lease.fds:
        try:
            _write_record(fd, {**record, "uid_base": lease.base})
        except OSError as exc:  # the record is informational; the lock is what counts
            LOGGER.debug("uid lease record: %s", exc)


def lease_status(state_dir: str = STATE_DIR) -> list[LeaseInfo]:
    """Every lock file in ``state_dir`` with whether a live process holds it (probed with a
    non-blocking ``flock`` that is released at once). Empty when the directory is missing."""
    try:
        names = os.listdir(state_dir)
    except OSError:
        return []
    infos = []
    for name in sorted(names):
        stem = name[:-len(".lock")] if name.endswith(".lock") else ""
        if not stem.isdigit():
            continue
        block = int(stem)
        try:
            fd = _try_lock(state_dir, block)
        except OSError:
            continue
        if fd is not None:
            os.close(fd)
        infos.append(LeaseInfo(block=block, held=fd is None, record=_read_record(state_dir, block)))
    return infos
