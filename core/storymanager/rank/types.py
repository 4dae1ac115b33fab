"""Typed inputs and outputs of the story manager's rank step.

This module is the contract between the test-case controller (which produces
:class:`CaseResult` objects and a :class:`RankConfig`) and the rank/visualisation
code (which writes ``all_rank.csv`` / ``selected_rank.csv`` and prints them).

It imports only ``core.common.errors`` from the rest of ``core``, so every other package
can depend on it.

Contracts
---------
* :meth:`RankConfig.from_mapping` is strict: unknown keys, wrong shapes and unknown
  enumerated values raise :class:`RankConfigError` naming the YAML file (``source``),
  the offending key and what to do.  Missing keys take the defaults of spec §9.6,
  except that every ``selected_dataitem`` key defaults on its own (upstream replaces
  the mapping wholesale and crashes when ``hyperparameters`` is missing, bug #10).
* Constructing :class:`RankConfig` directly validates enumerated values too
  (``__post_init__``), with ``source="<RankConfig>"``.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError, Problems

logger = logging.getLogger(__name__)

ALL = "all"
"""Selection wildcard: ``["all"]`` selects every column of a kind."""

SAVE_MODES: tuple[str, ...] = (
    "selected_and_all",
    "selected_only",
    "selected_and_all_and_picture",
)
"""Accepted ``rank.save_mode`` values."""

VISUALIZATION_MODES: tuple[str, ...] = ("selected_only", "none")
"""Accepted ``rank.visualization.mode`` values.

