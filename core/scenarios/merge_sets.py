"""``ianvs dataset merge-sets``: one task file from several built ones, with their reports.

A set built in parts -- the same builder run once per date window, so that each window gets its
own share of tasks (``--since``/``--until`` with ``--max-tasks`` or ``--limit``) -- is used by a
job as one file, whose metric splits it again by date (``periods``). This writes that file: the
parts' records in the order given, each part's ``.build.json`` report kept whole in the
merged file's report (``parts``: file name, SHA-256, task count, report), so the provenance of
every task stays with it.

Errors (one line each, nothing written): a part that is missing or not JSON lines
(``DatasetError`` of :func:`core.common.jsonl.iter_jsonl`, naming the line), a task id
(``id`` or ``task_id``) in two parts or twice in one, or an output that is one of the parts.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError
from core.common.jsonl import iter_jsonl
from core.scenarios.base import DatasetCommand

__all__ = ["merge_sets", "COMMAND"]


def merge_sets(parts: list[Path], output: Path) -> dict[str, Any]:
    """Write ``output`` (the parts' records, in order) and ``<output>.build.json``; return the
    report (module docstring)."""
    if any(p.resolve() == output.resolve() for p in parts):
        raise ConfigError(f"-o {output} is one of the parts", hint="write the merged set to a new file")
    seen: dict[str, Path] = {}
    records: list[dict[str, Any]] = []
    report_parts = []
    for path in parts:
        part = [record for _line, record in iter_jsonl(path, "task file")]
        for record in part:
            task_id = str(record.get("id") or record.get("task_id") or "")
            if not task_id:
                raise ConfigError(f"{path}: a task without an id")
            if task_id in seen:
                raise ConfigError(f"task {task_id} is in {seen[task_id]} and in {path}",
                                  hint="parts must not overlap (disjoint date windows)")
            seen[task_id] = path
        build = path.with_name(path.name + ".build.json")
        report_parts.append({"file": path.name,
                             "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                             "tasks": len(part),
                             "build": json.loads(build.read_text(encoding="utf-8"))
                             if build.is_file() else None})
        records.extend(part)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                   encoding="utf-8")
    tmp.replace(output)
    report = {"builder": "ianvs dataset merge-sets", "tasks": len(records), "parts": report_parts}
    output.with_name(output.name + ".build.json").write_text(json.dumps(report, indent=1) + "\n",
                                                             encoding="utf-8")
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("parts", nargs="+", type=Path, help="built task files, in order")
    parser.add_argument("-o", "--output", required=True, type=Path, help="merged task file")


def run(args: argparse.Namespace) -> int:
    report = merge_sets(list(args.parts), args.output)
    sys.stdout.write(f"wrote {report['tasks']} tasks to {args.output} from "
                     + ", ".join(f"{p['file']} ({p['tasks']})" for p in report["parts"]) + "\n")
    return 0


COMMAND = DatasetCommand("one task file from several built ones (e.g. one per date window)",
                         add_arguments, run)
