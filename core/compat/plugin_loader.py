"""Import plugin files named by ``url:`` keys and look up their registered aliases.

Each url (a ``.py`` file or a package directory) is imported once per process under a
unique module name derived from its absolute path, so two ``basemodel.py`` files in one job
are two modules (upstream imported by bare basename and silently skipped the second). The
plugin's own folder is on ``sys.path`` only while it is imported, so it can import its
siblings; the entry is removed afterwards, also on failure.
"""
from __future__ import annotations

import hashlib
import importlib.util
import logging
import re
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from core.common.class_factory import ClassFactory, Registration
from core.common.errors import PluginError, RegistryError, suggest
from core.compat import sedna_shim

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedPlugin:
    """A plugin module and the registrations its import made."""

    path: Path
    module: ModuleType
    registrations: tuple[Registration, ...]

    def lookup(self, group: str, alias: str) -> Any:
        """The object this file registered as ``alias`` in ``group``.

        Falls back to the global registry (e.g. the file imports a sibling that registers),
        and raises :class:`RegistryError` with suggestions when nothing matches.
        """
        own = [r for r in self.registrations if r.group == group and r.alias == alias]
        if own:
            return own[-1].obj
        try:
            return ClassFactory.get_cls(group, alias)
        except RegistryError as err:
            here = sorted({r.alias for r in self.registrations if r.group == group})
            hint = suggest(alias, here) or (
                f"{self.path.name} registers {', '.join(here)}" if here else
                f"{self.path.name} registers nothing in group {group!r}; add "
                f"@ClassFactory.register(ClassType.{group.upper()}, alias={alias!r})")
            raise RegistryError(f"{self.path} does not register {alias!r} in group "
                                f"{group!r}", hint=hint) from err


_cache: dict[Path, LoadedPlugin] = {}
_lock = threading.RLock()


def module_name_for(path: Path) -> str:
    """Unique, importable module name for a plugin path."""
    digest = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    stem = re.sub(r"\W", "_", path.stem if path.is_file() else path.name)
    return f"ianvs_plugin_{digest}_{stem}"


def load_plugin(path: Path) -> LoadedPlugin:
    """Import ``path`` (a file or package directory) once and return what it registered.

    Raises:
        PluginError: the file is missing or its import raised (message names the file and
            the plugin's own error line).
    """
    path = path.resolve()
    with _lock:
        if path in _cache:
            return _cache[path]
        sedna_shim.install()
        if not path.exists():
            raise PluginError(f"plugin file {path} does not exist", hint="check the url")
        if path.is_dir():
            init = path / "__init__.py"
            spec = importlib.util.spec_from_file_location(
                module_name_for(path), init, submodule_search_locations=[str(path)])
            folder = path.parent
        else:
            spec = importlib.util.spec_from_file_location(module_name_for(path), path)
            folder = path.parent
        if spec is None or spec.loader is None:
            raise PluginError(f"cannot import {path}", hint="a plugin url must be a .py "
                              "file or a package directory with __init__.py")
        module = importlib.util.module_from_spec(spec)
        before = sedna_shim.foreign_registry_snapshot()
        sys.modules[spec.name] = module
        sys.path.insert(0, str(folder))
        try:
            with ClassFactory.capture() as captured:
                spec.loader.exec_module(module)
        except Exception as exc:
            del sys.modules[spec.name]
            tb = traceback.extract_tb(exc.__traceback__)
            where = next((f"{f.filename}:{f.lineno}" for f in reversed(tb)
                          if f.filename.startswith(str(folder))), str(path))
            raise PluginError(f"load module(url={path}) failed, error: "
                              f"{type(exc).__name__}: {exc}", source=where) from exc
        finally:
            try:
                sys.path.remove(str(folder))
            except ValueError:
                pass
        regs = list(captured)
        after = sedna_shim.foreign_registry_snapshot()
        for (group, alias), obj in after.items():
            if before.get((group, alias)) is not obj:
                regs.append(ClassFactory.register_cls(obj, group, alias) and
                            Registration(group, alias, obj, spec.name))
        plugin = LoadedPlugin(path, module, tuple(regs))
        _cache[path] = plugin
        logger.debug("loaded plugin %s as %s (%d registrations)", path, spec.name, len(regs))
        return plugin
