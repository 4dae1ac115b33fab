"""The ``codegen`` record schema: function-level generation judged by unit tests.

One JSON object per line (see docs/proposals/scenarios/smart_coding/codegen.md):

=================== ========= ==========================================================
field               type      meaning
=================== ========= ==========================================================
task_id             str       unique id, e.g. ``HumanEval/0``
prompt              str       code the model continues (imports, signature, docstring)
entry_point         str       name of the function under test
test                str       Python defining ``check(candidate)``; raises on failure
canonical_solution  str       reference body; ``prompt + canonical_solution`` passes
packages            [str]     optional, pip requirements the tests need (default [])
timeout             float     optional, seconds for the whole test run (default: executor's)
grading             str       optional, ``boundary`` (default: the test runs in a trusted judge
                              process, the sample only returns data) or ``in_process`` (for
                              tests that need objects the sample defines)
metadata            object    optional, free-form (source, license, difficulty...)
=================== ========= ==========================================================

A program under test is ``code + "\\n\\n" + test + "\\n\\ncheck(" + entry_point + ")\\n"``
where ``code`` is a complete module (``Generation.code``).
"""
from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.common.errors import DatasetError
from core.common.jsonl import iter_jsonl
from core.testenvmanager.sandbox.types import GradingTier

REQUIRED_FIELDS: tuple[str, ...] = ("task_id", "prompt", "entry_point", "test", "canonical_solution")
OPTIONAL_FIELDS: tuple[str, ...] = ("packages", "timeout", "grading", "metadata")
GRADING_TIERS: tuple[str, ...] = tuple(tier.value for tier in GradingTier)


@dataclass(frozen=True)
class CodegenTask:
    """One validated codegen record (see the module docstring)."""

    task_id: str
    prompt: str
    entry_point: str
    test: str
    canonical_solution: str
    packages: tuple[str, ...] = ()
    timeout: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    grading: str = "boundary"

    def to_record(self) -> dict[str, Any]:
        """JSON-ready dict in schema field order (``packages`` as a list)."""
        record = asdict(self)
        record["packages"] = list(self.packages)
        if self.grading == "boundary":  # the default is not written out
            del record["grading"]
        return record

    def program(self, code: str) -> str:
        """The test program for candidate module ``code``."""
        return f"{code}\n\n{self.test}\n\ncheck({self.entry_point})\n"

    @classmethod
    def from_record(cls, record: Mapping[str, Any], *, source: str | None = None,
                    line: int | None = None) -> "CodegenTask":
        """Validate a dict; DatasetError names file/line and the offending field."""
        if not isinstance(record, Mapping):
            raise DatasetError("record is not a JSON object", source=source, line=line)
        for name in REQUIRED_FIELDS:
            if not isinstance(record.get(name), str):
                raise DatasetError(f"field {name!r} must be a string", source=source, line=line)
        if not record["task_id"] or not record["entry_point"].isidentifier():
            raise DatasetError("'task_id' must be non-empty and 'entry_point' an identifier",
                               source=source, line=line)
        unknown = sorted(set(record) - set(REQUIRED_FIELDS) - set(OPTIONAL_FIELDS))
        if unknown:
            raise DatasetError(f"unknown field(s) {unknown}", source=source, line=line,
                               hint="put extra information under 'metadata'")
        packages = record.get("packages") or []
        if not isinstance(packages, list) or not all(isinstance(p, str) for p in packages):
            raise DatasetError("'packages' must be a list of strings", source=source, line=line)
        timeout = record.get("timeout")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or timeout <= 0):
            raise DatasetError("'timeout' must be a positive number of seconds", source=source, line=line)
        metadata = record.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise DatasetError("'metadata' must be an object", source=source, line=line)
        grading = record.get("grading", "boundary")
        if grading not in GRADING_TIERS:
            raise DatasetError(f"'grading' must be one of {', '.join(GRADING_TIERS)}, got {grading!r}",
                               source=source, line=line)
        return cls(record["task_id"], record["prompt"], record["entry_point"], record["test"],
                   record["canonical_solution"], tuple(packages),
                   float(timeout) if timeout is not None else None, dict(metadata), grading)


def read_codegen_jsonl(path: str | os.PathLike[str]) -> Iterator[CodegenTask]:
    """Stream and validate a codegen JSONL file (blank lines skipped, ids unique)."""
    file = Path(path)
    seen: set[str] = set()
    for lineno, record in iter_jsonl(file, "dataset file"):
        task = CodegenTask.from_record(record, source=str(file), line=lineno)
        if task.task_id in seen:
            raise DatasetError(f"duplicate task_id {task.task_id!r}", source=file, line=lineno)
        seen.add(task.task_id)
        yield task


def write_codegen_jsonl(tasks: Iterable[CodegenTask], out_path: str | os.PathLike[str]) -> int:
    """Write tasks atomically (temp file + rename); returns the number written.

    Raises:
        DatasetError: the output cannot be written (nothing is left behind).
    """
    out = Path(out_path)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    count = 0
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as handle:
            for task in tasks:
                handle.write(json.dumps(task.to_record(), ensure_ascii=False) + "\n")
                count += 1
        os.replace(tmp, out)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise DatasetError(f"cannot write the dataset: {exc.strerror or exc}", source=out,
                               hint="choose a writable output path") from exc
        raise
    return count
