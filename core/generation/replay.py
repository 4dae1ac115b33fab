"""Replay recorded samples (HumanEval / EvalPlus ``samples.jsonl``) instead of a model.

Accepted lines (JSON objects, ``.jsonl`` or ``.jsonl.gz``, blank lines ignored):

* ``{"task_id": ..., "completion": ...}`` — HumanEval style: text that continues the
  prompt; the module is ``prompt + completion``.
* ``{"task_id": ..., "solution": ...}`` — EvalPlus style: a full solution; used as is.
* both keys present: ``solution`` wins.
* optional ``mean_logprob`` / ``min_logprob`` (finite numbers): the recorded run's token
  log-probabilities, kept on the replayed generation (confidence routers read them); anything
  else there is ignored, never invented.

Several lines per task are several samples (``sample_index`` = order of appearance
within the task). ``n`` in the requests is ignored: a task gets exactly its recorded
samples. A requested task with no recording yields one sample with ``error`` set
(visible, never a silently shrunk denominator). Lines for tasks nobody asked for are
counted in a warning when the generator is closed. Malformed lines raise
:class:`DatasetError` naming file and line.

Memory: a plain ``.jsonl`` recording is indexed (task id -> line offsets) and each line is read
back when its task is asked for, so a recording of 100k samples does not sit in memory; a
``.jsonl.gz`` one cannot be seeked and is held in memory.
"""
from __future__ import annotations

import hashlib
import logging
import os
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from core.common.errors import DatasetError
from core.common.jsonl import iter_jsonl, lines_with_offsets, parse_record, read_json_at
from core.generation.base import Generator
from core.generation.cache_key import sample_key
from core.generation.types import Generation, GenerationRequest

LOGGER = logging.getLogger(__name__)


def read_samples(path: str | os.PathLike[str]) -> dict[str, list[dict[str, Any]]]:
    """task_id -> recorded lines, in file order. Raises DatasetError on bad lines."""
    file = Path(path)
    samples: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for lineno, record in iter_jsonl(file, "samples file"):
        if not isinstance(record.get("task_id"), str):
            raise DatasetError("each line needs a string 'task_id'", source=file, line=lineno)
        text = record.get("solution", record.get("completion"))
        if not isinstance(text, str):
            raise DatasetError("each line needs a string 'completion' or 'solution'",
                               source=file, line=lineno)
        samples[record["task_id"]].append(record)
    return dict(samples)


def _check(record: Any, file: Path, lineno: int) -> str:
    """The record's task id; DatasetError when the line is not a usable sample."""
    if not isinstance(record, dict) or not isinstance(record.get("task_id"), str):
        raise DatasetError("each line needs a string 'task_id'", source=file, line=lineno)
    if not isinstance(record.get("solution", record.get("completion")), str):
        raise DatasetError("each line needs a string 'completion' or 'solution'",
                           source=file, line=lineno)
    return str(record["task_id"])


def index_samples(path: str | os.PathLike[str]) -> dict[str, int | list[int]]:
    """task_id -> byte offset of its line, or a list of offsets for a task with several lines,
    in file order (plain ``.jsonl`` only; one int per single-sample task keeps 100k tasks
    small); every line is parsed and checked as :func:`read_samples` does."""
    file = Path(path)
    index: dict[str, int | list[int]] = {}
    for lineno, start, raw in lines_with_offsets(file):
        if not raw.strip():
            continue
        task = _check(parse_record(raw, file, lineno), file, lineno)
        known = index.get(task)
        if known is None:
            index[task] = start
        elif isinstance(known, list):
            known.append(start)
        else:
            index[task] = [known, start]
    return index


class ReplayGenerator(Generator):
    """Yields recorded samples as generations.

    Args:
        samples_path: the recorded ``samples.jsonl`` (or ``.jsonl.gz``).
    """

    name = "replay"

    def __init__(self, samples_path: str | os.PathLike[str]) -> None:
        self.samples_path = Path(samples_path)
        self._index: dict[str, int | list[int]] = {}
        self._samples: dict[str, list[dict[str, Any]]] = {}
        if self.samples_path.suffix == ".gz":
            self._samples = read_samples(self.samples_path)
        else:
            self._index = index_samples(self.samples_path)
        self._asked: set[str] = set()
        digest = hashlib.sha256()
        with open(self.samples_path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        self._sha256 = digest.hexdigest()

    def describe(self) -> dict[str, Any]:
        """Identity = content hash of the recording (not its path)."""
        return {"generator": self.name, "samples_sha256": self._sha256}

    def _recorded(self, task_id: str) -> list[dict[str, Any]]:
        if not self._index:
            return self._samples.get(task_id, [])
        found = self._index.get(task_id)
        if found is None:
            return []
        offsets = found if isinstance(found, list) else [found]
        return [read_json_at(self.samples_path, off) for off in offsets]

    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Generation]:
        model = self.describe()
        for request in requests:
            self._asked.add(request.task_id)
            recorded = self._recorded(request.task_id)
            if not recorded:
                yield Generation(task_id=request.task_id, sample_index=0, raw_output="", code="",
                                 error=f"no recorded sample for this task in {self.samples_path.name}",
                                 key=sample_key(model, request, 0))
                continue
            for index, record in enumerate(recorded):
                if "solution" in record and isinstance(record["solution"], str):
                    raw = record["solution"]
                    code = raw
                else:
                    raw = record["completion"]
                    code = request.prompt + raw
                yield Generation(task_id=request.task_id, sample_index=index, raw_output=raw,
                                 code=code, key=sample_key(model, request, index),
                                 mean_logprob=_logprob(record.get("mean_logprob")),
                                 min_logprob=_logprob(record.get("min_logprob")))

    def close(self) -> None:
        """Warn once about recorded tasks no request asked for."""
        recorded = self._index or self._samples
        if self._asked:
            extra = [t for t in recorded if t not in self._asked]
            if extra:
                LOGGER.warning("%s: %d recorded task(s) were not requested (e.g. %s)",
                               self.samples_path, len(extra), sorted(extra)[0])
        self._asked = set()


def _logprob(value: object) -> float | None:
    """A recorded log-probability (a finite number), else None: a replay keeps what the
    recorded run measured, and never invents it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None
