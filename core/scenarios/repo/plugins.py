"""Which pytest plugins of a repository environment the selected tests need; the others stay off.

A plugin installed in the environment (a ``pytest11`` entry point: pytest-benchmark, pytest-mypy,
hypothesis, pytest-mock, ...) is loaded by every pytest run whether a test uses it or not, and
some do what the sandbox forbids as they load: pytest-benchmark's ``pytest_configure`` builds
its session, which starts ``git rev-parse --git-dir`` (and more ``git``/``hg`` commands) to
name the project; the kernel's seccomp filter kills such a sample, so every sandboxed run of the package's tests died before
its first test. So the builder decides once, before the baseline, which plugins the selected
tests need (:func:`choose_plugins`) and turns the others off with ``-p no:NAME`` in *every* run
of the build and of the job: the baseline, the blanked bodies, the sandbox check and the job's
samples (the tasks record the choice in ``env.pytest_plugins``; :func:`pytest_plugin_args`).
A plugin that changes outcomes is then active in all of them or in none.

A plugin is needed (kept) when, among the collected test functions, one

* requests a fixture the plugin defines (directly, through ``usefixtures``, an autouse fixture
  or another fixture: pytest's fixture closure), or
* carries a marker the plugin registered (``config.addinivalue_line("markers", ...)``), or
* is an item class the plugin defines (pytest-asyncio's coroutine items), or
* is a coroutine (or async generator) function, or requests an async fixture, and the plugin
  implements ``pytest_pyfunc_call`` or ``pytest_fixture_setup`` (the async runners), or

when the repository's pytest configuration sets an ini option the plugin registered
(``asyncio_mode``, ``timeout``, ``env``, ``DJANGO_SETTINGS_MODULE``...), or names it in
``required_plugins``. The harness's own pytest-cov (the baseline's coverage) and a plugin of
the package under test are always kept. Items that are not test functions (pytest-mypy's,
pytest-ruff's, pytest-checkdocs' lint items) keep no plugin: tasks come from test functions.

How: one ``--collect-only`` run of the selected tests in the environment, direct (like the
baseline: the repository's trusted code), with all plugins loaded and a small reporting plugin
(:data:`PROBE_SOURCE`) that attributes every fixture, marker, ini option and async runner to the
plugin that defined it (by the top-level package of the defining module).

Task records (``env.pytest_plugins``): ``{"disabled": [entry-point names], "enabled": [...]}``;
only ``disabled`` acts. Records without the field (every set built before this) run with
every installed plugin, as before.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from core.common.errors import IanvsError
from core.scenarios.repo.project import normalise
from core.scenarios.repo.testrun import RunResult, run_pytest

__all__ = ["PluginChoice", "choose_plugins", "decide", "pytest_plugin_args", "check_record", "PROBE_SOURCE",
           "ALWAYS_KEPT"]

LOG = logging.getLogger(__name__)

#: distributions whose plugins are never disabled: the harness's own tools (the baseline measures
#: coverage with pytest-cov; without ``--cov`` options it does nothing)
ALWAYS_KEPT = frozenset({"pytest-cov"})
#: what an entry-point name may look like (it goes into ``-p no:NAME``)
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_PROBE_MODULE = "ianvs_repo_plugins"

#: The reporting plugin of the collection run (loaded with ``-p``, before the entry points, so its
#: wrappers of ``Parser.addini`` and ``Config.addinivalue_line`` see every plugin's registrations).
#: Writes ``{"plugins": {name: {module, dist, version}}, "needs": {name: {reason: tests}}}`` to
#: ``$IANVS_REPO_PLUGINS``.
PROBE_SOURCE = r'''
import inspect, json, os, sys
from _pytest.config import Config
from _pytest.config.argparsing import Parser
import pytest

_MARKERS = {}
_INI = {}
_addini, _addline = Parser.addini, Config.addinivalue_line


def _caller():
    return sys._getframe(2).f_globals.get("__name__", "") or ""


def _wrapped_addini(self, name, *args, **kwargs):
    _INI.setdefault(name, _caller())
    return _addini(self, name, *args, **kwargs)


def _wrapped_addline(self, name, line):
    if name == "markers":
        _MARKERS.setdefault(str(line).split(":", 1)[0].split("(", 1)[0].strip(), _caller())
    return _addline(self, name, line)


Parser.addini, Config.addinivalue_line = _wrapped_addini, _wrapped_addline


def _top(module):
    return (module or "").split(".")[0]


def _module_of(obj):
    return getattr(obj, "__module__", None) or getattr(obj, "__name__", "") or ""


def _is_async(func):
    try:
        func = inspect.unwrap(func) if callable(func) else func
        return inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func)
    except Exception:
        return False


def pytest_collection_finish(session):
    config = session.config
    pm = config.pluginmanager
    plugins, tops = {}, {}
    for plugin, dist in pm.list_plugin_distinfo():
        name = pm.get_name(plugin)
        if not name:
            continue
        module = getattr(plugin, "__name__", "") or _module_of(type(plugin))
        plugins[name] = {"module": module, "dist": dist.metadata["name"] or "", "version": dist.version or ""}
        tops.setdefault(_top(module), set()).add(name)
    needs = {}

    def note(module, reason, nodeid):
        for name in tops.get(_top(module), ()):
            needs.setdefault(name, {}).setdefault(reason, set()).add(nodeid)

    runners = [_module_of(impl.plugin) for hook in (config.hook.pytest_pyfunc_call, config.hook.pytest_fixture_setup)
               for impl in hook.get_hookimpls()]
    for item in session.items:
        if not isinstance(item, pytest.Function):
            continue
        nodeid = item.nodeid
        note(type(item).__module__, "test items", nodeid)
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs if info is not None else {}
        asynchronous = _is_async(getattr(item, "obj", None))
        for fixture in item.fixturenames:
            for fixturedef in defs.get(fixture, ()):
                func = getattr(fixturedef, "func", None)
                note(_module_of(func), "fixture " + fixture, nodeid)
                asynchronous = asynchronous or _is_async(func)
        for mark in {m.name for m in item.iter_markers()}:
            if mark in _MARKERS:
                note(_MARKERS[mark], "marker " + mark, nodeid)
        if asynchronous:
            for module in runners:
                note(module, "async tests", nodeid)
    for key in config.inicfg:
        if key in _INI:
            note(_INI[key], "ini option " + key, "<config>")
    required = config.getini("required_plugins") or []
    for req in required:
        wanted = req.split(">")[0].split("<")[0].split("=")[0].split("!")[0].split("~")[0].strip().lower()
        for name, info in plugins.items():
            if info["dist"].lower().replace("_", "-") == wanted.replace("_", "-"):
                needs.setdefault(name, {}).setdefault("required_plugins", set()).add("<config>")
    out = {"plugins": plugins,
           "needs": {n: {r: len(ids) for r, ids in reasons.items()} for n, reasons in needs.items()}}
    with open(os.environ["IANVS_REPO_PLUGINS"], "w") as fh:
        json.dump(out, fh)
'''


@dataclass
class PluginChoice:
    """The build's decision: ``enabled`` (entry-point name -> why: the reasons, or ``harness
    tool``/``package under test``) and ``disabled`` (name -> ``dist version``)."""
    enabled: dict[str, list[str]] = field(default_factory=dict)
    disabled: dict[str, str] = field(default_factory=dict)

    def record(self) -> dict[str, list[str]]:
        """The tasks' ``env.pytest_plugins``."""
        return {"disabled": sorted(self.disabled), "enabled": sorted(self.enabled)}

    def args(self) -> list[str]:
        """pytest arguments that turn the disabled plugins off (``-p no:NAME`` each, sorted)."""
        return _args(sorted(self.disabled))


