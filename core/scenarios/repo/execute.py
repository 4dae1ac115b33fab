"""Run samples of repo tasks: inject by AST position into a private view, run the task's tests in the sandbox.

Per sample: a hard-link view (:mod:`.view`) with the task's file replaced by the injected version,
then one sandbox request (``script`` mode, in-process grading) that puts the view and the
repository environment's site-packages on ``sys.path`` and runs pytest on exactly the task's
FAIL_TO_PASS + PASS_TO_PASS tests (then the node ids of its ``model_written_tests``, whose files
are written at the view's root). The fork server is started with the environment's interpreter
(``LocalExecutor(python=...)``) with that environment's site-packages as a read path (every
other site-/dist-packages directory, the base interpreter's included, stays hidden:
``hide_packages=True``). Views are removed after each result.
With an :class:`~.image_env.ImageEnv` the same requests run on the ``docker`` backend in that
image instead: the run's views directory is bind-mounted read-only at :data:`VIEWS_IN_CONTAINER`
(the runner names views by that path) and the image's site directories replace the venv's.
Tasks with a PostgreSQL service run on both backends: on ``docker`` the service's socket
directory is bind-mounted read-only at :data:`POSTGRES_IN_CONTAINER` (the container keeps no
network; see :func:`run_samples`).

What a sample can read (kernel walls; isolation ``kernel`` or ``full``): its own view and nothing
else of the run. The run's views directory is the executor's *request read root*
(``request_read_roots``): visible in the sandbox but readable by no request by default, and
each request names its own view as its only ``read_paths`` entry, for which the fork server's
child adds a Landlock read rule (``ExecRequest.read_paths``). So a sample cannot list the views
directory nor read a sibling's view -- which would hold the original of its function whenever
the sibling belongs to another task (or is the gold control). Besides its view it reads the
sandbox's system directories, the interpreter's standard library and the environment's
site-packages. The original checkout (``root``, the cached source) is never a read path; it is
refused when it lies beneath a directory every sample reads, and so is an environment that
provides the package under test itself (installed, or an editable install pointing at a
checkout): :func:`check_environment`, called by :func:`run_samples`. Without Landlock (isolation
below ``kernel``, e.g. ``min_isolation`` lowered on an old kernel) none of this holds: a sample
reads whatever its uid can, the other views included. The ``dask`` backend forwards
``read_paths`` unchanged, but views exist only on the machine that builds them: repo tasks run
on ``local`` or ``docker``, never on remote nodes (a node without a request read root holding
the path refuses such a request: ``infra_error``).

The Python audit hook is off for these runs (``audit_hook=False``): repositories' own tests
legitimately inspect traceback frames (``pytest.raises``), which the hook forbids; the hook is a
diagnostic, not a wall -- namespaces, Landlock, seccomp, the dropped uid and rlimits still apply.

The per-test outcomes a sample prints are informational (F2P/P2P shares; the runner's own line is
the last one, so an earlier line the sample prints is ignored); a test counts as passed once its
call passed *and* its teardown finished without error (a teardown report that never comes --
pytest stopped by an internal error while reporting a failure, as Debian's Python 3.11.2 does
on ``dataset``'s blanked ``Database.close``: ``SystemError: AST constructor recursion depth
mismatch`` -- leaves the test not passed, not run); the pass/fail verdict is the
sandbox outcome: pytest exits 0 *and* every selected test ran and passed (a skip, an xfail, a test
that never ran because the sample ended the session with ``pytest.exit(returncode=0)`` are not a
pass). Both come from the sample's own process (the
repository code under test runs in the same interpreter as its tests), i.e. the ``in_process_confined`` tier: the
candidate's code is compiled under :mod:`.policy` first, the runner installs :mod:`.guards` before
pytest is imported and compares pytest's reporting path before and after the run (the tripwire).
A refusal, a guard that fired (even if the code caught it) or a tripped wire is ``sandbox_violation``.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Iterator

from core.common.errors import IanvsError
from core.scenarios.repo.env import RepoEnv
from core.scenarios.repo import guards
from core.scenarios.repo.functions import FunctionSite, InjectionError, blank, find_functions, inject, reinject
from core.scenarios.repo.policy import (PolicyRefused, confine_body, confine_file, module_context, own_packages,
                                        relaxations, repository_imports)
from core.scenarios.repo.image_env import ImageEnv, image_provides
from core.scenarios.repo.postgres import PostgresDatabase, PostgresService
from core.scenarios.repo.plugins import pytest_plugin_args
from core.scenarios.repo.preload import dependency_modules
from core.scenarios.repo.testrun import config_file
from core.scenarios.repo.view import make_view
from core.scenarios.repo.workdir import default_views_dir
from core.testenvmanager.sandbox import ExecRequest, ExecResult, Executor, get_executor
from core.testenvmanager.sandbox.base import under_any
from core.testenvmanager.sandbox.forkserver import DEFAULT_PRELOAD, READ_DIRS
from core.testenvmanager.sandbox.types import ExecMode

__all__ = ["Sample", "SampleResult", "run_samples", "site_of", "RESULT_MARK", "default_views_dir",
           "written_test_files", "written_test_ids", "task_modules", "check_environment"]


LOG = logging.getLogger(__name__)

RESULT_MARK = "@@ianvs-repo-results@@"
#: the runtime half of the grading policy (:mod:`.guards`), executed by every sample's runner
#: before pytest is imported
GUARDS_SOURCE = Path(guards.__file__).read_text()

#: Paths each sandboxed process sees as its own empty tmpfs: views placed there would be invisible.
PRIVATE_IN_SANDBOX = ("/tmp", "/var/tmp", "/dev/shm", "/run", "/var/run")
#: Where a run's views directory is bind-mounted (read-only) in the docker backend's containers.
VIEWS_IN_CONTAINER = "/opt/ianvs/views"
#: Where the PostgreSQL service's socket directory is mounted (read-only) in the docker
#: backend's containers; the samples' ``PGHOST`` and ``DATABASE_URL`` name it.
POSTGRES_IN_CONTAINER = "/opt/ianvs/services/postgres"

_RUNNER = '''
import json, os, sys
sys.dont_write_bytecode = True
_G = {{"__name__": "ianvs_guards"}}
exec(compile({guards!r}, "<ianvs-guards>", "exec"), _G)
_G["install"]({relax!r})
sys.path[:0] = [*[os.path.join({view!r}, r) for r in {roots!r}], {view!r}, *{sites!r}]
import pytest
_TRIPWIRE = {{}}
def _watch(into):
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name in ("pytest", "builtins", "sys", "os", "json", "posix")
                               or name.startswith(("_pytest", "pluggy"))):
            continue
        into["M|" + name] = mod
        for key, value in list(vars(mod).items()):
            if name == "sys" and key.startswith("last_"):
                continue  # pytest records a failed test's exception there (sys.last_type...)
            if callable(value) or type(value) is type(sys):
                into["A|" + name + "|" + key] = value
                if isinstance(value, type) and value.__dict__.get("__module__") == name:
                    for k, v in list(vars(value).items()):
                        into["C|" + name + "|" + key + "|" + k] = v
    for key, value in vars(_Collect).items():
        into["C|runner|_Collect|" + key] = value
    return into
_CFG = os.path.join({view!r}, {config!r}) if {config!r} else os.devnull
_R = {{}}
_CALLED = set()
_M = {{}}
_WANT = {tests!r}
class _Collect:
    def pytest_runtest_logreport(self, report):
        if report.failed:
            _R[report.nodeid] = "failed"
            _M[report.nodeid] = "\\n".join(l[2:].strip() for l in str(report.longreprtext).splitlines()
                                           if l.startswith("E "))[-300:]
        elif hasattr(report, "wasxfail"):
            _R[report.nodeid] = "xfailed" if report.skipped else "xpassed"
        elif report.when == "call" and not report.skipped:
            _CALLED.add(report.nodeid)
        elif report.when == "teardown" and report.nodeid in _CALLED:
            _R.setdefault(report.nodeid, "passed")
        elif report.skipped and report.nodeid not in _R:
            _R[report.nodeid] = "skipped"
    @pytest.hookimpl(tryfirst=True)
    def pytest_load_initial_conftests(self, early_config, parser, args):
        # the environment's plugins are loaded (hypothesis patches pytest on import), no
        # conftest or test module yet: the tripwire's baseline
        _watch(_TRIPWIRE)
_EARLY = _watch({{}})
rc = pytest.main(["-q", "-p", "no:cacheprovider", "-o", "addopts=", "--no-header", "-rN",
                  "--rootdir", {view!r}, "-c", _CFG, "--confcutdir", {view!r}, *{plugins!r}, *{deselect!r}, "--", *[{view!r} + "/" + t for t in _WANT]], plugins=[_Collect()])
_NOW = _watch({{}})
_BASE = _TRIPWIRE or _EARLY  # before pytest.main if the hook never ran: never no baseline
_CHANGED = sorted([k for k, v in _BASE.items() if _NOW.get(k, _BASE) is not v]
                  + [k for k in _NOW if k not in _BASE and k[:2] == "C|"  # a new method or descriptor
                     and "A|" + k[2:].rsplit("|", 1)[0] in _BASE
                     and (callable(_NOW[k]) or hasattr(type(_NOW[k]), "__get__"))])
_CHANGED += ["refused: " + v for v in _G["VIOLATIONS"][:5]]
if _CHANGED:
    sys.stdout.write("\\n" + {tmark!r} + json.dumps(_CHANGED[:20]) + "\\n")
    sys.stdout.flush()
    raise AssertionError(f"tripwire: {{_CHANGED[:5]}}")
sys.stdout.write("\\n" + {mmark!r} + json.dumps(_M) + "\\n")
sys.stdout.write("\\n" + {mark!r} + json.dumps(_R) + "\\n")
sys.stdout.flush()
_MISSING = [t for t in _WANT if not any(k == t or k.startswith((t + "[", t + "::")) for k in _R)]
_NOT_PASSED = sorted(k for k, v in _R.items() if v != "passed")
assert rc == 0, f"pytest exit status {{rc}}"
assert not _MISSING, f"tests that did not run: {{_MISSING[:5]}}"
assert not _NOT_PASSED, f"tests that did not pass: {{_NOT_PASSED[:5]}}"
'''


@dataclass(frozen=True)
class Sample:
    """One sample: ``code`` is model output (a full def), or ``None`` for the blanked control.

    ``edits`` (relative path -> whole new text), when given, are written into the view instead
    of injecting ``code`` (the implement-change kind: a change to any files of the task root;
    the caller has checked the paths, :mod:`core.scenarios.implement_change.answer`); ``{}``
    runs the root unchanged. ``pinned`` (canonical relative paths) are written from the root
    *after* the edits, or removed where the root has none (:func:`.view.make_view`): the
    implement-change kind pins its task's test side there."""
    sample_id: str
    task: dict
    code: str | None
    edits: dict[str, str] | None = None
    pinned: frozenset[str] = frozenset()