``selected_only`` prints ``selected_rank.csv`` (upstream behaviour).  ``none`` is an
extension of this project that turns printing off explicitly (upstream prints nothing
for any mode other than ``selected_only``, so the effect is compatible)."""

VISUALIZATION_METHODS: tuple[str, ...] = ("print_table",)
"""Accepted ``rank.visualization.method`` values (see ``visualization.METHODS``)."""

SORT_ASCEND = "ascend"
SORT_DESCEND = "descend"

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
"""Format of the ``time`` column (local clock, 24h, zero padded, no zone)."""

_SELECTED_KEYS: tuple[str, ...] = ("paradigms", "modules", "hyperparameters", "metrics")
_RANK_KEYS: tuple[str, ...] = ("sort_by", "visualization", "selected_dataitem", "save_mode")
_VIS_KEYS: tuple[str, ...] = ("mode", "method")


class RankConfigError(ConfigError, ValueError):
    """Invalid ``rank`` section.  The message names the file, the key and the fix.

    A :class:`core.common.errors.ConfigError` (so the CLI prints it as one line) and a
    ``ValueError``.
    """


def format_completion_time(moment: _dt.datetime | None = None) -> str:
    """Return ``moment`` (default: now, local clock) as ``YYYY-MM-DD HH:MM:SS``.

    Timezone information, if any, is dropped (not converted): the column has no zone.
    """
    moment = moment if moment is not None else _dt.datetime.now()
    return moment.strftime(TIME_FORMAT)


def _err(source: str, key: str, problem: str, fix: str,
         line: int | None = None) -> RankConfigError:
    return RankConfigError(f"rank.{key}: {problem}", source=source, line=line, hint=fix)


def _line(container: Any, key: Any = None) -> int | None:
    """Line of ``key`` in a mapping or list loaded by the YAML loader (its ``line_of``), or of
    the container itself; None for plain Python values."""
    if key is None:
        return getattr(container, "line", None)
    line_of = getattr(container, "line_of", None)
    return line_of(key) if callable(line_of) else None


def _hint(name: str, allowed: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(allowed), n=1)
    return f" Did you mean '{close[0]}'?" if close else ""


def _check_keys(data: Mapping[str, Any], allowed: Sequence[str], where: str, source: str,
                problems: Problems | None = None) -> None:
    problems = problems or Problems()
    for key in data:
        if key not in allowed:
            problems.add(_err(
                source,
                f"{where}{key}" if where else str(key),
                "unknown key",
                f"Allowed keys here: {', '.join(allowed)}.{_hint(str(key), allowed)}",
                _line(data, key),
            ))


def _parse_sort_by(value: Any, source: str, line: int | None = None,
                   problems: Problems | None = None,
                   lines: dict[str, int] | None = None) -> tuple[tuple[str, str], ...]:
    """The ``sort_by`` entries; each bad entry is one problem (``problems``) and is left out.
    ``lines`` receives the line of each entry kept (``sort_by[i]``)."""
    problems = problems or Problems()
    if value is None:
        raise _err(source, "sort_by", "must not be null",
                   "Use a list such as [{acc: descend}] or [] for no sorting.", line)
    if not isinstance(value, list):
        raise _err(source, "sort_by", f"must be a list, got {type(value).__name__}",
                   "Write it as a list of single-key mappings, e.g. [{acc: descend}].", line)
    keys: list[tuple[str, str]] = []
    for i, entry in enumerate(value):
        where = f"sort_by[{i}]"
        at = _line(value, i) or line
        if not isinstance(entry, Mapping) or len(entry) != 1:
            problems.add(_err(source, where, f"must be a mapping with exactly one key, got "
                              f"{entry!r}", "Write each entry as {<metric name>: ascend|descend}"
                              "; put several metrics in separate list items.", at))
            continue
        (metric, direction), = entry.items()
        at = _line(entry, metric) or at
        if not isinstance(metric, str) or not metric:
            problems.add(_err(source, where, f"metric name must be a non-empty string, got "
                              f"{metric!r}", "Use a metric name from the testenv.", at))
            continue
        if not isinstance(direction, str):
            problems.add(_err(source, where, f"direction must be a string, got {direction!r}",
                              "Use 'ascend' or 'descend'.", at))
            continue
        if direction not in (SORT_ASCEND, SORT_DESCEND):
            logger.warning("%s: rank.%s: direction %r is not 'ascend'; sorting %r descending "
                           "(upstream rule). Write 'descend' to silence this warning.",
                           source, where, direction, metric)
            direction = SORT_DESCEND
        if lines is not None and at is not None:
            lines[f"sort_by[{len(keys)}]"] = at
        keys.append((metric, direction))
    return tuple(keys)


def _parse_visualization(value: Any, source: str, line: int | None = None,
                         problems: Problems | None = None) -> tuple[str, str]:
    if not isinstance(value, Mapping):
        raise _err(source, "visualization", f"must be a mapping, got {value!r}",
                   "Write e.g. {mode: selected_only, method: print_table}.", line)
    _check_keys(value, _VIS_KEYS, "visualization.", source, problems)
    mode = value.get("mode", VISUALIZATION_MODES[0])
    method = value.get("method", VISUALIZATION_METHODS[0])
    return mode, method


def _parse_names(value: Any, key: str, source: str, allow_empty: bool,
                 line: int | None = None) -> tuple[str, ...]:
    where = f"selected_dataitem.{key}"
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _err(source, where, f"must be a list of non-empty strings, got {value!r}",
                   'Write e.g. ["all"] or ["acc", "latency"].', line)
    if not value and not allow_empty:
        raise _err(source, where, "must not be empty", 'Use ["all"] to select everything.',
                   line)
    if ALL in value and len(value) > 1:
        raise _err(source, where, f'"all" cannot be combined with other names: {value!r}',
                   'Use either ["all"] or an explicit list of names.', line)
    dupes = sorted({v for v in value if value.count(v) > 1})
    if dupes:
        raise _err(source, where, f"duplicate names {dupes}", "List each name once.", line)
    return tuple(value)


def _check_choice(value: Any, allowed: Sequence[str], key: str, source: str,
                  line: int | None = None) -> None:
    if value not in allowed:
        raise _err(source, key, f"unsupported value {value!r}",
                   f"Use one of: {', '.join(allowed)}.{_hint(str(value), allowed)}", line)


@dataclass(frozen=True)
class RankConfig:
    """Validated ``benchmarkingjob.rank`` section.

    Attributes:
        sort_by: ``(metric, "ascend"|"descend")`` pairs; the first is the primary key.
            Any direction other than ``"ascend"`` means descending.
        visualization_mode: ``"selected_only"`` prints the selected table; ``"none"`` does not.
        visualization_method: name of a visualisation method (``"print_table"``).
        selected_paradigms / selected_modules / selected_hyperparameters /
        selected_metrics: ``("all",)`` or explicit names in output order.  Hyperparameter
            names are ``<module type>-<hp>`` columns; a bare ``<hp>`` is also accepted
            (resolved at save time, see ``docs/rank.md``).
        save_mode: one of :data:`SAVE_MODES`.
        lines: where items were written in the job file, when it was read from one:
            ``sort_by[i]`` (the i-th kept entry), ``selected_dataitem.<key>`` and
            ``selected_dataitem.<key>[i]`` -> line (for messages; not compared).
    """

    sort_by: tuple[tuple[str, str], ...] = ()
    visualization_mode: str = "selected_only"
    visualization_method: str = "print_table"
    selected_paradigms: tuple[str, ...] = (ALL,)
    selected_modules: tuple[str, ...] = (ALL,)
    selected_hyperparameters: tuple[str, ...] = (ALL,)
    selected_metrics: tuple[str, ...] = (ALL,)
    save_mode: str = "selected_and_all"
    lines: Mapping[str, int] = field(default_factory=dict, compare=False, repr=False)

    def line(self, item: str) -> int | None:
        """The job file's line of ``item`` (a key of :attr:`lines`), if known."""
        return self.lines.get(item)

    def __post_init__(self) -> None:
        source = "<RankConfig>"
        _check_choice(self.save_mode, SAVE_MODES, "save_mode", source)
        _check_choice(self.visualization_mode, VISUALIZATION_MODES, "visualization.mode", source)
        _check_choice(self.visualization_method, VISUALIZATION_METHODS,
                      "visualization.method", source)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, source: str,
                     problems: Problems | None = None) -> RankConfig:
        """Parse the YAML ``rank:`` mapping of ``source`` (the job file path, for messages).

        ``None`` (no ``rank`` section) yields the defaults and logs a warning; upstream
        crashes after running every test case in that situation. Errors name the line when
        ``data`` comes from the YAML loader.

        With a collecting ``problems`` (``ianvs validate``), each bad item (an unknown key, a
        ``sort_by`` entry, a ``selected_dataitem`` list, ...) is one problem and takes its
        default, and the other items are still checked.

        Raises:
            RankConfigError: unknown key, wrong type, null ``sort_by``/``visualization``,
                empty ``paradigms``/``modules``/``metrics``, ``"all"`` mixed with names,
                duplicate names, or an unsupported ``save_mode`` / ``mode`` / ``method``.
        """
        problems = problems or Problems()
        if data is None:
            logger.warning("%s: no 'rank' section; using defaults (write all_rank.csv and "
                           "selected_rank.csv, print the table).", source)
            return cls()
        if not isinstance(data, Mapping):
            raise RankConfigError(f"rank: must be a mapping, got {type(data).__name__}",
                                  source=source, line=_line(data),
                                  hint="See docs/rank.md for the keys.")
        _check_keys(data, _RANK_KEYS, "", source, problems)
        kwargs: dict[str, Any] = {}
        lines: dict[str, int] = {}
        if "sort_by" in data:
            with problems.part():
                kwargs["sort_by"] = _parse_sort_by(data["sort_by"], source,
                                                   _line(data, "sort_by"), problems, lines)
        if "visualization" in data:
            vis = data["visualization"]
            with problems.part():
                mode, method = _parse_visualization(vis, source, _line(data, "visualization"),
                                                    problems)
                with problems.part():
                    _check_choice(mode, VISUALIZATION_MODES, "visualization.mode", source,
                                  _line(vis, "mode"))
                    kwargs["visualization_mode"] = mode
                with problems.part():
                    _check_choice(method, VISUALIZATION_METHODS, "visualization.method",
                                  source, _line(vis, "method"))
                    kwargs["visualization_method"] = method
        if "selected_dataitem" in data:
            sel = data["selected_dataitem"]
            with problems.part():
                if not isinstance(sel, Mapping):
                    raise _err(source, "selected_dataitem", f"must be a mapping, got {sel!r}",
                               "Write e.g. {paradigms: [all], modules: [all], "
                               "hyperparameters: [all], metrics: [all]}.",
                               _line(data, "selected_dataitem"))
                _check_keys(sel, _SELECTED_KEYS, "selected_dataitem.", source, problems)
                for key in _SELECTED_KEYS:
                    if key not in sel:
                        continue
                    at = _line(sel, key)
                    with problems.part():
                        kwargs[f"selected_{key}"] = _parse_names(
                            sel[key], key, source, allow_empty=(key == "hyperparameters"),
                            line=at)
                        if at is not None:
                            lines[f"selected_dataitem.{key}"] = at
                        for i in range(len(sel[key])):
                            item = _line(sel[key], i) or at
                            if item is not None:
                                lines[f"selected_dataitem.{key}[{i}]"] = item
        if "save_mode" in data:
            with problems.part():
                _check_choice(data["save_mode"], SAVE_MODES, "save_mode", source,
                              _line(data, "save_mode"))
                kwargs["save_mode"] = data["save_mode"]
        return cls(**kwargs, lines=lines)


