"""``benchmarks/<name>.py`` scripts imported as modules by the tests that share their code."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def benchmark_module(stem: str) -> ModuleType:
    """``benchmarks/<stem>.py`` as the module ``_<stem>`` (loaded once per process and kept in
    ``sys.modules``: dataclasses look their module up while it is executed)."""
    name = f"_{stem}"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{stem}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
