"""The ``ianvs`` logger.

Upstream plugins do ``from core.common.log import LOGGER``; that name is kept. Modules of
this project use ``logging.getLogger(__name__)``, which are children of nothing in
particular; :func:`setup_logging` (called once by the CLI) configures the root handler so
both appear on stderr in upstream's format ``[time] file(line) [LEVEL] - message``.
"""
from __future__ import annotations

import logging
import sys

LOGGER = logging.getLogger("ianvs")

LOG_FORMAT = "[%(asctime)s] %(filename)s(%(lineno)d) [%(levelname)s] - %(message)s"


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes each record to ``sys.stderr`` as it is when the record is emitted, not as it was
    when the handler was made: the CLI may run in-process (tests, an embedding program) under a
    replaced ``sys.stderr`` that is closed afterwards, and a handler holding that stream would
    fail on every later record ("I/O operation on closed file")."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr


def setup_logging(level: int | str = logging.INFO) -> None:
    """Send INFO and above (or ``level``) to stderr with the upstream format.

    Idempotent: a second call only changes the level. Every record the handler prints is
    scrubbed of registered secrets (:class:`core.common.redact.ScrubFilter`).
    """
    from core.common.redact import ScrubFilter

    root = logging.getLogger()
    if isinstance(level, str):
        level = logging.getLevelName(level.upper())
    root.setLevel(level)
    if not any(getattr(h, "_ianvs", False) for h in root.handlers):
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        handler.addFilter(ScrubFilter())
        handler._ianvs = True  # type: ignore[attr-defined]
        root.addHandler(handler)
