"""Make ``import sedna.common.class_factory`` work with or without KubeEdge Sedna.

If a Sedna that provides ``sedna.common.class_factory`` is importable, nothing is
installed and the loader reads that package's registry too (see
:func:`foreign_registry_snapshot`). Otherwise (no Sedna, or PyPI's unrelated ``sedna``
package) module objects named ``sedna``, ``sedna.common``, ``sedna.common.class_factory`` and
``sedna.common.config`` are put in ``sys.modules``, backed by this project's registry, so
upstream plugin files load unchanged.
"""
from __future__ import annotations

import importlib
import logging
import sys
import types
from typing import Any

from core.common import class_factory as our_factory
from core.compat import sedna_config

logger = logging.getLogger(__name__)

_SHIM_MARK = "__ianvs_shim__"


def _real_sedna_factory() -> types.ModuleType | None:
    mod = sys.modules.get("sedna.common.class_factory")
    if mod is not None:
        return None if getattr(mod, _SHIM_MARK, False) else mod
    try:
        mod = importlib.import_module("sedna.common.class_factory")
    except Exception:  # noqa: BLE001 - any failure means "no usable Sedna"
        for name in [n for n in sys.modules if n == "sedna" or n.startswith("sedna.")]:
            if not getattr(sys.modules[name], _SHIM_MARK, False):
                del sys.modules[name]
        return None
    return mod if hasattr(mod, "ClassFactory") else None


def install() -> bool:
    """Install the shim unless a real Sedna is importable. Returns True if installed."""
    if _real_sedna_factory() is not None:
        logger.debug("using the installed KubeEdge Sedna registry")
        return False
    if getattr(sys.modules.get("sedna.common.class_factory"), _SHIM_MARK, False):
        return True

    def package(name: str) -> types.ModuleType:
        mod = types.ModuleType(name, f"Ianvs stand-in for {name}")
        mod.__path__ = []  # type: ignore[attr-defined]
        setattr(mod, _SHIM_MARK, True)
        return mod

    sedna, common = package("sedna"), package("sedna.common")
    cf = types.ModuleType("sedna.common.class_factory")
    cf.ClassFactory = our_factory.ClassFactory  # type: ignore[attr-defined]
    cf.ClassType = our_factory.ClassType  # type: ignore[attr-defined]
    setattr(cf, _SHIM_MARK, True)
    cfg = types.ModuleType("sedna.common.config")
    cfg.Context = sedna_config.Context  # type: ignore[attr-defined]
    cfg.BaseConfig = sedna_config.Context  # type: ignore[attr-defined]
    setattr(cfg, _SHIM_MARK, True)
    sedna.common = common  # type: ignore[attr-defined]
    common.class_factory = cf  # type: ignore[attr-defined]
    common.config = cfg  # type: ignore[attr-defined]
    sys.modules.update({"sedna": sedna, "sedna.common": common,
                        "sedna.common.class_factory": cf, "sedna.common.config": cfg})
    return True


def foreign_registry_snapshot() -> dict[tuple[str, str], Any]:
    """(group, alias) -> object of a real Sedna's registry ({} when the shim is in use)."""
    mod = _real_sedna_factory()
    if mod is None:
        return {}
    registry = getattr(mod.ClassFactory, "__registry__", {}) or {}
    return {(group, alias): obj for group, entries in registry.items()
            for alias, obj in dict(entries).items()}
