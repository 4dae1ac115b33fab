"""The record of every try, and the file that keeps them (``selfalign_tries.jsonl``).

One JSON line per finished try, appended and fsynced only once the try's sandbox outcomes are
in, so a run killed with ``kill -9`` loses at most the try in flight and never repeats a
finished one. A line for try t replaces the lines before it for tries t and later of the same
task (a run with other settings redid them). Fields of a line (:class:`TryRecord`):

=================== ========================================================================
``task_id``, ``try`` the task and the try number (1-based)
``key``             SHA-256 of what determines the try (model identity, messages, schema,
                    decoding); a resumed run reuses a stored try only when its key matches
``messages``        the chat messages sent (the model never sees the dataset's tests)
``structured``      whether the reply was constrained by the JSON schema
``raw_output``      the model's reply, exactly
``parse_error``     ``null`` or why the reply could not be read (``not_json``, ``not_object``,
                    ``missing:<field>``, ``type:<field>``; ``server_format``: the server
                    refused its own constrained reply, its message in ``extra.server_error``)
``asked``           ``{"code": bool, "tests": bool}``: which fields this try regenerated
``code``            the module graded this try (prompt + extracted code; kept from the
                    previous try when the code was not regenerated; ``""`` when unreadable)
``tests``           the test units graded this try (list of strings)
``units``           per unit: ``index``, ``outcome`` (sandbox outcome or ``invalid``),
                    ``reason`` (why invalid), ``detail``, ``output``, ``ran``, ``duration_s``
``aligned``         every unit passed (at least one unit; an invalid unit is not a pass)
``prompt_tokens``, ``completion_tokens``, ``latency_s``, ``finish_reason``   the model call
``sandbox_runs``, ``sandbox_s``   sandbox requests made for this try and their wall time
``extra``           ``repeat_of`` (a greedy repeat not sent again), ``server_error``,
                    ``control`` (a gold control's try: ``reference`` or ``broken``; only
                    such a try may name the repository's tests as its own, :mod:`.repo`)
=================== ========================================================================
"""
from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from core.common.jsonl import append_durably

logger = logging.getLogger(__name__)
T = TypeVar("T")

TRIES_FILE = "selfalign_tries.jsonl"


@dataclass(frozen=True)
class TryRecord:
    """One finished try (see the module docstring for the fields)."""

    task_id: str
    try_: int
    key: str
    messages: list[dict[str, str]]
    structured: bool
    raw_output: str
    parse_error: str | None
    asked: dict[str, bool]
    code: str
    tests: list[str]
    units: list[dict[str, Any]]
    aligned: bool
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    finish_reason: str | None = None
    sandbox_runs: int = 0
    sandbox_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["try"] = data.pop("try_")
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TryRecord":
        values = dict(data)
        values["try_"] = values.pop("try")
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in values.items() if k in known})

    @property
    def tokens(self) -> int:
        return int(self.prompt_tokens or 0) + int(self.completion_tokens or 0)


def read_stored(path: Path, parse: Callable[[dict[str, Any]], T], what: str = "line") -> Iterator[T]:
    """``parse`` of each line of an append-only JSONL store, in order; a line that does not
    read or parse (one cut by a kill) is skipped with a warning naming it -- its work is
    redone. A missing file reads as empty."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                item = parse(json.loads(line))
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                logger.warning("%s:%d: unreadable %s skipped (%s); it is redone", path, lineno,
                               what, exc)
                continue
            yield item


class TryStore:
    """Append-only store of :class:`TryRecord` lines in one file (module docstring); safe to
    share between threads running different tasks."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._tries: dict[str, list[TryRecord]] = defaultdict(list)
        for rec in read_stored(path, TryRecord.from_dict, "try"):
            self._keep(rec)

    def _keep(self, record: TryRecord) -> None:
        """A try replaces the task's tries from its number on (a later line redid them)."""
        kept = [r for r in self._tries[record.task_id] if r.try_ < record.try_]
        self._tries[record.task_id] = kept + [record]

    def tries(self, task_id: str) -> list[TryRecord]:
        """The stored tries of a task, by try number (a copy)."""
        return list(self._tries.get(task_id, []))

    def add(self, record: TryRecord) -> None:
        """Append ``record`` durably (flush + fsync) and keep it in memory."""
        line = json.dumps(record.to_dict(), ensure_ascii=False) + "\n"
        with self._lock:
            append_durably(self.path, line)
            self._keep(record)
