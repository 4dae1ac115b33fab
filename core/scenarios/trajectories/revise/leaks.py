"""The revise kind's leak view: the model sees ``message``, ``feedback``, ``pull_request.title``
(maskable), the ``previous`` commit's message and diff, and the ``files``; the answer is the new
code lines of ``reference_files`` (code)."""
from __future__ import annotations

from core.scenarios.leak_views import LeakView, Record, clear_field, new_lines, unchanged
from core.scenarios.leaks import Finding, code_leak, code_lines, first_leak


def find(record: Record) -> Finding | None:
    ref, shown = record["reference_files"], record["files"]
    prev = record["previous"]
    new = new_lines(ref, shown)
    return first_leak(unchanged(ref, shown), code_leak(new, {
        "pull_request.title": code_lines(str(record["pull_request"].get("title") or "")),
        "previous.diff": code_lines(str(prev.get("diff") or ""), diff=True),
        "previous.message": code_lines(str(prev.get("message") or "")),
        "feedback": code_lines(str(record.get("feedback") or "")),
        "message": code_lines(str(record["message"]))}))


VIEW = LeakView(find, {"pull_request.title": clear_field(("pull_request", "title"))})
