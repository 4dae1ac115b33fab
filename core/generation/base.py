"""The generator interface every backend implements."""
from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from core.generation.types import Generation, GenerationRequest


class Generator(abc.ABC):
    """Turns requests into generations.

    Contract:

    * :meth:`generate` yields exactly one :class:`Generation` per requested sample
      (``request.sample_indices``), in no guaranteed order when the backend is
      concurrent; consumers key results by ``(task_id, sample_index)``.
    * A sample that could not be produced (server down, retries exhausted, missing
      recording) is still yielded, with ``error`` set; configuration problems (bad
      model file, missing packages, missing API key variable) raise at construction.
    * :meth:`describe` identifies the model for cache keys: result-relevant settings
      only, never secrets, stable across machines.
    * :meth:`close` releases resources; it is idempotent. Generators are context managers.
    """

    name: str = "generator"

    @abc.abstractmethod
    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Generation]:
        """Yield one Generation per requested sample."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """JSON-serialisable model identity (no secrets)."""

    @classmethod
    def check_options(cls, options: Mapping[str, Any]) -> None:
        """Raise :class:`~core.common.errors.IanvsError` (with ``key`` the option's name) for
        an option value the constructor would refuse and its type annotation cannot show (a
        choice among names); builds nothing. ``ianvs validate`` calls it, so a bad value is
        reported at its line before a run loads a model. Default: nothing to check."""

    def close(self) -> None:
        """Release resources (default: nothing to release)."""

    def __enter__(self) -> "Generator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
