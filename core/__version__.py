"""Version string; `ianvs -v` prints it (upstream Ianvs prints 0.1.0)."""
__version__ = "0.1.0"
