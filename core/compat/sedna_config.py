"""Stand-in for ``sedna.common.config.Context`` (used when Sedna is not installed).

Upstream plugins import ``Context`` and occasionally read parameters with
``Context.get_parameters(name, default)``. Sedna reads them from environment variables; so
does this stand-in, and nothing else.
"""
from __future__ import annotations

import os
from typing import Any


class Context:
    """Read-only access to job parameters passed as environment variables."""

    parameters: dict[str, str] = {}

    @classmethod
    def get_parameters(cls, param: str, default: Any = None) -> Any:
        """Value of ``param`` from the environment (exact or upper case), else ``default``."""
        for key in (param, param.upper()):
            if key in os.environ:
                return os.environ[key]
        return cls.parameters.get(param, default)

    @classmethod
    def get_algorithm_from_api(cls, algorithm: str, **param: Any) -> dict[str, Any]:
        """Sedna builds ``{"method": name, "param": ...}`` specs this way; so do we."""
        spec: dict[str, Any] = {"method": algorithm}
        if param:
            spec["param"] = param
        return spec


BaseConfig = Context
"""Sedna's ``BaseConfig`` holds job settings read from the environment; the stand-in is
:class:`Context` under a second name (upstream plugins only import it)."""
