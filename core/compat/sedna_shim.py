"""Make the parts of KubeEdge Sedna that upstream plugins import work without Sedna.

The stand-in surface (:data:`SURFACE`) is ``sedna.common.class_factory``,
``sedna.common.config``, ``sedna.common.file_ops``, ``sedna.common.log``,
``sedna.common.utils`` and ``sedna.datasources``, backed by this project's registry and the
``core.compat.sedna_*`` modules. It reaches plugins in two ways:

* the top-level ``sedna`` stand-in package of this repository (see its docstring), which
  ``pip install`` provides when no other ``sedna`` package was present, so plain
  ``import sedna.datasources`` works in any script;
* :func:`install`, called by the plugin loader, which puts module objects with the same
  names and contents into ``sys.modules`` when no ``sedna.common.class_factory`` can be
  imported at all (no ``sedna`` package, or PyPI's unrelated ``sedna`` package).

Both carry the attribute ``__ianvs_shim__ = True``, and both yield to a real KubeEdge Sedna:
if an importable ``sedna.common.class_factory`` provides ``ClassFactory`` and is not marked,
nothing is installed and the loader also reads that package's registry (see
:func:`foreign_registry_snapshot`).
"""
from __future__ import annotations

import importlib
import logging
import sys
import types
from typing import Any

logger = logging.getLogger(__name__)

_SHIM_MARK = "__ianvs_shim__"

# Stand-in module -> (implementing module, exported names). The files of the top-level
# ``sedna`` package re-export exactly these (a test checks it).
SURFACE: dict[str, tuple[str, tuple[str, ...]]] = {
    "sedna.common.class_factory": ("core.common.class_factory", ("ClassFactory", "ClassType")),
    "sedna.common.config": ("core.compat.sedna_config", ("Context", "BaseConfig")),
    "sedna.common.file_ops": ("core.compat.sedna_file_ops", ("FileOps",)),
    "sedna.common.log": ("core.compat.sedna_log", ("LOGGER", "Logger")),
    "sedna.common.utils": ("core.compat.sedna_utils", ("get_host_ip", "singleton")),
    "sedna.datasources": ("core.compat.sedna_datasources",
                          ("BaseDataSource", "TxtDataParse", "IndexDataParse",
                           "CSVDataParse", "JSONDataParse")),
}
_PACKAGES = ("sedna", "sedna.common", "sedna.datasources")


def is_shim(module: object) -> bool:
    """Does ``module`` carry the stand-in mark (in memory or the on-disk package)?"""
    return bool(getattr(module, _SHIM_MARK, False))


def _real_sedna_factory() -> types.ModuleType | None:
    mod = sys.modules.get("sedna.common.class_factory")
    if mod is not None:
        return None if is_shim(mod) else mod
    try:
        mod = importlib.import_module("sedna.common.class_factory")
    except Exception:  # noqa: BLE001 - any failure means "no usable Sedna"
        for name in [n for n in sys.modules if n == "sedna" or n.startswith("sedna.")]:
            if not is_shim(sys.modules[name]):
                del sys.modules[name]
        return None
    if is_shim(mod):  # the on-disk stand-in package
        return None
    return mod if hasattr(mod, "ClassFactory") else None


def _build_modules() -> dict[str, types.ModuleType]:
    modules: dict[str, types.ModuleType] = {}
    for name in _PACKAGES:
        mod = types.ModuleType(name, f"Ianvs stand-in for {name}")
        mod.__path__ = []  # type: ignore[attr-defined]
        modules[name] = mod
    for name, (source, exports) in SURFACE.items():
        mod = modules.get(name) or types.ModuleType(name, f"Ianvs stand-in for {name}")
        implementation = importlib.import_module(source)
        for attr in exports:
            setattr(mod, attr, getattr(implementation, attr))
        mod.__all__ = list(exports)  # type: ignore[attr-defined]
        modules[name] = mod
    for name, mod in modules.items():
        setattr(mod, _SHIM_MARK, True)
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(modules[parent], child, mod)
    return modules


def install() -> bool:
    """Provide the stand-in surface unless a real Sedna is importable; True if in use.

    When the on-disk stand-in package is importable it is used as it is (its modules
    load on import); otherwise module objects are placed in ``sys.modules``.
    """
    if _real_sedna_factory() is not None:
        logger.debug("using the installed KubeEdge Sedna registry")
        return False
    if is_shim(sys.modules.get("sedna.common.class_factory")):
        return True
    sys.modules.update(_build_modules())
    return True


def foreign_registry_snapshot() -> dict[tuple[str, str], Any]:
    """(group, alias) -> object of a real Sedna's registry ({} when the shim is in use)."""
    mod = _real_sedna_factory()
    if mod is None:
        return {}
    registry = getattr(mod.ClassFactory, "__registry__", {}) or {}
    return {(group, alias): obj for group, entries in registry.items()
            for alias, obj in dict(entries).items()}
