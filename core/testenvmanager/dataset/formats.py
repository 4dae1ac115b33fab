"""Dataset file formats and how a file's format is detected (upstream rules)."""
from __future__ import annotations

import enum
from pathlib import Path


class DatasetFormat(str, enum.Enum):
    """Formats a dataset file may have."""

    CSV = "csv"
    TXT = "txt"
    JSON = "json"
    JSONL = "jsonl"
    JSONFORLLM = "jsonforllm"


def detect_format(path: Path | str) -> str:
    """``jsonforllm`` for a file named exactly ``metadata.json``, else the extension.

    The extension is returned without the dot and case-sensitively (``x.JSONL`` gives
    ``JSONL``, which is not a supported format), as upstream does.
    """
    name = Path(path).name
    if name == "metadata.json":
        return DatasetFormat.JSONFORLLM.value
    return name.rsplit(".", 1)[-1] if "." in name else ""


SUPPORTED = {f.value for f in DatasetFormat}
