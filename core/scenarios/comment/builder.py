"""``ianvs dataset comments --from <dir|sdist>``: comment records from a documented codebase.

Every function and method of the codebase's Python files (test files and folders excluded)
whose docstring and ``#`` comments annotate at least ``min_annotations`` lines becomes a
record: ``code_snippet`` is the function with its comments and docstrings stripped (other
lines verbatim, dedented), ``annotations`` the stripped texts at the lines they annotate (see
:mod:`core.scenarios.comment.annotate`). A function is kept only when

* it parses on its own, its snippet has ``min_lines``..``max_lines`` lines and the stripped
  snippet is the same program as the original (AST equality);
* its reference round-trips: the annotations written back into the snippet are extracted again
  unchanged (so the ``reference`` control scores exactly 1);
* its snippet is not a duplicate (same program) of one already kept.

When more functions qualify than ``limit``, an evenly spaced selection over the sorted ids is
kept (every module has a chance; the result does not depend on the file system's order).

Then the leak check (:mod:`core.scenarios.leak_views`): a record whose annotations (the
reference) are, or nearly are, in what the model sees -- the description or the stripped code,
e.g. a docstring repeated as a string literal -- is dropped, after the selection (so a rebuild
keeps the same selection; a limited build may return fewer records). The count per reason is
logged (this builder writes no report file).
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import logging
import os
import textwrap
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.scenarios.base import DatasetCommand
from core.scenarios.leak_views import screen_all, tally
from core.scenarios.comment.annotate import (code_fingerprint, extract_annotations,
                                             render_annotations, strip_comments)
from core.scenarios.sources import opened_source, write_built
from core.common import pyast

logger = logging.getLogger(__name__)

TEST_DIRS = {"test", "tests", "testing", "idle_test", "__pycache__", "site-packages",
             "_bundled", "turtledemo"}


@dataclass(frozen=True)
class CommentBuildOptions:
    """What to take from the codebase (see the module docstring)."""

    source_name: str = ""
    license: str = "unknown"
    limit: int | None = None
    min_lines: int = 5
    max_lines: int = 40
    min_annotations: int = 2


def is_test_file(rel: Path) -> bool:
    """Test files and folders of a codebase (not meant as documented code)."""
    name = rel.name
    return (any(part in TEST_DIRS or part.startswith("test_") for part in rel.parts[:-1])
            or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py")


def python_files(root: Path) -> Iterator[Path]:
    """Non-test ``.py`` files under ``root``, sorted."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in TEST_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if name.endswith(".py") and not is_test_file(path.relative_to(root)):
                yield path


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    stack: list[tuple[str, ast.AST]] = [("", tree)]
    while stack:
        prefix, node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qual = f"{prefix}{child.name}"
                yield qual, child
                stack.append((qual + ".", child))
            elif isinstance(child, ast.ClassDef):
                stack.append((f"{prefix}{child.name}.", child))


def records_from_file(path: Path, rel: str, opts: CommentBuildOptions
                      ) -> Iterator[dict[str, Any]]:
    """Candidate records of one file (unfiltered for duplicates)."""
    try:
        text = path.read_text(encoding="utf-8")
        tree = pyast.parse(text)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError) as exc:
        logger.debug("skipped %s: %s", path, exc)
        return
    lines = text.splitlines()
    for qual, fn in _functions(tree):
        first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
        original = textwrap.dedent("\n".join(lines[first - 1:fn.end_lineno]) + "\n")
        snippet = strip_comments(original)
        if snippet is None or not opts.min_lines <= len(snippet.splitlines()) <= opts.max_lines:
            continue
        anns = extract_annotations(original, snippet)
        if anns is None or len(anns) < opts.min_annotations:
            continue
        if extract_annotations(render_annotations(snippet, anns), snippet) != anns:
            continue
        yield {"id": f"{opts.source_name}/{rel}:{qual}",
               "description": f"`{qual}` from `{rel}` of {opts.source_name}.",
               "code_snippet": snippet,
               "annotations": [a.to_dict() for a in anns],
               "metadata": {"source": f"{opts.source_name}/{rel}", "line": first,
                            "license": opts.license}}


def build_comment_records(source: Path, opts: CommentBuildOptions,
                          leak_counts: Counter[str] | None = None) -> list[dict[str, Any]]:
    """The records of ``source`` (a folder or an sdist), deduplicated and selected, leaking
    ones dropped; ``leak_counts``, when given, is updated with the leak check's counts (what
    the build report shows, :func:`~core.scenarios.leak_views.tally`)."""
    with opened_source(source) as root:
        name = opts.source_name or source.name
        opts = CommentBuildOptions(name, opts.license, opts.limit, opts.min_lines,
                                   opts.max_lines, opts.min_annotations)
        seen: set[str] = set()
        found: list[dict[str, Any]] = []
        for path in python_files(root):
            rel = path.relative_to(root).as_posix()
            for record in records_from_file(path, rel, opts):
                digest = hashlib.sha256(str(code_fingerprint(record["code_snippet"]))
                                        .encode()).hexdigest()
                if digest in seen:
                    continue
                seen.add(digest)
                found.append(record)
    found.sort(key=lambda r: r["id"])
    if opts.limit is not None and len(found) > opts.limit:
        step = len(found) / opts.limit
        found = [found[int(i * step)] for i in range(opts.limit)]
    found, leaks = screen_all("comment", found, where=str(source))
    logger.info("leak check: %s", tally(leaks))
    if leak_counts is not None:
        leak_counts.update(leaks)
    return found


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``ianvs dataset comments``."""
    parser.add_argument("--from", dest="source", required=True, type=Path,
                        help="a folder or a source archive (sdist) of Python files")
    parser.add_argument("-o", "--output", required=True, type=Path)
    parser.add_argument("--limit", type=int, help="keep at most N records (evenly spaced)")
    parser.add_argument("--min-lines", type=int, default=5)
    parser.add_argument("--max-lines", type=int, default=40)
    parser.add_argument("--license", default="unknown", help="licence of the codebase (recorded)")
    parser.add_argument("--source-name", default="", help="name recorded in ids and provenance")


def run(args: argparse.Namespace) -> int:
    """``ianvs dataset comments``: build, screen for leaks, write records and build report."""
    leaks: Counter[str] = Counter()
    records = build_comment_records(args.source, CommentBuildOptions(
        args.source_name, args.license, args.limit, args.min_lines, args.max_lines), leaks)
    write_built(records, args.output, leaks)
    return 0


COMMAND = DatasetCommand("comment records from a documented Python codebase", add_arguments, run)
