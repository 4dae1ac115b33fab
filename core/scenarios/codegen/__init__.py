"""The ``codegen`` task kind: complete a function; its unit tests decide (in the sandbox).

Its pieces predate the task-kind seam and stay where the sandbox and execution code use them;
this package is their one entry point:

* record schema: :class:`core.datasets.codegen.CodegenTask` (docs/proposals/scenarios/
  smart_coding/codegen.md);
* prompts: the record's ``prompt`` (completion) and :func:`core.generation.types.
  default_chat_messages` (chat);
* builder: ``ianvs dataset humaneval`` (:mod:`core.datasets.humaneval`);
* basemodel: :class:`core.generation.codegen_model.CodegenModel`; controls ``canonical`` and
  ``broken`` (:mod:`core.generation.reference`);
* metrics: :mod:`core.testcasecontroller.metrics.codegen` (pass@k, acc, edge cost).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.common.class_factory import ClassFactory
from core.datasets.codegen import CodegenTask
from core.generation.types import default_chat_messages
from core.scenarios.base import TASK_KIND, MetricFn, TaskKind


@ClassFactory.register(TASK_KIND, alias="codegen")
class CodegenKind(TaskKind):
    """HumanEval-style function completion (see module docstring)."""

    name = "codegen"
    input_field = "prompt"
    default_mode = "complete"

    def validate(self, record: Mapping[str, Any], source: str | None = None,
                 line: int | None = None) -> dict[str, Any]:
        task = CodegenTask.from_record(record, source=source, line=line)
        return {**task.to_record(), "id": task.task_id}

    def messages(self, record: Mapping[str, Any]) -> list[dict[str, str]]:
        return default_chat_messages(record["prompt"])

    def prompt(self, record: Mapping[str, Any]) -> str:
        return str(record["prompt"])

    def reference(self, record: Mapping[str, Any]) -> str:
        return str(record["prompt"]) + str(record["canonical_solution"])

    def judge_view(self, record: Mapping[str, Any]) -> dict[str, str]:
        return {"task": str(record["prompt"]), "reference": self.reference(record)}

    def metrics(self) -> dict[str, MetricFn]:
        from core.testcasecontroller.metrics.codegen import edge_cost, exec_accuracy, pass_at_k

        return {"pass_at_k": pass_at_k, "acc": exec_accuracy, "edge_cost": edge_cost}
