"""Run a repository's tests directly (no sandbox) in its environment: the builder's measuring tool.

Results come from a tiny pytest plugin that writes, as JSON, ``{nodeid: outcome}`` (outcome is
``passed``, ``failed`` or ``skipped``; a failure in setup or teardown makes the test ``failed``),
how many tests were collected, the collection errors (bounded) and pytest's exit status
(:class:`RunResult`; :func:`run_tests` returns only the outcomes). The last lines of pytest's own
output are kept too, for a run that ends before the plugin writes (a conftest that cannot be
imported, an unknown option in the repository's configuration).
A run that exceeds ``timeout`` is killed (whole process group) and every requested test node id counts
as ``failed`` (a path argument is not a test and is never reported), so a blanked body that loops forever is still a failing task, never a hang.

The run's ``PYTHONPATH`` holds the plugin, the repository's *import roots* (``src`` for a ``src/``
layout, see :mod:`.project`) and the repository's top folder. The pytest process is its own
session (process group) and gets SIGKILL from the kernel when the thread that started it dies
(``PR_SET_PDEATHSIG``), so a killed build leaves no test run behind; whatever the tests started in
that group is killed with it on a timeout, and swept by the next build otherwise (:mod:`.workdir`).
Scratch files go under ``scratch`` (the build's own folder) when given.
"""

from __future__ import annotations

import configparser
import json
import os
import signal
import subprocess
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from core.common.lifetime import die_with_parent

__all__ = ["run_tests", "run_pytest", "RunResult", "PLUGIN_SOURCE", "pytest_argv", "config_file",
           "python_path"]

#: characters of collection error text / output kept per run
ERROR_CHARS = 3000
OUTPUT_CHARS = 4000

PLUGIN_SOURCE = '''
import json, os
_RESULTS = {}
_ERRORS = []
_FAILURES = []
_COLLECTED = [0]
def pytest_runtest_logreport(report):
    prev = _RESULTS.get(report.nodeid)
    if report.failed:
        _RESULTS[report.nodeid] = "failed"
        if len(_FAILURES) < 5:
            _FAILURES.append([report.nodeid, str(report.longreprtext)[-%(chars)d:]])
    elif report.skipped and prev is None:
        _RESULTS[report.nodeid] = "skipped"
    elif report.when == "call" and prev is None:
        _RESULTS[report.nodeid] = "passed"
def pytest_collectreport(report):
    if report.failed and len(_ERRORS) < 20:
        _ERRORS.append([report.nodeid, str(report.longreprtext)[-%(chars)d:]])
def pytest_collection_finish(session):
    _COLLECTED[0] = len(session.items)
def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["IANVS_REPO_RESULTS"], "w") as fh:
        json.dump({"outcomes": _RESULTS, "collected": _COLLECTED[0], "errors": _ERRORS,
                   "failures": _FAILURES, "exitstatus": int(exitstatus)}, fh)
''' % {"chars": ERROR_CHARS}


@dataclass
class RunResult:
    """One direct pytest run: per-test ``outcomes``, how many tests were ``collected``, the
    collection ``errors`` (node id, pytest's text; at most 20), the first 5 test ``failures``
    (node id, text), the ``exitstatus`` (``None``:
    the plugin never wrote, e.g. pytest could not start), whether it ``timed_out``, and the
    ``output`` tail (last :data:`OUTPUT_CHARS` characters of stdout+stderr)."""
    outcomes: dict[str, str] = field(default_factory=dict)
    collected: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    exitstatus: int | None = None
    timed_out: bool = False
    output: str = ""


def _has_pytest_section(path: Path) -> bool:
    try:
        if path.name == "pyproject.toml":
            return "ini_options" in tomllib.loads(path.read_text()).get("tool", {}).get("pytest", {})
        if path.name in ("pytest.ini", ".pytest.ini"):
            return True
        cfg = configparser.ConfigParser(interpolation=None, strict=False)
        cfg.read(path)
        return cfg.has_section("tool:pytest" if path.name == "setup.cfg" else "pytest")
    except (OSError, ValueError, configparser.Error, tomllib.TOMLDecodeError):
        return False


