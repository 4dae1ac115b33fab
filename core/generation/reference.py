"""Reference generators: the dataset's own solutions (``canonical``) and a ``broken``
control. They validate the whole pipeline and each executor node: ``canonical`` must
score pass@1 = 1.0 and ``broken`` pass@1 = 0.0 on any correct dataset.

``broken`` variants (the code is ``prompt`` + one body line):

* ``raise`` (default): ``raise NotImplementedError("broken reference solution")`` —
  fails every test that calls the function, including tests expecting ``None``;
* ``none``: ``return None`` — fails unless a test only checks ``None`` results
  (HumanEval has none such);
* ``syntax``: a body that does not compile — exercises the syntax-error path;
* ``unrelated`` / ``empty``: a fixed text unrelated to any task, or nothing — the broken
  control of the comment and issue kinds (scored on the raw output).
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError, DatasetError
from core.common.jsonl import iter_jsonl
from core.generation.base import Generator
from core.generation.cache_key import sample_key
from core.generation.types import Generation, GenerationRequest

BROKEN_BODIES: dict[str, str] = {
    "raise": '    raise NotImplementedError("broken reference solution")\n',
    "none": "    return None\n",
    "syntax": "    return (\n",
    # for the text-scored kinds (comment, issue), whose answer is the raw output
    "unrelated": ("The quarterly weather report: light rain in the morning, clearing by noon, "
                  "with temperatures around twelve degrees and a gentle breeze from the west.\n"),
    "empty": "",
}


def load_canonical_solutions(dataset_path: str | os.PathLike[str]) -> dict[str, str]:
    """task_id -> canonical_solution from a codegen JSONL dataset."""
    file = Path(dataset_path)
    solutions: dict[str, str] = {}
    for lineno, record in iter_jsonl(file, "dataset file"):
        solution = record.get("canonical_solution")
        if not isinstance(solution, str) or not isinstance(record.get("task_id"), str):
            raise DatasetError("record needs string 'task_id' and 'canonical_solution'",
                               source=file, line=lineno)
        solutions[record["task_id"]] = solution
    return solutions


class CanonicalGenerator(Generator):
    """Yields ``prompt + canonical_solution`` for every requested sample.

    Args:
        solutions: task_id -> canonical solution (body continuing the prompt), or
        dataset_path: a codegen JSONL file to read them from.

    A task without a solution yields a sample with ``error`` set.
    """

    name = "canonical"

    def __init__(self, solutions: Mapping[str, str] | None = None,
                 dataset_path: str | os.PathLike[str] | None = None) -> None:
        if (solutions is None) == (dataset_path is None):
            raise ConfigError("canonical generator: give exactly one of solutions / dataset_path")
        self._solutions = dict(solutions) if solutions is not None else load_canonical_solutions(dataset_path)  # type: ignore[arg-type]

    def describe(self) -> dict[str, Any]:
        return {"generator": self.name}

    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Generation]:
        model = self.describe()
        for request in requests:
            solution = self._solutions.get(request.task_id)
            for index in request.sample_indices:
                key = sample_key(model, request, index)
                if solution is None:
                    yield Generation(request.task_id, index, "", "", key=key,
                                     error="no canonical solution for this task")
                else:
                    yield Generation(request.task_id, index, solution, request.prompt + solution, key=key)


class BrokenGenerator(Generator):
    """Deliberately wrong answers (see the module docstring for the variants)."""

    name = "broken"

    def __init__(self, variant: str = "raise") -> None:
        if variant not in BROKEN_BODIES:
            raise ConfigError(f"broken generator: unknown variant {variant!r}",
                              hint=f"one of {sorted(BROKEN_BODIES)}")
        self.variant = variant

    def describe(self) -> dict[str, Any]:
        return {"generator": self.name, "variant": self.variant}

    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Generation]:
        model = self.describe()
        body = BROKEN_BODIES[self.variant]
        for request in requests:
            for index in request.sample_indices:
                yield Generation(request.task_id, index, body, request.prompt.rstrip("\n") + "\n" + body,
                                 key=sample_key(model, request, index))
