"""Ianvs stand-in for ``sedna.common.file_ops``: ``FileOps`` for local paths only."""
from core.compat.sedna_file_ops import FileOps

__all__ = ["FileOps"]
__ianvs_shim__ = True
