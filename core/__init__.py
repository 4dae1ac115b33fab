"""Smart Coding for KubeEdge-Ianvs: an Ianvs-compatible benchmarking core."""
from core.__version__ import __version__

__all__ = ["__version__"]
