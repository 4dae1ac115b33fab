"""Code generation backends for the smart-coding scenario.

Pick one by name with :func:`create_generator` (the ``generator`` hyperparameter of
an algorithm), e.g. ``create_generator("openai", base_url=..., model=...)``:

========== ==============================================================
name        class / what it does
========== ==============================================================
embedded    :class:`EmbeddedGenerator` — offline GGUF on CPU (default)
openai      :class:`OpenAIGenerator` — any OpenAI-compatible endpoint
replay      :class:`ReplayGenerator` — recorded ``samples.jsonl``
canonical   :class:`CanonicalGenerator` — dataset reference solutions
broken      :class:`BrokenGenerator` — deliberately wrong control
edge_node   :class:`EdgeNodeGenerator` — another generator on a Dask edge node
========== ==============================================================

The built-ins are registered in the project's one registry (group ``generator``) as lazy
``module:attr`` entries, so importing this package needs neither xllamacpp nor a model;
a plugin adds a generator with ``@ClassFactory.register(ClassType.GENERATOR, alias=...)``.
"""
from __future__ import annotations

from typing import Any

from core.common.class_factory import ClassFactory, ClassType
from core.common.errors import ConfigError, RegistryError, suggest
from core.common.signatures import KeywordParameters, keyword_parameters
from core.generation.base import Generator
from core.generation.cache_key import cached_generate, sample_key
from core.generation.types import DecodingSettings, Generation, GenerationRequest

GENERATORS: dict[str, str] = {
    "embedded": "core.generation.embedded:EmbeddedGenerator",
    "openai": "core.generation.openai_http:OpenAIGenerator",
    "replay": "core.generation.replay:ReplayGenerator",
    "canonical": "core.generation.reference:CanonicalGenerator",
    "broken": "core.generation.reference:BrokenGenerator",
    # a model on an edge node of the Dask cluster (the [edge] extra; core/edge/models.py)
    "edge_node": "core.edge.models:EdgeNodeGenerator",
}

DEFAULT_GENERATOR = "embedded"

for _alias, _target in GENERATORS.items():
    ClassFactory.register_lazy(ClassType.GENERATOR, _alias, _target)


def generator_class(name: str) -> type[Generator]:
    """The class registered under ``name``; RegistryError with suggestions if unknown."""
    if not ClassFactory.is_exists(ClassType.GENERATOR, name):
        known = ClassFactory.aliases(ClassType.GENERATOR)
        raise RegistryError(f"unknown generator {name!r}",
                            hint=suggest(name, known) or f"one of {known}")
    return ClassFactory.get_cls(ClassType.GENERATOR, name)  # type: ignore[no-any-return]


def generator_parameters(name: str) -> KeywordParameters:
    """Keyword parameters of generator ``name``'s constructor.

    Imports the generator's module but builds nothing (no model is loaded).

    Raises:
        RegistryError: unknown name (with suggestions).
    """
    return keyword_parameters(generator_class(name))


def create_generator(name: str = DEFAULT_GENERATOR, **params: Any) -> Generator:
    """Instantiate generator ``name`` with keyword ``params`` (its hyperparameters).

    Raises:
        RegistryError: unknown name. ConfigError: parameters the class does not accept.
    """
    cls = generator_class(name)
    try:
        return cls(**params)
    except TypeError as exc:
        raise ConfigError(f"generator {name!r}: {exc}") from exc


__all__ = [
    "DEFAULT_GENERATOR", "GENERATORS", "DecodingSettings", "Generation", "GenerationRequest",
    "Generator", "cached_generate", "create_generator", "generator_class", "generator_parameters",
    "sample_key",
]
