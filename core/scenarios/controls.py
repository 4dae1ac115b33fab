"""Gold controls of the text-scored kinds: the reference answer, and a broken generator.

* ``reference`` (:class:`ReferenceTextGenerator`): the kind's reference reply of each record
  (:meth:`TaskKind.reference`): the best human answer, or the reference annotations written
  into the code. It must score at the top of every reference-based metric.
* ``broken`` (:class:`BrokenTextGenerator`): ``variant: unrelated`` (default) replies with a
  fixed text unrelated to any task; ``variant: empty`` replies with nothing. It must score at
  the bottom.

Registered in the generator group as ``reference_text`` and ``broken_text``;
:class:`~core.scenarios.model.TaskKindModel` maps the hyperparameter values ``reference`` and
``broken`` to them.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from core.common.class_factory import ClassFactory, ClassType
from core.common.errors import ConfigError
from core.generation.base import Generator
from core.generation.cache_key import sample_key
from core.generation.types import Generation, GenerationRequest

UNRELATED_TEXT = ("The quarterly weather report: light rain in the morning, clearing by noon, "
                  "with temperatures around twelve degrees and a gentle breeze from the west.")
BROKEN_VARIANTS = {"unrelated": UNRELATED_TEXT, "empty": ""}


class ReferenceTextGenerator(Generator):
    """Yields each task's reference reply (``solutions[task_id]``) for every sample."""

    name = "reference"

    def __init__(self, solutions: Mapping[str, str]) -> None:
        self._solutions = dict(solutions)

    def describe(self) -> dict[str, Any]:
        return {"generator": self.name}

    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Generation]:
        model = self.describe()
        for request in requests:
            text = self._solutions.get(request.task_id)
            for index in request.sample_indices:
                key = sample_key(model, request, index)
                if text is None:
                    yield Generation(request.task_id, index, "", "", key=key,
                                     error="no reference answer for this task")
                else:
                    yield Generation(request.task_id, index, text, text, key=key)


class BrokenTextGenerator(Generator):
    """Replies that must score at the bottom (see the module docstring)."""

    name = "broken"

    def __init__(self, variant: str = "unrelated") -> None:
        if variant not in BROKEN_VARIANTS:
            raise ConfigError(f"broken generator: unknown variant {variant!r}",
                              hint=f"one of {sorted(BROKEN_VARIANTS)}")
        self.variant = variant

    def describe(self) -> dict[str, Any]:
        return {"generator": self.name, "variant": self.variant}

    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Generation]:
        model = self.describe()
        text = BROKEN_VARIANTS[self.variant]
        for request in requests:
            for index in request.sample_indices:
                yield Generation(request.task_id, index, text, text,
                                 key=sample_key(model, request, index))


ClassFactory.register_lazy(ClassType.GENERATOR, "reference_text",
                           "core.scenarios.controls:ReferenceTextGenerator")
ClassFactory.register_lazy(ClassType.GENERATOR, "broken_text",
                           "core.scenarios.controls:BrokenTextGenerator")
