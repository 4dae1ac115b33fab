"""A judge generator whose replies a test chooses (registered as ``scripted_judge``).

It stands in for a judge *model* only where a test must control what the judge says (to check
parsing, counting, caching and the control check); the real embedded judge runs in the
default-job tests. Every call is appended to ``calls_path`` so tests can count them.

With ``reference_aware`` it behaves like a judge that *passes* its control check: a rubric
prompt whose answer to grade is the reference shown in the same prompt gets ``top_score``, and
a pairwise prompt where exactly one answer is the reference it was shown for the same task in
an earlier rubric prompt prefers that answer (unless ``pair`` is no verdict at all: then it
replies ``pair`` as always). Without it the judge gives the same verdicts whatever the answer
(and fails the check: that is the "judge that cannot tell good from bad" of the tests). With
``word_order_blind`` as well, an answer with the reference's words in any order gets
``top_score`` too (a judge that does not read the answer, only its vocabulary).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from core.common.class_factory import ClassFactory, ClassType
from core.generation.base import Generator
from core.generation.cache_key import sample_key
from core.generation.types import Generation, GenerationRequest


_TASK = re.compile(r"\n## [^\n]*\n(.*?)\n\n## (?:Reference|Answer A|Message A)", re.DOTALL)
_REFERENCE = re.compile(r"\n## Reference[^\n]*\n(.*?)\n\n## (?:Answer|Message) to grade\n",
                        re.DOTALL)
_GRADED = re.compile(r"\n## (?:Answer|Message) to grade\n(.*)\n\nGrade ", re.DOTALL)
_PAIR = re.compile(r"\n## (?:Answer|Message) A\n(.*?)\n\n## (?:Answer|Message) B\n(.*)\n\nWhich ",
                   re.DOTALL)
TOP = "functionality: 5\nreliability: 5\ninterpretability: 5"


class ScriptedJudge(Generator):
    """Replies ``score`` to rubric prompts and ``pair`` to pairwise prompts; ``marked_score``
    when the sample's answer contains ``marker`` (to make verdicts depend on the answer); with
    ``reference_aware``, see the module docstring."""

    name = "scripted_judge"

    def __init__(self, score: str = "functionality: 4\nreliability: 4\ninterpretability: 4",
                 pair: str = "A", calls_path: str = "", marker: str = "",
                 marked_score: str = "", reference_aware: bool = False,
                 top_score: str = TOP, word_order_blind: bool = False) -> None:
        self.score, self.pair, self.calls_path = score, pair, calls_path
        self.marker, self.marked_score = marker, marked_score
        self.reference_aware, self.top_score = reference_aware, top_score
        self.word_order_blind = word_order_blind
        self._seen: dict[str, str] = {}  # task text -> reference

    def describe(self) -> dict[str, Any]:
        return {"generator": self.name, "score": self.score, "pair": self.pair,
                "marker": self.marker, "marked_score": self.marked_score,
                "reference_aware": self.reference_aware, "top_score": self.top_score,
                "word_order_blind": self.word_order_blind}

    def _reply(self, text: str) -> str:
        if "exactly one" in text and "A, B or TIE" in text:
            pair, task = _PAIR.search(text), _TASK.search(text)
            known = self._seen.get(task.group(1)) if task else None
            if (self.reference_aware and pair and known is not None
                    and self.pair.strip().upper() in ("A", "B", "TIE")):
                a, b = (pair.group(i).strip() == known for i in (1, 2))
                if a != b:
                    return "A" if a else "B"
            return self.pair
        ref, graded, task = _REFERENCE.search(text), _GRADED.search(text), _TASK.search(text)
        if self.reference_aware and ref and graded and task:
            self._seen[task.group(1)] = ref.group(1).strip()
            answer, reference = graded.group(1).strip(), ref.group(1).strip()
            if answer == reference or (self.word_order_blind
                                       and sorted(answer.split()) == sorted(reference.split())):
                return self.top_score
        if self.marker and self.marker in text.split("to grade\n", 1)[-1]:
            return self.marked_score
        return self.score

    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Generation]:
        model = self.describe()
        for request in requests:
            reply = self._reply(request.chat_messages()[-1]["content"])
            if self.calls_path:
                with open(self.calls_path, "a", encoding="utf-8") as fh:
                    fh.write(request.task_id + "\n")
            for index in request.sample_indices:
                yield Generation(request.task_id, index, reply, reply,
                                 key=sample_key(model, request, index))


ClassFactory.register_cls(ScriptedJudge, ClassType.GENERATOR, alias="scripted_judge")
