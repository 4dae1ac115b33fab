"""Errors the CLI turns into one readable line.

Every error raised for bad input is an :class:`IanvsError`. Its text names *where*
(file, and line or key when known), *what* is wrong and, when we know it, *how to fix it*.
The CLI prints ``str(error)`` and exits non-zero; ``--debug`` adds the traceback.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path


class IanvsError(Exception):
    """Base class of all user-facing errors.

    Args:
        message: what is wrong, one sentence.
        source: file the problem is in (a path or a display string), if any.
        line: 1-based line in ``source``, if known.
        hint: what the user should do about it.
    """

    def __init__(self, message: str, *, source: str | Path | None = None,
                 line: int | None = None, hint: str | None = None) -> None:
        self.message = message
        self.source = str(source) if source is not None else None
        self.line = line
        self.hint = hint
        super().__init__(self.render())

    def render(self) -> str:
        where = ""
        if self.source:
            where = self.source if self.line is None else f"{self.source}:{self.line}"
            where += ": "
        text = f"{where}{self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text


class ConfigError(IanvsError):
    """A YAML configuration file is missing, malformed or has invalid values."""


class DatasetError(IanvsError):
    """A dataset file is missing, has an unsupported format or a malformed record."""


class RegistryError(IanvsError, ValueError):
    """A plugin alias is unknown, ambiguous or registered twice with different objects."""


class PluginError(IanvsError):
    """A plugin file failed to import or a plugin call failed."""


def suggest(name: str, candidates: Iterable[str]) -> str | None:
    """Return a "did you mean ..." phrase for the closest candidates, or None."""
    matches = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
    if not matches:
        return None
    return "did you mean " + " or ".join(repr(m) for m in matches) + "?"
