"""Run a repository's tests directly (no sandbox) in its environment: the builder's measuring tool.

Results come from a tiny pytest plugin that writes ``{nodeid: outcome}`` as JSON (outcome is
``passed``, ``failed`` or ``skipped``; a failure in setup or teardown makes the test ``failed``).
A run that exceeds ``timeout`` is killed (whole process group) and every requested test node id counts
as ``failed`` (a path argument is not a test and is never reported), so a blanked body that loops forever is still a failing task, never a hang.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from pathlib import Path

__all__ = ["run_tests", "PLUGIN_SOURCE", "pytest_argv", "config_file"]

PLUGIN_SOURCE = '''
import json, os
_RESULTS = {}
def pytest_runtest_logreport(report):
    prev = _RESULTS.get(report.nodeid)
    if report.failed:
        _RESULTS[report.nodeid] = "failed"
    elif report.skipped and prev is None:
        _RESULTS[report.nodeid] = "skipped"
    elif report.when == "call" and prev is None:
        _RESULTS[report.nodeid] = "passed"
def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["IANVS_REPO_RESULTS"], "w") as fh:
        json.dump(_RESULTS, fh)
'''


def config_file(root: Path) -> str:
    """The repository's own pytest config file, or ``os.devnull`` (never one above ``root``)."""
    for name in ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"):
        if (root / name).is_file():
            return str(root / name)
    return os.devnull


def pytest_argv(python: str, root: Path, test_ids: list[str], extra: list[str] | None = None) -> list[str]:
    """The pytest command line every direct repo run uses: no cache dir, the repo's addopts
    ignored, configuration and conftest lookup confined to ``root``."""
    return [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "ianvs_repo_report",
            "-o", "addopts=", "--no-header", "-rN", "--rootdir", str(root), "-c", config_file(root),
            "--confcutdir", str(root), *(extra or []), "--", *test_ids]


def run_tests(python: Path, root: Path, test_ids: list[str], timeout: float,
              extra: list[str] | None = None, env_extra: dict[str, str] | None = None) -> dict[str, str]:
    """Run ``test_ids`` (all tests when empty) under ``root``; return ``{nodeid: outcome}``."""
    with tempfile.TemporaryDirectory(prefix="ianvs-repo-run-") as tmp:
        Path(tmp, "ianvs_repo_report.py").write_text(PLUGIN_SOURCE)
        results = Path(tmp, "results.json")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "LANG": "C.UTF-8",
               "PYTHONPATH": f"{tmp}:{root}", "PYTHONDONTWRITEBYTECODE": "1",
               "IANVS_REPO_RESULTS": str(results), **(env_extra or {})}
        proc = subprocess.Popen(pytest_argv(str(python), root, test_ids, extra), cwd=root, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return {t: "failed" for t in test_ids if "::" in t}
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if not results.exists():
            return {t: "failed" for t in test_ids if "::" in t}
        got: dict[str, str] = json.loads(results.read_text())
        for t in test_ids:  # a requested test (not a path) that never reported failed
            if "::" in t:
                got.setdefault(t, "failed")
        return got
