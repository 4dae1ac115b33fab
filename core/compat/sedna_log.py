"""Stand-in for ``sedna.common.log``: ``LOGGER`` is the standard logger named ``sedna``.

Sedna's own ``LOGGER`` has a coloured handler of its own and does not propagate. This one has
no handler and propagates, so its records go through the root handler that the ``ianvs``
command sets up (:func:`core.common.log.setup_logging`) and appear once, in the same format
and at the same level as the rest of the run output. Its level is left unset (it follows the
root logger, i.e. ``--log-level``). Without any root handler Python's last-resort handler
prints WARNING and above to stderr.
"""
from __future__ import annotations

import logging

__all__ = ["LOGGER", "Logger"]


class Logger:
    """Sedna's ``Logger(name)`` shape: ``Logger(name).logger`` is ``logging.getLogger(name)``.

    Unlike Sedna it adds no handler and keeps propagation on (see the module docs).
    """

    def __init__(self, name: str = "sedna") -> None:
        self.logger = logging.getLogger(name)
        self.logLevel = "INFO"  # Sedna's attribute; informational only


LOGGER: logging.Logger = Logger().logger
