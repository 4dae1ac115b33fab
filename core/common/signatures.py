"""What keyword arguments a plugin callable takes, read from its signature.

One reader for every place that checks names from YAML against a callable before calling it:
module hyperparameters (``Cls(**hyperparameters)``), generator options and metric parameters.
"""
from __future__ import annotations

import inspect
import os
import types
import typing
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


#: the annotations :func:`annotation_problem` checks, and how a message names each
_SIMPLE_TYPES: dict[Any, str] = {int: "a whole number", float: "a number", bool: "true or false",
                                 str: "a string", type(None): "null"}


def _accepts(hint: Any, value: Any) -> bool | None:
    """Whether ``value`` fits annotation ``hint``; None when the annotation is not a simple one
    (or a union of them) this reader can judge."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        results = [_accepts(arg, value) for arg in typing.get_args(hint)]
        if True in results:
            return True
        return None if None in results else False
    if hint is None or hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint is os.PathLike or typing.get_origin(hint) is os.PathLike:
        return isinstance(value, os.PathLike)
    return None


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(_describe(arg) for arg in typing.get_args(hint)))
    if hint is os.PathLike or typing.get_origin(hint) is os.PathLike:
        return "a path"
    return _SIMPLE_TYPES.get(None if hint is None else hint, getattr(hint, "__name__", str(hint)))


def annotation_problem(fn: Callable[..., Any], name: str, value: Any) -> str | None:
    """Why ``value`` cannot be passed as ``fn``'s keyword ``name`` (for a class, its
    constructor's), judged by the parameter's annotation: e.g. ``must be a whole number or
    null, got str 'x'``. None when it fits, or when the annotation is missing, unreadable or
    not made of simple types (int, float, bool, str, None, os.PathLike), which are not judged.
    """
    target = fn.__init__ if isinstance(fn, type) else fn  # type: ignore[misc]
    try:
        hint = typing.get_type_hints(target).get(name)
    except Exception:  # noqa: BLE001 - annotations that do not evaluate are not checked
        return None
    if hint is None or _accepts(hint, value) is not False:
        return None
    return f"must be {_describe(hint)}, got {type(value).__name__} {value!r}"
