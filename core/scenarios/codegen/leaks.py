"""The codegen kind's leak view: the model sees ``prompt`` (signature and docstring); the answer
is ``canonical_solution`` (code). Codegen sets (HumanEval and the like) are third-party, not
built here: they are checked, not rewritten."""
from __future__ import annotations

from core.scenarios.leak_views import LeakView, Record
from core.scenarios.leaks import Finding, code_leak, code_lines


def find(record: Record) -> Finding | None:
    return code_leak(code_lines(str(record.get("canonical_solution") or "")),
                     {"prompt": code_lines(str(record["prompt"]))})


VIEW = LeakView(find, {})
