"""Which commits are not developer trajectory steps, and why.

Each walked commit gets exactly one decision, the first that applies in this order:

========================= ==================================================================
``outside_window``        its commit date is before ``since`` or not before ``until``
``bot``                   its author's name or e-mail matches a bot pattern (:data:`BOT_PATTERNS`
                          plus ``--bot PATTERN``; case-insensitive substrings)
``merge_only``            a merge whose combined diff is empty: it only joins its parents
``empty``                 it changes no file (``--allow-empty`` commits)
``huge``                  more than ``max_files`` files or ``max_lines`` added+deleted lines
``vendored``              every changed path is vendored or generated (:data:`VENDORED_GLOBS`
                          plus ``--vendored GLOB``)
``whitespace_only``       only whitespace or blank lines changed in modified text files
``kept``                  a trajectory step
========================= ==================================================================

A merge that resolves conflicts or changes something of its own is kept (``is_merge: true``, its
diff the combined one; its files and line counts are those against its first parent, so a merge
that brings a large branch and also resolves a conflict counts as ``huge``). ``huge`` is tested before ``vendored`` and ``whitespace_only`` because
those tests read the commit's diff, which for a huge commit is large.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from datetime import datetime, timezone

from core.common.errors import IanvsError
from core.scenarios.trajectories.git import GitRepo
from core.scenarios.trajectories.history import Commit, FileChange, merge_only, whitespace_only

__all__ = ["FilterOptions", "DECISIONS", "decide", "parse_when", "BOT_PATTERNS", "VENDORED_GLOBS"]

#: every decision, in the order they are tested (``kept`` last)
DECISIONS = ("outside_window", "bot", "merge_only", "empty", "huge", "vendored",
             "whitespace_only", "kept")
BOT_PATTERNS = ("[bot]", "dependabot", "renovate", "github-actions", "pre-commit-ci",
                "greenkeeper", "snyk-bot", "pyup-bot", "allcontributors")
VENDORED_GLOBS = ("vendor/*", "*/vendor/*", "vendored/*", "*/vendored/*", "_vendor/*",
                  "*/_vendor/*", "third_party/*", "*/third_party/*", "third-party/*",
                  "*/third-party/*", "node_modules/*", "*/node_modules/*", "*.min.js", "*.min.css",
                  "package-lock.json", "*/package-lock.json", "yarn.lock", "*/yarn.lock",
                  "poetry.lock", "Pipfile.lock", "*.pb.go", "*_pb2.py")


def parse_when(text: str, option: str) -> datetime:
    """A ``--since``/``--until`` value (``YYYY-MM-DD`` or ISO 8601 date-time; no offset means
    UTC) as an aware datetime. Raises :class:`IanvsError` naming the option."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise IanvsError(f"{option} {text!r} is not a date",
                         hint="use YYYY-MM-DD or an ISO 8601 date-time such as 2020-01-31T12:00:00+00:00"
                         ) from None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class FilterOptions:
    """Thresholds and patterns of the filters (module docstring)."""

    since: str | None = None
    until: str | None = None
    max_files: int = 50
    max_lines: int = 2000
    bots: tuple[str, ...] = field(default_factory=tuple)
    vendored: tuple[str, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, object]:
        return {"since": self.since, "until": self.until, "max_files": self.max_files,
                "max_lines": self.max_lines, "bots": list(self.bots),
                "vendored": list(self.vendored)}


def _in_window(commit: Commit, opts: FilterOptions) -> bool:
    when = datetime.fromisoformat(commit.committed_at)
    if opts.since and when < parse_when(opts.since, "--since"):
        return False
    return not (opts.until and when >= parse_when(opts.until, "--until"))


def _is_bot(commit: Commit, opts: FilterOptions) -> bool:
    who = f"{commit.author_name} {commit.author_email}".lower()
    return any(p.lower() in who for p in (*BOT_PATTERNS, *opts.bots))


def _vendored(path: str, opts: FilterOptions) -> bool:
    return any(fnmatch.fnmatchcase(path, g) for g in (*VENDORED_GLOBS, *opts.vendored))


def decide(repo: GitRepo, commit: Commit, files: list[FileChange], opts: FilterOptions) -> str:
    """The commit's decision (one of :data:`DECISIONS`; see the module docstring)."""
    if not _in_window(commit, opts):
        return "outside_window"
    if _is_bot(commit, opts):
        return "bot"
    if merge_only(repo, commit):
        return "merge_only"
    if not files:
        return "empty"
    if len(files) > opts.max_files or sum(f.additions + f.deletions for f in files) > opts.max_lines:
        return "huge"
    if all(_vendored(f.path, opts) for f in files):
        return "vendored"
    if whitespace_only(repo, commit, files):
        return "whitespace_only"
    return "kept"
