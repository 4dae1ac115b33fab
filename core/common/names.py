"""Names from configuration files that become folder names, and the workspace wall.

A job's ``name`` and its algorithms' ``name`` become folders: ``<workspace>/<job>/<algorithm>/
<test case uuid>``. Such a name must be a *plain name* (:func:`plain_name_problem`): it can
never climb out of the workspace (``../x``), point elsewhere (``/etc``), hide (``.x``) or carry
characters a file system or a shell mangles. :func:`inside_workspace` is the last check
before anything is written: every folder a run writes must resolve under its workspace.
"""
from __future__ import annotations

import re
from pathlib import Path

from core.common.errors import ConfigError

#: longest plain name (a path component; file systems allow 255 bytes)
MAX_NAME_LENGTH = 100
#: letters (any script), digits, ``_``, then also ``.``, ``-`` and inner spaces (upstream
#: examples name algorithms "rfnet_lifelong_learning for travel mode")
_PLAIN = re.compile(r"\w(?:[\w. -]*[\w.-])?")
#: what the hint of every refused name says
PLAIN_NAME_RULE = (f"use at most {MAX_NAME_LENGTH} letters, digits, '_', '-', '.' or inner "
                   "spaces, starting with a letter, digit or '_'")


def plain_name_problem(value: str) -> str | None:
    """Why ``value`` is not a plain name (a phrase that reads after "which", e.g. ``contains
    '/'``), or None when it is one.

    A plain name is 1 to :data:`MAX_NAME_LENGTH` characters: letters, digits and ``_``
    (Unicode word characters), plus ``.``, ``-`` and spaces inside; it starts with a letter,
    digit or ``_`` and does not end with a space. So ``.``, ``..``, ``/``, ``\\``, a leading
    ``-`` or ``.``, control characters and the empty name are all refused.
    """
    if not value:
        return "is empty"
    if len(value) > MAX_NAME_LENGTH:
        return f"is {len(value)} characters long (at most {MAX_NAME_LENGTH})"
    if value in (".", ".."):
        return "refers to a folder instead of naming one"
    bad = sorted({c for c in value if not (c.isalnum() or c in "_.- ")})
    if bad:
        return "contains " + ", ".join(repr(c) for c in bad)
    if not _PLAIN.fullmatch(value):
        return "starts with '.', '-' or a space, or ends with a space"
    return None


def inside_workspace(workspace: str | Path, path: str | Path, what: str,
                     source: str | Path | None = None) -> Path:
    """``path`` when it resolves (symbolic links followed) to ``workspace`` or below it.

    Called before a run writes a folder (the job's, a test case's, the rank and report
    folders): nothing is ever written outside the job's workspace, whatever a name or a link
    says. Both are taken as written (``~`` is not expanded: the check is about the very path
    that will be written).

    Raises:
        ConfigError: ``path`` resolves outside ``workspace``; the message names ``what``, both
            resolved paths and ``source`` (the job file).
    """
    root = Path(workspace).resolve()
    target = Path(path).resolve()
    if target != root and root not in target.parents:
        raise ConfigError(f"{what} {str(path)!r} resolves to {target}, outside the workspace "
                          f"{root}", source=source,
                          hint="names in the job file must be plain names, and no folder of "
                               "the workspace may link outside it")
    return Path(path)
