"""Task roots of many tasks in one git bundle: ``ianvs dataset pack-roots``.

An implement-change or test-graded revise task runs in its *task root*, a whole tree of the
repository (the parent with the change's tests applied). The builders write one deterministic
``.tar.gz`` per task; for a large repository that is megabytes per task (networkx: about 1.8 MB),
though the roots of one repository share almost every file. A roots bundle stores each root as
the tree of a parentless commit on ``refs/roots/<name>`` (``name``: the archive's name without
``.tar.gz``), so git keeps each distinct file once: 40 networkx roots take 2.4 MB instead of
72 MB.

``pack_roots`` reads the task files, adds every task's root archive found in the sources folder
to a bundle and rewrites the tasks' ``repo.source`` to ``<bundle file>#<name>``, which the
graders resolve like an archive (:func:`core.scenarios.repo.source.materialise`) and check
against the task's ``repo.content_hash`` as before. Each root is checked twice while packing:
its archive against the recorded content hash, and the tree read back from the bundle against
it. Commits are made with a fixed author, committer and date, so a root's commit id depends on
its tree only. Tasks without a root (similarity-graded revise tasks) are left as they are; a
task whose source is already in a bundle is carried over from that bundle.

Edge cases: two tasks with the same root name must have the same content hash (else an error
names both); a missing archive is an error naming the task and the file; the task files are
replaced only after the bundle is written and every root read back from it.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError
from core.common.jsonl import iter_jsonl
from core.scenarios.base import DatasetCommand
from core.scenarios.repo.source import ROOTS_REF, bundle_tree, content_hash, materialise

logger = logging.getLogger(__name__)

__all__ = ["PackReport", "pack_roots", "COMMAND"]

#: fixed identity and date of every root commit: its id depends on the tree alone
_COMMIT_ENV = {"GIT_AUTHOR_NAME": "ianvs", "GIT_AUTHOR_EMAIL": "roots@ianvs.invalid",
               "GIT_COMMITTER_NAME": "ianvs", "GIT_COMMITTER_EMAIL": "roots@ianvs.invalid",
               "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+00:00",
               "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+00:00"}


@dataclass
class PackReport:
    """What :func:`pack_roots` did: roots packed (by name), tasks rewritten per file, tasks
    without a root, and the bundle's size in bytes."""

    bundle: Path
    roots: dict[str, str] = field(default_factory=dict)  # name -> content hash
    rewritten: dict[str, int] = field(default_factory=dict)
    without_root: int = 0
    size: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"bundle": self.bundle.name, "roots": len(self.roots), "rewritten": self.rewritten,
                "without_root": self.without_root, "bytes": self.size}


def _git(args: list[str], git_dir: Path, **env: str) -> str:
    full = {**os.environ, "GIT_DIR": str(git_dir), **env}
    return subprocess.run(["git", *args], env=full, check=True, capture_output=True,
                          text=True).stdout.strip()


def _read_tasks(path: Path) -> list[dict[str, Any]]:
    return [task for _line, task in iter_jsonl(path, "task file")]


def _root_of(sources_dir: Path, source: str) -> tuple[str, str]:
    """``(root name, source spec)`` of a task's ``repo.source``: an archive's name without
    ``.tar.gz``, or the name after ``#`` of a root already in a bundle."""
    spec = str(sources_dir / source)
    inside = bundle_tree(spec)
    return (inside[1] if inside else source.removesuffix(".tar.gz")), spec


def _commit_root(root: Path, git_dir: Path, name: str, scratch: Path) -> None:
    """``root``'s files as the tree of a parentless commit on ``refs/roots/<name>``."""
    env = {**_COMMIT_ENV, "GIT_WORK_TREE": str(root), "GIT_INDEX_FILE": str(scratch / "index")}
    _git(["add", "-A", "-f", "."], git_dir, **env)
    tree = _git(["write-tree"], git_dir, **env)
    commit = _git(["commit-tree", tree, "-m", f"task root {name}"], git_dir, **env)
    _git(["update-ref", f"{ROOTS_REF}{name}", commit], git_dir)
    (scratch / "index").unlink()


