"""``report/manifest.json``: what is needed to reproduce or trust a score.

Machine (project version, Python, OS, CPU, memory), the exact command, and per test case: its
modules and hyperparameters, the model identity the model recorded (``model.json``: e.g. the
GGUF file's SHA-256, or endpoint and model name, and the decoding settings), the dataset file's
SHA-256 and record count, the sandbox backend with the isolation and grading tiers that
produced the verdicts, and start and end times. What the job's task kind reports of each test
case folder (:meth:`core.scenarios.base.TaskKind.run_facts`) completes the sandbox entry: for
codegen, which node graded how many samples (``graded_by``, from the ``node`` of each result in
``executions.jsonl``: the edge nodes for ``backend: dask``, this host for local backends) and
the calibrated timeouts.

No secret ever appears: nothing is read from the environment, and any value whose key looks
like a credential (the rule of :mod:`core.common.redact`; names ending in ``_env`` hold
variable *names* and are kept) is replaced by ``"<redacted>"``. No absolute path of the user's
appears either: every path is relative to the job file's folder, the workspace or the current
directory (:func:`core.common.redact.public_paths`), or reduced to its file name.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from core.__version__ import __version__
from core.common.redact import REDACTED, public_path, public_paths, redact, scrub

__all__ = ["REDACTED", "build_manifest", "case_entry", "case_folder", "redact"]


def case_folder(url: str, job_dir: Path | None = None) -> Path:
    """The test case folder a rank row's ``url`` names.

    ``url`` is absolute, relative to the current directory (a relative workspace, as
    upstream) or relative to the workspace (``<job>/<algorithm>/<uuid>``, written when the
    workspace is absolute). With ``job_dir``, ``<job_dir>/<algorithm>/<uuid>`` is preferred
    when it exists, so the answer does not depend on the current directory.
    """
    path = Path(url)
    if job_dir is not None and url:
        candidate = job_dir / path.parent.name / path.name
        if candidate.is_dir():
            return candidate
    return path if path.is_absolute() else Path.cwd() / url


def file_sha256(path: Path) -> str | None:
    try:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        return digest.hexdigest()
    except OSError:
        return None


def _count_lines(path: Path) -> int | None:
    try:
        with path.open("rb") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError:
        return None


def machine() -> dict[str, Any]:
    """Project version, Python, OS, CPU model and count, total memory."""
    cpu = platform.processor() or platform.machine()
    memory_mb = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_mb = int(line.split()[1]) // 1024
                break
    except OSError:
        pass
    return {"project": "ianvs-smart-coding", "version": __version__,
            "python": sys.version.split()[0], "os": platform.platform(), "cpu": cpu,
            "cpu_count": os.cpu_count(), "memory_mb": memory_mb, "node": platform.node()}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


#: what a case's ``sandbox`` entry says when its kind reports no run facts
NO_RUN_FACTS: dict[str, Any] = {"reference_times_s": {"count": 0, "max": None},
                                "timeouts_s": {"min": None, "max": None}, "graded_by": {}}


def case_entry(case_dir: Path, row: Mapping[str, str], sandbox: Mapping[str, Any],
               run_facts: Callable[[Path], Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """One test case: configuration (``case.json``), model identity (``model.json``), sandbox
    facts from its rank row, and what the job's kind reports of the case folder
    (``run_facts``, :meth:`core.scenarios.base.TaskKind.run_facts`: calibrated timeouts, the
    nodes that graded; missing facts are shown as :data:`NO_RUN_FACTS`)."""
    case = _read_json(case_dir / "case.json") or {}
    facts = {**NO_RUN_FACTS, **(run_facts(case_dir) if run_facts else {})}
    host = platform.node()
    entry: dict[str, Any] = redact({
        "url": row.get("url", str(case_dir)),
        "algorithm": row.get("algorithm", case.get("algorithm")),
        "modules": case.get("modules", {}),
        "model": _read_json(case_dir / "model.json"),
        "sandbox": {"backend": sandbox.get("backend", "local"),
                    "isolation": row.get("isolation") or None,
                    "grading": row.get("grading") or None,
                    "ianvs_host": host,
                    "reference_times_s": facts["reference_times_s"],
                    "timeouts_s": facts["timeouts_s"]},
        "started": case.get("started"), "finished": case.get("finished"),
        "status": case.get("status"),
    })
    # node names are not secrets: kept as they are even when one looks like a credential key
    entry["sandbox"]["graded_by"] = dict(sorted(facts["graded_by"].items()))
    return entry


def publish_bases(job_source: Path, job_dir: Path | None = None) -> list[Path]:
    """Folders published paths are made relative to: the job file's folder, the workspace
    (the job folder's parent), the current directory."""
    bases = [Path(job_source).expanduser().absolute().parent]
    if job_dir is not None:
        bases.append(Path(job_dir).absolute().parent)
    bases.append(Path.cwd())
    return bases


def build_manifest(job_source: Path, dataset: Path, sandbox: Mapping[str, Any],
                   rows: list[dict[str, str]], command: list[str],
                   job_dir: Path | None = None,
                   run_facts: Callable[[Path], Mapping[str, Any]] | None = None
                   ) -> dict[str, Any]:
    """The whole manifest (see the module docstring); ``rows`` are ``all_rank.csv`` rows and
    ``job_dir`` the ``<workspace>/<job>`` folder (to find test case folders and to make
    paths relative to the workspace); ``run_facts`` as in :func:`case_entry`."""
    cases = [case_entry(case_folder(row.get("url", ""), job_dir), row, sandbox, run_facts)
             for row in rows]
    bases = publish_bases(job_source, job_dir)
    manifest = {
        "machine": machine(),
        "command": [scrub(str(arg)) for arg in command],
        "job": public_path(job_source, bases),
        "dataset": {"file": public_path(dataset.resolve(), bases),
                    "sha256": file_sha256(dataset),
                    "records": _count_lines(dataset) if dataset.suffix == ".jsonl" else None},
        "sandbox": redact(dict(sandbox)),
        "test_cases": cases,
    }
    return dict(public_paths(manifest, bases))
