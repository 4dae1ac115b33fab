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

from core.common.errors import ConfigError

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


def _err(source: str, key: str, problem: str, fix: str) -> RankConfigError:
    return RankConfigError(f"rank.{key}: {problem}", source=source, hint=fix)


def _hint(name: str, allowed: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(allowed), n=1)
    return f" Did you mean '{close[0]}'?" if close else ""


def _check_keys(data: Mapping[str, Any], allowed: Sequence[str], where: str, source: str) -> None:
    for key in data:
        if key not in allowed:
            raise _err(
                source,
                f"{where}{key}" if where else str(key),
                "unknown key",
                f"Allowed keys here: {', '.join(allowed)}.{_hint(str(key), allowed)}",
            )


def _parse_sort_by(value: Any, source: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        raise _err(source, "sort_by", "must not be null",
                   "Use a list such as [{acc: descend}] or [] for no sorting.")
    if not isinstance(value, list):
        raise _err(source, "sort_by", f"must be a list, got {type(value).__name__}",
                   "Write it as a list of single-key mappings, e.g. [{acc: descend}].")
    keys: list[tuple[str, str]] = []
    for i, entry in enumerate(value):
        where = f"sort_by[{i}]"
        if not isinstance(entry, Mapping) or len(entry) != 1:
            raise _err(source, where, f"must be a mapping with exactly one key, got {entry!r}",
                       "Write each entry as {<metric name>: ascend|descend}; put several "
                       "metrics in separate list items.")
        (metric, direction), = entry.items()
        if not isinstance(metric, str) or not metric:
            raise _err(source, where, f"metric name must be a non-empty string, got {metric!r}",
                       "Use a metric name from the testenv.")
        if not isinstance(direction, str):
            raise _err(source, where, f"direction must be a string, got {direction!r}",
                       "Use 'ascend' or 'descend'.")
        if direction not in (SORT_ASCEND, SORT_DESCEND):
            logger.warning("%s: rank.%s: direction %r is not 'ascend'; sorting %r descending "
                           "(upstream rule). Write 'descend' to silence this warning.",
                           source, where, direction, metric)
            direction = SORT_DESCEND
        keys.append((metric, direction))
    return tuple(keys)


def _parse_visualization(value: Any, source: str) -> tuple[str, str]:
    if not isinstance(value, Mapping):
        raise _err(source, "visualization", f"must be a mapping, got {value!r}",
                   "Write e.g. {mode: selected_only, method: print_table}.")
    _check_keys(value, _VIS_KEYS, "visualization.", source)
    mode = value.get("mode", VISUALIZATION_MODES[0])
    method = value.get("method", VISUALIZATION_METHODS[0])
    return mode, method


def _parse_names(value: Any, key: str, source: str, allow_empty: bool) -> tuple[str, ...]:
    where = f"selected_dataitem.{key}"
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _err(source, where, f"must be a list of non-empty strings, got {value!r}",
                   'Write e.g. ["all"] or ["acc", "latency"].')
    if not value and not allow_empty:
        raise _err(source, where, "must not be empty", 'Use ["all"] to select everything.')
    if ALL in value and len(value) > 1:
        raise _err(source, where, f'"all" cannot be combined with other names: {value!r}',
                   'Use either ["all"] or an explicit list of names.')
    dupes = sorted({v for v in value if value.count(v) > 1})
    if dupes:
        raise _err(source, where, f"duplicate names {dupes}", "List each name once.")
    return tuple(value)


def _check_choice(value: Any, allowed: Sequence[str], key: str, source: str) -> None:
    if value not in allowed:
        raise _err(source, key, f"unsupported value {value!r}",
                   f"Use one of: {', '.join(allowed)}.{_hint(str(value), allowed)}")


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
    """

    sort_by: tuple[tuple[str, str], ...] = ()
    visualization_mode: str = "selected_only"
    visualization_method: str = "print_table"
    selected_paradigms: tuple[str, ...] = (ALL,)
    selected_modules: tuple[str, ...] = (ALL,)
    selected_hyperparameters: tuple[str, ...] = (ALL,)
    selected_metrics: tuple[str, ...] = (ALL,)
    save_mode: str = "selected_and_all"

    def __post_init__(self) -> None:
        source = "<RankConfig>"
        _check_choice(self.save_mode, SAVE_MODES, "save_mode", source)
        _check_choice(self.visualization_mode, VISUALIZATION_MODES, "visualization.mode", source)
        _check_choice(self.visualization_method, VISUALIZATION_METHODS,
                      "visualization.method", source)

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, source: str) -> RankConfig:
        """Parse the YAML ``rank:`` mapping of ``source`` (the job file path, for messages).

        ``None`` (no ``rank`` section) yields the defaults and logs a warning; upstream
        crashes after running every test case in that situation.

        Raises:
            RankConfigError: unknown key, wrong type, null ``sort_by``/``visualization``,
                empty ``paradigms``/``modules``/``metrics``, ``"all"`` mixed with names,
                duplicate names, or an unsupported ``save_mode`` / ``mode`` / ``method``.
        """
        if data is None:
            logger.warning("%s: no 'rank' section; using defaults (write all_rank.csv and "
                           "selected_rank.csv, print the table).", source)
            return cls()
        if not isinstance(data, Mapping):
            raise RankConfigError(f"rank: must be a mapping, got {type(data).__name__}",
                                  source=source, hint="See docs/rank.md for the keys.")
        _check_keys(data, _RANK_KEYS, "", source)
        kwargs: dict[str, Any] = {}
        if "sort_by" in data:
            kwargs["sort_by"] = _parse_sort_by(data["sort_by"], source)
        if "visualization" in data:
            mode, method = _parse_visualization(data["visualization"], source)
            _check_choice(mode, VISUALIZATION_MODES, "visualization.mode", source)
            _check_choice(method, VISUALIZATION_METHODS, "visualization.method", source)
            kwargs["visualization_mode"] = mode
            kwargs["visualization_method"] = method
        if "selected_dataitem" in data:
            sel = data["selected_dataitem"]
            if not isinstance(sel, Mapping):
                raise _err(source, "selected_dataitem", f"must be a mapping, got {sel!r}",
                           "Write e.g. {paradigms: [all], modules: [all], "
                           "hyperparameters: [all], metrics: [all]}.")
            _check_keys(sel, _SELECTED_KEYS, "selected_dataitem.", source)
            for key in _SELECTED_KEYS:
                if key in sel:
                    kwargs[f"selected_{key}"] = _parse_names(
                        sel[key], key, source, allow_empty=(key == "hyperparameters"))
        if "save_mode" in data:
            _check_choice(data["save_mode"], SAVE_MODES, "save_mode", source)
            kwargs["save_mode"] = data["save_mode"]
        return cls(**kwargs)


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
