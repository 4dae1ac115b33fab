"""Cost of the seccomp policy in a freshly forked child: the current ``walls.py`` against a
baseline version of it (stdlib only; Linux, x86_64 or aarch64).

Usage: ``python benchmarks/seccomp_policy.py [--baseline REV_OR_PATH] [--rounds 9] [--children 40]``

The baseline is a git revision (read with ``git show REV:core/testenvmanager/sandbox/walls.py``)
or a path to a ``walls.py``; the default is the last revision with the default-allow denylist
policy. Both modules are loaded by path, their strict programs (``allow_subprocess=False``) built
and prepared here, in the parent, as the fork server does. Then, in rounds that alternate the
order of the variants (``none``: no filter, ``old``, ``new``), each variant forks ``children``
children; each child

* first does a little unrelated work (a few syscalls, allocations, ``json``/``struct`` calls):
  the fork server's child has run Landlock, ``setuid`` and its descriptor juggling before it
  installs the filter, so the pages every Python call touches are no longer first-touch faults
  there; without this warm-up the first ``os.getpid()`` alone costs ~15 us;
* times installing its filter (``apply_seccomp``; for ``new`` including ``os.getpid()`` and the
  pid patch, what the fork server's child pays), and
* times three hot loops after it: ``getppid`` (a syscall the kernel's action cache allows
  without running the filter), ``getrlimit`` (``prlimit64(0, ...)``: the new policy inspects its
  pid argument, so the filter runs on every call) and ``kill(getpid(), 0)`` (likewise in the new
  strict program).

Per round the median over the children is taken; the figure reported is the median over rounds,
and the ratios new/old are computed per round, then their median. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import resource
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from types import ModuleType
from typing import Callable

LOGGER = logging.getLogger("seccomp_policy")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from _provenance import Provenance  # noqa: E402
WALLS = os.path.join("core", "testenvmanager", "sandbox", "walls.py")
#: the last revision whose policy was default-allow with a denylist
DEFAULT_BASELINE = "08ae78d"
LOOPS = ("getppid", "getrlimit", "kill_self")
_RESULT = struct.Struct("<4d")  # attach_us, then ns per call of each loop


def load_walls(path: str, name: str) -> ModuleType:
    """Load a ``walls.py`` by path under *name* (as the fork server does)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def baseline_path(baseline: str, scratch: str) -> str:
    """A file path for *baseline*: itself if it is a file, else the git revision's walls.py."""
    if os.path.isfile(baseline):
        return baseline
    text = subprocess.run(["git", "-C", ROOT, "show", f"{baseline}:{WALLS}"], check=True,
                          capture_output=True, text=True).stdout
    path = os.path.join(scratch, "walls_baseline.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def make_installers(old: ModuleType, new: ModuleType) -> dict[str, Callable[[], None]]:
    """variant -> function installing its filter in the calling (child) process."""
    old_program = old.seccomp_program(False)
    new_program = new.seccomp_program(False)
    old_apply, new_apply, getpid = old.apply_seccomp, new.apply_seccomp, os.getpid

    def install_old() -> None:
        old_apply(old_program)

    def install_new() -> None:
        new_apply(new_program, getpid())

    return {"none": lambda: None, "old": install_old, "new": install_new}


def warm_up() -> None:
    """Work a fork server child has done before it installs the filter (see the docstring)."""
    os.getpid()
    os.getppid()
    os.fstat(0)
    os.umask(0o022)
    json.dumps({"warm": [index * 3 for index in range(200)]})
    struct.pack("<I", 7)


def child(install: Callable[[], None], iterations: int, wfd: int) -> None:
    """Runs in the forked child: warm up, install, time the loops, write the figures, exit."""
    warm_up()
    perf = time.perf_counter_ns
    t0 = perf()
    install()
    attach = (perf() - t0) / 1000.0
    figures = [attach]
    getppid, getrlimit, kill, pid = os.getppid, resource.getrlimit, os.kill, os.getpid()
    nofile = resource.RLIMIT_NOFILE
    for loop in LOOPS:
        t0 = perf()
        if loop == "getppid":
            for _ in range(iterations):
                getppid()
        elif loop == "getrlimit":
            for _ in range(iterations):
                getrlimit(nofile)
        else:
            for _ in range(iterations):
                kill(pid, 0)
        figures.append((perf() - t0) / iterations)
    os.write(wfd, _RESULT.pack(*figures))


def run_variant(install: Callable[[], None], children: int, iterations: int) -> list[tuple[float, ...]]:
    """Fork *children* children one after another; their (attach_us, ns per call...) figures."""
    out: list[tuple[float, ...]] = []
    for _ in range(children):
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(rfd)
                child(install, iterations, wfd)
                code = 0
            finally:
                os._exit(code)
        os.close(wfd)
        data = os.read(rfd, _RESULT.size)
        os.close(rfd)
        _, status = os.waitpid(pid, 0)
        if status != 0 or len(data) != _RESULT.size:
            signame = signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status) else status
            raise RuntimeError(f"benchmark child failed: {signame}")
        out.append(_RESULT.unpack(data))
    return out


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="git revision or walls.py path")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--children", type=int, default=40, help="children per variant per round")
    parser.add_argument("--iterations", type=int, default=5000, help="calls per loop per child")
    args = parser.parse_args()
    provenance = Provenance()

    with tempfile.TemporaryDirectory() as scratch:
        old = load_walls(baseline_path(args.baseline, scratch), "walls_baseline")
    new = load_walls(os.path.join(ROOT, WALLS), "walls_current")
    if not new.seccomp_available():
        LOGGER.error("seccomp filters are unavailable here: %s", new.describe())
        return 2
    installers = make_installers(old, new)
    order = list(installers)
    medians: dict[str, list[tuple[float, ...]]] = {name: [] for name in order}
    for round_no in range(args.rounds):
        names = order if round_no % 2 == 0 else order[::-1]
        for name in names:
            figures = run_variant(installers[name], args.children, args.iterations)
            medians[name].append(tuple(statistics.median(column) for column in zip(*figures)))
        LOGGER.info("round %d/%d: attach old %.1f us new %.1f us", round_no + 1, args.rounds,
                    medians["old"][-1][0], medians["new"][-1][0])

    fields = ("attach_us",) + tuple(f"{loop}_ns" for loop in LOOPS)
    result: dict[str, object] = {
        "arch": os.uname().machine, "kernel": os.uname().release, "baseline": args.baseline,
        "rounds": args.rounds, "children": args.children, "iterations": args.iterations,
        "loadavg": round(os.getloadavg()[0], 2),
        "old_instructions": len(old.seccomp_program(False)) // 8,
        "new_instructions": len(new.seccomp_program(False)) // 8,
    }
    for name in order:
        result[name] = {field: round(statistics.median(r[i] for r in medians[name]), 3)
                        for i, field in enumerate(fields)}
    result["ratio_new_old"] = {
        field: round(statistics.median(n[i] / o[i] for n, o in zip(medians["new"], medians["old"])
                                       if o[i] > 0), 3)
        for i, field in enumerate(fields)}
    print(provenance.line())
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
