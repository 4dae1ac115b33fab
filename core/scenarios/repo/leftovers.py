"""What the ``repo`` kind leaves on a machine, for ``ianvs sandbox doctor`` and ``clean``.

=============== ======================================================= ======================
kind            where / how it is named                                 owner
=============== ======================================================= ======================
``postgres``    ``<tmp>/ianvs-pg-<pid>-<random>`` (a temp cluster,      the harness process
                :mod:`.postgres`)
``repo-views``  ``<cache>/repo-views/run-<pid>-<random>`` (:mod:`.execute`) the scoring process
``repo-builds`` ``<cache>/repo-builds/<pid>-<start ticks>-<random>``    the ``ianvs dataset repo``
                (:mod:`.workdir`)                                       process
=============== ======================================================= ======================

:class:`RepoKind.leftovers() <core.scenarios.repo.kind.RepoKind>` hands these to the
sandbox's registry (:func:`core.testenvmanager.sandbox.leftovers.register_leftovers`).
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Callable

from core.testenvmanager.sandbox.leftovers import Leftover, remove_tree, scan
from core.testenvmanager.sandbox.owners import token_alive

LOGGER = logging.getLogger(__name__)

PG_PREFIX = "ianvs-pg-"
_PG_RE = re.compile(r"^ianvs-pg-(\d+)-")
_VIEWS_RE = re.compile(r"^run-(?:(\d+)-)?")
_BUILDS_RE = re.compile(r"^(\d+)-(\d+)-[0-9a-f]+$")


def postgres_dirs(base: str | None = None) -> list[Leftover]:
    """Run directories of throw-away PostgreSQL clusters (``ianvs-pg-<pid>-...``)."""
    return scan(base or tempfile.gettempdir(), _PG_RE, "postgres")


def remove_postgres(path: str) -> bool:
    """Kill the dead owner's server (only if its command line names ``path``), then remove."""
    pidfile = os.path.join(path, "data", "postmaster.pid")
    try:
        with open(pidfile) as fh:
            server = int(fh.read().split("\n", 1)[0])
        with open(f"/proc/{server}/cmdline", "rb") as fh:
            if path.encode() in fh.read():
                os.kill(server, signal.SIGKILL)
    except (OSError, ValueError):
        pass
    shutil.rmtree(path, ignore_errors=True)
    return not os.path.lexists(path)


def repo_views(views_dir: str | None = None) -> list[Leftover]:
    """Per-run view folders of the repo kind (``run-<pid>-...``; ``run-<random>`` of older
    versions have no owner and are only listed)."""
    if views_dir is None:
        from core.scenarios.repo.workdir import default_views_dir

        views_dir = str(default_views_dir())
    return scan(views_dir, _VIEWS_RE, "repo-views")


def repo_builds(builds_dir: str | None = None) -> list[Leftover]:
    """Build folders of ``ianvs dataset repo`` (``<pid>-<start ticks>-<random>``; owner: that
    exact process). Removing one first kills the processes working inside it."""
    if builds_dir is None:
        from core.scenarios.repo.workdir import default_builds_dir

        builds_dir = str(default_builds_dir())

    def alive(pid: int, path: str) -> bool:
        match = _BUILDS_RE.match(os.path.basename(path))
        return token_alive(f"{pid}:{match.group(2)}") if match else True
    return scan(builds_dir, _BUILDS_RE, "repo-builds", alive)


def remove_build(path: str) -> bool:
    from core.scenarios.repo.workdir import remove_dead_build

    return remove_dead_build(path)


#: leftover kind -> (lister, remover), as :meth:`RepoKind.leftovers` returns them
LEFTOVERS: dict[str, tuple[Callable[[], list[Leftover]], Callable[[str], bool]]] = {
    "postgres": (postgres_dirs, remove_postgres),
    "repo-views": (repo_views, remove_tree),
    "repo-builds": (repo_builds, remove_build),
}
