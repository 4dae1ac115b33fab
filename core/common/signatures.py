"""What keyword arguments a plugin callable takes, read from its signature.

One reader for every place that checks names from YAML against a callable before calling it:
module hyperparameters (``Cls(**hyperparameters)``), generator options and metric parameters.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_BY_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


@dataclass(frozen=True)
class KeywordParameters:
    """Keyword parameters of one callable."""

    accepted: tuple[str, ...]  # names that can be passed by keyword, in signature order
    required: tuple[str, ...]  # the accepted names without a default
    takes_any: bool            # it has ``**kwargs``, or its signature cannot be read


def keyword_parameters(fn: Callable[..., Any]) -> KeywordParameters:
    """Read ``fn``'s keyword parameters; for a class, those of its constructor (no ``self``).

    A callable whose signature cannot be read (some builtins) is taken to accept anything.
    """
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return KeywordParameters((), (), True)
    accepted = tuple(p.name for p in params if p.kind in _BY_KEYWORD)
    required = tuple(p.name for p in params
                     if p.kind in _BY_KEYWORD and p.default is inspect.Parameter.empty)
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
    return KeywordParameters(accepted, required, takes_any)
