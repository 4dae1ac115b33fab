"""Functions a job trusts by name: ``"package.module:function"`` entries, imported through the
registry (group :data:`CODE_HOOK`).

A testenv's ``code_hooks:`` lists them; the dataset records of a kind that runs code may then
name one (see :mod:`core.scenarios.codegen.records`). Only the job's own configuration is ever
imported from a name, never a dataset value. A name that cannot be loaded leaves nothing
registered.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from core.common.class_factory import ClassFactory
from core.common.errors import ConfigError, IanvsError

#: registry group of record hooks (merge and parse functions)
CODE_HOOK = "code_hook"
#: the testenv.yaml key that lists the functions a job trusts as hooks
TRUST_KEY = "code_hooks"
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")


def load_hook(path: str) -> Callable[..., Any]:
    """The function registered as ``path`` (lazily imported on first use).

    Raises:
        ConfigError: it cannot be loaded or is not callable (nothing is left registered).
    """
    if not ClassFactory.is_exists(CODE_HOOK, path):
        ClassFactory.register_lazy(CODE_HOOK, path, path)
    try:
        fn = ClassFactory.get_cls(CODE_HOOK, path)
    except (ImportError, AttributeError, IanvsError) as exc:
        ClassFactory.unregister(CODE_HOOK, path)
        raise ConfigError(f"{path!r} cannot be loaded: {type(exc).__name__}: {exc}") from None
    if not callable(fn):
        ClassFactory.unregister(CODE_HOOK, path)
        raise ConfigError(f"{path!r} is not a function")
    return fn  # type: ignore[no-any-return]


def check_trusted_hook(path: Any) -> Callable[..., Any]:
    """Check one ``code_hooks:`` entry of testenv.yaml and import it: ``path`` must be
    ``"package.module:function"`` naming a callable. Called for the job's own configuration
    only, never for a dataset value.

    Raises:
        ConfigError: malformed, not importable, or not callable (message without location;
            the caller adds file and line).
    """
    if not isinstance(path, str) or not _DOTTED.fullmatch(path):
        raise ConfigError(f"must be 'package.module:function', got {path!r}")
    return load_hook(path)