@dataclass(frozen=True)
class SampleResult:
    sample_id: str
    task_id: str
    outcome: str
    tests: dict[str, str]
    detail: str
    duration_s: float
    isolation: str = ""
    executed_by: str = ""
    #: per failed test, the ``E`` lines of its report (assertion message; 300 characters):
    #: what the sample printed, so feedback only, never a verdict
    messages: dict[str, str] = field(default_factory=dict)


def site_of(task: dict, text: str) -> FunctionSite:
    """The task's function in ``text``, found by its recorded AST position (not by text)."""
    pos = task["position"]
    for site in find_functions(text):
        if site.def_line == pos["def_line"] and site.qualname == task["qualname"]:
            return site
    raise InjectionError(f"{task['task_id']}: no function {task['qualname']} at line {pos['def_line']}")


def _edited(task: dict, root: Path, code: str | None, packages: frozenset[str] = frozenset(),
            reference: bool = False) -> str:
    """The task's file with ``code``'s body injected under the grading policy (``reference``:
    the file's own body, put back through the same policy: the gold control; ``code=None``:
    the blanked control, never confined). Raises :class:`InjectionError` or
    :class:`~.policy.PolicyRefused`."""
    text = (root / task["file"]).read_text()
    site = site_of(task, text)
    if code is None and not reference:
        return blank(text, site)
    ctx = module_context(text, packages)
    is_async = site.signature.lstrip().startswith("async")

    def confine(chunk: str) -> str:
        return confine_body(chunk, ctx, is_async=is_async, class_name=site.class_name)
    return reinject(text, site, confine) if reference else inject(text, site, str(code), confine)