@dataclass
class CaseResult:
    """Outcome of one finished test case: one row of the rank files (spec §9.2).

    Attributes:
        algorithm: algorithm ``name`` from the job YAML.
        paradigm: ``paradigm_type``.
        metrics: metric name -> value, in testenv metric order.  Numbers stay numbers,
            ``None``/NaN become empty cells, other objects are written as ``str()``.
            The raw value is kept for pictures (``MATRIX``).
        modules: module type -> module name, in module order.
        hyperparameters: module type -> {hp name: value}; written as columns
            ``<type>-<hp>`` holding ``str(value)`` (Python ``str``: ``0.1``, ``True``,
            ``[1, 2]``).
        time: completion time, ``YYYY-MM-DD HH:MM:SS`` (see :func:`format_completion_time`).
        url: test-case directory string as published in the rank files: exactly as joined
            from the workspace string when the workspace is relative (upstream), relative to
            the workspace (``<job>/<algorithm>/<uuid>``) when it is absolute.
        folder: the test case directory on this machine (for pictures); ``url`` when empty.
    """

    algorithm: str
    paradigm: str
    metrics: dict[str, Any]
    modules: dict[str, str]
    hyperparameters: dict[str, Any]
    time: str
    url: str
    folder: str = ""


@dataclass(frozen=True)
class RankFiles:
    """Paths written by one ``save_rank`` call.

    Attributes:
        rank_dir: the ``<workspace>/<job>/rank`` directory.
        selected_rank: ``selected_rank.csv`` (written in every save mode).
        all_rank: ``all_rank.csv`` if it was (re)written by this call, else ``None``
            (``save_mode: selected_only``).
        pictures: heatmap PNGs written (``selected_and_all_and_picture`` only).
    """

    rank_dir: Path
    selected_rank: Path
    all_rank: Path | None = None
    pictures: tuple[Path, ...] = field(default_factory=tuple)
