"""Commit dates of trajectory tasks: parsing, windows and the periods metrics are split by.

A task's date is its commit's ``committed_at`` (ISO 8601 with the recorded offset). Periods are
given as cut dates (``periods: ["2024-06-01"]`` in a metric's testenv entry, e.g. a model's
training cut-off): with cuts ``c1 < c2 < ...`` the periods are ``before c1``, ``c1..c2``, ...,
``from cN``; a task belongs to exactly one. Dates without an offset are UTC.
"""
from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

from core.common.errors import ConfigError, DatasetError

__all__ = ["commit_time", "cut_dates", "period_of", "period_labels", "in_window"]


def commit_time(text: str, source: str | None = None, line: int | None = None) -> datetime:
    """``text`` (a record's ``committed_at``) as an aware datetime; DatasetError otherwise."""
    try:
        when = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise DatasetError(f"field 'committed_at' must be an ISO 8601 date-time, got {text!r}",
                           source=source, line=line) from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _date(value: object, what: str) -> datetime:
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        raise ConfigError(f"{what}: {value!r} is not a date",
                          hint="use YYYY-MM-DD or an ISO 8601 date-time") from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def cut_dates(periods: Sequence[object] | None) -> list[datetime]:
    """The cut dates of a ``periods`` option, checked (dates, strictly increasing)."""
    cuts = [_date(p, "periods") for p in (periods or [])]
    if any(b <= a for a, b in zip(cuts, cuts[1:])):
        raise ConfigError(f"periods must be increasing dates, got {list(periods or [])!r}")
    return cuts


def period_labels(periods: Sequence[object] | None) -> list[str]:
    """Labels of the periods the cuts define, in time order (empty without cuts)."""
    texts = [str(p) for p in (periods or [])]
    if not texts:
        return []
    return ([f"before {texts[0]}"] + [f"{a}..{b}" for a, b in zip(texts, texts[1:]) ]
            + [f"from {texts[-1]}"])


def period_of(when: datetime, periods: Sequence[object] | None) -> str | None:
    """The label of the period ``when`` falls in (None without cuts)."""
    cuts = cut_dates(periods)
    if not cuts:
        return None
    labels = period_labels(periods)
    for i, cut in enumerate(cuts):
        if when < cut:
            return labels[i]
    return labels[-1]


def in_window(when: datetime, after: object | None = None, before: object | None = None) -> bool:
    """True when ``after <= when < before`` (either bound optional)."""
    if after is not None and when < _date(after, "after"):
        return False
    return not (before is not None and when >= _date(before, "before"))
