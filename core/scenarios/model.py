"""The basemodel of every text-scored task kind: a kind renders, a generator answers.

An example's ``basemodel.py`` registers a subclass naming its kind::

    @ClassFactory.register(ClassType.GENERAL, alias="gen")
    class BaseModel(TaskKindModel):
        kind = "comment"

Hyperparameters are those of :class:`~core.generation.codegen_model.CodegenModel`
(``generator``, ``mode``, decoding settings, generator options), with two differences:
``mode`` defaults to ``chat`` (the kind's prompt templates become the chat messages; in
``complete`` mode their text is the prompt), and the gold controls are the kind's own:
``generator: reference`` (the reference answer of each record, served by the ``canonical``
generator, whose raw output is that answer) and ``generator: broken`` (default ``variant:
unrelated``, a fixed unrelated text; ``empty``: nothing; see :mod:`core.generation.reference`). Generations are
cached and resumable exactly as for codegen (``generations.jsonl`` in the test case folder).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.generation import create_generator
from core.generation.base import Generator
from core.generation.codegen_model import CodegenModel
from core.generation.types import DecodingSettings, GenerationRequest
from core.scenarios import get_kind
from core.scenarios.base import TaskKind

CONTROL_ALIASES = {"reference": "canonical"}


class TaskKindModel(CodegenModel):
    """A generator answering the records of task kind :attr:`kind` (module docstring)."""

    kind: str = ""

    @classmethod
    def _parse(cls, hyperparameters: Mapping[str, Any]  # type: ignore[override]
               ) -> tuple[str, str, DecodingSettings, dict[str, Any]]:
        params = dict(hyperparameters)
        name = str(params.get("generator", "embedded"))
        params["generator"] = CONTROL_ALIASES.get(name, name)
        params.setdefault("mode", get_kind(cls.kind).default_mode)
        if params["generator"] == "broken":
            params.setdefault("variant", "unrelated")
        return CodegenModel._parse(params, who=f"the {cls.kind} model")

    @property
    def task_kind(self) -> TaskKind:
        return get_kind(self.kind)

    def _make_generator(self, records: Sequence[dict[str, Any]]) -> Generator:
        if self.generator_name == "canonical" and "dataset_path" not in self.generator_params:
            kind = self.task_kind
            solutions = {}
            for record in records:
                rec = kind.validate(record)
                solutions[rec["id"]] = kind.reference(rec)
            return create_generator("canonical", solutions=solutions)
        return super()._make_generator(records)

    def _requests(self, records: Sequence[dict[str, Any]]) -> list[GenerationRequest]:
        kind = self.task_kind
        requests = []
        for record in records:
            rec = kind.validate(record)
            requests.append(GenerationRequest(
                task_id=rec["id"], prompt=kind.prompt(rec), mode=self.mode,
                decoding=self.decoding, messages=tuple(kind.messages(rec))))
        return requests
