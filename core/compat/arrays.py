"""numpy coercion of dataset columns, as upstream Ianvs does it (shared by the dataset parsers
and the ``sedna.datasources`` stand-ins)."""
from __future__ import annotations

from typing import Any

import numpy as np


def to_array(values: list[Any]) -> np.ndarray:
    """numpy coercion as upstream; ragged or nested data falls back to an object array."""
    if not values:
        return np.array([])
    try:
        return np.array(values)
    except ValueError:
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
        return arr
