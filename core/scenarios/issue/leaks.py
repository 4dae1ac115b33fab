"""The issue kind's leak view: the model sees ``question`` and ``body``; the answer is every
``answer_N.body`` (prose)."""
from __future__ import annotations

from collections.abc import Mapping

from core.scenarios.leak_views import LeakView, Record
from core.scenarios.leaks import Finding, first_leak, text_leak


def find(record: Record) -> Finding | None:
    shown = {"question": str(record["question"]), "body": str(record.get("body") or "")}
    answers = [str(record[k]["body"]) for k in sorted(record) if k.startswith("answer_")
               and isinstance(record[k], Mapping)]
    return first_leak(*(text_leak(a, shown) for a in answers))


VIEW = LeakView(find, {})
