"""One-command check of the sandbox's walls on this machine: hostile memory and process attacks
on the ``local`` executor, each with the outcome a walled machine gives it (stdlib only).

Usage, from the repository root (as root for the strongest walls; without root it runs too and
shows what this machine enforces then)::

    python benchmarks/walls_check.py [--verbose]

It starts one ``LocalExecutor`` (2 workers, or the CPU count when smaller; the interpreter-level
audit hook off, so what is stopped is stopped by the kernel walls alone) and runs every check
below in both grading tiers, ``boundary`` and ``in_process``, one request at a time:

* ``control``: a correct sample; it must be graded ``passed`` (an executor that grades nothing
  cannot look walled);
* ``memfd`` (25 memfds of 60 MB, 1.5 GB, each file under ``RLIMIT_FSIZE``, ``memory_mb=256``:
  the case a cgroup v2 host graded ``passed``), ``tmpfs_files`` (200 MB of files in the working
  directory, 96 MB allowed), ``pipe_buffers``, ``socketpair_buffers``: memory outside the
  address space, which only the slot's memory group stops, and ``anonymous`` (512 MB, stopped
  by ``RLIMIT_AS``). Expected: ``memory_exceeded``;
* ``fork_bomb`` (``allow_subprocess``): every process forks without end; the sample's first
  process counts its own children and returns after 1000 or 2 s. Expected ``failed`` (the
  process limit stopped it short of 1000) or ``timeout``;
* ``escapee`` (``allow_subprocess``): a double fork with ``setsid``, a grandchild that sleeps
  60 s in a session of its own; the sample itself may finish, so ``passed`` is expected here,
  and the wall is that the grandchild is gone once the result is back.

Every attack's ``hold()`` returns what it got (megabytes, processes, the escapee's pid), prints
it (``held N``), and the test asserts that it got it: an attack that is not stopped is graded
``passed``, and ``passed`` is always FAIL for the memory and fork attacks. After every request
no process of it may remain (polled for up to 2 s): none of the executor's sample uids (at
``full``, where each slot runs as a uid of its own), none in the sample's session or process
group, and not the escapee (its pid, printed by the sample). A process left is a FAIL.

Output: a header, one line per check and tier (name, tier, outcome, expected outcome(s),
``OK``/``FAIL``, seconds of the request, a short detail: the grader's detail, what the attack
held, survivors), then the report of ``ianvs sandbox doctor`` (indented; run after the executor
is closed, so its leftovers list shows what this run left), the provenance line and last::

    walls_check: 16/16 as expected isolation=full cgroups=memory,pids slot_memory_groups=2 \
doctor=ok all_ok=true

``cgroups`` and any other mechanism whose name contains ``cgroup`` are printed as the executor
reports them in ``mechanisms``; ``slot_memory_groups`` counts the per-slot memory groups in its
``facts`` (0: memory outside the address space is not bounded per sample on this machine).

A check the executor itself fails on (its fork server died) is a FAIL with ``infra_error``; the
checks after it are not run and count as not as expected.

Exit status: 0 when every check came out as expected and the doctor ran (``all_ok=true``),
1 otherwise, 2 when the executor did not start. It takes 7-9 s on a 2-core machine (root,
cgroup v1), about 17-19 s there without root: no memory groups then, so memfd, tmpfs_files and
socketpair_buffers hold their megabytes and are graded ``passed`` (FAIL), and pipe_buffers is
refused by the kernel's per-user pipe limit (``error``: FAIL too, no sandbox wall stopped it).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Iterable

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from _provenance import Provenance  # noqa: E402

from core.testenvmanager.sandbox import ExecRequest  # noqa: E402
from core.testenvmanager.sandbox.local import LocalExecutor  # noqa: E402
from core.testenvmanager.sandbox.types import ExecResult, IsolationLevel, Outcome  # noqa: E402

LOGGER = logging.getLogger("walls_check")
TIERS = ("boundary", "in_process")

#: kinds of check: ``control`` must pass; ``hold``: the sample reports what it got, so
#: ``passed`` means the wall is missing; ``escape``: the sample may finish, the wall is that
#: nothing of it outlives the request
CONTROL, HOLD, ESCAPE = "control", "hold", "escape"

#: seconds to wait for a request's processes to be gone once its result is back
SURVIVOR_WAIT_S = 2.0

#: every program starts with this: the ids the survivor check looks for (the sample is the
#: leader of its own session and process group), printed before the attack
PRELUDE = ("import os, time\n"
           "print('ids', os.getpid(), os.getpgid(0), os.getsid(0), flush=True)\n")

#: every program's entry point: runs the attack (``_hold``) and reports what it got
EPILOGUE = ("def hold():\n"
            "    held = _hold()\n"
            "    print('held', held, flush=True)\n"
            "    return held\n")

MB = "B = b'x' * (1 << 20)\n"


@dataclass(frozen=True)
class Check:
    """One check: ``body`` defines ``_hold()``; the test asserts ``held >= need``."""

    name: str
    kind: str
    body: str
    need: int
    unit: str
    expected: frozenset[Outcome]
    memory_mb: int = 256
    allow_subprocess: bool = False
    timeout: float = 10.0

    @property
    def program(self) -> str:
        return PRELUDE + self.body + EPILOGUE

    @property
    def test(self) -> str:
        return f"def check(candidate):\n    held = candidate()\n    assert held >= {self.need}, held\n"

    def request(self, tier: str) -> ExecRequest:
        return ExecRequest(id=f"{self.name}-{tier}", program=self.program, test=self.test,
                           entry_point="hold", grading=tier, memory_mb=self.memory_mb,
                           timeout=self.timeout, allow_subprocess=self.allow_subprocess)


MEMORY_EXCEEDED = frozenset({Outcome.MEMORY_EXCEEDED})

CHECKS: tuple[Check, ...] = (
    Check("control", CONTROL, "def _hold():\n    return 2 + 3\n", 5, "", frozenset({Outcome.PASSED})),
    # many files, each under RLIMIT_FSIZE (64 MiB), so only the memory group can stop them
    Check("memfd", HOLD, MB + "KEEP = []\n"
          "def _hold():\n"
          "    total = 0\n"
          "    for n in range(25):\n"
          "        fd = os.memfd_create('hog'); KEEP.append(fd)\n"
          "        for i in range(60):\n"
          "            total += os.write(fd, B)\n"
          "    return total >> 20\n", 1500, "MB", MEMORY_EXCEEDED, memory_mb=256),
    # under the working directory's tmpfs size (256 MB), so only the memory group can stop them
    Check("tmpfs_files", HOLD, MB + "def _hold():\n"
          "    total = 0\n"
          "    for n in range(8):\n"
          "        with open(f'big{n}', 'wb') as fh:\n"
          "            for i in range(25):\n"
          "                total += fh.write(B)\n"
          "    return total >> 20\n", 200, "MB", MEMORY_EXCEEDED, memory_mb=96),
    Check("pipe_buffers", HOLD, "import fcntl\nKEEP = []\n"
          "def _hold():\n"
          "    total = 0\n"
          "    for i in range(100):\n"
          "        r, w = os.pipe(); KEEP.extend((r, w))\n"
          "        fcntl.fcntl(w, 1031, 1 << 20)\n"  # F_SETPIPE_SZ
          "        os.set_blocking(w, False)\n"
          "        try:\n"
          "            while True:\n"
          "                total += os.write(w, b'x' * 65536)\n"
          "        except BlockingIOError:\n"
          "            pass\n"
          "    return total >> 20\n", 96, "MB", MEMORY_EXCEEDED, memory_mb=48),
    Check("socketpair_buffers", HOLD, "import socket\nKEEP = []\n"
          "def _hold():\n"
          "    total = 0\n"
          "    for i in range(100):\n"
          "        a, b = socket.socketpair(); KEEP.extend((a, b))\n"
          "        for s in (a, b):\n"
          "            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 30)\n"
          "            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 30)\n"
          "            s.setblocking(False)\n"
          "            try:\n"
          "                while True:\n"
          "                    total += s.send(b'x' * 65536)\n"
          "            except BlockingIOError:\n"
          "                pass\n"
          "    return total >> 20\n", 129, "MB", MEMORY_EXCEEDED, memory_mb=128),
    Check("anonymous", HOLD, "def _hold():\n    b = bytearray(512 << 20)\n    return len(b) >> 20\n",
          512, "MB", MEMORY_EXCEEDED, memory_mb=128),
    # every process forks without end (sleeping a moment when refused); the first one counts
    # its own children and returns after 1000 of them or 2 s
    Check("fork_bomb", HOLD, "def _hold():\n"
          "    made, end = 0, time.monotonic() + 2.0\n"
          "    while made < 1000 and time.monotonic() < end:\n"
          "        try:\n"
          "            pid = os.fork()\n"
          "        except OSError:\n"
          "            continue\n"
          "        if pid == 0:\n"
          "            while True:\n"
          "                try:\n"
          "                    os.fork()\n"
          "                except OSError:\n"
          "                    time.sleep(0.01)\n"
          "        made += 1\n"
          "    return made\n", 1000, "processes", frozenset({Outcome.FAILED, Outcome.TIMEOUT}),
          allow_subprocess=True, timeout=5.0),
    # a grandchild in a session of its own (re-parented when its parent exits) sleeps 60 s
    Check("escapee", ESCAPE, "def _hold():\n"
          "    r, w = os.pipe()\n"
          "    if os.fork() == 0:\n"
          "        os.setsid()\n"
          "        pid = os.fork()\n"
          "        if pid == 0:\n"
          "            time.sleep(60)\n"
          "            os._exit(0)\n"
          "        os.write(w, str(pid).encode())\n"
          "        os._exit(0)\n"
          "    return int(os.read(r, 32))\n", 1, "pid", frozenset({Outcome.PASSED}),
          allow_subprocess=True),
)


def verdict(check: Check, outcome: Outcome, survivors: Iterable[int]) -> bool:
    """Whether ``outcome`` (with ``survivors`` left afterwards) is what a walled machine gives
    ``check``: a process left is always wrong, and so is ``passed`` for an attack whose sample
    reports what it got (it got it: the wall is missing)."""
    if list(survivors):
        return False
    if check.kind == HOLD and outcome is Outcome.PASSED:
        return False
    return outcome in check.expected


# ------------------------------------------------------------------------------ survivors
@dataclass(frozen=True)
class Marks:
    """What identifies a request's processes: its sample's ids (printed by the sample) and the
    executor's sample uids (``full`` only: at lower levels samples run as the caller)."""

    sessions: frozenset[int]
    pids: frozenset[int]
    uids: range