def _relaxations(task: dict, root: Path, whole_files: bool) -> tuple[str, ...]:
    """The policy relaxations the task's own reference needs (:func:`.policy.relaxations`;
    none for whole-file answers, whose reference is the answer itself)."""
    if whole_files or "position" not in task:
        return ()
    text = (root / task["file"]).read_text()
    return relaxations(site_of(task, text).body_text(text))


def _confined_edits(edits: dict[str, str], root: Path, pinned: frozenset[str],
                    packages: frozenset[str]) -> dict[str, str]:
    """``edits`` with every Python file the view keeps (not a ``pinned`` test-side path)
    rewritten under the grading policy in whole-file mode (:func:`.policy.confine_file`).
    Raises :class:`~.policy.PolicyRefused` naming the file."""
    out = dict(edits)
    imports = repository_imports(root)
    for rel, text in edits.items():
        if not rel.endswith(".py") or os.path.normpath(rel) in pinned:
            continue
        old_path = root / rel
        old = old_path.read_text(errors="replace") if old_path.is_file() else None
        try:
            out[rel] = confine_file(text, old, module_context(old, packages, imports, file_mode=True))
        except PolicyRefused as exc:
            raise PolicyRefused(f"{rel}: {exc}") from None
    return out


def policy_refusal(sample: Sample, root: Path) -> str | None:
    """Why the grading policy refuses ``sample``'s edits as it would refuse a model's (the
    whole-file rewrite of :func:`_confined_edits`), or None when it takes them. Builders run
    their tasks' reference change through this, so a kept task cannot fail its own gold
    control on the policy (e.g. a ``from .x import *`` it added)."""
    if sample.edits is None:
        return None
    roots = tuple(sample.task.get("env", {}).get("import_roots", ["."]))
    try:
        _confined_edits(sample.edits, root, sample.pinned, own_packages(root, roots))
    except PolicyRefused as exc:
        return str(exc)
    return None


