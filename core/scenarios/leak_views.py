"""The leak check of a built dataset: does what the model sees already hold the answer?

:mod:`core.scenarios.leaks` measures whether a reference is in a shown text. Which record fields
reach the model, what the answer is and which field may be masked is each kind's own knowledge:
its :meth:`~core.scenarios.base.TaskKind.leak_view` returns a :class:`LeakView` (the built-in
kinds keep theirs in their folder's ``leaks.py``). This module screens records with that view.

**Legitimate overlap, not leaks.** A code change's *before* files are the task (an
implement-change or revise reply edits them), so code the model is shown in those files is the
material of the change: only the change's *new* lines (:func:`new_lines`) -- reference lines
absent from every shown file -- count, and they leak when the free text (message, title, review
comments, the previous commit's diff) already holds them. A change that leaves every shown file
as it is (the answer *is* the shown code) is the ``unchanged`` leak (:func:`unchanged`).
Identifiers a commit subject names, which also appear in its diff, are vocabulary, not the
answer: containment needs four words and 80 % of the subject's word 4-grams
(:mod:`core.scenarios.leaks`).

**Masking.** Only a field the task does not need is masked (a commit's pull-request title when
the diff is the task, a repo task's model-written ``problem``); any other leak drops the task.
:func:`screen` returns the masked record (or None) and what was done; builders count
``leak_masked:<reason>`` / ``leak_dropped:<reason>`` in their reports.
"""
from __future__ import annotations

import copy
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from core.scenarios.leaks import Finding, code_lines

__all__ = ["LeakView", "Screened", "clear_field", "find_leak", "leak_view", "new_lines",
           "screen", "screen_all", "subject", "tally", "unchanged"]

LOG = logging.getLogger(__name__)

Record = Mapping[str, Any]


@dataclass(frozen=True)
class Screened:
    """The outcome of :func:`screen`: ``action`` is ``clean``, ``masked`` or ``dropped``;
    ``record`` the record to keep (masked when ``masked``, None when ``dropped``); ``finding``
    the leak that decided (None when clean)."""

    action: str
    record: dict[str, Any] | None
    finding: Finding | None

    @property
    def key(self) -> str:
        """``leak_masked:<reason>`` / ``leak_dropped:<reason>`` (``<reason>`` is the match and
        the field, e.g. ``exact:pull_request_title``); ``clean`` for no leak."""
        if self.finding is None:
            return "clean"
        return f"leak_{self.action}:{self.finding.reason}:{self.finding.field}"


def subject(message: str) -> str:
    """A commit message's subject: its first non-blank line."""
    return next((line for line in message.splitlines() if line.strip()), "")


def new_lines(reference_files: Mapping[str, str], shown_files: Mapping[str, str]) -> list[str]:
    """Code lines of the reference files that no shown file has."""
    shown = {line for text in shown_files.values() for line in code_lines(text)}
    return [line for text in reference_files.values() for line in code_lines(text)
            if line not in shown]


def unchanged(reference_files: Mapping[str, str], shown_files: Mapping[str, str]
              ) -> Finding | None:
    """The ``unchanged`` leak: every reference file is shown exactly as it is."""
    if reference_files and all(shown_files.get(p) == t for p, t in reference_files.items()):
        return Finding("files", "unchanged", 1.0)
    return None


def clear_field(path: tuple[str, ...]) -> Callable[[dict[str, Any]], None]:
    """A masking function that empties the field at ``path`` (nested keys)."""
    def clear(record: dict[str, Any]) -> None:
        target = record
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = ""
    return clear


@dataclass(frozen=True)
class LeakView:
    """A kind's leak finder and its maskable fields (finding field -> masking function)."""

    find: Callable[[Record], Finding | None]
    maskable: Mapping[str, Callable[[dict[str, Any]], None]]


def leak_view(kind: str) -> LeakView:
    """The leak view of the registered kind ``kind``.

    Raises:
        ValueError: the kind has none (:meth:`~core.scenarios.base.TaskKind.leak_view`
            returned None) or is not registered.
    """
    from core.common.errors import IanvsError
    from core.scenarios import get_kind

    try:
        view = get_kind(kind).leak_view()
    except IanvsError as exc:
        raise ValueError(exc.message) from None
    if view is None:
        raise ValueError(f"task kind {kind!r} has no leak view: give its TaskKind a leak_view() "
                         "(docs/adding-a-scenario.md)")
    return view


def find_leak(kind: str, record: Record) -> Finding | None:
    """The leak of ``record``'s reference into what the model sees, or None.

    Raises:
        ValueError: ``kind`` has no view here.
    """
    return leak_view(kind).find(record)


def screen(kind: str, record: Record) -> Screened:
    """Check a record; mask the leaking field when it is maskable and the masked record is then
    clean, else drop it. The input record is not modified (a masked copy is returned)."""
    view = leak_view(kind)
    finding = view.find(record)
    if finding is None:
        return Screened("clean", dict(record), None)
    first = finding
    masked = copy.deepcopy(dict(record))
    while finding.field in view.maskable:
        view.maskable[finding.field](masked)
        after = view.find(masked)
        if after is None:
            return Screened("masked", masked, first)
        if after.field == finding.field:  # masking that field did not remove the leak
            break
        finding = after
    return Screened("dropped", None, finding)


def screen_all(kind: str, records: Iterable[Record], where: str = ""
               ) -> tuple[list[dict[str, Any]], Counter[str]]:
    """Screen many records: (records kept, masked ones masked; counts per :attr:`Screened.key`,
    ``clean`` included). Each masked or dropped record is logged at INFO with its id."""
    kept: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    for record in records:
        result = screen(kind, record)
        counts[result.key] += 1
        if result.finding is not None:
            LOG.info("%s%s %s: %s", f"{where}: " if where else "", result.action,
                     record.get("id") or record.get("task_id"), result.finding.describe())
        if result.record is not None:
            kept.append(result.record)
    return kept, counts


def tally(counts: Mapping[str, int]) -> dict[str, Any]:
    """The leak part of a build report: ``{"masked": n, "dropped": n, "by_reason": {...}}``
    (``by_reason`` sorted, ``clean`` left out)."""
    masked = sum(n for k, n in counts.items() if k.startswith("leak_masked:"))
    dropped = sum(n for k, n in counts.items() if k.startswith("leak_dropped:"))
    return {"masked": masked, "dropped": dropped,
            "by_reason": {k: counts[k] for k in sorted(counts) if k != "clean" and counts[k]}}
