"""``ianvs sandbox ...``: the walls of this machine, what runs left behind, the docker images.

* ``ianvs sandbox doctor``: start a ``local`` executor briefly and print its isolation level,
  each mechanism and what the next level needs; then list what sandbox runs left on this host
  (:mod:`core.testenvmanager.sandbox.leftovers`), each with its owner and whether it is alive,
  and the uid leases;
* ``ianvs sandbox clean [--dry-run]``: remove what dead owners left (never a live run's); one
  line per item and a summary;
* ``ianvs sandbox image build [--dataset records.jsonl]``: build the base Python image
  locally (no registry; see :mod:`core.testenvmanager.sandbox.images`) and, with
  ``--dataset``, the task images its records' ``run_env``/``package_downloads`` need;
* ``ianvs sandbox sweep [--images]``: remove the docker backend's labelled containers whose
  ``ianvs`` process is gone (a live run's are never touched: two runs on one machine are
  normal), unused labelled volumes, dangling labelled images, and with ``--images`` its images.

Errors print one line and exit 1 (``--debug`` adds the traceback).
"""
from __future__ import annotations

import argparse
import sys
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from core.common.errors import IanvsError
from core.common.log import setup_logging
from core.scenarios import DEFAULT_KIND

if TYPE_CHECKING:
    from core.testenvmanager.sandbox.leftovers import Leftover

logger = logging.getLogger("ianvs")


def sandbox_parser() -> argparse.ArgumentParser:
    """The parser of ``ianvs sandbox`` (builds it only; docker is not contacted)."""
    from core.testenvmanager.sandbox.images import DEFAULT_DOCKER_HOST

    parser = argparse.ArgumentParser(prog="ianvs sandbox",
                                     description="Walls, leftovers and docker images of the sandbox.")
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
    build.add_argument("--kind", default=DEFAULT_KIND,
                       help=f"the task kind of the --dataset records (default {DEFAULT_KIND})")
    sweep = sub.add_parser("sweep", help="remove labelled containers of dead runs and unused volumes")
    sweep.add_argument("--images", action="store_true", help="remove the images too")
    sub.add_parser("doctor", help="show the walls of this machine and what runs left behind")
    clean = sub.add_parser("clean", help="remove what runs whose owner is dead left behind")
    clean.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    return parser


def _item_line(status: str, item: "Leftover") -> str:
    detail = f"  ({item.detail})" if item.detail else ""
    return f"{status:<13} {item.kind:<10} {item.name}  [{item.owner_text}]{detail}"


def _cgroup_lines(facts: dict) -> list[str]:
    """The cgroup part of the doctor's report: the version, the controllers each hierarchy
    offers, the groups made, each wall, and the fix for a missing one."""
    from core.testenvmanager.sandbox.cgroups import WALLS, cgroup_fix, walls

    made = facts.get("cgroup") or {}
    layout = made.get("layout") or {}
    v2 = (f"; v2 at {layout['v2_mount']}: {' '.join(layout.get('v2_controllers') or []) or 'none'}"
          if layout.get("v2_mount") else "")
    lines = [f"cgroup version: {layout.get('version', 'unknown')} (v1: "
             f"{' '.join(layout.get('v1') or []) or 'none'}{v2})"]
    for ctrl, path in sorted((made.get("executor") or {}).items()):
        lines.append(f"  {ctrl} group: {path}")
    if made.get("placement"):
        lines.append(f"  v2 parent chosen: {made['placement']} (see docs/sandbox.md, 'cgroup v2')")
    for name, present in walls(facts).items():
        lines.append(f"  wall {name}: {'yes' if present else 'MISSING'} - {WALLS[name]}")
    fix = cgroup_fix(facts)
    if fix:
        lines.append(f"  {fix.strip()[1:-1]}")
    return lines


