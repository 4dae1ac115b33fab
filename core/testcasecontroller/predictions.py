"""Per-sample prediction log: how a killed run resumes without losing or repeating work.

``predictions.jsonl`` in a test case's folder holds one line per finished sample::

    {"index": 3, "sample_key": "<sha256 of the input>", "prediction": <JSON value>}

Lines are appended and flushed as samples finish (a killed process loses nothing flushed);
they are fsynced at most every :data:`FSYNC_INTERVAL` seconds and when the store closes, so a
crash of the machine itself loses at most that much. On load, a torn last line (the process
was killed mid-write) is dropped and the file truncated to its last complete line; lines
whose ``sample_key`` no longer matches the dataset (the data changed) are ignored.
Predictions must be JSON-serialisable; numpy scalars/arrays are converted.

Memory stays flat in the number of samples: the store keeps the *offset* of each stored line,
not the prediction, and :meth:`PredictionStore.ordered` returns a read-only sequence that reads
predictions from the file when they are asked for (a later line for the same index wins).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np

from core.common.jsonl import lines_with_offsets

logger = logging.getLogger(__name__)

#: the folder beside the test cases of a job where the joint-inference paradigm caches both
#: models' answers per task, so every router's test case reuses them
JOINT_CACHE_DIR = "jointinference-cache"

#: seconds between fsyncs of the prediction log (every line is flushed at once regardless)
FSYNC_INTERVAL = 1.0


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


def _position(index: int, length: int) -> int:
    """``index`` as a position in ``range(length)`` (negative counts from the end)."""
    position = index + length if index < 0 else index
    if not 0 <= position < length:
        raise IndexError(index)
    return position


class KeyList(Sequence[str]):
    """Sample keys (32 hex digits each, see :func:`sample_key`) packed 16 bytes apiece: 100k
    keys take 1.6 MB instead of about 8 MB of ``str`` objects."""

    def __init__(self, keys: Iterable[str]) -> None:
        blob = bytearray()
        for key in keys:
            raw = bytes.fromhex(key)
            if len(raw) != 16:
                raise ValueError(f"not a 32-hex-digit sample key: {key!r}")
            blob += raw
        self._blob = bytes(blob)

    def __len__(self) -> int:
        return len(self._blob) // 16

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = _position(index, len(self))
        return self._blob[16 * index:16 * index + 16].hex()


class StoredPredictions(Sequence[Any]):
    """Predictions in dataset order, read from ``predictions.jsonl`` on demand.

    ``offsets[i]`` is the byte offset of index ``i``'s line (-1: not stored; then
    ``provisional[i]`` is used). Iteration reads the file sequentially when the lines are in
    order, otherwise it seeks; either way one prediction is in memory at a time.
    """

    def __init__(self, path: Path, offsets: array, provisional: Mapping[int, Any]) -> None:
        self.path, self.offsets, self.provisional = path, offsets, dict(provisional)
        for i, off in enumerate(offsets):
            if off < 0 and i not in self.provisional:
                raise KeyError(i)

    def __len__(self) -> int:
        return len(self.offsets)

    def _read(self, handle: Any, index: int) -> Any:
        off = self.offsets[index]
        if off < 0:
            return self.provisional[index]
        handle.seek(off)
        return json.loads(handle.readline())["prediction"]

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = _position(index, len(self))
        with self.path.open("rb") as handle:
            return self._read(handle, index)

    def __iter__(self) -> Iterator[Any]:
        if not self.path.exists():
            yield from (self.provisional[i] for i in range(len(self)))
            return
        with self.path.open("rb") as handle:
            for i in range(len(self)):
                yield self._read(handle, i)

    def __repr__(self) -> str:
        return f"StoredPredictions({self.path}, {len(self)} predictions)"


class PredictionStore:
    """Append-only, crash-tolerant map ``index -> prediction`` backed by JSONL."""

    FILE_NAME = "predictions.jsonl"

    def __init__(self, folder: Path, keys: Sequence[str]) -> None:
        self.path = folder / self.FILE_NAME
        self.keys = keys
        self.offsets = array("q", [-1]) * len(keys)
        self.stored = 0
        self._lock = threading.Lock()
        self._load()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = self.path.open("ab")
        self._synced = time.monotonic()

    def _load(self) -> None:
        if not self.path.exists():
            return
        good_bytes = 0
        stale = 0
        for _line, start, raw in lines_with_offsets(self.path):
            if not raw.endswith(b"\n"):
                logger.warning("%s: dropping an incomplete last line (killed run)", self.path)
                break
            good_bytes = start + len(raw)
            try:
                entry = json.loads(raw)
                index, key = int(entry["index"]), entry["sample_key"]
            except (ValueError, KeyError, TypeError):
                logger.warning("%s: dropping a malformed line", self.path)
                continue
            if 0 <= index < len(self.keys) and self.keys[index] == key:
                if self.offsets[index] < 0:
                    self.stored += 1
                self.offsets[index] = start
            else:
                stale += 1
        if good_bytes < self.path.stat().st_size:
            with self.path.open("r+b") as handle:
                handle.truncate(good_bytes)
        if stale:
            logger.warning("%s: ignored %d stored predictions whose input changed",
                           self.path, stale)

    @property
    def done(self) -> set[int]:
        """Indices with a stored prediction."""
        return {i for i, off in enumerate(self.offsets) if off >= 0}

    def is_stored(self, index: int) -> bool:
        return self.offsets[index] >= 0

    def pending(self) -> list[int]:
        """Indices without a stored prediction, in order."""
        return [i for i, off in enumerate(self.offsets) if off < 0]

    def put(self, index: int, prediction: Any) -> None:
        """Store one prediction (flushed at once; fsynced per :data:`FSYNC_INTERVAL`)."""
        value = _jsonable(prediction)
        line = json.dumps({"index": index, "sample_key": self.keys[index],
                           "prediction": value}, ensure_ascii=False).encode("utf-8") + b"\n"
        with self._lock:
            offset = self._handle.seek(0, os.SEEK_END)
            self._handle.write(line)
            self._handle.flush()
            now = time.monotonic()
            if now - self._synced >= FSYNC_INTERVAL:
                os.fsync(self._handle.fileno())
                self._synced = now
            if self.offsets[index] < 0:
                self.stored += 1
            self.offsets[index] = offset

    def put_many(self, items: Iterable[tuple[int, Any]]) -> None:
        for index, prediction in items:
            self.put(index, prediction)

    def ordered(self, provisional: Mapping[int, Any] | None = None) -> StoredPredictions:
        """All predictions in dataset order; ``provisional`` fills indices not stored.

        Raises:
            KeyError: an index is neither stored nor provisional.
        """
        with self._lock:
            self._handle.flush()
        return StoredPredictions(self.path, array("q", self.offsets), provisional or {})

    def close(self) -> None:
        with self._lock:
            if not self._handle.closed:
                self._handle.flush()
                os.fsync(self._handle.fileno())
                self._handle.close()
