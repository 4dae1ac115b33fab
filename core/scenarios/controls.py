"""Gold controls of the text-scored kinds: the reference answer, and a broken generator.

* ``reference``: the kind's reference reply of each record (:meth:`TaskKind.reference`: the
  best human answer, or the reference annotations written into the code), served by the
  codegen ``canonical`` generator (its ``raw_output`` is the reference; text kinds score
  ``raw_output``). It must score at the top of every reference-based metric.
* ``broken`` (:class:`BrokenTextGenerator`): ``variant: unrelated`` (default) replies with a
  fixed text unrelated to any task; ``variant: empty`` replies with nothing. It must score at
  the bottom.

:class:`~core.scenarios.model.TaskKindModel` maps the hyperparameter values ``reference`` and
``broken`` to ``canonical`` and ``broken_text`` (registered here in the generator group).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from core.common.class_factory import ClassFactory, ClassType
from core.common.errors import ConfigError
from core.generation.base import Generator
from core.generation.cache_key import sample_key
from core.generation.types import Generation, GenerationRequest

UNRELATED_TEXT = ("The quarterly weather report: light rain in the morning, clearing by noon, "
                  "with temperatures around twelve degrees and a gentle breeze from the west.")
BROKEN_VARIANTS = {"unrelated": UNRELATED_TEXT, "empty": ""}


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


ClassFactory.register_lazy(ClassType.GENERATOR, "broken_text",
                           "core.scenarios.controls:BrokenTextGenerator")