def _with_databases(requests: Iterable[ExecRequest], service: PostgresService,
                    live: dict[str, PostgresDatabase], socket_dir: str | None = None) -> Iterator[ExecRequest]:
    """Each request with a fresh database of ``service``: created when the executor takes the
    request (so at most its send window of databases exist at once), its variables set in the
    sample's own process by a prelude of the program -- never in this process's environment.
    ``socket_dir``: where the sample sees the service's socket directory (the container path
    on ``docker``; default: the host path)."""
    for req in requests:
        db = service.create_database(req.id)
        live[req.id] = db
        seen = replace(db, socket_dir=Path(socket_dir)) if socket_dir else db
        yield replace(req, program=f"import os as _o\n_o.environ.update({seen.env!r})\ndel _o\n" + req.program)


_WRITTEN_FILE = re.compile(r"test_[A-Za-z0-9_]+\.py")


def written_test_files(task: dict) -> dict[str, str]:
    """``{file name: code}`` of the task's model-written tests (placed at the repository root of
    each view). Raises :class:`IanvsError` for a name that is not a plain ``test_*.py`` file name
    (a tasks file cannot make a view write outside itself)."""
    files: dict[str, str] = {}
    for w in task.get("model_written_tests") or []:
        if not _WRITTEN_FILE.fullmatch(str(w.get("file", ""))):
            raise IanvsError(f"{task['task_id']}: model_written_tests file {w.get('file')!r} is not a plain "
                             "test_*.py name", hint="rebuild the tasks file with 'ianvs dataset repo --llm-tests'")
        files[w["file"]] = w["code"]
    return files


def written_test_ids(task: dict) -> list[str]:
    """Node ids of the task's model-written tests (run after its own tests)."""
    return [t for w in task.get("model_written_tests") or [] for t in w["tests"]]


