"""The ``comment`` task kind: comment a given function without changing it.

Record (one JSON object per line; docs/proposals/scenarios/smart_coding/comment.md)::

    {"id": "cpython-3.11/textwrap.py:dedent",           # optional (content hash otherwise)
     "description": "Function dedent of textwrap.py ...", # context shown to the model
     "code_snippet": "def dedent(text):\\n    ...",        # the code, comments/docstrings removed
     "annotations": [{"line_number": 1, "annotation": "Remove any common leading ..."}, ...],
     "metadata": {"source": ..., "license": ...}}          # optional, free-form

``annotations`` are the human reference: the text of the original docstring and ``#``
comments, each at the 1-based line of ``code_snippet`` it annotates (see
:mod:`core.scenarios.comment.annotate`). The model's reply is scored by
:mod:`core.scenarios.comment.metrics`; the dataset builder is
:mod:`core.scenarios.comment.builder`.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.common.class_factory import ClassFactory
from core.common.errors import DatasetError
from core.scenarios.base import (TASK_KIND, MetricFn, TaskKind, finish_record, reject_unknown,
                                 require_object, require_str)
from core.scenarios.judged import judged_metrics
from core.scenarios.comment import prompts
from core.scenarios.comment.annotate import Annotation, render_annotations
from core.generation.extract import fenced_blocks

FIELDS = {"id", "description", "code_snippet", "annotations", "metadata"}


def annotations_of(record: Mapping[str, Any]) -> list[Annotation]:
    """The record's reference annotations as :class:`Annotation` objects."""
    return [Annotation(int(a["line_number"]), str(a["annotation"]))
            for a in record["annotations"]]


@ClassFactory.register(TASK_KIND, alias="comment")
class CommentKind(TaskKind):
    """Comment a function; the reference is the human-written comments (see module doc)."""

    name = "comment"
    input_field = "code_snippet"

    def leak_view(self) -> Any:
        from core.scenarios.comment.leaks import VIEW

        return VIEW

    def validate(self, record: Mapping[str, Any], source: str | None = None,
                 line: int | None = None) -> dict[str, Any]:
        reject_unknown(require_object(record, source, line), FIELDS, source, line)
        description = require_str(record, "description", source, line)
        code = require_str(record, "code_snippet", source, line, allow_empty=False)
        anns = record.get("annotations")
        if not isinstance(anns, list) or not anns:
            raise DatasetError("field 'annotations' must be a non-empty list", source=source,
                               line=line)
        n_lines = len(code.splitlines())
        checked = []
        for i, ann in enumerate(anns):
            where = f"annotations[{i}]."
            if not isinstance(ann, Mapping):
                raise DatasetError(f"field 'annotations[{i}]' must be an object", source=source,
                                   line=line)
            reject_unknown(ann, {"line_number", "annotation"}, source, line, where)
            number = ann.get("line_number")
            if isinstance(number, bool) or not isinstance(number, int) \
                    or not 1 <= number <= n_lines:
                raise DatasetError(f"field '{where}line_number' must be a line of code_snippet "
                                   f"(1..{n_lines}), got {number!r}", source=source, line=line)
            text = require_str(ann, "annotation", source, line, where, allow_empty=False)
            checked.append({"line_number": number, "annotation": text})
        rec = {"description": description, "code_snippet": code, "annotations": checked}
        return finish_record(rec, record, "comment", source, line)

    def messages(self, record: Mapping[str, Any]) -> list[dict[str, str]]:
        code = record["code_snippet"]
        return [{"role": "system", "content": prompts.SYSTEM},
                {"role": "user", "content": prompts.USER.format(
                    description=record.get("description") or "-",
                    code_snippet=code if code.endswith("\n") else code + "\n")}]

    def reference(self, record: Mapping[str, Any]) -> str:
        return render_annotations(record["code_snippet"], annotations_of(record))

    def answer(self, raw_output: str, record: Mapping[str, Any]) -> str:
        """The first fenced code block of the reply, else the whole reply."""
        blocks = fenced_blocks(raw_output)
        return blocks[0].text if blocks else raw_output

    def judge_view(self, record: Mapping[str, Any]) -> dict[str, str]:
        return {"task": "Comment this function without changing it:\n\n"
                        + record["code_snippet"],
                "reference": self.reference(record)}

    def metrics(self) -> dict[str, MetricFn]:
        from core.scenarios.comment.metrics import comment_scores

        return {"comment_scores": comment_scores, **judged_metrics(self.name)}
