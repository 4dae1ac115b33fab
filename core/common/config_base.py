"""Helpers for strict, typed parsing of the Ianvs YAML files.

A :class:`Section` wraps one YAML mapping and reads keys with type checks. Every problem
becomes a :class:`ConfigError` naming ``file:line``, the key and the fix. Keys a section
does not know are *reported* (a warning with a "did you mean", collected in
:attr:`Section.warnings` for ``ianvs validate``), never injected as attributes.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError, suggest
from core.common.names import PLAIN_NAME_RULE, plain_name_problem
from core.common.yaml_loader import LinedDict, LinedList, load_yaml

logger = logging.getLogger(__name__)

_MISSING = object()


def type_name(value: Any) -> str:
    """YAML-ish name of a value's type (``LinedDict`` -> ``dict``)."""
    if value is None:
        return "null"
    for base in (bool, int, float, str, dict, list):
        if isinstance(value, base):
            return base.__name__
    return type(value).__name__


class Section:
    """Typed read access to one mapping of a YAML file.

    Args:
        data: the mapping (a :class:`LinedDict` when loaded by our YAML loader).
        source: the YAML file, for messages and relative paths.
        where: dotted path of this section inside the file, e.g. ``benchmarkingjob.rank``.
        warnings: shared list receiving unknown-key warnings.
    """

    def __init__(self, data: Any, source: Path, where: str,
                 warnings: list[str] | None = None) -> None:
        if not isinstance(data, dict):
            raise ConfigError(f"'{where}' must be a mapping, got {type_name(data)}",
                              source=source, line=getattr(data, "line", None))
        self.data = data
        self.source = source
        self.where = where
        self.warnings = warnings if warnings is not None else []

    def line(self, key: Any = None) -> int | None:
        if isinstance(self.data, LinedDict):
            return self.data.line_of(key) if key is not None else self.data.line
        return None

    def error(self, key: str | None, message: str, hint: str | None = None) -> ConfigError:
        label = self.child(key) if key else self.where
        return ConfigError(f"'{label}' {message}", source=self.source, line=self.line(key),
                           hint=hint)

    def child(self, key: str) -> str:
        """Dotted name of ``key`` inside this section."""
        return f"{self.where}.{key}" if self.where else str(key)

    def has(self, key: str) -> bool:
        return key in self.data

    def get(self, key: str, types: type | tuple[type, ...], default: Any = _MISSING,
            *, allow_none: bool = False) -> Any:
        """Value of ``key`` checked against ``types``; ``default`` when absent.

        A key that is absent with no default is a "required" error. ``bool`` is never
        accepted where only ``int`` is asked for.
        """
        if key not in self.data:
            if default is _MISSING:
                raise self.error(key, "is required", hint=f"add '{key}:' to {self.where}")
            return default
        value = self.data[key]
        if value is None and allow_none:
            return None
        want = types if isinstance(types, tuple) else (types,)
        ok = isinstance(value, want) and not (isinstance(value, bool) and bool not in want)
        if not ok:
            names = " or ".join(t.__name__ for t in want)
            raise self.error(key, f"must be {names}, got {type_name(value)} ({value!r})")
        return value

    def name(self, key: str, what: str, default: Any = _MISSING, *,
             allow_empty: bool = False) -> str:
        """A string that becomes a folder name (see :mod:`core.common.names`): ``key`` read
        with :meth:`get`, then held to the plain-name rule (``""`` passes only with
        ``allow_empty``: no folder level at all). ``what`` says what the folder is for in the
        message.

        Raises:
            ConfigError: missing (without ``default``), not a string, or not a plain name;
                naming file, line and key.
        """
        value = self.get(key, str, default)
        problem = None if allow_empty and value == "" else plain_name_problem(value)
        if problem:
            raise self.error(key, f"is {value!r}, which {problem}; it names {what}, so it "
                                  "must be a plain name", hint=PLAIN_NAME_RULE)
        return str(value)

    def section(self, key: str, default: Any = _MISSING) -> Section:
        value = self.get(key, dict, default)
        return Section(value, self.source, self.child(key), self.warnings)

    def sections(self, key: str, default: Any = _MISSING) -> list[Section]:
        """A list of mappings under ``key``, each as a Section."""
        items = self.get(key, list, default)
        result = []
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                line = items.line_of(i) if isinstance(items, LinedList) else self.line(key)
                raise ConfigError(f"'{self.child(key)}[{i}]' must be a mapping, got "
                                  f"{type_name(item)} ({item!r})", source=self.source, line=line)
            result.append(Section(item, self.source, f"{self.child(key)}[{i}]", self.warnings))
        return result

    def report_unknown(self, known: Iterable[str],
                       misplaced: Mapping[str, str] | None = None) -> list[str]:
        """Warn about keys not in ``known``; return them. ``misplaced`` maps keys that belong
        elsewhere to where (the hint of their warning)."""
        known = list(known)
        unknown = [k for k in self.data if k not in known]
        for key in unknown:
            hint = (misplaced or {}).get(str(key)) or suggest(str(key), known) or \
                f"known keys: {', '.join(known)}"
            line = self.line(key)
            where = f"{self.source}:{line}" if line else str(self.source)
            msg = f"{where}: unknown key '{self.child(key)}' is ignored ({hint})"
            self.warnings.append(msg)
            logger.warning(msg)
        return unknown


def load_top_section(path: Path, top_key: str, known_keys: Iterable[str],
                     warnings: list[str] | None = None, what: str = "file",
                     misplaced: Mapping[str, str] | None = None) -> Section:
    """Read a YAML file whose only top-level key is ``top_key``; return that section.

    Unknown keys at the top level and inside the section (not in ``known_keys``) are reported
    into ``warnings`` with near-match suggestions.

    Raises:
        ConfigError: unreadable or malformed YAML, or ``top_key`` missing (line 1 named).
    """
    data = load_yaml(path)
    if not isinstance(data, dict) or top_key not in data:
        raise ConfigError(f"top-level key {top_key!r} not found", source=path, line=1,
                          hint=f"the {what} must start with '{top_key}:'")
    top = Section(data, path, "", warnings)
    top.report_unknown([top_key])
    sec = top.section(top_key)
    sec.report_unknown(known_keys, misplaced)
    return sec


def resolve_path(raw: str, yaml_file: Path) -> Path:
    """Resolve a path written in a YAML file.

    Absolute paths stay as they are. A relative path is tried against the current working
    directory first (upstream Ianvs behaviour), then against the folder of ``yaml_file``
    (so examples run from any directory). If neither exists the CWD-relative path is
    returned, so error messages name what upstream would have used.
    """
    path = Path(os.path.expanduser(raw)) if raw.startswith("~") else Path(raw)
    if path.is_absolute():
        return path
    from_cwd = Path.cwd() / path
    if from_cwd.exists():
        return from_cwd
    from_yaml = yaml_file.parent / path
    if from_yaml.exists():
        return from_yaml
    return from_cwd


def require_file(raw: str, yaml_file: Path, what: str, section: Section, key: str,
                 package: bool = False) -> Path:
    """Resolve ``raw`` and insist that it is an existing file (or, with ``package``, a folder
    holding ``__init__.py``: a plugin split over several modules)."""
    path = resolve_path(raw, yaml_file)
    if not (path.is_file() or (package and (path / "__init__.py").is_file())):
        kind = f"{what} (a .py file or a package folder)" if package else what
        raise section.error(key, f"names {kind} {raw!r}, which was not found",
                            hint=f"tried {Path.cwd() / raw} and {yaml_file.parent / raw}")
    return path
