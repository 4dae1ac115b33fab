"""Ianvs stand-in for ``sedna.common.log``: ``LOGGER`` propagates to the root handlers."""
from core.compat.sedna_log import LOGGER, Logger

__all__ = ["LOGGER", "Logger"]
__ianvs_shim__ = True
