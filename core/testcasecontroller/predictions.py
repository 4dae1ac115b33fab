"""Per-sample prediction log: how a killed run resumes without losing or repeating work.

``predictions.jsonl`` in a test case's folder holds one line per finished sample::

    {"index": 3, "sample_key": "<sha256 of the input>", "prediction": <JSON value>}

Lines are appended and flushed as samples finish. On load, a torn last line (the process
was killed mid-write) is dropped and the file truncated to its last complete line; lines
whose ``sample_key`` no longer matches the dataset (the data changed) are ignored.
Predictions must be JSON-serialisable; numpy scalars/arrays are converted.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def sample_key(x: Any) -> str:
    """Stable key of one input sample (its JSON form, hashed)."""
    text = json.dumps(_jsonable(x), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class PredictionStore:
    """Append-only, crash-tolerant map ``index -> prediction`` backed by JSONL."""

    FILE_NAME = "predictions.jsonl"

    def __init__(self, folder: Path, keys: list[str]) -> None:
        self.path = folder / self.FILE_NAME
        self.keys = keys
        self.done: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._load()
        self._handle = self.path.open("a", encoding="utf-8")

    def _load(self) -> None:
        if not self.path.exists():
            return
        good_bytes = 0
        stale = 0
        with self.path.open("rb") as handle:
            for raw in handle:
                if not raw.endswith(b"\n"):
                    logger.warning("%s: dropping an incomplete last line (killed run)",
                                   self.path)
                    break
                try:
                    entry = json.loads(raw)
                    index, key = int(entry["index"]), entry["sample_key"]
                except (ValueError, KeyError, TypeError):
                    logger.warning("%s: dropping a malformed line", self.path)
                    good_bytes += len(raw)
                    continue
                good_bytes += len(raw)
                if 0 <= index < len(self.keys) and self.keys[index] == key:
                    self.done[index] = entry.get("prediction")
                else:
                    stale += 1
        if good_bytes < self.path.stat().st_size:
            with self.path.open("r+b") as handle:
                handle.truncate(good_bytes)
        if stale:
            logger.warning("%s: ignored %d stored predictions whose input changed",
                           self.path, stale)

    def pending(self) -> list[int]:
        """Indices without a stored prediction, in order."""
        return [i for i in range(len(self.keys)) if i not in self.done]

    def put(self, index: int, prediction: Any) -> None:
        """Store one prediction durably (flushed and fsynced)."""
        value = _jsonable(prediction)
        line = json.dumps({"index": index, "sample_key": self.keys[index],
                           "prediction": value}, ensure_ascii=False)
        with self._lock:
            self._handle.write(line + "\n")
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self.done[index] = value

    def put_many(self, items: Iterable[tuple[int, Any]]) -> None:
        for index, prediction in items:
            self.put(index, prediction)

    def ordered(self, provisional: Mapping[int, Any] | None = None) -> list[Any]:
        """All predictions in dataset order; ``provisional`` fills indices not stored.

        Raises:
            KeyError: an index is neither stored nor provisional.
        """
        extra = provisional or {}
        return [self.done[i] if i in self.done else extra[i] for i in range(len(self.keys))]

    def close(self) -> None:
        self._handle.close()