def task_modules(tasks: Iterable[dict], root: Path) -> list[str]:
    """The top-level import names of the tasks' files (sorted): the outermost regular package
    (a directory with ``__init__.py``) holding the file, or the file's own module name when its
    directory is not one (``toolz/itertoolz.py`` -> ``toolz``, ``src/pkg/m.py`` -> ``pkg``,
    ``tool.py`` -> ``tool``)."""
    names: set[str] = set()
    for task in tasks:
        parts = Path(task["file"]).parts
        name, depth = Path(parts[-1]).stem, len(parts) - 1
        while depth > 0 and root.joinpath(*parts[:depth], "__init__.py").is_file():
            name, depth = parts[depth - 1], depth - 1
        names.add(name)
    return sorted(names)


def check_environment(tasks: Iterable[dict], root: Path, env: RepoEnv | ImageEnv) -> None:
    """Refuse (:class:`IanvsError`) to run the tasks where a sample could read the original
    implementation outside its view: ``env`` provides one of :func:`task_modules` (installed in
    its site directories, or an editable install / ``.pth`` pointing at a checkout), or, on the
    ``local`` backend, ``root`` lies beneath a directory every sample may read (the sandbox's
    system directories, the environment's prefixes or site-packages). On ``docker`` the checkout
    is not in the container at all."""
    modules = task_modules(tasks, root)
    if isinstance(env, ImageEnv):
        found, where = image_provides(env, modules), f"image {env.image}"
    else:
        found, prefixes = env.provides(modules)
        where = f"environment {env.root}"
        wider = under_any(os.path.realpath(root), [*READ_DIRS, *prefixes, env.site_packages()])
        if wider is not None:
            raise IanvsError(f"the repository checkout {root} lies beneath {wider}, which every sandboxed "
                             "sample may read: samples could read the original functions",
                             hint="keep repository sources outside system and environment directories "
                                  "(default: the cache's repo-src folder)")
    if found:
        name, path = sorted(found.items())[0]
        raise IanvsError(f"the repository {where} provides {name} ({path}), a package under test: samples "
                         f"could read the original of every function there",
                         hint="remove the repository's own package (and anything that installs it) from "
                              "env.requirements, or use a run_env image without it")


