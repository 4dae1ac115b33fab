"""Grading an answer on a record's test in the sandbox, for the cloud-edge metric, the routers'
checks and the fitted routers (one place, so all grade as the codegen kind does)."""
from __future__ import annotations

from pathlib import Path
from typing import Any


def passes(records: list[dict[str, Any]], answers: list[Any], sandbox: Any, folder: Path,
           show_progress: bool = False, hooks: tuple[str, ...] = ()) -> list[bool]:
    """Per record: whether its answer passes the record's test in the sandbox (as the codegen
    kind grades, with the execution cache in ``folder``). Shared by the metric, the routers'
    checks and the fitted routers."""
    from core.scenarios.codegen.execution import iter_results

    return [bool(rows) and all(r.passed for r in rows)
            for rows in iter_results(records, answers, sandbox, folder, show_progress,
                                     total=len(records), hooks=hooks)]
