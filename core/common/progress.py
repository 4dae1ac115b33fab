"""Progress reporting for long loops (generation, execution, prediction).

* stderr is a terminal: a tqdm bar that stays on screen when done; log records emitted while
  it is shown are printed above it instead of through it.
* stderr is not a terminal (CI logs, files): no control characters; a log line at most every
  10 s with the time so far and, from the pace so far, the time left (``generate (embedded):
  12/63, 31m 10s, about 2h 12m left (9.4 tokens/s)``), and one at the end (``execute: 21/21 in
  48s``). The estimate assumes the items left take as long as those done; it is a guide, not a
  promise (whole-file replies of one job differ tenfold).
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


def duration(seconds: float) -> str:
    """``48s``, ``31m 10s``, ``2h 12m`` (whole units, the larger two)."""
    whole = max(0, int(round(seconds)))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


class _LogBar:
    """Bar for non-terminals: a log line at most every ``LOG_INTERVAL_S`` and at the end."""

    def __init__(self, total: int, desc: str) -> None:
        self.total, self.desc, self.n = total, desc, 0
        self.interval = LOG_INTERVAL_S  # read now, not at import: settable at run time
        self._start = self._last = time.monotonic()
        self._logged_n = -1
        self.postfix = ""

    def update(self, n: int = 1) -> None:
        self.n += n
        if time.monotonic() - self._last >= self.interval or self.n >= self.total:
            self._log()

    def _log(self) -> None:
        self._last = time.monotonic()
        self._logged_n = self.n
        logger.info("%s: %d/%d%s%s", self.desc, self.n, self.total,
                    self._timing(self._last - self._start),
                    f" ({self.postfix})" if self.postfix else "")

    def _timing(self, elapsed: float) -> str:
        """`` in 48s`` when done; else ``, 31m 10s`` and, once an item is done, the time
        left at the pace so far (``, about 2h 12m left``)."""
        if self.n >= self.total:
            return f" in {duration(elapsed)}"
        text = f", {duration(elapsed)}"
        if self.n > 0:
            text += f", about {duration(elapsed / self.n * (self.total - self.n))} left"
        return text

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