def _doctor(docker_host: str) -> int:
    from core.scenarios import register_kind_leftovers
    from core.testenvmanager.sandbox.leftovers import discover
    from core.testenvmanager.sandbox.local import LocalExecutor
    from core.testenvmanager.sandbox.types import IsolationLevel

    register_kind_leftovers()
    found = discover(docker_host=docker_host)  # before our own executor adds a live cgroup
    executor = LocalExecutor(workers=1, sweep_leftovers=False)
    try:
        level = executor.isolation
        print(f"isolation: {level}")
        for name, value in executor.mechanisms.items():
            shown = ("yes" if value else "no") if isinstance(value, bool) else value
            print(f"  {name}: {shown}")
        print(f"  uid_base: {executor.uid_base} (workers 1: sample {executor.uid_base}, "
              f"judge {executor.uid_base + 1})")
        if level < IsolationLevel.FULL:
            target = IsolationLevel(int(level) + 1)
            needed = [text for need, text in executor.missing() if need <= target]
            print(f"missing for {target}: " + ("; ".join(needed) or "unknown"))
        else:
            print("missing for the next level: nothing (full is the highest)")
        for line in _cgroup_lines(executor.facts):
            print(line)
        for note in executor.facts.get("notes", []):
            print(f"  note: {note}")
    finally:
        executor.close()
    leases = [item for item in found if item.kind == "uid-lease"]
    held = sum(1 for item in leases if item.alive)
    print(f"uid leases: {held} block(s) held, {len(leases) - held} free")
    for item in leases:
        if item.alive:
            print("  " + _item_line("held", item))
    rest = [item for item in found if item.kind != "uid-lease"]
    dead = [item for item in rest if not item.alive and item.removable]
    print(f"leftovers: {len(rest)} ({len(dead)} of dead owners, {len(rest) - len(dead)} of live "
          "or unknown owners)")
    for item in rest:
        print("  " + _item_line("dead owner" if item in dead else "kept", item))
    if dead:
        print("run 'ianvs sandbox clean' to remove the leftovers of dead owners")
    return 0


def _clean(docker_host: str, dry_run: bool) -> int:
    from core.scenarios import register_kind_leftovers
    from core.testenvmanager.sandbox.leftovers import discover, remove

    register_kind_leftovers()
    removed = kept = failed = 0
    for item in discover(docker_host=docker_host):
        if item.kind == "uid-lease":  # a lease ends by itself when its holders die
            continue
        if item.alive or not item.removable:
            kept += 1
            print(_item_line("kept", item))
        elif dry_run:
            removed += 1
            print(_item_line("would remove", item))
        elif remove(item):
            removed += 1
            print(_item_line("removed", item))
        else:
            failed += 1
            print(_item_line("failed", item))
    verb = "would remove" if dry_run else "removed"
    print(f"{verb} {removed}, kept {kept} (live or unknown owners), failed {failed}")
    if failed:
        print(f"ianvs: error: {failed} leftover(s) could not be removed (see 'failed' above)",
              file=sys.stderr)
        return 1
    return 0


def _task_envs(dataset: Path, kind: str = DEFAULT_KIND) -> list[tuple[str | None, dict[str, str]]]:
    from core.scenarios import get_kind

    return get_kind(kind).container_envs(dataset)


def main(argv: Sequence[str]) -> int:
    """Entry point of ``ianvs sandbox``; returns the exit status."""
    from core.testenvmanager.sandbox.images import (BASE_IMAGE, ImageError, build_base_image,
                                                    connect, sweep, task_image)

    args = sandbox_parser().parse_args(argv)
    quiet = args.what in ("doctor", "clean")  # their output is the report; keep logs for problems
    setup_logging("DEBUG" if args.debug else "WARNING" if quiet else "INFO")
    if quiet:
        from core.testenvmanager.sandbox.types import SandboxError

        try:
            if args.what == "doctor":
                return _doctor(args.docker_host)
            return _clean(args.docker_host, args.dry_run)
        except (IanvsError, SandboxError, OSError) as exc:
            if args.debug:
                logger.exception("ianvs sandbox %s failed", args.what)
            print(f"ianvs: error: {exc}", file=sys.stderr)
            return 1
    try:
        client = connect(args.docker_host)
        try:
            if args.what == "sweep":
                from core.testenvmanager.sandbox.images import owner_alive

                counts = sweep(client, images=args.images, owner_alive=owner_alive)
                print("removed " + ", ".join(f"{n} {kind}" for kind, n in counts.items()))
                return 0
            image_id = build_base_image(client, args.mirror, args.suite, force=args.force)
            print(f"{BASE_IMAGE}: {image_id[:19]}")
            for run_env, packages in _task_envs(args.dataset, args.kind) if args.dataset else []:
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
