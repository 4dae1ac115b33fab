"""A cached virtual environment per repository, in which its own tests run offline.

``ensure_env(cache_dir, key, requirements)`` creates ``<cache_dir>/<key>`` once (``python -m venv``
plus ``pip install`` of the requirements and the test tools), and returns a :class:`RepoEnv` whose
``pins`` (``pip freeze``) are recorded in every task so a dataset can be rebuilt identically. A
``--env`` pointing at an existing venv is used as is. Installing needs the package index; running
the tests afterwards does not.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from core.common.errors import IanvsError

__all__ = ["RepoEnv", "ensure_env", "default_cache_dir", "TEST_TOOLS"]

LOG = logging.getLogger(__name__)

#: Installed in every repository environment (the builder needs coverage contexts and junit XML).
TEST_TOOLS = ["pytest==8.3.4", "pytest-cov==6.0.0", "coverage==7.6.10"]


def default_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ianvs-smart-coding" / "repo-envs"


@dataclass(frozen=True)
class RepoEnv:
    """A venv on this machine (the ``local`` backend's repository environment)."""

    root: Path
    pins: list[str]

    backend = "local"

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def site_packages(self) -> str:
        out = subprocess.run([str(self.python), "-c", "import sysconfig;print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True)
        return out.stdout.strip()


def _freeze(python: Path) -> list[str]:
    out = subprocess.run([str(python), "-m", "pip", "freeze", "--all"], check=True, capture_output=True, text=True)
    return sorted(line for line in out.stdout.splitlines() if line and not line.startswith("-e "))


def ensure_env(requirements: list[str], cache_dir: Path | None = None, existing: Path | None = None) -> RepoEnv:
    """Return the environment for ``requirements`` (created and cached on first use).

    The cache key is a hash of the requirements, the test tools and this interpreter's version, so
    two repositories with the same pins share one venv. A half-built venv (no ``.complete``
    marker) is rebuilt.
    """
    if existing is not None:
        return RepoEnv(existing, _freeze(existing / "bin" / "python"))
    reqs = sorted(set(requirements) | set(TEST_TOOLS))
    key = hashlib.sha256(json.dumps([sys.version, reqs]).encode()).hexdigest()[:16]
    root = (cache_dir or default_cache_dir()) / key
    marker = root / ".complete"
    if not marker.exists():
        LOG.info("creating repository environment %s (%s)", root, ", ".join(reqs))
        try:
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(root)], check=True,
                           capture_output=True, text=True)
            subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "-q",
                            "--disable-pip-version-check", *reqs], check=True, capture_output=True, text=True)
        except subprocess.CalledProcessError as exc:
            tail = (exc.stderr or exc.stdout or "").strip().splitlines()[-3:]
            raise IanvsError(f"could not create the repository environment {root}: "
                             f"{' | '.join(tail) or exc}",
                             hint="creating it installs the tasks' pinned requirements once, which needs "
                                  "the package index; later runs are offline") from None
        marker.write_text(json.dumps(reqs))
    return RepoEnv(root, _freeze(root / "bin" / "python"))
