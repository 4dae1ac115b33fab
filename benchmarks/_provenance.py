"""Provenance of a benchmark's figures: when, on what, under which load, by which command.

Every script in ``benchmarks/`` prints one line of this form beside its result (stdlib only)::

    provenance: date=2026-11-25T15:44:41Z load=0.43-1.20 nice=19 commit=1fa86f5 \
machine="2 cores, 23.5 GiB, Linux 6.18.5 x86_64, AMD EPYC 7B13" command="python benchmarks/scale.py"

* ``date``: when the script started, UTC, ISO 8601;
* ``load``: the 1-minute load average when the script started and when the line was printed
  (``os.getloadavg``), the figure the docs quote as "load 0.4-1.2";
* ``nice``: the script's nice value (benchmarks beside other work run under ``nice -n 19``);
* ``commit``: ``git rev-parse --short HEAD`` of this checkout, ``+dirty`` when tracked files
  differ from it, ``unknown`` outside git;
* ``machine``: cores, memory, kernel, architecture and CPU model; never the host name;
* ``command``: the command line as typed from the repository root
  (``python benchmarks/<script>.py <arguments>``).

Usage, first thing in ``main()`` (before the work, so the start load is the machine's own)::

    from _provenance import Provenance   # benchmarks/ is sys.path[0] for ``python benchmarks/x.py``
    provenance = Provenance()
    ...
    print(provenance.line())             # then the script's final line, unchanged
    print(final_line)

The docs quote this line next to each figure; see docs/testing.md, "Figures and their provenance".
"""
from __future__ import annotations

import datetime
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PREFIX = "provenance: "


def _load1() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def _memory_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024 ** 2:.1f} GiB"
    except OSError:
        pass
    return "? GiB"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "cpu model"):
                return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def machine() -> str:
    """Cores, memory, kernel, architecture, CPU model (no host name, no user)."""
    return (f"{os.cpu_count()} cores, {_memory_gib()}, {platform.system()} {platform.release()} "
            f"{platform.machine()}, {_cpu_model()}")


def commit(repo: Path = REPO) -> str:
    """Short commit of *repo*, ``+dirty`` when tracked files changed; ``unknown`` without git."""
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def command(argv: list[str] | None = None) -> str:
    """The command line as run from the repository root: ``python benchmarks/x.py args``."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]) if argv else Path("?")
    try:
        shown = str(script.resolve().relative_to(REPO))
    except ValueError:
        shown = str(script)
    return shlex.join(["python", shown, *argv[1:]])


def _fmt(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"


class Provenance:
    """Taken when a benchmark starts; :meth:`line` adds the load when its result is printed."""

    def __init__(self, argv: list[str] | None = None) -> None:
        self.started = datetime.datetime.now(datetime.timezone.utc)
        self.load_start = _load1()
        self.command = command(argv)
        self.machine = machine()
        self.commit = commit()

    @property
    def date(self) -> str:
        return self.started.strftime("%Y-%m-%dT%H:%M:%SZ")

    def note(self) -> str:
        """The docs' provenance note for these figures: the command in backticks, the date and
        the load, e.g. ``python benchmarks/scale.py``, 2026-11-25, load 1.2-1.9 (see
        docs/testing.md)."""
        end = _load1()
        load = ("not recorded" if self.load_start is None or end is None
                else f"{self.load_start:.1f}-{end:.1f}")
        return f"`{self.command}`, {self.started:%Y-%m-%d}, load {load}"

    def line(self) -> str:
        """``provenance: date=... load=<start>-<now> nice=... commit=... machine="..."
        command="..."`` (one line)."""
        load = f"{_fmt(self.load_start)}-{_fmt(_load1())}"
        return (f"{PREFIX}date={self.date} load={load} nice={os.nice(0)} commit={self.commit} "
                f'machine="{self.machine}" command="{self.command}"')


def parse(line: str) -> dict[str, str]:
    """The fields of a provenance line (for tests and tools): ``{"date": ..., "load": ...}``."""
    if not line.startswith(PREFIX):
        raise ValueError(f"not a provenance line: {line!r}")
    fields: dict[str, str] = {}
    for token in shlex.split(line[len(PREFIX):]):
        key, sep, value = token.partition("=")
        if sep:
            fields[key] = value
    return fields
