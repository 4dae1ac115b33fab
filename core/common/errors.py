"""Errors the CLI turns into one readable line.

Every error raised for bad input is an :class:`IanvsError`. Its text names *where*
(file, and line or key when known), *what* is wrong and, when we know it, *how to fix it*.
The CLI prints ``str(error)`` and exits non-zero; ``--debug`` adds the traceback.
"""
from __future__ import annotations

import contextlib
import difflib
from collections.abc import Iterable, Iterator
from pathlib import Path


class IanvsError(Exception):
    """Base class of all user-facing errors.

    Args:
        message: what is wrong, one sentence.
        source: file the problem is in (a path or a display string), if any.
        line: 1-based line in ``source``, if known.
        hint: what the user should do about it.
        key: the configuration key the problem is about (e.g. the hyperparameter
            ``max_tokens``), if known: whoever knows the file can then name its line.
    """

    def __init__(self, message: str, *, source: str | Path | None = None,
                 line: int | None = None, hint: str | None = None,
                 key: str | None = None) -> None:
        self.message = message
        self.source = str(source) if source is not None else None
        self.line = line
        self.hint = hint
        self.key = key
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


class Problems:
    """Where a loader puts the problems it finds in the files it reads.

    ``Problems()`` raises the first one, as ``ianvs -f`` stops at it. ``Problems(collect=True)``
    (``ianvs validate``) keeps every one in :attr:`found`, and the loader goes on with the next
    part that does not depend on the one that failed (the next metric entry, module,
    hyperparameter or rank item), leaving that part out: one pass reports every problem.
    """

    def __init__(self, collect: bool = False) -> None:
        self.collect = collect
        self.found: list[IanvsError] = []

    def add(self, error: IanvsError) -> None:
        """Raise ``error``, or keep it when collecting."""
        if not self.collect:
            raise error
        self.found.append(error)

    @contextlib.contextmanager
    def part(self) -> Iterator[None]:
        """Run one independent part of a file: an :class:`IanvsError` it raises is
        :meth:`add`-ed (re-raised unless collecting; then the rest of the block is skipped)."""
        try:
            yield
        except IanvsError as exc:
            if not self.collect:
                raise
            self.found.append(exc)


class DatasetError(IanvsError):
    """A dataset file is missing, has an unsupported format or a malformed record."""


class RegistryError(IanvsError, ValueError):
    """A plugin alias is unknown, ambiguous or registered twice with different objects."""


class PluginError(IanvsError):
    """A plugin file failed to import or a plugin call failed."""


class ModelUnavailable(IanvsError):
    """A model placed on another machine could not answer because its machine is gone (e.g. the
    edge node left the Dask scheduler and no allowed node took over within ``node_timeout``).
    The jointinference paradigm routes such an edge task to the cloud and records it as lost;
    it is never a model failure and never dropped."""


class MetricInvalid(RuntimeError):
    """A metric that could not prove itself (e.g. a judge failing its control set): its score
    columns are *invalid*, not scores, and the runner shows them so (``invalid`` cells, the
    reason under the table) while keeping the test case's other metrics.

    ``values`` are the columns the metric can still report truthfully -- the statistics of the
    check it failed (say ``judge_valid: 0`` and the control AUC); every other column it declares
    becomes NaN. Not an :class:`IanvsError`: it is a verdict on the metric, not a configuration
    mistake, and must not fail the test case."""

    def __init__(self, reason: str, values: dict[str, object] | None = None) -> None:
        super().__init__(reason)
        self.values = dict(values or {})


def bad_utf8(data: bytes, exc: UnicodeDecodeError, first_line: int = 1) -> tuple[int, str]:
    """``(line, message)`` for ``exc``, raised decoding ``data`` as UTF-8: the 1-based line of
    the bad byte (``data`` starting on line ``first_line``) and what it is, e.g. ``not valid
    UTF-8: byte 7 of the line is 0xff (invalid start byte)``."""
    line_start = data.rfind(b"\n", 0, exc.start) + 1
    return (first_line + data.count(b"\n", 0, exc.start),
            f"not valid UTF-8: byte {exc.start - line_start + 1} of the line is "
            f"0x{data[exc.start]:02x} ({exc.reason})")


def read_utf8(path: Path, error: type[IanvsError]) -> str:
    """The whole text file ``path`` decoded as UTF-8: the one way configuration and data files
    are read whole, so a bad byte is always reported on its own line.

    Raises:
        error: (e.g. :class:`ConfigError`, :class:`DatasetError`) the file cannot be read, or
            is not UTF-8 (naming the line and the byte, see :func:`bad_utf8`).
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"cannot read: {exc.strerror or exc}", source=path) from exc
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, message = bad_utf8(data, exc)
        raise error(message, source=path, line=line, hint="save the file as UTF-8") from None


def suggest(name: str, candidates: Iterable[str]) -> str | None:
    """Return a "did you mean ..." phrase for the closest candidates, or None."""
    matches = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
    if not matches:
        return None
    return "did you mean " + " or ".join(repr(m) for m in matches) + "?"
