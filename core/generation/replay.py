"""Replay recorded samples (HumanEval / EvalPlus ``samples.jsonl``) instead of a model.

Accepted lines (JSON objects, ``.jsonl`` or ``.jsonl.gz``, blank lines ignored):

* ``{"task_id": ..., "completion": ...}`` — HumanEval style: text that continues the
  prompt; the module is ``prompt + completion``.
* ``{"task_id": ..., "solution": ...}`` — EvalPlus style: a full solution; used as is.
* both keys present: ``solution`` wins.

Several lines per task are several samples (``sample_index`` = order of appearance
within the task). ``n`` in the requests is ignored: a task gets exactly its recorded
samples. A requested task with no recording yields one sample with ``error`` set
(visible, never a silently shrunk denominator). Lines for tasks nobody asked for are
counted in a warning. Malformed lines raise :class:`DatasetError` naming file and line.
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
from core.common.jsonl import iter_jsonl
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


class ReplayGenerator(Generator):
    """Yields recorded samples as generations.

    Args:
        samples_path: the recorded ``samples.jsonl`` (or ``.jsonl.gz``).
    """

    name = "replay"

    def __init__(self, samples_path: str | os.PathLike[str]) -> None:
        self.samples_path = Path(samples_path)
        self._samples = read_samples(self.samples_path)
        digest = hashlib.sha256()
        with open(self.samples_path, "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        self._sha256 = digest.hexdigest()

    def describe(self) -> dict[str, Any]:
        """Identity = content hash of the recording (not its path)."""
        return {"generator": self.name, "samples_sha256": self._sha256}

    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Generation]:
        model = self.describe()
        asked: set[str] = set()
        for request in requests:
            asked.add(request.task_id)
            recorded = self._samples.get(request.task_id, [])
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
                                 code=code, key=sample_key(model, request, index))
        extra = set(self._samples) - asked
        if extra:
            LOGGER.warning("%s: %d recorded task(s) were not requested (e.g. %s)",
                           self.samples_path, len(extra), sorted(extra)[0])
