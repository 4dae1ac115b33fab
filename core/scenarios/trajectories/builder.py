"""``ianvs dataset trajectories``: one JSONL record per trajectory step of a repository's history.

Contract (record schema: docs/proposals/scenarios/smart_coding/trajectories.md):

* **Range.** The commits reachable from ``rev`` (default ``HEAD``) and, unless
  ``include_pulls`` is off, from every ``refs/pull/<N>/head`` (commits of pull requests never
  merged are steps too), oldest first in git's topological order. The range is *recorded*: the
  manifest ``<output>.build.json`` names the resolved tip and pull-request heads, so
  ``--from-manifest`` rebuilds exactly the same steps later, even after the branch moved.
* **Decisions.** Every walked commit gets one decision (:mod:`.filters`); counts per decision
  are in the manifest and the returned :class:`BuildReport` (they add up to ``walked``).
* **Resume.** Each kept step is appended to the output and flushed, then its decision to
  ``<output>.progress.jsonl``; a killed build (SIGKILL included) started again with the same
  range and options continues after the last decided commit (a record cut mid-line is dropped
  and redone). Another range or other options on an unfinished output is an error (``--fresh``
  starts over). When the build completes the manifest says ``complete`` and the progress file
  is removed.
* **Privacy.** Author and committer *names* are recorded, their e-mail addresses never (they
  are only read to recognise bots). Addresses written in angle brackets in a message or a pull
  request's text (``Co-authored-by: Name <addr>``, ``Signed-off-by`` and other trailers) are
  replaced by ``<e-mail removed>`` (:func:`mask_addresses`); the repository's files and diffs
  are recorded as they are (an ``author_email`` in a ``setup.py`` stays).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.common.errors import IanvsError
from core.common.progress import progress_bar
from core.scenarios.trajectories.codehost import CodeHost, load_codehost
from core.scenarios.trajectories.filters import DECISIONS, FilterOptions, decide, parse_when
from core.scenarios.trajectories.git import GitRepo, open_repo
from core.scenarios.trajectories.history import changes, diff_text, walk
from core.scenarios.trajectories.pulls import find_pulls, membership

__all__ = ["TrajectoryOptions", "BuildReport", "build_trajectories", "detect_licence",
           "SCHEMA", "manifest_path", "progress_path"]

LOG = logging.getLogger(__name__)

#: the ``schema`` value of every step record
SCHEMA = "ianvs-trajectory-step/1"
_LICENCE_FILES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "LICENSE.rst", "LICENCE", "LICENCE.txt",
                  "COPYING", "COPYING.txt")
_LICENCE_PHRASES = (("Permission is hereby granted, free of charge", "MIT"),
                    ("Apache License", "Apache-2.0"),
                    ("Neither the name", "BSD-3-Clause"),
                    ("Redistribution and use in source and binary forms", "BSD-2-Clause"),
                    ("GNU LESSER GENERAL PUBLIC LICENSE", "LGPL"),
                    ("GNU GENERAL PUBLIC LICENSE", "GPL"),
                    ("Mozilla Public License", "MPL-2.0"))


def manifest_path(output: Path) -> Path:
    return output.with_name(output.name + ".build.json")


def progress_path(output: Path) -> Path:
    return output.with_name(output.name + ".progress.jsonl")


@dataclass
class TrajectoryOptions:
    """What ``ianvs dataset trajectories`` was asked (see its ``--help``)."""

    repo: str
    output: Path
    rev: str | None = None
    name: str | None = None
    include_pulls: bool = True
    max_diff_bytes: int = 64_000
    filters: FilterOptions = field(default_factory=FilterOptions)
    licence: str | None = None
    codehost: Path | None = None
    from_manifest: Path | None = None
    fresh: bool = False
    show_progress: bool = True


@dataclass
class BuildReport:
    """Counts of one build: ``walked`` commits, one decision each (``counts``)."""

    walked: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    pull_requests: int = 0
    steps_in_pull_requests: int = 0
    resumed: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"walked": self.walked, "counts": dict(self.counts),
                "pull_requests": self.pull_requests,
                "steps_in_pull_requests": self.steps_in_pull_requests, "resumed": self.resumed}


def detect_licence(repo: GitRepo, commit: str) -> dict[str, str | None]:
    """``{"spdx", "file"}`` of the licence file at the root of ``commit``: the SPDX id guessed
    from well-known phrases (``unknown`` when none matches), None for both when there is none."""
    for name in _LICENCE_FILES:
        text = repo.show_file(commit, name)
        if text is not None:
            spdx = next((sid for phrase, sid in _LICENCE_PHRASES if phrase in text), "unknown")
            return {"spdx": spdx, "file": name}
    return {"spdx": None, "file": None}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _range(repo: GitRepo, opts: TrajectoryOptions) -> dict[str, Any]:
    """The recorded range: the resolved tip and pull-request heads (from the manifest when
    ``from_manifest`` is given, checked to exist in ``repo``)."""
    if opts.from_manifest is not None:
        try:
            recorded = json.loads(opts.from_manifest.read_text(encoding="utf-8"))["range"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise IanvsError(f"cannot read the recorded range: {exc}", source=opts.from_manifest,
                             hint="pass the .build.json file a previous build wrote") from None
        for sha in [recorded["tip"], *recorded.get("pull_heads", {}).values()]:
            repo.resolve(sha)
        return dict(recorded)
    tip = repo.resolve(opts.rev or "HEAD")
    heads = ({ref: sha for ref, sha in repo.refs("refs/pull/").items() if ref.endswith("/head")}
             if opts.include_pulls else {})
    return {"rev": opts.rev or "HEAD", "tip": tip, "pull_heads": dict(sorted(heads.items()))}


def _options_key(opts: TrajectoryOptions, rng: dict[str, Any], licence: dict[str, Any],
                 codehost_sha: str | None) -> dict[str, Any]:
    return {"range": {k: rng[k] for k in ("tip", "pull_heads")}, "filters": opts.filters.as_dict(),
            "max_diff_bytes": opts.max_diff_bytes, "licence": licence, "codehost_sha256": codehost_sha,
            "name": opts.name}


def _load_done(output: Path) -> tuple[list[str], dict[str, str]]:
    """Complete record lines of ``output`` and the decisions of the progress file (a decision
    ``kept`` whose record is missing is forgotten, so that commit is done again)."""
    lines: list[str] = []
    have: set[str] = set()
    if output.is_file():
        for line in output.read_text(encoding="utf-8").splitlines(keepends=True):
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if line.endswith("\n") and isinstance(rec, dict) and "commit" in rec:
                lines.append(line)
                have.add(rec["commit"])
    decided: dict[str, str] = {}
    prog = progress_path(output)
    if prog.is_file():
        for line in prog.read_text(encoding="utf-8").splitlines():
            try:
                item = json.loads(line)
                decided[item["commit"]] = item["decision"]
            except (ValueError, KeyError, TypeError):
                continue
    decided = {c: d for c, d in decided.items() if d != "kept" or c in have}
    kept_lines = [line for line in lines if json.loads(line)["commit"] in decided]
    return kept_lines, decided


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


#: an e-mail address in angle brackets, as git trailers write them
_BRACKETED_ADDRESS = re.compile(r"<[^<>\s@]+@[^<>\s@]+\.[^<>\s@]+>")
MASKED_ADDRESS = "<e-mail removed>"


def mask_addresses(text: str) -> str:
    """``text`` with every ``<local@domain>`` replaced by :data:`MASKED_ADDRESS` (the trailers of
    commit messages and squash bodies: ``Co-authored-by: Ada <ada@example.org>``)."""
    return _BRACKETED_ADDRESS.sub(MASKED_ADDRESS, text)


def _step(repo: GitRepo, name: str, commit: Any, files: list[Any], licence: dict[str, Any],
          pr: dict[str, Any] | None, mainline: bool, max_diff_bytes: int) -> dict[str, Any]:
    diff, size, truncated = diff_text(repo, commit, max_diff_bytes)
    return {
        "schema": SCHEMA,
        "id": f"{name}@{commit.sha[:12]}",
        "repo": {"name": name, "licence": licence["spdx"], "licence_file": licence["file"]},
        "commit": commit.sha,
        "parents": list(commit.parents),
        "author": commit.author_name,
        "authored_at": commit.authored_at,
        "committer": commit.committer_name,
        "committed_at": commit.committed_at,
        "message": mask_addresses(commit.message.strip("\n")),
        "is_merge": commit.is_merge,
        "on_mainline": mainline,
        "files": [f.as_dict() for f in files],
        "tests_touched": [f.path for f in files if f.is_test],
        "diff": diff,
        "diff_format": "combined" if commit.is_merge else "unified",
        "diff_bytes": size,
        "diff_truncated": truncated,
        "pull_request": pr,
        "review_comments": [],
        "issues": [],
    }


def build_trajectories(opts: TrajectoryOptions) -> BuildReport:
    """Write the steps of ``opts.repo``'s history to ``opts.output`` (module docstring).

    Raises:
        IanvsError: the repository cannot be read, a revision or a recorded commit is missing,
            a date or the code-host export is malformed, or the output holds an unfinished build
            of another range or other options (without ``fresh``).
    """
    for option, value in (("--since", opts.filters.since), ("--until", opts.filters.until)):
        if value:
            parse_when(value, option)
    codehost: CodeHost | None = load_codehost(opts.codehost) if opts.codehost else None
    workdir = Path(tempfile.mkdtemp(prefix="ianvs-trajectories-"))
    try:
        repo, origin = open_repo(opts.repo, workdir)
        return _build(repo, origin, opts, codehost)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _build(repo: GitRepo, origin: str, opts: TrajectoryOptions, codehost: CodeHost | None) -> BuildReport:
    if opts.from_manifest is not None:
        recorded = json.loads(opts.from_manifest.read_text(encoding="utf-8"))
        opts.filters = FilterOptions(**{**recorded["options"]["filters"],
                                        "bots": tuple(recorded["options"]["filters"]["bots"]),
                                        "vendored": tuple(recorded["options"]["filters"]["vendored"])})
        opts.max_diff_bytes = int(recorded["options"]["max_diff_bytes"])
        opts.name = recorded["repo"]["name"]
        opts.licence = recorded["repo"]["licence"]["spdx"]
    rng = _range(repo, opts)
    name = opts.name or Path(origin).name.removesuffix(".bundle").removesuffix(".git")
    opts.name = name
    licence = detect_licence(repo, rng["tip"])
    if opts.licence:
        licence = {**licence, "spdx": opts.licence}
    codehost_sha = _sha256(opts.codehost) if opts.codehost else None
    key = _options_key(opts, rng, licence, codehost_sha)
    output = opts.output
    output.parent.mkdir(parents=True, exist_ok=True)
    man_path = manifest_path(output)
    manifest_old: dict[str, Any] = {}
    if man_path.is_file() and not opts.fresh:
        try:
            manifest_old = json.loads(man_path.read_text(encoding="utf-8"))
        except ValueError:
            manifest_old = {}
        if manifest_old.get("key") != key:
            raise IanvsError(f"{output} holds a build of another range or other options",
                             source=man_path, hint="pass --fresh to start over, or choose another -o")
    if (manifest_old.get("status") == "complete" and output.is_file()
            and manifest_old.get("output_sha256") == _sha256(output)):
        LOG.info("%s is already complete for this range and these options", output)
        return BuildReport(walked=manifest_old["walked"], counts=manifest_old["counts"],
                           pull_requests=manifest_old["pull_requests"],
                           steps_in_pull_requests=manifest_old["steps_in_pull_requests"],
                           resumed=manifest_old["walked"])
    if opts.fresh or not manifest_old or manifest_old.get("status") == "complete":
        for path in (output, progress_path(output)):
            path.unlink(missing_ok=True)
    lines, decided = _load_done(output) if manifest_old else ([], {})
    _write_atomic(output, "".join(lines))
    _write_atomic(progress_path(output), "".join(json.dumps({"commit": c, "decision": d}) + "\n"
                                                 for c, d in decided.items()))
    manifest: dict[str, Any] = {
        "builder": "ianvs dataset trajectories", "schema": SCHEMA, "status": "running",
        "repo": {"name": name, "origin": origin, "licence": licence},
        "range": {**rng, "since": opts.filters.since, "until": opts.filters.until},
        "options": {"filters": opts.filters.as_dict(), "max_diff_bytes": opts.max_diff_bytes,
                    "include_pulls": opts.include_pulls, "codehost_sha256": codehost_sha},
        "key": key,
    }
    _write_atomic(man_path, json.dumps(manifest, indent=1) + "\n")
    tips = [rng["tip"], *rng.get("pull_heads", {}).values()]
    commits = list(walk(repo, tips))
    mainline_ids = set(repo.run("rev-list", rng["tip"]).split())
    merges = {c.sha: c for c in commits if c.is_merge and c.sha in mainline_ids}
    pulls = find_pulls(repo, rng["tip"], merges, rng.get("pull_heads", {})) if opts.include_pulls else []
    members = membership(pulls)
    report = BuildReport(walked=len(commits), pull_requests=len(pulls), resumed=len(decided))
    counts: Counter[str] = Counter(decided.values())
    with open(output, "a", encoding="utf-8") as out, \
            open(progress_path(output), "a", encoding="utf-8") as prog, \
            progress_bar(len(commits) - len(decided), "trajectory steps", "commit",
                         opts.show_progress) as bar:
        for commit in commits:
            if commit.sha in decided:
                continue
            files = changes(repo, commit)
            decision = decide(repo, commit, files, opts.filters)
            if decision == "kept":
                pr_info = members.get(commit.sha)
                pr = pr_info[0].as_dict(pr_info[1]) if pr_info else None
                step = _step(repo, name, commit, files, licence, pr, commit.sha in mainline_ids,
                             opts.max_diff_bytes)
                if codehost is not None:
                    codehost.attach(step)
                out.write(json.dumps(step, ensure_ascii=False) + "\n")
                out.flush()
            prog.write(json.dumps({"commit": commit.sha, "decision": decision}) + "\n")
            prog.flush()
            counts[decision] += 1
            bar.update(1)
    report.counts = {d: counts.get(d, 0) for d in DECISIONS}
    kept_ids = {json.loads(line)["commit"] for line in output.read_text(encoding="utf-8").splitlines()}
    report.steps_in_pull_requests = sum(1 for sha in kept_ids if sha in members)
    manifest.update(status="complete", counts=report.counts, walked=report.walked,
                    pull_requests=report.pull_requests,
                    steps_in_pull_requests=report.steps_in_pull_requests,
                    output_sha256=_sha256(output))
    _write_atomic(man_path, json.dumps(manifest, indent=1) + "\n")
    progress_path(output).unlink(missing_ok=True)
    LOG.info("trajectories: %d commits walked, %s", report.walked,
             ", ".join(f"{k}={v}" for k, v in report.counts.items()))
    return report
