"""Ianvs stand-in for ``sedna.common.class_factory``: this project's plugin registry."""
from core.common.class_factory import ClassFactory, ClassType

__all__ = ["ClassFactory", "ClassType"]
__ianvs_shim__ = True
