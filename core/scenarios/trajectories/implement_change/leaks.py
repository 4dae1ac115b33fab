"""The implement-change kind's leak view: the model sees ``message``, ``pull_request_title`` and
the ``context`` files; the answer is the new code lines of ``reference_files`` (code), or the
shown files themselves when the change leaves them as they are."""
from __future__ import annotations

from core.scenarios.leak_views import LeakView, Record, new_lines, unchanged
from core.scenarios.leaks import Finding, code_leak, code_lines, first_leak


def find(record: Record) -> Finding | None:
    ref, shown = record["reference_files"], record["context"]
    new = new_lines(ref, shown)
    return first_leak(unchanged(ref, shown), code_leak(new, {
        "pull_request_title": code_lines(str(record.get("pull_request_title") or "")),
        "message": code_lines(str(record["message"]))}))


VIEW = LeakView(find, {})