def _args(names: list[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        out += ["-p", f"no:{name}"]
    return out


def decide(probe: Mapping[str, Any], keep: frozenset[str] = frozenset(),
           project: str | None = None) -> PluginChoice:
    """The choice from the collection run's report (``probe``: :data:`PROBE_SOURCE`'s JSON).
    Kept: plugins with a need, those of :data:`ALWAYS_KEPT` and of the ``project`` distribution
    (PEP 503 names compared), and the entry-point names in ``keep`` (``--pytest-plugin``); every
    other plugin is disabled."""
    choice = PluginChoice()
    needs: Mapping[str, Mapping[str, int]] = probe.get("needs") or {}
    always = {normalise(d) for d in ALWAYS_KEPT}
    own = normalise(project) if project else None
    for name, info in sorted((probe.get("plugins") or {}).items()):
        if not _NAME.fullmatch(name):
            LOG.warning("pytest plugin %r: a name pytest's -p cannot take; left enabled", name)
            choice.enabled[name] = ["unusual name"]
            continue
        dist = normalise(str(info.get("dist", "")))
        reasons = [f"{reason} ({count} test{'s' if count != 1 else ''})" if not reason.startswith(("ini", "req"))
                   else reason for reason, count in sorted((needs.get(name) or {}).items())]
        if dist in always:
            choice.enabled[name] = ["harness tool"]
        elif own is not None and dist == own:
            choice.enabled[name] = ["package under test"]
        elif name in keep:
            choice.enabled[name] = ["--pytest-plugin"]
        elif reasons:
            choice.enabled[name] = reasons
        else:
            choice.disabled[name] = f"{info.get('dist', '?')} {info.get('version', '')}".strip()
    return choice


def choose_plugins(python: Path, root: Path, test_ids: list[str], timeout: float,
                   extra: list[str] | None = None, env_extra: dict[str, str] | None = None,
                   import_roots: list[str] | None = None, scratch: Path | None = None,
                   keep: frozenset[str] = frozenset(), project: str | None = None) -> PluginChoice | None:
    """Collect ``test_ids`` (all tests when empty; ``extra``: the build's ``--deselect``) once in
    the environment of ``python`` with every plugin loaded and return :func:`decide`'s choice,
    logging it plugin by plugin; ``None`` when the collection run wrote no report (pytest did
    not start: the baseline, run next with every plugin, then says why)."""
    with tempfile.TemporaryDirectory(prefix="ianvs-repo-plugins-", dir=scratch) as tmp:
        report = Path(tmp, "plugins.json")
        run: RunResult = run_pytest(python, root, test_ids, timeout, ["--collect-only", *(extra or [])],
                                    env_extra={**(env_extra or {}), "IANVS_REPO_PLUGINS": str(report)},
                                    import_roots=import_roots, scratch=scratch,
                                    extra_plugins={_PROBE_MODULE: PROBE_SOURCE})
        if not report.is_file():
            LOG.warning("pytest plugins: the collection run wrote no report (pytest exit status %s); every installed "
                        "plugin stays enabled", run.exitstatus)
            return None
        probe = json.loads(report.read_text())
    choice = decide(probe, keep, project)
    plugins = probe.get("plugins") or {}
    for name, why in sorted(choice.enabled.items()):
        info = plugins.get(name, {})
        LOG.info("pytest plugin %s (%s %s): enabled, %s", name, info.get("dist"), info.get("version"), "; ".join(why))
    for name, dist in sorted(choice.disabled.items()):
        LOG.info("pytest plugin %s (%s): not needed by the selected tests, disabled in every run (-p no:%s)",
                 name, dist, name)
    if not plugins:
        LOG.info("pytest plugins: none installed besides pytest's own")
    return choice


def check_record(value: object) -> str | None:
    """Why ``env.pytest_plugins`` of a task record is malformed, or ``None`` when it is fine
    (absent, or ``{"disabled": [names], "enabled": [names]}`` with names pytest's ``-p`` takes)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        return "must be an object {disabled: [...], enabled: [...]}"
    for key in ("disabled", "enabled"):
        names = value.get(key, [])
        if not isinstance(names, list) or not all(isinstance(n, str) and _NAME.fullmatch(n) for n in names):
            return f"'{key}' must be a list of pytest plugin names"
    return None


def pytest_plugin_args(task: Mapping[str, Any]) -> list[str]:
    """pytest arguments of every run of ``task``: ``-p no:NAME`` for each plugin its
    ``env.pytest_plugins.disabled`` names (sorted as recorded); ``[]`` for a record without the
    field. Raises :class:`IanvsError` for a malformed field (never passes it to pytest)."""
    value = (task.get("env") or {}).get("pytest_plugins")
    problem = check_record(value)
    if problem is not None:
        raise IanvsError(f"{task.get('task_id')}: field 'env.pytest_plugins' {problem}",
                         hint="rebuild the tasks file with 'ianvs dataset repo'")
    if value is None:
        return []
    return _args(list(value.get("disabled", [])))
