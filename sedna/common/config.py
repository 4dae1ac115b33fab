"""Ianvs stand-in for ``sedna.common.config``: job parameters from the environment."""
from core.compat.sedna_config import BaseConfig, Context

__all__ = ["Context", "BaseConfig"]
__ianvs_shim__ = True
