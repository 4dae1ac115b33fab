"""Safe YAML loading that remembers where every key came from.

:func:`load_yaml` returns plain ``dict``/``list`` subclasses (:class:`LinedDict`,
:class:`LinedList`) that carry the 1-based line of each key or item, so config errors can
say ``file:line``. Malformed YAML becomes a :class:`ConfigError` naming file and line.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from core.common.errors import ConfigError


class LinedDict(dict):
    """A dict whose keys know their source line (``key_lines``) and which knows its own."""

    line: int | None = None
    key_lines: dict[Any, int]

    def line_of(self, key: Any) -> int | None:
        """Line of ``key`` if known, else the mapping's own line."""
        return getattr(self, "key_lines", {}).get(key, self.line)


class LinedList(list):
    """A list whose items know their source line (``item_lines``)."""

    line: int | None = None
    item_lines: list[int]

    def line_of(self, index: int) -> int | None:
        lines = getattr(self, "item_lines", [])
        return lines[index] if 0 <= index < len(lines) else self.line


class _LineLoader(yaml.SafeLoader):
    """SafeLoader building Lined* containers."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode) -> LinedDict:
    loader.flatten_mapping(node)
    result = LinedDict()
    result.line = node.start_mark.line + 1
    result.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError as exc:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                "found an unhashable key", key_node.start_mark) from exc
        if key in result:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"found duplicate key {key!r}", key_node.start_mark)
        result[key] = loader.construct_object(value_node, deep=True)
        result.key_lines[key] = key_node.start_mark.line + 1
    return result


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode) -> LinedList:
    result = LinedList(loader.construct_object(child, deep=True) for child in node.value)
    result.line = node.start_mark.line + 1
    result.item_lines = [child.start_mark.line + 1 for child in node.value]
    return result


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_yaml(path: Path) -> Any:
    """Parse ``path`` safely; errors name the file and line.

    Raises:
        ConfigError: missing file, not ``.yaml``/``.yml``, unreadable or malformed YAML.
    """
    if not path.is_file():
        raise ConfigError("file not found", source=path,
                          hint="check the path; relative paths are tried against the current "
                          "directory, then the folder of the YAML that names them")
    if path.suffix not in (".yaml", ".yml"):
        raise ConfigError("config file must be the yaml format", source=path,
                          hint="rename it to .yaml or .yml")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", source=path) from exc
    try:
        return yaml.load(text, Loader=_LineLoader)  # noqa: S506 - SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise ConfigError(f"malformed YAML: {problem}", source=path, line=line,
                          hint="fix the YAML syntax at that line") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"malformed YAML: {exc}", source=path) from exc
