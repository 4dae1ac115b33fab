"""Review comments and issue text from an exported code-host file (optional; no network).

Accepted shape (one JSON object; every field but the numbers optional; unknown fields are an
error naming the field, so a typo is not silently dropped)::

    {"pull_requests": [
        {"number": 58, "title": "Support modern Keras 3.x", "body": "...",
         "issues": [57],                          # issues the PR links (numbers)
         "review_comments": [
            {"commit": "1a2b3c4", "author": "reviewer", "created_at": "2025-04-01T10:00:00Z",
             "body": "please add a test", "path": "eli5/keras/x.py", "line": 12}]}],
     "issues": [
        {"number": 57, "title": "...", "body": "...", "author": "...", "created_at": "..."}]}

``commit`` of a review comment is the commit it was made on (a full id or a unique prefix of at
least 7 hex digits), as GitHub's REST API gives ``commit_id`` of a pull-request review comment.
What a step gets (:meth:`CodeHost.attach`): the PR's ``title`` (when the history has none) and
``body``; ``review_comments`` made on the step's own commit (the feedback the PR's next steps
may address); ``issues``: the issues the PR links plus those the commit message references as
``#N``, with their title and body.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.common.errors import DatasetError

__all__ = ["CodeHost", "load_codehost"]

_PR_FIELDS = {"number", "title", "body", "issues", "review_comments"}
_COMMENT_FIELDS = {"commit", "author", "created_at", "body", "path", "line"}
_ISSUE_FIELDS = {"number", "title", "body", "author", "created_at"}
_REF = re.compile(r"(?<![\w/])#([0-9]+)\b")
_HEX = re.compile(r"^[0-9a-f]{7,40}$")


def _check(obj: Any, allowed: set[str], where: str, source: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise DatasetError(f"{where} must be an object", source=source)
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise DatasetError(f"unknown field '{where}.{unknown[0]}'", source=source,
                           hint=f"allowed: {', '.join(sorted(allowed))}")
    for key in ("title", "body", "author", "created_at", "path"):
        if key in obj and not isinstance(obj[key], str):
            raise DatasetError(f"field '{where}.{key}' must be a string", source=source)
    return obj


def _number(obj: Mapping[str, Any], where: str, source: str) -> int:
    value = obj.get("number")
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DatasetError(f"field '{where}.number' must be a positive integer, got {value!r}",
                           source=source)
    return value


@dataclass(frozen=True)
class CodeHost:
    """A loaded export: pull requests and issues by number."""

    pulls: dict[int, Mapping[str, Any]]
    issues: dict[int, Mapping[str, Any]]

    def _issue(self, number: int) -> dict[str, Any] | None:
        issue = self.issues.get(number)
        if issue is None:
            return None
        return {"number": number, "title": issue.get("title", ""), "body": issue.get("body", ""),
                "author": issue.get("author", ""), "created_at": issue.get("created_at", "")}

    def attach(self, step: dict[str, Any]) -> None:
        """Fill ``step``'s ``review_comments`` and ``issues`` and its pull request's ``title``
        / ``body`` from the export (see the module docstring)."""
        pr = step.get("pull_request")
        linked: list[int] = []
        comments: list[dict[str, Any]] = []
        if pr is not None and pr["number"] in self.pulls:
            data = self.pulls[pr["number"]]
            pr["title"] = pr["title"] or data.get("title", "")
            pr["body"] = data.get("body", "")
            linked = list(data.get("issues", []))
            for c in data.get("review_comments", []):
                if step["commit"].startswith(c["commit"]):
                    comments.append({k: c.get(k, "" if k != "line" else None)
                                     for k in ("author", "created_at", "body", "path", "line")})
        numbers = linked + [int(n) for n in _REF.findall(step["message"])]
        seen: set[int] = set()
        issues = []
        for n in numbers:
            if n not in seen and (found := self._issue(n)) is not None:
                seen.add(n)
                issues.append(found)
        step["review_comments"] = comments
        step["issues"] = issues


def load_codehost(path: Path) -> CodeHost:
    """Read and check an export file (shape in the module docstring). Raises
    :class:`DatasetError` naming the file and the field."""
    source = str(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DatasetError(f"cannot read the code-host export: {exc.strerror}", source=source) from None
    except ValueError as exc:
        raise DatasetError(f"not valid JSON: {exc}", source=source) from None
    top = _check(data, {"pull_requests", "issues"}, "export", source)
    pulls: dict[int, Mapping[str, Any]] = {}
    for i, pr in enumerate(top.get("pull_requests", [])):
        where = f"pull_requests[{i}]"
        _check(pr, _PR_FIELDS, where, source)
        issues = pr.get("issues", [])
        if not isinstance(issues, list) or not all(isinstance(n, int) and not isinstance(n, bool)
                                                   for n in issues):
            raise DatasetError(f"field '{where}.issues' must be a list of issue numbers", source=source)
        for j, c in enumerate(pr.get("review_comments", [])):
            cw = f"{where}.review_comments[{j}]"
            _check(c, _COMMENT_FIELDS, cw, source)
            if not isinstance(c.get("commit"), str) or not _HEX.match(c["commit"]):
                raise DatasetError(f"field '{cw}.commit' must be a commit id (7-40 lower-case hex digits)",
                                   source=source)
            if "line" in c and c["line"] is not None and (isinstance(c["line"], bool)
                                                          or not isinstance(c["line"], int)):
                raise DatasetError(f"field '{cw}.line' must be an integer or null", source=source)
        pulls[_number(pr, where, source)] = pr
    issues_by: dict[int, Mapping[str, Any]] = {}
    for i, issue in enumerate(top.get("issues", [])):
        where = f"issues[{i}]"
        _check(issue, _ISSUE_FIELDS, where, source)
        issues_by[_number(issue, where, source)] = issue
    return CodeHost(pulls, issues_by)
