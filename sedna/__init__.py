"""Ianvs stand-in for KubeEdge Sedna: the ``sedna`` modules upstream Ianvs plugins import.

What it provides (each module re-exports a ``core.compat`` implementation and carries
``__ianvs_shim__ = True``):

=============================  ===============================================================
``sedna.common.class_factory``  ``ClassFactory``, ``ClassType`` (this project's registry)
``sedna.common.config``         ``Context``, ``BaseConfig`` (parameters from the environment)
``sedna.common.file_ops``       ``FileOps`` for *local* paths; remote URLs raise
``sedna.common.log``            ``LOGGER`` (the ``sedna`` logger, propagating to the root)
``sedna.common.utils``          ``get_host_ip`` (no network traffic), ``singleton``
``sedna.datasources``           ``BaseDataSource``, ``TxtDataParse``, ``IndexDataParse``,
                                ``CSVDataParse`` (pandas), ``JSONDataParse`` (pycocotools)
=============================  ===============================================================

Why a top-level package. Inside ``ianvs``, :mod:`core.compat.sedna_shim` can put module
objects into ``sys.modules`` before a plugin is imported; a plain script or a plugin's own
test (``python -c "import sedna.datasources"``) never runs that code. Only a real
``sedna`` package on the import path serves those. ``setup.py`` therefore installs this
folder as the top-level package ``sedna`` next to ``core``.

How it yields to a real KubeEdge Sedna ("real" = a ``sedna`` package with
``common/class_factory.py`` that is not this stand-in):

1. Install time. ``setup.py`` leaves this package out when the installing interpreter
   already has another ``sedna`` package (KubeEdge Sedna, or PyPI's unrelated ``sedna``)
   in its import path or site-packages, so a regular install never overwrites a foreign
   package's files. ``IANVS_SEDNA_STANDIN=1`` / ``=0`` forces it in / out.
2. Import time, editable install (``pip install -e .``). setuptools' editable finder sits
   at the *end* of ``sys.meta_path``, so any ``sedna`` on ``sys.path`` (e.g. a Sedna
   installed after this project) is found before this folder.
3. Import time, this folder found first (Python started in the repository root, where
   ``''`` leads ``sys.path``; or a regular install followed by a Sedna installed further
   down the path). This file looks for a real Sedna elsewhere on ``sys.path`` (and via
   the other import finders) and, if there is one, loads it *in its place*: it replaces
   ``sys.modules["sedna"]`` while running, which the import system honours, so every
   ``sedna.*`` submodule then comes from the real package. If the real package fails to
   import, the stand-in stays and a warning says why (as the runtime shim does).
4. Inside ``ianvs``, :func:`core.compat.sedna_shim.install` treats modules carrying the mark
   as "no real Sedna", so the registry, loader and yield rules stay as before.

PyPI's ``sedna`` (a maths package without ``sedna.common``) is never handed over to. If it
shadows this package, ``ianvs`` still works through the runtime shim; plain scripts work only
with an editable install (setuptools' finder then serves ``sedna.common`` and
``sedna.datasources`` from this folder beneath PyPI's top-level package).
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import sys
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
_MARK = "__ianvs_shim__"


def _is_real_sedna(spec: importlib.machinery.ModuleSpec | None) -> bool:
    """A package spec with ``common/class_factory.py`` whose ``__init__`` is not ours."""
    if spec is None or not spec.submodule_search_locations or not spec.origin:
        return False
    init = Path(spec.origin)
    try:
        if init.name != "__init__.py" or init.resolve().parent == _HERE:
            return False
        if _MARK in init.read_text(encoding="utf-8", errors="replace"):
            return False
    except OSError:
        return False
    return any((Path(loc) / "common" / "class_factory.py").is_file()
               for loc in spec.submodule_search_locations)


def _real_sedna_spec() -> importlib.machinery.ModuleSpec | None:
    for entry in list(sys.path):
        try:
            spec = importlib.machinery.PathFinder.find_spec("sedna", [entry])
        except (ImportError, OSError, ValueError):
            continue
        if _is_real_sedna(spec):
            return spec
    for finder in list(sys.meta_path):
        find_spec: Any = getattr(finder, "find_spec", None)
        if finder is importlib.machinery.PathFinder or find_spec is None:
            continue
        try:
            spec = find_spec("sedna", None)
        except Exception:  # noqa: BLE001 - a third-party finder's failure is not ours
            continue
        if _is_real_sedna(spec):
            return spec
    return None


def _hand_over_to_real_sedna() -> bool:
    """Load a real KubeEdge Sedna as ``sedna`` in place of this module; True on success."""
    ours = sys.modules.get(__name__)
    spec = _real_sedna_spec()
    if ours is None or spec is None or spec.loader is None:
        return False
    before = set(sys.modules)
    real = importlib.util.module_from_spec(spec)
    sys.modules[__name__] = real
    try:
        spec.loader.exec_module(real)
    except Exception as exc:  # noqa: BLE001 - same rule as the runtime shim
        for name in set(sys.modules) - before:
            if name.startswith(f"{__name__}."):
                del sys.modules[name]
        sys.modules[__name__] = ours
        logging.getLogger(__name__).warning(
            "KubeEdge Sedna at %s failed to import (%s: %s); using the Ianvs stand-in",
            spec.origin, type(exc).__name__, exc)
        return False
    return True


if __name__ != "sedna" or not _hand_over_to_real_sedna():
    __ianvs_shim__ = True
