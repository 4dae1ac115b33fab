"""Progress reporting for long loops (generation, execution, prediction).

* stderr is a terminal: a tqdm bar that stays on screen when done; log records emitted while
  it is shown are printed above it instead of through it.
* stderr is not a terminal (CI logs, files): no control characters; a log line at most every
  10 s and one at the end (``generate (embedded): 12/21 (20.4 tokens/s)``).
* ``enabled=False`` (``--no-progress``): nothing at all.
"""
from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

logger = logging.getLogger(__name__)

#: seconds between progress log lines when stderr is not a terminal
LOG_INTERVAL_S = 10.0


class _LogBar:
    """Bar for non-terminals: a log line at most every ``LOG_INTERVAL_S`` and at the end."""

    def __init__(self, total: int, desc: str) -> None:
        self.total, self.desc, self.n = total, desc, 0
        self.interval = LOG_INTERVAL_S  # read now, not at import: settable at run time
        self._last = time.monotonic()
        self._logged_n = -1
        self.postfix = ""

    def update(self, n: int = 1) -> None:
        self.n += n
        if time.monotonic() - self._last >= self.interval or self.n >= self.total:
            self._log()

    def _log(self) -> None:
        self._last = time.monotonic()
        self._logged_n = self.n
        logger.info("%s: %d/%d%s", self.desc, self.n, self.total,
                    f" ({self.postfix})" if self.postfix else "")

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        """Shown after the count in the next log line (tqdm-compatible)."""
        self.postfix = text

    def close(self) -> None:
        if self.n != self._logged_n and self.n:
            self._log()


class _NullBar(_LogBar):
    """Bar that reports nothing (``--no-progress``)."""

    def update(self, n: int = 1) -> None:
        self.n += n

    def close(self) -> None:
        pass


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def progress_bar(total: int, desc: str, unit: str = "it", enabled: bool = True) -> Iterator[Any]:
    """Yield an object with tqdm's ``update(n)``/``set_postfix_str``; see the module docstring."""
    if not enabled or total <= 0:
        bar: Any = _NullBar(total, desc)
    elif not _is_terminal(sys.stderr):
        bar = _LogBar(total, desc)
    else:
        from tqdm import tqdm
        from tqdm.contrib.logging import logging_redirect_tqdm

        with logging_redirect_tqdm(), tqdm(total=total, desc=desc, unit=unit, file=sys.stderr,
                                           dynamic_ncols=True, leave=True) as tbar:
            yield tbar
        return
    try:
        yield bar
    finally:
        bar.close()
