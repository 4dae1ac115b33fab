"""Safe YAML loading that remembers where every key came from: the one YAML loader.

Every YAML file the tool reads (benchmarking job, testenv, algorithm, ``other_hyperparameters``
files, judge rubrics...) goes through :func:`load_yaml` (or :func:`parse_yaml` for text that
is not a file). Both return plain ``dict``/``list`` subclasses (:class:`LinedDict`,
:class:`LinedList`) that carry the 1-based line of each key or item, so config errors can say
``file:line``. Malformed YAML becomes a :class:`ConfigError` naming file and line.

Aliases (``*name``) are allowed, but what they repeat is bounded: a few hundred bytes of
nested aliases ("billion laughs") would otherwise expand into megabytes of configuration,
logs and workspace files. Each alias adds the size of the node it repeats (1 per node plus
the characters of each scalar, nested aliases included); once the aliases of one file add
more than :data:`MAX_ALIAS_EXPANSION`, loading stops with one :class:`ConfigError` naming the
file and the line of the alias. A recursive alias (a node containing itself) is refused too.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from core.common.errors import ConfigError, read_utf8


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


#: most nodes plus scalar characters that the aliases of one YAML file may add by repeating
#: what they name (no upstream Ianvs example uses aliases at all; a shared block of settings
#: repeated a few times adds a few hundred)
MAX_ALIAS_EXPANSION = 100_000


class _LineLoader(yaml.SafeLoader):
    """SafeLoader building Lined* containers, with a bound on what aliases expand to.

    ``source`` names the file in errors.
    """

    def __init__(self, stream: str, source: str | Path) -> None:
        super().__init__(stream)
        self.source = source
        self.alias_added = 0
        #: id of a finished node -> its size with every alias in it expanded
        self._sizes: dict[int, int] = {}
        self._finished: set[int] = set()

    def compose_node(self, parent: Any, index: Any) -> Any:
        if not self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            self._finished.add(id(node))
            return node
        mark = self.peek_event().start_mark
        node = super().compose_node(parent, index)
        self.alias_added += self._expanded_size(node, mark.line + 1)
        if self.alias_added > MAX_ALIAS_EXPANSION:
            raise ConfigError(
                f"YAML aliases expand this file too much: up to here they repeat more than "
                f"{MAX_ALIAS_EXPANSION:,} nodes and characters", source=self.source,
                line=mark.line + 1,
                hint="write the values out instead of repeating them through nested aliases")
        return node

    def _expanded_size(self, node: yaml.Node, line: int) -> int:
        """Nodes plus scalar characters of ``node`` with its aliases expanded (memoised per
        finished node, so nested aliases cost their distinct nodes once)."""
        active: set[int] = set()

        def size(item: yaml.Node) -> int:
            key = id(item)
            if key in self._sizes:
                return self._sizes[key]
            if key in active:
                raise ConfigError("recursive YAML alias: a node contains itself",
                                  source=self.source, line=line,
                                  hint="configuration values cannot contain themselves")
            active.add(key)
            if isinstance(item, yaml.ScalarNode):
                total = 1 + len(item.value)
            elif isinstance(item, yaml.SequenceNode):
                total = 1 + sum(size(child) for child in item.value)
            else:
                total = 1 + sum(size(k) + size(v) for k, v in item.value)
            active.discard(key)
            if key in self._finished:
                self._sizes[key] = total
            return total

        return size(node)


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


def parse_yaml(text: str, source: str | Path) -> Any:
    """Parse YAML ``text`` safely (``source`` names it in errors; see the module docstring).

    Raises:
        ConfigError: malformed YAML, aliases that expand too much or contain themselves, or
            nesting deeper than Python's recursion allows; naming ``source`` and the line.
    """
    loader = _LineLoader(text, source)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise ConfigError(f"malformed YAML: {problem}", source=source, line=line,
                          hint="fix the YAML syntax at that line") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"malformed YAML: {exc}", source=source) from exc
    except RecursionError:
        raise ConfigError("YAML nested too deeply", source=source,
                          line=loader.get_mark().line + 1,
                          hint="configuration files nest a few levels, not thousands") from None
    finally:
        loader.dispose()


def load_yaml(path: Path) -> Any:
    """Parse the file ``path`` safely with :func:`parse_yaml`; errors name the file and line.

    Raises:
        ConfigError: missing file, not ``.yaml``/``.yml``, unreadable (or not UTF-8), or any
            error of :func:`parse_yaml`.
    """
    if not path.is_file():
        raise ConfigError("file not found", source=path,
                          hint="check the path; relative paths are tried against the current "
                          "directory, then the folder of the YAML that names them")
    if path.suffix not in (".yaml", ".yml"):
        raise ConfigError("config file must be the yaml format", source=path,
                          hint="rename it to .yaml or .yml")
    text = read_utf8(path, ConfigError)
    return parse_yaml(text, path)
