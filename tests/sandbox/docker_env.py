"""How the tests reach the project's Docker engine: the explicit socket of
``.ci/docker-engine.sh`` (:data:`DEFAULT_DOCKER_HOST`), and the locally built base image.

:func:`require_docker` skips the calling test with a visible reason only when the engine cannot
be run here (no root); with root, a missing engine is started by the project's script and a
missing base image is built (once, about a minute), so CI and a fresh machine run the tests, and
an engine that still does not answer is a failure, not a skip. An engine this session started is
stopped when the session ends.
"""

from __future__ import annotations

import atexit
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

    try:
        client = connect(DEFAULT_DOCKER_HOST, timeout=10)
    except ImageError:
        script = str(ROOT / ".ci" / "docker-engine.sh")
        try:  # the script waits for the engine at most 30 s; installing it may take minutes
            subprocess.run(["bash", script], check=False, timeout=900)
        except subprocess.TimeoutExpired:
            return "'.ci/docker-engine.sh' did not finish within 900 s" + _engine_log_tail()
        # this session started the engine, so it stops it when it ends (images stay cached)
        atexit.register(subprocess.run, ["bash", script, "stop"], check=False, timeout=60)
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
