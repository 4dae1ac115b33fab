"""``ianvs dataset issues --from <export.json | faq dir | sdist>``: issue records from real data.

Two sources:

* **GitHub REST exports** (a ``.json`` file): one object ``{"issue": <issue object>,
  "comments": [<comment objects>]}`` as the REST API returns them
  (``GET /repos/{o}/{r}/issues/{n}`` and ``.../comments``), or a list of such objects. The
  issue's ``title`` is the question, its ``body``, author and times are kept; every comment
  that is not by the issue's author nor by a bot (``user.type == "Bot"``) and is not empty
  becomes ``answer_1``, ``answer_2``, ... in order. Pull requests and issues without an answer
  are skipped (and counted).
* **FAQ documents** (a folder, or an sdist, containing ``faq/*.txt`` or ``faq/*.rst``
  reStructuredText files, as Django's source distribution does): every section whose heading
  is a question (ends with ``?``) becomes a record; its text up to the next heading is the
  answer, written by the project's documentation authors. Sphinx roles are reduced to their
  text (``:class:`~a.B``` -> ``B``); nothing else is rewritten. Answers shorter than
  :data:`MIN_ANSWER_CHARS` characters (bare cross-references such as "See X.") are skipped.

Every record carries ``metadata.source`` (where it came from) and ``metadata.license``.

Every record then passes the leak check (:mod:`core.scenarios.leak_views`): one whose answer
(any ``answer_N``, since metrics take the best match) is, or nearly is, its question or body --
an issue whose body already quotes the fix, an FAQ answer that only restates its heading -- is
dropped; the count per reason is logged (this builder writes no report file).
"""
from __future__ import annotations

import argparse
import json
import logging
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from core.common.errors import DatasetError
from core.scenarios.base import DatasetCommand
from core.scenarios.leak_views import screen_all, tally
from core.scenarios.sources import opened_source, write_built

logger = logging.getLogger(__name__)

#: FAQ answers shorter than this are bare cross-references ("See X."), not answers
MIN_ANSWER_CHARS = 40

_UNDERLINE = re.compile(r"^([=\-~^*+#\"'`])\1{2,}\s*$")
_ROLE = re.compile(r":[\w:.-]+:`(?:~?)([^`<]*?)(?:\s*<[^>]*>)?`")


def _login(obj: Any) -> str:
    user = obj.get("user") if isinstance(obj, Mapping) else None
    return str(user.get("login") or "") if isinstance(user, Mapping) else ""


def _need(obj: Any, key: str, where: str, source: Path) -> Any:
    if not isinstance(obj, Mapping) or key not in obj:
        raise DatasetError(f"{where} has no {key!r} field", source=source,
                           hint="give the JSON of the REST API: {\"issue\": {...}, "
                                "\"comments\": [...]} or a list of them")
    return obj[key]


