"""How the tests reach the project's Docker engine: the explicit socket of
``.ci/docker-engine.sh`` (:data:`DEFAULT_DOCKER_HOST`), and the locally built base image.

:func:`require_docker` skips the calling test with a visible reason only when the engine cannot
be run here (no root); with root, a missing engine is started by the project's script and a
missing base image is built (once, about a minute), so CI and a fresh machine run the tests, and
an engine that still does not answer is a failure, not a skip.

Sessions share the engine: each one that uses it holds a shared ``flock`` on the script's users
file (``IANVS_DOCKER_USERS``) until it ends. A session that started the engine asks the script
to ``stop`` it at the end, and any other runs ``release``; the script stops the engine only when
no other session holds the lock, so the last one out stops it (two test runs at once no longer
lose their containers to the other's end).
"""

from __future__ import annotations

import atexit
import fcntl
import functools
import os
import subprocess
from pathlib import Path

import pytest

from core.testenvmanager.sandbox.images import BASE_IMAGE, DEFAULT_DOCKER_HOST, ImageError

ROOT = Path(__file__).resolve().parents[2]


@functools.lru_cache(maxsize=1)
def _prepare() -> str:
    """'' when the engine answers and the base image exists, else the reason it cannot."""
    from core.testenvmanager.sandbox.images import build_base_image, connect

    script = str(ROOT / ".ci" / "docker-engine.sh")
    users = _use_engine()  # before looking: an engine being stopped right now is waited for
    try:
        client = connect(DEFAULT_DOCKER_HOST, timeout=10)
        atexit.register(_leave_engine, users, script, "release")
    except ImageError:
        try:  # the script waits for the engine at most 30 s; installing it may take minutes
            subprocess.run(["bash", script], check=False, timeout=900)
        except subprocess.TimeoutExpired:
            return "'.ci/docker-engine.sh' did not finish within 900 s" + _engine_log_tail()
        # this session started the engine: it asks for the stop when it ends (the script
        # leaves it to the last session still using it; images stay cached)
        atexit.register(_leave_engine, users, script, "stop")
        try:
            client = connect(DEFAULT_DOCKER_HOST, timeout=10)
        except ImageError as exc:
            return str(exc) + _engine_log_tail()
    try:
        build_base_image(client)
    except ImageError as exc:
        return f"cannot build {BASE_IMAGE}: {exc}"
    finally:
        client.close()
    return ""


def _use_engine() -> int:
    """A descriptor holding a shared lock on the engine's users file (created when missing),
    taken blocking: an engine whose last user is stopping it right now holds the exclusive
    lock until it is down, and this session then starts a fresh one. Not inherited by children
    (Python's descriptors are close-on-exec), so a daemon started from here never holds it."""
    path = os.environ.get("IANVS_DOCKER_USERS", "/run/ianvs-docker.users")
    fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def _leave_engine(users: int, script: str, how: str) -> None:
    """At the session's end: drop this session's lock, then ``stop`` (it started the engine) or
    ``release`` (it did not); the script stops the engine only when nobody else uses it."""
    os.close(users)
    subprocess.run(["bash", script, how], check=False, timeout=60)


def _engine_log_tail(lines: int = 20) -> str:
    """The end of the engine's log (where .ci/docker-engine.sh sends it), for a failure message."""
    log = Path(os.environ.get("IANVS_DOCKER_LOG", "/var/log/ianvs-dockerd.log"))
    try:
        tail = log.read_text(errors="replace").splitlines()[-lines:]
    except OSError as exc:
        return f"; no engine log ({exc})"
    return f"; {log} ends:\n" + "\n".join(tail)


def require_docker() -> None:
    """Skip (with the reason) without root; with root, fail unless the Docker engine answers
    and the base image is there (CI and a fresh machine must run these tests)."""
    if os.geteuid() != 0:
        pytest.skip("the docker backend tests need root (to run the Docker engine)")
    reason = _prepare()
    if reason:
        pytest.fail(f"the docker backend cannot run although this is root: {reason}")
