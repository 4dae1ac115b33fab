"""Progress bars on stderr (tqdm when installed, otherwise periodic log lines)."""
from __future__ import annotations

import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger(__name__)


class _LogBar:
    """Fallback bar: a log line at most every 10 s and at the end."""

    def __init__(self, total: int, desc: str) -> None:
        self.total, self.desc, self.n = total, desc, 0
        self._last = time.monotonic()

    def update(self, n: int = 1) -> None:
        self.n += n
        if time.monotonic() - self._last > 10 or self.n >= self.total:
            self._last = time.monotonic()
            logger.info("%s: %d/%d", self.desc, self.n, self.total)

    def set_postfix_str(self, text: str) -> None:  # tqdm-compatible no-op
        pass

    def close(self) -> None:
        pass


@contextlib.contextmanager
def progress_bar(total: int, desc: str, unit: str = "it", enabled: bool = True) -> Iterator[Any]:
    """A tqdm bar on stderr (disabled when not wanted or stderr is not a terminal-like)."""
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a core dependency
        bar: Any = _LogBar(total, desc)
    else:
        bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=not enabled,
                   dynamic_ncols=True, leave=False)
    try:
        yield bar
    finally:
        bar.close()
