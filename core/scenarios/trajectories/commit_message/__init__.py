"""The ``commit_message`` task kind: given a commit's diff, write its message.

Record (one JSON object per line; docs/proposals/scenarios/smart_coding/trajectories.md)::

    {"id": "eli5@ce226a49979f",                       # the trajectory step's id
     "diff": "diff --git a/... b/...\\n...",           # unified diff against the parent
     "files": ["eli5/keras/explain_prediction.py"],   # changed paths
     "context": "eli5/keras/explain_prediction.py:\\n  def explain_prediction_keras(...)\\n...",
     "message": "Move span builder code to function",  # the developer's message (reference)
     "commit": "<40 hex>", "committed_at": "2019-07-05T15:03:39+01:00",
     "repo": {"name": "eli5", "licence": "MIT"},
     "pull_request_title": "",                         # "" when the step has none
     "metadata": {...}}                                # optional, free-form

``context`` (may be empty) is the outline of the touched files at the parent commit (class and
function headers), built by :mod:`.builder`. The reply is scored against ``message`` with the
reference metrics the comment and issue kinds use (chrF, BLEU, ROUGE-L:
:mod:`.metrics`) and, like them, by the LLM judge.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from core.common.class_factory import ClassFactory
from core.common.errors import DatasetError
from core.generation.extract import fenced_blocks
from core.scenarios.base import (TASK_KIND, MetricFn, TaskKind, finish_record, reject_unknown,
                                 require_object, require_str)
from core.scenarios.judged import judged_metrics
from core.scenarios.trajectories.commit_message import prompts

FIELDS = {"id", "diff", "files", "context", "message", "commit", "committed_at", "repo",
          "pull_request_title", "metadata"}
_LABEL = re.compile(r"^\s*(?:\*\*)?(?:git\s+)?commit\s+message(?:\*\*)?\s*:\s*", re.IGNORECASE)
_SHA = re.compile(r"^[0-9a-f]{40}$")


@ClassFactory.register(TASK_KIND, alias="commit_message")
class CommitMessageKind(TaskKind):
    """Write a commit's message from its diff; the developer's message is the reference."""

    name = "commit_message"
    input_field = "diff"

    def leak_view(self) -> Any:
        from core.scenarios.trajectories.commit_message.leaks import VIEW

        return VIEW

    def validate(self, record: Mapping[str, Any], source: str | None = None,
                 line: int | None = None) -> dict[str, Any]:
        reject_unknown(require_object(record, source, line), FIELDS, source, line)
        rec: dict[str, Any] = {
            "diff": require_str(record, "diff", source, line, allow_empty=False),
            "context": require_str(record, "context", source, line),
            "message": require_str(record, "message", source, line, allow_empty=False),
            "commit": require_str(record, "commit", source, line),
            "committed_at": require_str(record, "committed_at", source, line),
            "pull_request_title": require_str(record, "pull_request_title", source, line),
        }
        if not _SHA.match(rec["commit"]):
            raise DatasetError("field 'commit' must be a 40-digit commit id", source=source,
                               line=line)
        from core.scenarios.trajectories.periods import commit_time

        commit_time(rec["committed_at"], source, line)
        files = record.get("files")
        if not isinstance(files, list) or not files or not all(isinstance(f, str) for f in files):
            raise DatasetError("field 'files' must be a non-empty list of paths", source=source,
                               line=line)
        rec["files"] = list(files)
        repo = record.get("repo")
        if not isinstance(repo, Mapping) or not isinstance(repo.get("name"), str):
            raise DatasetError("field 'repo' must be an object with a string 'name'",
                               source=source, line=line)
        rec["repo"] = dict(repo)
        return finish_record(rec, record, "commit", source, line)

    def messages(self, record: Mapping[str, Any]) -> list[dict[str, str]]:
        diff = record["diff"]
        title = record.get("pull_request_title") or ""
        context = record.get("context") or ""
        return [{"role": "system", "content": prompts.SYSTEM},
                {"role": "user", "content": prompts.USER.format(
                    repo=record["repo"]["name"],
                    pull_request=f"\nPull request: {title}" if title else "",
                    files=", ".join(record["files"]),
                    context=prompts.CONTEXT.format(outline=context) if context else "",
                    diff=diff if diff.endswith("\n") else diff + "\n")}]

    def reference(self, record: Mapping[str, Any]) -> str:
        return str(record["message"])

    def answer(self, raw_output: str, record: Mapping[str, Any]) -> str:
        """The message in a reply: the first fenced block's text when the reply has one, else
        the reply; a leading ``Commit message:`` label removed; stripped."""
        blocks = fenced_blocks(raw_output)
        text = blocks[0].text if blocks else raw_output
        return _LABEL.sub("", text.strip(), count=1).strip()

    def judge_view(self, record: Mapping[str, Any]) -> dict[str, str]:
        return {"task": "Write the commit message for this change:\n\n" + record["diff"],
                "reference": self.reference(record)}

    def metrics(self) -> dict[str, MetricFn]:
        from core.scenarios.trajectories.commit_message.metrics import commit_message_scores

        return {"commit_message_scores": commit_message_scores, **judged_metrics(self.name)}
