"""Ianvs stand-in for ``sedna.common.utils``: ``get_host_ip`` (no network traffic)."""
from core.compat.sedna_utils import get_host_ip, singleton

__all__ = ["get_host_ip", "singleton"]
__ianvs_shim__ = True