def config_file(root: Path) -> str:
    """The repository's own pytest config file as pytest chooses it (``pytest.ini``, then the
    first of ``pyproject.toml``/``tox.ini``/``setup.cfg`` with a pytest section), or
    ``os.devnull``; never one above ``root``."""
    for name in ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"):
        if (root / name).is_file() and _has_pytest_section(root / name):
            return str(root / name)
    return os.devnull


def python_path(root: Path, import_roots: list[str] | None) -> list[str]:
    """``sys.path`` entries of a run: the import roots under ``root``, then ``root``."""
    out = [str(root / r) for r in (import_roots or []) if r not in ("", ".")]
    return [*out, str(root)]


def pytest_argv(python: str, root: Path, test_ids: list[str], extra: list[str] | None = None) -> list[str]:
    """The pytest command line every direct repo run uses: no cache dir, the repo's addopts
    ignored, configuration and conftest lookup confined to ``root``."""
    return [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "ianvs_repo_report",
            "-o", "addopts=", "--no-header", "-rN", "--rootdir", str(root), "-c", config_file(root),
            "--confcutdir", str(root), *(extra or []), "--", *test_ids]


def run_pytest(python: Path, root: Path, test_ids: list[str], timeout: float,
               extra: list[str] | None = None, env_extra: dict[str, str] | None = None,
               import_roots: list[str] | None = None, scratch: Path | None = None,
               extra_plugins: dict[str, str] | None = None) -> RunResult:
    """Run ``test_ids`` (all tests when empty) under ``root``; see :class:`RunResult`.
    ``extra_plugins`` (module name -> source) are written beside the reporting plugin and loaded
    with ``-p NAME`` before ``extra`` (the builder's plugin probe, :mod:`.plugins`)."""
    with tempfile.TemporaryDirectory(prefix="ianvs-repo-run-", dir=scratch) as tmp:
        Path(tmp, "ianvs_repo_report.py").write_text(PLUGIN_SOURCE)
        loads: list[str] = []
        for name, source in (extra_plugins or {}).items():
            Path(tmp, f"{name}.py").write_text(source)
            loads += ["-p", name]
        results = Path(tmp, "results.json")
        log = Path(tmp, "output.txt")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": tmp, "LANG": "C.UTF-8",
               "PYTHONPATH": os.pathsep.join([tmp, *python_path(root, import_roots)]),
               "PYTHONDONTWRITEBYTECODE": "1", "IANVS_REPO_RESULTS": str(results), **(env_extra or {})}
        requested = [t for t in test_ids if "::" in t]
        with open(log, "wb") as out:
            argv = pytest_argv(str(python), root, test_ids, [*loads, *(extra or [])])
            proc = subprocess.Popen(argv, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=die_with_parent(signal.SIGKILL))
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return RunResult({t: "failed" for t in requested}, timed_out=True, output=_tail(log))
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            try:  # tests may leave processes in the group: end them with the run
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not results.exists():
            return RunResult({t: "failed" for t in requested}, output=_tail(log))
        data = json.loads(results.read_text())
        got: dict[str, str] = data["outcomes"]
        for t in requested:  # a requested test (not a path) that never reported failed
            got.setdefault(t, "failed")
        return RunResult(got, int(data["collected"]), [(str(a), str(b)) for a, b in data["errors"]],
                         [(str(a), str(b)) for a, b in data["failures"]], int(data["exitstatus"]),
                         output=_tail(log))


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-OUTPUT_CHARS:].decode(errors="replace")


def run_tests(python: Path, root: Path, test_ids: list[str], timeout: float,
              extra: list[str] | None = None, env_extra: dict[str, str] | None = None,
              import_roots: list[str] | None = None, scratch: Path | None = None) -> dict[str, str]:
    """Run ``test_ids`` (all tests when empty) under ``root``; return ``{nodeid: outcome}``."""
    return run_pytest(python, root, test_ids, timeout, extra, env_extra, import_roots, scratch).outcomes
