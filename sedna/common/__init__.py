"""Ianvs stand-in for ``sedna.common`` (see the ``sedna`` package docstring)."""
__ianvs_shim__ = True
