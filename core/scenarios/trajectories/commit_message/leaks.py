"""The commit-message kind's leak view: the model sees ``pull_request_title`` (maskable: the diff
is the task), ``diff`` and ``context``; the answer is ``message``, checked as its subject line
and as the whole message (prose)."""
from __future__ import annotations

from core.scenarios.leak_views import LeakView, Record, clear_field, subject
from core.scenarios.leaks import Finding, first_leak, text_leak


def find(record: Record) -> Finding | None:
    message = str(record["message"])
    shown = {"pull_request_title": str(record.get("pull_request_title") or ""),
             "context": str(record.get("context") or ""), "diff": str(record["diff"])}
    return first_leak(text_leak(subject(message), shown), text_leak(message, shown))


VIEW = LeakView(find, {"pull_request_title": clear_field(("pull_request_title",))})