def pack_roots(task_files: list[Path], sources_dir: Path, bundle: Path) -> PackReport:
    """Pack the roots of every task in ``task_files`` into ``bundle`` and point the tasks at it
    (module docstring). Returns what was done.

    Raises:
        ConfigError: a task's archive is missing or does not match its content hash, or two
            tasks name one root with different contents.
        DatasetError: a task file is missing or not JSON lines (:func:`iter_jsonl`).
    """
    report = PackReport(bundle)
    files = {path: _read_tasks(path) for path in task_files}
    wanted: dict[str, tuple[str, str, str]] = {}  # name -> (hash, source spec, task id)
    for path, tasks in files.items():
        for task in tasks:
            repo = task.get("repo") or {}
            source, want = repo.get("source"), repo.get("content_hash")
            if not source or not want:
                report.without_root += 1
                continue
            task_id = str(task.get("task_id") or task.get("id"))
            name, spec = _root_of(sources_dir, str(source))
            if bundle_tree(spec) is None and not Path(spec).is_file():
                raise ConfigError(f"{path}: task {task_id}: no root archive {spec}",
                                  hint="--sources-dir names the folder the builder wrote the "
                                       "roots to")
            old = wanted.get(name)
            if old is not None and old[0] != want:
                raise ConfigError(f"root {name!r} has two contents: task {old[2]} and task "
                                  f"{task_id}")
            wanted[name] = (want, spec, task_id)
    with tempfile.TemporaryDirectory(prefix="ianvs-roots-") as tmp:
        work = Path(tmp)
        git_dir = work / "roots.git"
        subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)
        for name, (want, spec, task_id) in sorted(wanted.items()):
            out = work / "x"
            src = materialise(spec, out)
            if src.content_hash != want:
                raise ConfigError(f"task {task_id}: root {Path(spec).name} has content hash "
                                  f"{src.content_hash[:12]}, the task was built from {want[:12]}")
            _commit_root(src.root, git_dir, name, work)
            shutil.rmtree(out)
            report.roots[name] = want
            logger.info("packed root %s (%d of %d)", name, len(report.roots), len(wanted))
        if not report.roots:
            raise ConfigError("no task has a root to pack", hint="the tasks' repo.source names "
                              "the root archives (implement-change, test-graded revise tasks)")
        built = work / bundle.name
        _git(["bundle", "create", str(built), f"--glob={ROOTS_REF}*"], git_dir)
        for name, want in report.roots.items():  # read every root back from the bundle
            out = work / "check"
            got = materialise(f"{built}#{name}", out).content_hash
            shutil.rmtree(out)
            if got != want:
                raise ConfigError(f"root {name} read back from the bundle has content hash "
                                  f"{got[:12]}, not {want[:12]}")
        bundle.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(built), bundle)
    report.size = bundle.stat().st_size
    for path, tasks in files.items():
        count = 0
        for task in tasks:
            repo = task.get("repo") or {}
            if repo.get("source") and repo.get("content_hash"):
                repo["source"] = f"{bundle.name}#{_root_of(sources_dir, str(repo['source']))[0]}"
                count += 1
        tmp_out = path.with_name(path.name + ".tmp")
        tmp_out.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks),
                           encoding="utf-8")
        tmp_out.replace(path)
        report.rewritten[str(path)] = count
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("tasks", nargs="+", type=Path,
                        help="task files (JSON lines) whose repo.source names root archives; "
                             "rewritten in place")
    parser.add_argument("--sources-dir", required=True, type=Path,
                        help="the folder the roots are in now (the builder's --sources-dir)")
    parser.add_argument("-o", "--output", required=True, type=Path,
                        help="the bundle to write (<name>.bundle); the jobs' sources_dir must be "
                             "its folder")


def run(args: argparse.Namespace) -> int:
    if args.output.suffix != ".bundle":
        raise ConfigError(f"-o {args.output}: a roots bundle's name ends in .bundle")
    report = pack_roots(list(args.tasks), args.sources_dir, args.output)
    sys.stdout.write(json.dumps(report.as_dict()) + "\n")
    sys.stdout.write(f"packed {len(report.roots)} roots into {args.output} "
                     f"({report.size / 1e6:.1f} MB)\n")
    return 0


COMMAND = DatasetCommand("pack the task roots of implement-change and revise sets into one git "
                         "bundle", add_arguments, run)