def run_samples(samples: list[Sample], root: Path, env: RepoEnv | ImageEnv, views_dir: Path,
                workers: int = 2, timeout: float = 60.0, min_isolation: str = "kernel",
                reference: bool = False, audit_hook: bool = False,
                service: PostgresService | None = None, preload: bool = True) -> Iterator[SampleResult]:
    """Yield one :class:`SampleResult` per sample (completion order).

    ``env`` selects the backend: a :class:`RepoEnv` (a venv on this machine) runs on ``local``;
    an :class:`ImageEnv` runs on ``docker`` in that image, with the run's views directory
    bind-mounted read-only at :data:`VIEWS_IN_CONTAINER` and the image's own site directories on
    ``sys.path`` (``env.options`` are further options of the docker backend).
    ``reference=True`` runs the gold control (``code`` and ``edits`` are ignored): the task's own
    body put back through the grading policy (:mod:`.policy`), or the files unchanged for a
    task without a recorded ``position``. Every candidate body and every Python file of
    ``edits`` outside ``pinned`` is compiled under that policy first; code it refuses is
    ``sandbox_violation`` without running, and the runner's guards and tripwire make a refusal
    at run time, or a change to pytest's reporting path, ``sandbox_violation`` too.
    A sample whose code cannot be injected is ``syntax_error`` without running anything.
    ``service`` (a started :class:`PostgresService`, on either backend): every sample gets its own
    database (``DATABASE_URL`` and ``PG*`` in its environment), dropped when its result arrives
    (or when this generator is closed); the sandbox gets the service's socket directory as its
    only service allowance: ``socket_dirs`` on ``local``; on ``docker`` it is bind-mounted
    read-only at :data:`POSTGRES_IN_CONTAINER` (``socket_mounts``; the container keeps no
    network) and the samples' variables name that path.
    The task's ``model_written_tests`` files are written at the root of every view and their
    node ids run after the task's FAIL_TO_PASS and PASS_TO_PASS tests.
    ``preload``: the fork server imports pytest and the repository's third-party dependencies
    once (:func:`.preload.dependency_modules`), so samples fork with them loaded; never the
    repository's own modules.
    Each sample may read its own view and nothing else of the run (module docstring); raises
    :class:`IanvsError` before anything runs when the environment provides the package under
    test or ``root`` is readable by every sample (:func:`check_environment`).
    """
    docker = isinstance(env, ImageEnv)
    views_dir = views_dir.resolve()
    if not docker and any(views_dir == Path(p) or Path(p) in views_dir.parents for p in PRIVATE_IN_SANDBOX):
        raise IanvsError(f"views directory {views_dir} is under a path the sandbox replaces with a private tmpfs",
                         hint="use a directory outside /tmp, /var/tmp, /dev/shm and /run (default: the cache dir)")
    views_dir.mkdir(parents=True, exist_ok=True)
    if samples:
        check_environment([s.task for s in samples], root, env)
    sites = list(env.site) if isinstance(env, ImageEnv) else [env.site_packages()]
    requests: list[ExecRequest] = []
    views: dict[str, Path] = {}
    marks: dict[str, str] = {}
    early: list[SampleResult] = []
    cfg = config_file(root)
    config = Path(cfg).name if cfg != os.devnull else ""  # the repository's pytest config, as the builder's
    tmp = Path(tempfile.mkdtemp(prefix=f"run-{os.getpid()}-", dir=views_dir))  # owner: see leftovers
    tmp.chmod(0o755)  # the sandbox's unprivileged uid reads the views (never writes them)
    packages: dict[tuple[str, ...], frozenset[str]] = {}  # per import roots
    relaxed: dict[tuple[str, bool], tuple[str, ...]] = {}  # per task and answer form: one read of its file
    try:
        for n, s in enumerate(samples):
            task = s.task
            edits = written_test_files(task)
            roots_key = tuple(task.get("env", {}).get("import_roots", ["."]))
            if roots_key not in packages:
                packages[roots_key] = own_packages(root, roots_key)
            relax_key = (str(task["task_id"]), s.edits is not None)
            if relax_key not in relaxed:
                relaxed[relax_key] = _relaxations(task, root, s.edits is not None)
            try:
                if not reference and s.edits is not None:
                    edits.update(_confined_edits(s.edits, root, s.pinned, packages[roots_key]))
                elif s.edits is None and (not reference or "position" in task):  # else: the file as it is
                    edits[task["file"]] = _edited(task, root, s.code, packages[roots_key], reference)
            except InjectionError as exc:
                early.append(SampleResult(s.sample_id, task["task_id"], "syntax_error", {}, str(exc), 0.0,
                                          executed_by=env.backend))
                continue
            except PolicyRefused as exc:
                early.append(SampleResult(s.sample_id, task["task_id"], "sandbox_violation", {},
                                          f"the grading policy refused the candidate's code: {exc}", 0.0,
                                          executed_by=env.backend))
                continue
            view = make_view(root, tmp / f"v{n}", edits, s.pinned)
            views[s.sample_id] = view
            tests = [*task["tests"]["fail_to_pass"], *task["tests"]["pass_to_pass"], *written_test_ids(task)]
            deselect = [f"--deselect={d}" for d in task["tests"].get("deselect", [])]
            seen_as = f"{VIEWS_IN_CONTAINER}/{view.name}" if docker else str(view)
            # a fresh nonce per sample: a line the sample prints cannot pass for the runner's
            marks[s.sample_id] = f"{RESULT_MARK}{secrets.token_hex(8)}@@"
            roots = [r for r in task.get("env", {}).get("import_roots", ["."]) if r not in ("", ".")]
            program = _RUNNER.format(view=seen_as, sites=sites, tests=tests, deselect=deselect,
                                     plugins=pytest_plugin_args(task),
                                     mark=marks[s.sample_id], mmark=_messages_mark(marks[s.sample_id]),
                                     roots=roots, config=config, guards=GUARDS_SOURCE,
                                     relax=relaxed[relax_key],
                                     tmark=_tripwire_mark(marks[s.sample_id]))
            requests.append(ExecRequest(id=s.sample_id, mode=ExecMode.SCRIPT, program=program, test="",
                                        timeout=timeout, memory_mb=2048, read_paths=(seen_as,)))
        yield from early
        by_id = {s.sample_id: s for s in samples}
        if not requests:
            return
        live: dict[str, PostgresDatabase] = {}
        sockets = [str(service.socket_dir)] if service is not None else None
        modules = ([*DEFAULT_PRELOAD, *dependency_modules(root, sites[0])]
                   if preload and not docker else None)
        stream = (_with_databases(requests, service, live, POSTGRES_IN_CONTAINER if docker else None)
                  if service is not None else requests)
        try:
            with _executor(env, tmp, sites, workers, min_isolation, audit_hook, sockets, modules) as ex:
                for res in ex.run(stream):
                    if service is not None and res.id in live:
                        service.drop_database(live.pop(res.id))
                    yield _result(by_id[res.id], res, marks[res.id])
                    shutil.rmtree(views.pop(res.id), ignore_errors=True)
        finally:
            if service is not None and service.pid is not None:
                for db in list(live.values()):
                    service.drop_database(db)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _executor(env: RepoEnv | ImageEnv, views: Path, sites: list[str], workers: int, min_isolation: str,
              audit_hook: bool, sockets: list[str] | None, preload: list[str] | None) -> Executor:
    """The executor for ``env``: ``local`` with the venv's interpreter and site-packages readable
    (every other package directory hidden; ``preload`` imported by its fork server), or
    ``docker`` in the environment's image with ``views`` mounted read-only (no dependency
    preloading there yet). Either way ``views`` is the one request read root: each request
    reads only the view it names. ``sockets``: the service's socket directory (host path), the
    one service allowance (``socket_dirs`` on ``local``, ``socket_mounts`` at
    :data:`POSTGRES_IN_CONTAINER` on ``docker``)."""
    if isinstance(env, ImageEnv):
        return get_executor("docker", **{"workers": workers, **env.options}, min_isolation=min_isolation,
                            image=env.image, docker_host=env.docker_host, audit_hook=audit_hook,
                            read_mounts={str(views): VIEWS_IN_CONTAINER},
                            request_read_roots=[VIEWS_IN_CONTAINER],
                            socket_mounts={s: POSTGRES_IN_CONTAINER for s in sockets or []})
    # preloading a scientific stack (scikit-learn, scipy, pandas) takes the fork server tens of
    # seconds on a loaded 2-core machine: over the default 20 s start timeout (seen at load 13)
    return get_executor("local", workers=workers, min_isolation=min_isolation, python=str(env.python),
                        hide_packages=True, read_paths=sites, request_read_roots=[str(views)],
                        audit_hook=audit_hook, socket_dirs=sockets, preload=preload, sys_path=sites,
                        start_timeout=120.0 if preload else 20.0)


