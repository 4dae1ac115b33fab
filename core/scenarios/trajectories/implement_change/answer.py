"""A model's change, as whole files or as a unified diff, turned into file edits (never run).

Accepted replies:

* **Whole files**: one fenced block per file, the file's path on the line before the block as
  ``FILE: <path>`` (also ``File: ...``, ``### <path>``, ``` `path` ```) or in the fence's info
  string (```` ```python eli5/base.py ````). Each block is the file's complete new content.
  When the task changes exactly one file, a reply with a single unnamed block is that file.
* **A unified diff**: a fenced ``diff``/``patch`` block, or a reply whose text has ``--- `` /
  ``+++ `` file headers. It is applied with ``git apply`` (``--recount``: hunk line counts need
  not be exact) to a scratch copy of the files it names, outside the repository and the sandbox;
  nothing of the reply is executed.

Outcomes other than edits (each its own failure kind, never a test run):

* ``malformed_diff`` -- a diff git cannot parse (``corrupt patch``, no valid patch);
* ``diff_does_not_apply`` -- a well-formed diff whose context does not match the parent's files;
* ``no_change`` -- no file block, no diff, or edits identical to the files as they are;
* ``bad_path`` -- a path with no canonical form (absolute, ``..``/``.``/empty segments, a
  trailing ``/``, backslashes, control characters, inside ``.git``), a symbolic link or a path
  through one, a file where the tree has a folder (or the reverse), or a path on the task's
  *test side*: its tests and what pytest reads to configure, collect and import them
  (:mod:`.paths`). The detail says which path and why.

Paths are canonicalised once, where the reply is read (:func:`.paths.canonical_path`); the
edits are keyed by the canonical path only. The diff's files are the ones ``git apply --numstat
-z`` names, each checked before anything is applied; after applying, a file of the scratch
tree that was not checked refuses the whole reply.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from core.generation.extract import fenced_blocks
from core.scenarios.trajectories.implement_change.paths import TestSide, canonical_path

__all__ = ["ParsedChange", "parse_change", "FAILURE_KINDS", "TestSide"]

FAILURE_KINDS = ("malformed_diff", "diff_does_not_apply", "no_change", "bad_path")
_FILE_LINE = re.compile(r"^\s*(?:#+\s*|\*\*)?(?:file(?:name)?\s*:\s*)?`?(?P<path>[\w./][\w./-]*)`?\**\s*:?\s*$",
                        re.IGNORECASE)
#: a fenced block: three or more backticks, closed only by the same fence (CommonMark), so a
#: file holding a shorter fence (Markdown, a docstring's example) stays one block
_FENCE = re.compile(r"^(?P<fence>`{3,})[ \t]*(?P<info>[^\n`]*)\n(?P<body>.*?)(?:^(?P=fence)[ \t]*$|\Z)",
                    re.MULTILINE | re.DOTALL)
_DIFF_HEADER = re.compile(r"^(?:diff --git |--- (?:a/)?\S)", re.MULTILINE)


@dataclass(frozen=True)
class ParsedChange:
    """``edits`` (path -> new text) or a ``failure`` (one of :data:`FAILURE_KINDS`)."""

    form: str                      # "files", "diff" or "" (nothing recognised)
    edits: dict[str, str] = field(default_factory=dict)
    failure: str = ""
    detail: str = ""


def _refusal(raw: str, root: Path, side: TestSide) -> tuple[str, str]:
    """``(canonical path, "")`` when an answer may write ``raw`` into the tree at ``root``, else
    ``("", why)``."""
    path, why = canonical_path(raw)
    if why:
        return "", f"{why} (not a relative path inside the repository)"
    target = root / path
    inside = [target, *(p for p in target.parents if root in p.parents)]
    if any(p.is_symlink() for p in inside):
        return "", f"{path}: a symbolic link"
    if any(p.exists() and not p.is_dir() for p in inside[1:]) or target.is_dir():
        return "", f"{path}: not a file path of the repository"
    why = side.refusal(path) or ""
    return ("", why) if why else (path, "")


def _whole_files(reply: str, default_path: str | None = None) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    unnamed: list[str] = []
    for match in _FENCE.finditer(reply):
        info = match.group("info").strip().split()
        path = next((w for w in info if "/" in w or w.endswith(".py")), "")
        if not path or "." not in path.rsplit("/", 1)[-1]:
            before = reply[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            m = _FILE_LINE.match(before)
            path = m.group("path") if m and ("." in m.group("path") or "/" in m.group("path")) else ""
        lang = info[0].lower() if info else ""
        if lang in ("diff", "patch"):
            continue
        if path:
            found.append((path, match.group("body")))
        else:
            unnamed.append(match.group("body"))
    if not found and len(unnamed) == 1 and default_path and not _DIFF_HEADER.search(unnamed[0]):
        found.append((default_path, unnamed[0]))
    return found


def _diff_text(reply: str) -> str | None:
    for block in fenced_blocks(reply):
        if block.lang in ("diff", "patch") or _DIFF_HEADER.search(block.text):
            return block.text
    return reply if _DIFF_HEADER.search(reply) and "+++ " in reply else None


def _numstat_paths(out: str) -> list[str]:
    """The files ``git apply --numstat -z`` names (both names of a rename, where git gives two)."""
    paths: list[str] = []
    fields = out.split("\0")
    i = 0
    while i < len(fields):
        head = fields[i]
        i += 1
        if head.count("\t") < 2:
            continue
        name = head.split("\t", 2)[2]
        if name:
            paths.append(name)
        else:  # -z: a rename or copy is "added\tdeleted\t" then its old and new names
            paths += [p for p in fields[i:i + 2] if p]
            i += 2
    return paths


def _apply(diff: str, root: Path, side: TestSide) -> ParsedChange:
    if not diff.endswith("\n"):
        diff += "\n"
    with tempfile.TemporaryDirectory(prefix="ianvs-apply-") as tmp:
        scratch = Path(tmp, "tree")
        scratch.mkdir()
        patch = Path(tmp, "change.patch")
        patch.write_text(diff, encoding="utf-8")
        # outside any repository: git must not find one above the scratch tree (it would apply
        # the patch relative to that repository's root)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "GIT_CONFIG_NOSYSTEM": "1",
               "GIT_CONFIG_GLOBAL": os.devnull, "LANG": "C.UTF-8", "GIT_CEILING_DIRECTORIES": tmp}
        listed = subprocess.run(["git", "apply", "--recount", "--numstat", "-z", str(patch)], cwd=scratch,
                                capture_output=True, text=True, env=env, check=False)
        if listed.returncode != 0:
            return ParsedChange("diff", failure="malformed_diff", detail=listed.stderr.strip()[-300:])
        named = _numstat_paths(listed.stdout)
        if not named:
            return ParsedChange("diff", failure="malformed_diff", detail="no file in the diff")
        paths: list[str] = []
        for raw in named:
            path, why = _refusal(raw, root, side)
            if why:
                return ParsedChange("diff", failure="bad_path", detail=why)
            paths.append(path)
            src = root / path
            if src.is_file():
                (scratch / path).parent.mkdir(parents=True, exist_ok=True)
                (scratch / path).write_bytes(src.read_bytes())
        applied = subprocess.run(["git", "apply", "--recount", "--whitespace=nowarn", str(patch)], cwd=scratch,
                                 capture_output=True, text=True, env=env, check=False)
        if applied.returncode != 0:
            err = applied.stderr.strip()
            kind = "malformed_diff" if ("corrupt patch" in err or "No valid patches" in err) \
                else "diff_does_not_apply"
            return ParsedChange("diff", failure=kind, detail=err[-300:])
        checked = set(paths)
        edits: dict[str, str] = {}
        for dirpath, _dirs, filenames in os.walk(scratch):
            for fname in filenames:
                out = Path(dirpath, fname)
                path = out.relative_to(scratch).as_posix()
                if path not in checked:
                    return ParsedChange("diff", failure="bad_path",
                                        detail=f"{path}: written by the diff, not named by it")
                if out.is_symlink():
                    return ParsedChange("diff", failure="bad_path", detail=f"{path}: a symbolic link")
                edits[path] = out.read_text(encoding="utf-8", errors="replace")
        return ParsedChange("diff", edits=edits)


def parse_change(reply: str, root: Path, tests: TestSide | Sequence[str] | None,
                 default_path: str | None = None) -> ParsedChange:
    """The edits a reply makes to the tree at ``root`` (module docstring), keyed by canonical
    path. ``tests``: the task's test side (:class:`.paths.TestSide`; a list of test file paths
    builds one from them alone; None guards nothing but the paths' form -- for a tree whose
    tests never run). Whole-file blocks win when the reply has both forms. ``default_path``: the
    one file a task changes, if it changes exactly one; a reply whose only code block names no
    path is taken as that file. Edits equal to the current file are dropped; nothing left is
    ``no_change``."""
    side = tests if isinstance(tests, TestSide) else \
        TestSide.unguarded(root) if tests is None else TestSide.for_tests(root, tests)
    files = _whole_files(reply, default_path)
    if files:
        parsed = ParsedChange("files", edits={})
        for raw, text in files:
            path, why = _refusal(raw, root, side)
            if why:
                return ParsedChange("files", failure="bad_path", detail=why)
            parsed.edits[path] = text
    else:
        diff = _diff_text(reply)
        if diff is None:
            return ParsedChange("", failure="no_change", detail="neither file blocks nor a diff")
        parsed = _apply(diff, root, side)
        if parsed.failure:
            return parsed
    changed = {p: t for p, t in parsed.edits.items()
               if not ((root / p).is_file() and (root / p).read_text(encoding="utf-8", errors="replace") == t)}
    if not changed:
        return ParsedChange(parsed.form, failure="no_change", detail="the edits change nothing")
    return ParsedChange(parsed.form, edits=changed)
