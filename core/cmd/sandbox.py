"""``ianvs sandbox ...``: the Docker backend's images and leftovers.

* ``ianvs sandbox image build [--dataset records.jsonl]``: build the base Python image
  locally (no registry; see :mod:`core.testenvmanager.sandbox.images`) and, with
  ``--dataset``, the task images its records' ``run_env``/``package_downloads`` need;
* ``ianvs sandbox sweep [--images]``: remove every container and volume the backend labelled
  (with ``--images`` also its images), e.g. after a machine crash.

Errors print one line and exit 1 (``--debug`` adds the traceback).
"""
from __future__ import annotations

import argparse
import sys
import logging
from collections.abc import Sequence
from pathlib import Path

from core.common.errors import IanvsError
from core.common.log import setup_logging

logger = logging.getLogger("ianvs")


def _parser() -> argparse.ArgumentParser:
    from core.testenvmanager.sandbox.images import DEFAULT_DOCKER_HOST

    parser = argparse.ArgumentParser(prog="ianvs sandbox",
                                     description="Images and clean-up of the docker sandbox backend.")
    parser.add_argument("--docker-host", default=DEFAULT_DOCKER_HOST,
                        help=f"the Docker engine (default {DEFAULT_DOCKER_HOST}, the engine of "
                             ".ci/docker-engine.sh)")
    parser.add_argument("--debug", action="store_true", help="show tracebacks and DEBUG logs")
    sub = parser.add_subparsers(dest="what", required=True)
    image = sub.add_parser("image", help="build images")
    image_sub = image.add_subparsers(dest="action", required=True)
    build = image_sub.add_parser("build", help="build the base Python image (and task images)")
    build.add_argument("--mirror", help="Debian mirror URL (default: this host's apt source)")
    build.add_argument("--suite", help="Debian release (default: this host's)")
    build.add_argument("--force", action="store_true", help="rebuild the base image")
    build.add_argument("--dataset", type=Path,
                       help="also build the task images this JSONL dataset's records need")
    sweep = sub.add_parser("sweep", help="remove labelled containers and volumes")
    sweep.add_argument("--images", action="store_true", help="remove the images too")
    return parser


def _task_envs(dataset: Path) -> list[tuple[str | None, dict[str, str]]]:
    from core.common.jsonl import iter_jsonl
    from core.testcasecontroller.metrics.code_tasks import code_task

    envs: dict[tuple[str | None, tuple[tuple[str, str], ...]], None] = {}
    for _line, record in iter_jsonl(dataset, "dataset file"):
        task = code_task(record)
        if task.needs_container:
            envs[(task.run_env, tuple(sorted(task.packages.items())))] = None
    return [(run_env, dict(packages)) for run_env, packages in envs]


def main(argv: Sequence[str]) -> int:
    """Entry point of ``ianvs sandbox``; returns the exit status."""
    from core.testenvmanager.sandbox.images import (BASE_IMAGE, ImageError, build_base_image,
                                                    connect, sweep, task_image)

    args = _parser().parse_args(argv)
    setup_logging("DEBUG" if args.debug else "INFO")
    try:
        client = connect(args.docker_host)
        try:
            if args.what == "sweep":
                counts = sweep(client, images=args.images)
                print("removed " + ", ".join(f"{n} {kind}" for kind, n in counts.items()))
                return 0
            image_id = build_base_image(client, args.mirror, args.suite, force=args.force)
            print(f"{BASE_IMAGE}: {image_id[:19]}")
            for run_env, packages in _task_envs(args.dataset) if args.dataset else []:
                tag = task_image(client, run_env or BASE_IMAGE, packages)
                print(f"{tag}: {run_env or BASE_IMAGE} + {', '.join(sorted(packages.values()))}")
        finally:
            client.close()
    except (ImageError, IanvsError, OSError) as exc:
        if args.debug:
            logger.exception("ianvs sandbox failed")
        print(f"ianvs: error: {exc}", file=sys.stderr)
        return 1
    return 0
