"""A repository environment as a docker image (the ``docker`` backend's counterpart of :mod:`.env`).

``ensure_image_env(requirements)`` returns an :class:`ImageEnv` for the image that adds the tasks'
pinned ``env.requirements`` and the test tools (:data:`.env.TEST_TOOLS`) to the sandbox's base
image (:func:`~core.testenvmanager.sandbox.images.env_image`: built once, cached by content hash,
labelled; its ``pip freeze`` is recorded on the image and returned as ``pins``). With ``run_env``
(a task's existing image) that image is used as it is: it must already hold pytest and the
repository's requirements; its site directories and installed distributions are read from it by
one run of its ``python3`` without network (an image made here, with packages in
:data:`~core.testenvmanager.sandbox.images.PACKAGES_DIR`, qualifies).

Building needs the host's package index (wheels only, for the image's Python); runs never
install anything. Every failure is one :class:`~core.common.errors.IanvsError` naming the
requirements or the image, with the fix.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from core.common.errors import IanvsError
from core.scenarios.repo.env import TEST_TOOLS, provides_probe
from core.testenvmanager.sandbox.images import (BASE_IMAGE, DEFAULT_DOCKER_HOST, PACKAGES_DIR, ImageError,
                                                connect, env_image, image_pins, run_in_image)

__all__ = ["ImageEnv", "ensure_image_env", "image_provides"]

LOG = logging.getLogger(__name__)

#: Printed by ``python3`` in a ``run_env`` image: its site directories and installed distributions.
_PROBE = """
import json, os, site, sys, sysconfig
from importlib import metadata
dirs = [p for p in [*site.getsitepackages(), sysconfig.get_paths()["purelib"], %r] if os.path.isdir(p)]
sys.path.extend(dirs)
pins = sorted({f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions() if d.metadata['Name']})
print(json.dumps({"site": list(dict.fromkeys(dirs)), "pins": pins}))
""" % PACKAGES_DIR


@dataclass(frozen=True)
class ImageEnv:
    """An image in which a repository's tests run (``docker`` backend).

    ``site``: directories (inside the image) the runner puts on ``sys.path`` after the view;
    ``pins``: the image's installed distributions (``name==version``), recorded with results.
    """

    image: str
    site: list[str]
    pins: list[str]
    docker_host: str = DEFAULT_DOCKER_HOST
    options: dict[str, Any] = field(default_factory=dict)

    backend = "docker"


def ensure_image_env(requirements: list[str], run_env: str | None = None, base: str = BASE_IMAGE,
                     docker_host: str = DEFAULT_DOCKER_HOST) -> ImageEnv:
    """The image environment for ``requirements`` (built on first use), or ``run_env`` as is.

    Raises :class:`IanvsError` when the engine does not answer, the base or ``run_env`` image is
    missing, a requirement cannot be installed, or ``run_env`` has no pytest.
    """
    try:
        client = connect(docker_host)
    except ImageError as exc:
        raise IanvsError(str(exc), hint="repo tasks on the docker backend need the project's Docker "
                                        "engine (.ci/docker-engine.sh, as root)") from None
    try:
        if run_env:
            return _existing(client, run_env, docker_host)
        try:
            tag = env_image(client, base, list(requirements), list(TEST_TOOLS))
        except ImageError as exc:
            raise IanvsError(f"could not build the repository image for {', '.join(requirements) or 'no requirements'}: "
                             f"{exc}", hint="the image installs the tasks' pinned requirements (wheels for the "
                                            "image's Python) from the host's package index once; later runs "
                                            "are offline") from None
        LOG.info("repository image %s (%s)", tag, ", ".join(requirements) or "test tools only")
        return ImageEnv(tag, [PACKAGES_DIR], image_pins(client, tag), docker_host)
    finally:
        client.close()


#: (image, docker host, modules) -> what :func:`image_provides` found (images are immutable)
_PROVIDES: dict[tuple[str, str, tuple[str, ...]], dict[str, str]] = {}


def image_provides(env: ImageEnv, modules: list[str]) -> dict[str, str]:
    """``{module: where}`` for each of ``modules`` that ``env``'s image imports from outside its
    standard library (its site directories first on ``sys.path``, as the runner puts them): one
    run of its ``python3`` without network, remembered per image. Raises :class:`IanvsError`
    when the engine does not answer or the image cannot run the probe."""
    key = (env.image, env.docker_host, tuple(sorted(modules)))
    if key not in _PROVIDES:
        try:
            client = connect(env.docker_host)
            try:
                out = run_in_image(client, env.image, provides_probe(list(key[2]), list(env.site)))
            finally:
                client.close()
            found = json.loads(out.strip().splitlines()[-1])["found"]
        except (ImageError, ValueError, IndexError, KeyError) as exc:
            raise IanvsError(f"cannot inspect the repository image {env.image}: {exc}",
                             hint="the docker backend needs the project's Docker engine "
                                  "(.ci/docker-engine.sh, as root)") from None
        _PROVIDES[key] = {str(k): str(v) for k, v in found.items()}
    return dict(_PROVIDES[key])


def _existing(client: Any, image: str, docker_host: str) -> ImageEnv:
    try:
        out = run_in_image(client, image, _PROBE + "import pytest\n")
        facts = json.loads(out.strip().splitlines()[-1])
    except (ImageError, ValueError, IndexError) as exc:
        raise IanvsError(f"run_env image {image!r} cannot run the repository's tests: {exc}",
                         hint="name an image on the project's Docker engine whose python3 has pytest "
                              "and the repository's requirements installed") from None
    return ImageEnv(image, [str(p) for p in facts["site"]], [str(p) for p in facts["pins"]], docker_host)
