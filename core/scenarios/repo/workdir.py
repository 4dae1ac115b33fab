"""The build's own folder: every scratch file of one ``ianvs dataset repo`` run lives in it, and a
killed run's folder (and whatever still runs in it) is removed by the next run.

``BuildDir()`` (a context manager) creates ``<base>/<pid>-<start ticks>-<random>`` (default base:
``~/.cache/ianvs-smart-coding/repo-builds``, outside ``/tmp``): the extracted source, the package's
wheel build, the coverage database, the per-function blanked copies and pip's temporary files
(``TMPDIR`` of the pip subprocesses) all go there. On exit (normal end, exception, Ctrl-C, and
SIGTERM, which it turns into ``SystemExit`` while it is open in the main thread) it removes the
folder. A SIGKILLed run cannot clean up: its folder carries the run's exact identity
(pid and start time, :func:`~core.testenvmanager.sandbox.owners.token_alive`), so the next
``BuildDir`` finds folders whose owner is gone, SIGKILLs every process whose working directory is
inside such a folder (test runs orphaned by the kill; they also get SIGKILL from the kernel when
their starting thread dies, see :mod:`.testrun`, but their own children do not), and removes it.
Processes are identified by their working directory only (``/proc/<pid>/cwd``): a process that is
not working inside a dead build's folder is never touched.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import threading
import time
from pathlib import Path
from types import FrameType, TracebackType

from core.testenvmanager.sandbox.owners import owner_token, token_alive

__all__ = ["BuildDir", "default_builds_dir", "sweep_dead_builds", "remove_dead_build", "kill_inside"]

LOG = logging.getLogger(__name__)


def default_views_dir() -> Path:
    """Where per-sample views go by default (next to the cached environments, outside /tmp)."""
    from core.scenarios.repo.env import default_cache_dir  # noqa: PLC0415 - avoid a cycle at import

    return default_cache_dir().parent / "repo-views"


def default_builds_dir() -> Path:
    from core.scenarios.repo.env import default_cache_dir  # noqa: PLC0415 - avoid a cycle at import

    return default_cache_dir().parent / "repo-builds"


def _owner(folder: Path) -> str | None:
    pid, _, rest = folder.name.partition("-")
    ticks = rest.split("-", 1)[0]
    return f"{pid}:{ticks}" if pid.isdigit() and ticks.isdigit() else None


def _processes_in(folder: Path) -> list[int]:
    """Pids of processes whose working directory lies inside ``folder``."""
    real = os.path.realpath(folder)
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        cwd = cwd.removesuffix(" (deleted)")
        if cwd == real or cwd.startswith(real + os.sep):
            out.append(int(entry))
    return out


def kill_inside(folder: Path) -> int:
    killed = 0
    for _ in range(5):  # a dying parent may fork once more: look again until nothing is left
        pids = _processes_in(folder)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.1)
    return killed


def sweep_dead_builds(base: Path) -> int:
    """Remove the folders under ``base`` whose build process is gone, after killing what still
    runs inside them. Returns how many folders were removed."""
    if not base.is_dir():
        return 0
    return sum(1 for folder in sorted(base.iterdir()) if remove_dead_build(str(folder)))


def remove_dead_build(path: str) -> bool:
    """Remove one build folder whose owner is gone (kill what works inside it first); ``False``
    when its owner is alive or unknown or it could not be removed (also ``ianvs sandbox clean``'s
    ``repo-builds`` kind)."""
    folder = Path(path)
    token = _owner(folder)
    if token is None or not folder.is_dir() or token_alive(token):
        return False
    killed = kill_inside(folder)
    shutil.rmtree(folder, ignore_errors=True)
    if folder.exists():
        return False
    LOG.info("removed the folder of a killed build %s%s", folder,
             f" and ended {killed} process(es) still running in it" if killed else "")
    return True


class BuildDir:
    """A run-owned scratch folder (see the module docstring). ``path`` is valid inside ``with``."""

    def __init__(self, base: Path | None = None) -> None:
        self.base = base or default_builds_dir()
        self.path = Path()
        self._previous: object = None

    def __enter__(self) -> Path:
        self.base.mkdir(parents=True, exist_ok=True)
        sweep_dead_builds(self.base)
        self.path = self.base / f"{owner_token().replace(':', '-')}-{secrets.token_hex(4)}"
        self.path.mkdir()
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_term)
        return self.path

    @staticmethod
    def _on_term(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)  # type: ignore[arg-type]
            self._previous = None
        kill_inside(self.path)
        shutil.rmtree(self.path, ignore_errors=True)