def marks(stdout: str, uids: range) -> Marks:
    """The ``ids pid pgid sid`` and ``held <pid>`` lines of a sample's output (each tier's
    sample prints its own; the escapee's pid comes as ``held``). A session or group counts
    only when the sample leads it (one it shares with the fork server would name the server)."""
    sessions: set[int] = set()
    pids: set[int] = set()
    for line in stdout.splitlines():
        words = line.split()
        if len(words) == 4 and words[0] == "ids" and all(w.isdigit() for w in words[1:]):
            pid, pgid, sid = map(int, words[1:])
            sessions.update(mark for mark in (pgid, sid) if mark == pid)
        elif len(words) == 2 and words[0] == "held" and words[1].isdigit():
            pids.add(int(words[1]))
    return Marks(frozenset(sessions), frozenset(pids), uids)


def _process(pid: str) -> tuple[int, int, int] | None:
    """``(real uid, process group, session)`` of a running process; None when it is gone or a
    zombie (killed: only its reaping is left)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        with open(f"/proc/{pid}/status") as fh:
            uid = next(int(line.split()[1]) for line in fh if line.startswith("Uid:"))
    except (OSError, StopIteration, ValueError):
        return None
    fields = stat[stat.rindex(b")") + 2:].split()
    if fields[0] == b"Z":
        return None
    return uid, int(fields[2]), int(fields[3])


def survivors(found: Marks, escapee: bool) -> list[int]:
    """Pids of running processes of one request: a sample uid, the sample's session or process
    group, or (``escapee``) a pid the sample reported."""
    left = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        info = _process(entry)
        if info is None:
            continue
        uid, pgid, sid = info
        if (uid in found.uids or pgid in found.sessions or sid in found.sessions
                or (escapee and int(entry) in found.pids)):
            left.append(int(entry))
    return sorted(left)


def wait_for_survivors(found: Marks, escapee: bool) -> list[int]:
    """:func:`survivors`, polled until none are left or :data:`SURVIVOR_WAIT_S` has passed
    (killed processes may take a moment to be reaped)."""
    deadline = time.monotonic() + SURVIVOR_WAIT_S
    left = survivors(found, escapee)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = survivors(found, escapee)
    return left


# ------------------------------------------------------------------------------ running
@dataclass(frozen=True)
class Row:
    """One check in one tier, as printed."""

    check: Check
    tier: str
    outcome: Outcome
    seconds: float
    survivors: list[int]
    detail: str

    @property
    def ok(self) -> bool:
        return verdict(self.check, self.outcome, self.survivors)

    def line(self) -> str:
        expected = "|".join(sorted(o.value for o in self.check.expected))
        return (f"{self.check.name:<19} {self.tier:<10} {self.outcome.value:<16} {expected:<16} "
                f"{'OK' if self.ok else 'FAIL':<4} {self.seconds:6.2f}s  {self.detail}")


HEADER = f"{'check':<19} {'tier':<10} {'outcome':<16} {'expected':<16} {'ok':<4} {'secs':>7}  detail"


def _detail(check: Check, result: ExecResult, left: list[int], checked: str) -> str:
    held = re.findall(r"^held (\d+)$", result.stdout, re.M)
    parts = [" ".join(result.detail.split())[:90]] if result.detail else []
    if held and check.kind != CONTROL:
        parts.append(f"held {held[-1]} {check.unit}")
    parts.append(f"survivors: {', '.join(map(str, left[:8]))}" if left else f"no survivors ({checked})")
    return "; ".join(parts)


def run_check(executor: LocalExecutor, check: Check, tier: str) -> Row:
    """Run ``check`` in ``tier`` and look for what it left behind."""
    full = executor.isolation >= IsolationLevel.FULL
    uids = range(executor.uid_base, executor.uid_base + executor.workers) if full else range(0)
    start = time.monotonic()
    (result,) = list(executor.run([check.request(tier)]))
    seconds = time.monotonic() - start
    found = marks(result.stdout, uids)
    left = wait_for_survivors(found, escapee=check.kind == ESCAPE)
    checked = "uids, session" if full else "session"
    if check.kind == ESCAPE:
        checked += ", escapee pid" if found.pids else ", escapee pid not reported"
    LOGGER.debug("%s/%s: %s stdout=%r stderr=%r", check.name, tier, result.outcome.value,
                 result.stdout[-300:], result.stderr[-300:])
    return Row(check, tier, result.outcome, seconds, left, _detail(check, result, left, checked))


def doctor() -> tuple[int, str]:
    """``ianvs sandbox doctor`` (what the ``ianvs`` console script runs for it:
    ``core.cmd.sandbox.main(['doctor'])``) in a child interpreter: exit status and output."""
    code = "import sys; from core.cmd.sandbox import main; sys.exit(main(['doctor']))"
    try:
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
    except subprocess.TimeoutExpired as exc:
        return 124, f"timed out after {exc.timeout} s"
    return proc.returncode, (proc.stdout + proc.stderr).rstrip()


def cgroup_fields(executor: LocalExecutor) -> str:
    """The executor's cgroup mechanisms as ``key=value`` (lists comma-joined) and the number of
    per-slot memory groups."""
    fields = []
    for key, value in executor.mechanisms.items():
        if "cgroup" in key:
            shown = (",".join(map(str, value)) or "none") if isinstance(value, (list, tuple)) else value
            fields.append(f"{key}={shown}")
    fields.append(f"slot_memory_groups={len(executor.facts.get('slot_memory') or [])}")
    return " ".join(fields)


def main(argv: list[str] | None = None) -> int:
    provenance = Provenance()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--verbose", "-v", action="store_true", help="log diagnostics (DEBUG)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    workers = min(2, cpus)
    began = time.monotonic()
    try:
        executor = LocalExecutor(workers=workers, audit_hook=False)
    except Exception as exc:  # noqa: BLE001 - reported, exit status 2
        LOGGER.debug("executor start failed", exc_info=True)
        print(f"walls_check: the local executor did not start: {exc}")
        return 2
    rows: list[Row] = []
    try:
        print(f"walls_check: local executor, {workers} worker(s), uid {os.geteuid()}, "
              f"isolation={executor.isolation}, audit hook off (kernel walls only)")
        print(HEADER)
        for check in CHECKS:
            for tier in TIERS:
                try:
                    row = run_check(executor, check, tier)
                except Exception as exc:  # noqa: BLE001 - the executor failed: reported as FAIL
                    LOGGER.debug("%s/%s failed", check.name, tier, exc_info=True)
                    row = Row(check, tier, Outcome.INFRA_ERROR, 0.0, [], f"the executor failed: {exc!r}")
                rows.append(row)
                print(row.line(), flush=True)
                if not executor.alive():
                    break
            if not executor.alive():
                print("walls_check: the fork server died; the remaining checks were not run")
                break
        isolation, cgroups = executor.isolation, cgroup_fields(executor)
    finally:
        executor.close()
    rc, report = doctor()
    print(f"doctor (ianvs sandbox doctor, exit status {rc}):")
    print("\n".join("    " + line for line in report.splitlines()))
    good, total = sum(row.ok for row in rows), len(CHECKS) * len(TIERS)
    all_ok = good == total and rc == 0
    LOGGER.debug("walls_check took %.1f s", time.monotonic() - began)
    print(provenance.line())
    print(f"walls_check: {good}/{total} as expected isolation={isolation} {cgroups} "
          f"doctor={'ok' if rc == 0 else f'failed({rc})'} all_ok={str(all_ok).lower()}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
