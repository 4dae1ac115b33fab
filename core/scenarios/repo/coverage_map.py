"""Which tests cover which lines: one run of the suite with per-test coverage contexts.

Uses ``pytest-cov``'s ``--cov-context=test`` in the repository environment, then reads the
coverage database with that environment's ``coverage`` (never this interpreter's), returning
``{relative file: {line: {test nodeid, ...}}}`` for files under ``root``. The repository's own
coverage configuration is not used (``--cov-config`` names an empty one): it is the builder's
measurement, and a project's ``omit``, ``fail_under`` or coverage plugins (``covdefaults``) must
not change it.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from core.scenarios.repo.testrun import RunResult, run_pytest

__all__ = ["measure"]

_READER = r'''
import json, sys
from coverage import CoverageData
data = CoverageData(basename=sys.argv[1]); data.read()
out = {}
for f in data.measured_files():
    out[f] = {str(k): sorted({c.split("|")[0] for c in v if c}) for k, v in data.contexts_by_lineno(f).items()}
json.dump(out, sys.stdout)
'''


def measure(python: Path, root: Path, timeout: float, test_ids: list[str] | None = None,
            extra: list[str] | None = None, env_extra: dict[str, str] | None = None,
            import_roots: list[str] | None = None,
            scratch: Path | None = None) -> tuple[RunResult, dict[str, dict[int, set[str]]]]:
    """Run the tests with coverage contexts; return (the run, coverage map). A run that wrote no
    coverage database (pytest did not start) has an empty map."""
    with tempfile.TemporaryDirectory(prefix="ianvs-repo-cov-", dir=scratch) as tmp:
        db = str(Path(tmp, ".coverage"))
        rc = Path(tmp, "coveragerc")
        rc.write_text("[run]\n")
        run = run_pytest(python, root, test_ids or [], timeout,
                         extra=[f"--cov={root}", f"--cov-config={rc}", "--cov-context=test", "--cov-report=",
                                *(extra or [])],
                         env_extra={**(env_extra or {}), "COVERAGE_FILE": db}, import_roots=import_roots,
                         scratch=scratch)
        if not Path(db).exists():
            return run, {}
        raw = subprocess.run([str(python), "-c", _READER, db], check=True, capture_output=True, text=True).stdout
    cov: dict[str, dict[int, set[str]]] = {}
    for fname, lines in json.loads(raw).items():
        path = Path(fname)
        if not path.is_relative_to(root):
            continue
        cov[str(path.relative_to(root))] = {int(k): set(v) for k, v in lines.items()}
    return run, cov