def records_from_github_export(path: Path, license: str = "unknown") -> list[dict[str, Any]]:
    """Issue records of a GitHub REST export (see the module docstring).

    Raises:
        DatasetError: unreadable JSON or a missing field, naming the file and the JSON path.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        raise DatasetError(f"not a JSON file: {exc}", source=path, line=line) from exc
    items = data if isinstance(data, list) else [data]
    records: list[dict[str, Any]] = []
    skipped = 0
    for i, item in enumerate(items):
        where = f"[{i}]" if isinstance(data, list) else "the export"
        issue = _need(item, "issue", where, path)
        comments = _need(item, "comments", where, path)
        if not isinstance(comments, list):
            raise DatasetError(f"{where}.comments must be a list", source=path)
        title = _need(issue, "title", f"{where}.issue", path)
        if "pull_request" in issue:
            skipped += 1
            continue
        author = _login(issue)
        record: dict[str, Any] = {
            "id": str(issue.get("html_url") or f"issue-{issue.get('number', i)}"),
            "question": str(title), "user_login": author,
            "created_at": str(issue.get("created_at") or ""),
            "updated_at": str(issue.get("updated_at") or ""),
            "body": str(issue.get("body") or ""),
        }
        n = 0
        for j, comment in enumerate(comments):
            body = str(_need(comment, "body", f"{where}.comments[{j}]", path) or "").strip()
            user = comment.get("user") or {}
            if not body or _login(comment) == author or user.get("type") == "Bot":
                continue
            n += 1
            record[f"answer_{n}"] = {"user_login": _login(comment),
                                     "created_at": str(comment.get("created_at") or ""),
                                     "updated_at": str(comment.get("updated_at") or ""),
                                     "body": body}
        if not n:
            skipped += 1
            continue
        record["metadata"] = {"source": str(issue.get("html_url") or path.name),
                              "license": license}
        records.append(record)
    if skipped:
        logger.info("%s: %d issue(s) skipped (pull requests or no answer)", path, skipped)
    return records


def _clean(text: str) -> str:
    return _ROLE.sub(lambda m: m.group(1).split(".")[-1] if m.group(1).startswith("~")
                     else m.group(1), text).strip()


def _sections(lines: list[str]) -> Iterator[tuple[str, list[str]]]:
    """(heading, body lines) of every underlined section; overlined titles are skipped."""
    heads = [i for i in range(1, len(lines))
             if _UNDERLINE.match(lines[i]) and lines[i - 1].strip()
             and not _UNDERLINE.match(lines[i - 1])
             and len(lines[i].rstrip()) >= len(lines[i - 1].rstrip())
             and not (i >= 2 and _UNDERLINE.match(lines[i - 2]))]
    for n, i in enumerate(heads):
        end = heads[n + 1] - 1 if n + 1 < len(heads) else len(lines)
        yield lines[i - 1].strip(), lines[i + 1:end]


def faq_files(root: Path) -> list[Path]:
    """FAQ documents under ``root``: ``*.txt``/``*.rst`` in any folder named ``faq``."""
    return sorted(p for p in root.rglob("*") if p.suffix in (".txt", ".rst")
                  and p.parent.name.lower() == "faq" and p.is_file())


def records_from_faq(source: Path, license: str, source_name: str = "",
                     author: str = "") -> list[dict[str, Any]]:
    """Issue records of the FAQ documents in a folder or an sdist (see module docstring).

    Raises:
        DatasetError: nothing to read, or no question found.
    """
    records: list[dict[str, Any]] = []
    with opened_source(source) as root:
        files = faq_files(root)
        if not files:
            raise DatasetError("no FAQ documents found (faq/*.txt or faq/*.rst)", source=source)
        name = source_name or source.name.removesuffix(".tar.gz")
        for path in files:
            rel = path.relative_to(root).as_posix()
            lines = path.read_text(encoding="utf-8").splitlines()
            for heading, body in _sections(lines):
                answer = _clean("\n".join(body))
                question = _clean(heading)
                if not question.endswith("?") or len(answer) < MIN_ANSWER_CHARS:
                    continue
                records.append({
                    "id": f"{name}/{rel}#{len(records) + 1}",
                    "question": question, "user_login": "", "created_at": "",
                    "updated_at": "", "body": "",
                    "answer_1": {"user_login": author or f"{name} documentation authors",
                                 "created_at": "", "updated_at": "", "body": answer},
                    "metadata": {"source": f"{name}/{rel}", "section": question,
                                 "license": license}})
    if not records:
        raise DatasetError("the FAQ documents hold no question headings", source=source)
    return records


def build_issue_records(source: Path, license: str = "unknown", source_name: str = "",
                        leak_counts: Counter[str] | None = None) -> list[dict[str, Any]]:
    """Dispatch on the input: a ``.json`` export, else FAQ documents; leaking records dropped
    (module docstring); ``leak_counts``, when given, is updated with the leak check's counts."""
    if source.suffix == ".json":
        records = records_from_github_export(source, license)
    else:
        records = records_from_faq(source, license, source_name)
    kept, leaks = screen_all("issue", records, where=str(source))
    logger.info("leak check: %s", tally(leaks))
    if leak_counts is not None:
        leak_counts.update(leaks)
    return kept


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``ianvs dataset issues``."""
    parser.add_argument("--from", dest="source", required=True, type=Path,
                        help="a GitHub REST export (.json) or a folder/sdist with faq/ documents")
    parser.add_argument("-o", "--output", required=True, type=Path)
    parser.add_argument("--limit", type=int, help="keep at most N records (evenly spaced)")
    parser.add_argument("--license", default="unknown", help="licence of the texts (recorded)")
    parser.add_argument("--source-name", default="", help="name recorded in ids and provenance")


def run(args: argparse.Namespace) -> int:
    """``ianvs dataset issues``: build, screen for leaks, keep ``--limit`` evenly spaced
    records, write them and the build report."""
    leaks: Counter[str] = Counter()
    records = build_issue_records(args.source, args.license, args.source_name, leaks)
    if args.limit is not None and len(records) > args.limit:
        step = len(records) / args.limit
        records = [records[int(i * step)] for i in range(args.limit)]
    write_built(records, args.output, leaks)
    return 0


COMMAND = DatasetCommand("issue records from a GitHub export or FAQ documents", add_arguments, run)
