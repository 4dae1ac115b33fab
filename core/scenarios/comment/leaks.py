"""The comment kind's leak view: the model sees ``description`` and ``code_snippet``; the answer
is the annotations' texts (prose)."""
from __future__ import annotations

from core.scenarios.leak_views import LeakView, Record
from core.scenarios.leaks import Finding, text_leak


def find(record: Record) -> Finding | None:
    reference = [str(a["annotation"]) for a in record["annotations"]]
    return text_leak(reference, {"description": str(record.get("description") or ""),
                                 "code_snippet": str(record["code_snippet"])})


VIEW = LeakView(find, {})
