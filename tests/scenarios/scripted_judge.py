"""A judge generator whose replies a test chooses (registered as ``scripted_judge``).

It stands in for a judge *model* only where a test must control what the judge says (to check
parsing, counting and caching); the real embedded judge runs in the default-job tests. Every
call is appended to ``calls_path`` so tests can count them.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from core.common.class_factory import ClassFactory, ClassType
from core.generation.base import Generator
from core.generation.cache_key import sample_key
from core.generation.types import Generation, GenerationRequest


class ScriptedJudge(Generator):
    """Replies ``score`` to rubric prompts and ``pair`` to pairwise prompts; ``answer_pair``
    when the sample's answer contains ``marker`` (to make verdicts depend on the answer)."""

    name = "scripted_judge"

    def __init__(self, score: str = "functionality: 4\nreliability: 4\ninterpretability: 4",
                 pair: str = "A", calls_path: str = "", marker: str = "",
                 marked_score: str = "") -> None:
        self.score, self.pair, self.calls_path = score, pair, calls_path
        self.marker, self.marked_score = marker, marked_score

    def describe(self) -> dict[str, Any]:
        return {"generator": self.name, "score": self.score, "pair": self.pair,
                "marker": self.marker, "marked_score": self.marked_score}

    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Generation]:
        model = self.describe()
        for request in requests:
            text = request.chat_messages()[-1]["content"]
            if "exactly one" in text and "A, B or TIE" in text:
                reply = self.pair
            elif self.marker and self.marker in text.split("## Answer to grade", 1)[-1]:
                reply = self.marked_score
            else:
                reply = self.score
            if self.calls_path:
                with open(self.calls_path, "a", encoding="utf-8") as fh:
                    fh.write(request.task_id + "\n")
            for index in request.sample_indices:
                yield Generation(request.task_id, index, reply, reply,
                                 key=sample_key(model, request, index))


ClassFactory.register_cls(ScriptedJudge, ClassType.GENERATOR, alias="scripted_judge")