def _messages_mark(mark: str) -> str:
    """The mark of the runner's line of failure messages (never a prefix of ``mark``'s line)."""
    return mark[:-2] + "@M@"


def _tripwire_mark(mark: str) -> str:
    """The mark of the runner's tripwire line (what changed in pytest's reporting path)."""
    return mark[:-2] + "@T@"


def _result(sample: Sample, res: ExecResult, mark: str) -> SampleResult:
    tests: dict[str, str] = {}
    messages: dict[str, str] = {}
    mmark, tmark = _messages_mark(mark), _tripwire_mark(mark)
    tripped = ""
    for line in (res.stdout or "").splitlines():  # the last line with this sample's mark
        if line.startswith(tmark):
            tripped = line[len(tmark):][:600]
        elif line.startswith(mark):
            try:
                tests = json.loads(line[len(mark):])
            except ValueError:
                tests = {}
        elif line.startswith(mmark):
            try:
                found = json.loads(line[len(mmark):])
            except ValueError:
                found = {}
            messages = {str(k): str(v)[:300] for k, v in found.items()} \
                if isinstance(found, dict) else {}
    detail = (res.detail + "\n" + (res.stderr or "")[-500:]).strip()
    outcome = res.outcome.value
    if tripped and outcome != "infra_error":  # a claim only the sample's own run can make against itself
        outcome, detail = "sandbox_violation", ("the grading policy refused the candidate's code at run time, or "
                                                f"pytest's reporting path changed during the run: {tripped}")[:800]
    return SampleResult(sample.sample_id, sample.task["task_id"], outcome, tests, detail, res.duration_s,
                        res.isolation_label, res.backend, messages)
