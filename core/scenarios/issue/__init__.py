"""The ``issue`` task kind: answer a developer's issue; human answers are the reference.

Record (one JSON object per line; docs/proposals/scenarios/smart_coding/issue.md), the Smart
Coding proposal's shape::

    {"id": "django-5.1.4/faq/usage.txt#3",          # optional (content hash otherwise)
     "question": "How do I use image and file fields?",
     "user_login": "...", "created_at": "...", "updated_at": "...",
     "body": "...",                                   # may be empty
     "answer_1": {"user_login", "created_at", "updated_at", "body"},
     "answer_2": {...}, ...,                          # at least answer_1, numbered without gaps
     "metadata": {"source": ..., "license": ...}}     # optional, free-form

Upstream Ianvs's smart-coding layout (``metadata.json`` + ``data.jsonl`` lines with ``query``,
``response``, optional ``prompt``/``judge_prompt``/``level_*``) is accepted as well: ``query``
becomes the question (after ``prompt``), ``response`` the only answer.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from core.common.class_factory import ClassFactory
from core.common.errors import DatasetError
from core.scenarios.base import (TASK_KIND, MetricFn, TaskKind, finish_record, reject_unknown,
                                 require_object, require_str)
from core.scenarios.judged import judged_metrics
from core.scenarios.issue import prompts

PERSON_FIELDS = ("user_login", "created_at", "updated_at")
FIELDS = {"id", "question", "body", "metadata", *PERSON_FIELDS}
ANSWER_FIELDS = {"user_login", "created_at", "updated_at", "body"}
UPSTREAM_FIELDS = {"prompt", "query", "response", "explanation", "judge_prompt", "level_1_dim",
                   "level_2_dim", "level_3_dim", "level_4_dim"}
_ANSWER_KEY = re.compile(r"^answer_([1-9][0-9]*)$")


def answers_of(record: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The human answers of a validated record, in order."""
    return [record[f"answer_{i}"] for i in range(1, len(record) + 1)
            if f"answer_{i}" in record]


def _from_upstream(record: Mapping[str, Any], source: str | None,
                   line: int | None) -> dict[str, Any]:
    reject_unknown(record, UPSTREAM_FIELDS | {"id", "metadata"}, source, line)
    query = require_str(record, "query", source, line, allow_empty=False)
    response = require_str(record, "response", source, line, allow_empty=False)
    prefix = record.get("prompt") or ""
    return {"question": f"{prefix}{query}", "user_login": "", "created_at": "",
            "updated_at": "", "body": "",
            "answer_1": {"user_login": "", "created_at": "", "updated_at": "",
                         "body": response},
            "metadata": {**dict(record.get("metadata") or {}),
                         **{k: record[k] for k in UPSTREAM_FIELDS - {"query", "response"}
                            if k in record}},
            **({"id": record["id"]} if "id" in record else {})}


@ClassFactory.register(TASK_KIND, alias="issue")
class IssueKind(TaskKind):
    """Answer an issue; the reference is the best-matching human answer (see module doc)."""

    name = "issue"
    input_field = "question"

    def leak_view(self) -> Any:
        from core.scenarios.issue.leaks import VIEW

        return VIEW

    def validate(self, record: Mapping[str, Any], source: str | None = None,
                 line: int | None = None) -> dict[str, Any]:
        if "query" in require_object(record, source, line) and "question" not in record:
            record = _from_upstream(record, source, line)
        answer_keys = sorted((int(m.group(1)), k) for k in record
                             if (m := _ANSWER_KEY.match(k)))
        reject_unknown(record, FIELDS | {k for _, k in answer_keys}, source, line)
        rec: dict[str, Any] = {"question": require_str(record, "question", source, line,
                                                       allow_empty=False)}
        for name in (*PERSON_FIELDS, "body"):
            rec[name] = require_str(record, name, source, line)
        if not answer_keys:
            raise DatasetError("record has no 'answer_1'", source=source, line=line,
                               hint="an issue record needs at least one human answer")
        for expected, (number, key) in enumerate(answer_keys, start=1):
            if number != expected:
                raise DatasetError(f"answers must be numbered answer_1, answer_2, ... without "
                                   f"gaps; found {key!r} after answer_{expected - 1}",
                                   source=source, line=line)
            answer = record[key]
            if not isinstance(answer, Mapping):
                raise DatasetError(f"field {key!r} must be an object", source=source, line=line)
            reject_unknown(answer, ANSWER_FIELDS, source, line, f"{key}.")
            rec[key] = {name: require_str(answer, name, source, line, f"{key}.")
                        for name in PERSON_FIELDS}
            rec[key]["body"] = require_str(answer, "body", source, line, f"{key}.",
                                           allow_empty=False)
        return finish_record(rec, record, "issue", source, line)

    def messages(self, record: Mapping[str, Any]) -> list[dict[str, str]]:
        body = record.get("body") or ""
        return [{"role": "system", "content": prompts.SYSTEM},
                {"role": "user", "content": prompts.USER.format(
                    question=record["question"], body=body + "\n" if body else "")}]

    def reference(self, record: Mapping[str, Any]) -> str:
        """The first human answer (the accepted/maintainer answer in the shipped sets)."""
        return str(answers_of(record)[0]["body"])

    def references(self, record: Mapping[str, Any]) -> list[str]:
        """Every human answer's text (metrics take the best match)."""
        return [str(a["body"]) for a in answers_of(record)]

    def judge_view(self, record: Mapping[str, Any]) -> dict[str, str]:
        body = record.get("body") or ""
        return {"task": record["question"] + ("\n\n" + body if body else ""),
                "reference": self.reference(record)}

    def metrics(self) -> dict[str, MetricFn]:
        from core.scenarios.issue.metrics import issue_scores

        return {"issue_scores": issue_scores, **judged_metrics(self.name)}
