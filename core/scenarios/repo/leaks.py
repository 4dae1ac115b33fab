"""The repo kind's leak view: the model sees the prompt's context (its last
``PROMPT_CONTEXT_CHARS``) and the header; the answer is the function body ``reference`` (code).
A body leaks when the shown context holds it (a duplicate or near-duplicate function). The
header's model-written ``problem`` is maskable (the header then shows the bare signature)."""
from __future__ import annotations

from typing import Any

from core.scenarios.leak_views import LeakView, Record
from core.scenarios.leaks import Finding, code_leak, code_lines
from core.scenarios.repo.prompts import PROMPT_CONTEXT_CHARS, header_of


def find(record: Record) -> Finding | None:
    context = str(record["context"])[-PROMPT_CONTEXT_CHARS:]
    return code_leak(code_lines(str(record["reference"])),
                     {"context": code_lines(context), "header": code_lines(header_of(record))})


def drop_problem(record: dict[str, Any]) -> None:
    """Mask a repo task's model-written problem (the header then shows the bare signature)."""
    record["problem"] = None
    record.pop("problem_author", None)


VIEW = LeakView(find, {"header": drop_problem})
