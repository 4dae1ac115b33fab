"""The repository-level set of the self-align loop: the repo kind's function tasks.

A repo record (docs/proposals/scenarios/smart_coding/repo.md: a function of a real repository,
toolz, ELI5 or dataset, whose body the repository's own tests check) goes through the same loop
as a HumanEval record; what differs is where code and tests run:

* **What the model sees** (:func:`loop_prompt`): the repo kind's prompt (the nearest repository
  context, the file's name, the function's header and docstring), never the repository's tests.
* **Its code** (:func:`final_code`): the function it wrote, read like any repo answer
  (:func:`core.scenarios.repo.kind.answer_code`: a full ``def``).
* **Its tests** are units checked statically like HumanEval's (:mod:`.units`: parsed, never run
  here; invalid ones counted). The valid ones become one pytest module,
  :data:`UNITS_FILE` (assert rewriting off: pytest compiles exactly what :func:`.units.check_unit`
  compiled), placed at the root of a private copy-on-write view whose file holds the model's
  function injected by AST position (:mod:`core.scenarios.repo.view`,
  :func:`core.scenarios.repo.execute.run_samples`): each unit is a test function that imports
  the function from its module (:func:`target_import`) and runs the unit's asserts on it. One
  sandbox request runs them all in the repository's environment (``kernel`` isolation at
  least: the view walls rest on Landlock); the per-test outcomes give each unit's outcome, the
  ``E`` lines of a failing test's report its feedback message. A unit whose test never ran
  (the module did not import, the run timed out) gets the run's outcome (``error``,
  ``timeout``); one that ran no assert to completion is invalid (``ran_no_assert``).
* **The units' view holds no test of the repository** (:func:`blind_root`): it is made from a
  copy of the source without its test directories (``test``, ``tests``), test modules
  (``test_*.py``, ``*_test.py``), ``conftest.py`` files, compiled files, and whatever file a
  hidden test of the task names (the task's own file excepted). Since each request reads
  only its own view, nothing a unit's run reports -- the feedback of the next try -- can come
  from the hidden tests. Only a gold control's hidden units run in a view of the whole source.
* **What a run writes is never an infrastructure failure**: a run that ends ``infra_error`` is
  checked against trusted runs (:meth:`RepoUnitRunner._attributed`): the original function
  with a trivial test (fails too: the sandbox's fault, :class:`.sandbox.SandboxInfraError`),
  the same run again, then each unit alone against the original function (fails: that unit
  is invalid, ``harness:<detail>``) and against the model's function (fails: the function's
  fault, that unit ``error``). In this in-process tier the model's function and its units
  share the interpreter with pytest, so either can write the run's verdict; this attribution
  is what keeps such a verdict from becoming an infrastructure failure.
* **Hidden tests** are the repository's own (the task's FAIL_TO_PASS and PASS_TO_PASS node
  ids), graded by the repo kind's machinery in the same way (:func:`grade_hidden`), with the
  ``repo_tests`` metric's cache file, so the two never run the same sample twice.
* **Gold controls** (:func:`control_fields`): ``reference`` replies with the original function
  and, as its own tests, the hidden tests by node id (units ``repo-test:<node id>``, which only a
  control's try may name: :func:`check_units`; to a model's try such a unit is not Python, so
  invalid); ``broken`` replies with a body that raises and the same tests.

* **Methods** (``class_name`` set): the units module imports the class (:func:`target_import`)
  and a unit is valid when it calls the method as an attribute (``Table(db, "t").insert(...)``;
  for a dunder method, when it calls the class), besides the calls by name a function's units
  make (:func:`.units.calls_entry_point`). The model is asked for ``<Class>.<method>``
  (:func:`entry_label`).
* **Services** (``services: [postgres]``): every run of the task's tests -- units, hidden tests,
  mutants -- gets a database of its own on a private PostgreSQL server, exactly as the repo
  kind's runs do (:class:`core.scenarios.repo.postgres.PostgresService`, one per runner,
  started at the first such task and stopped with the runner; ``DATABASE_URL`` and ``PG*`` in
  the sample's environment).

Grading tier: ``in_process_confined`` (the repository's code, the model's function and its tests share
one interpreter in the sandbox, as for the repo kind). A task naming a service the repo kind
does not know is refused with a ConfigError; :func:`function_tasks` selects a tasks file's
usable tasks (optionally without methods or services).
"""
from __future__ import annotations

import ast
import fnmatch
import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from core.common import pyast
from core.common.errors import ConfigError
from core.common.jsonl import append_durably, open_append
from core.generation.reference import BROKEN_BODIES
from core.scenarios.repo.env import RepoEnv, record_env
from core.scenarios.repo.execute import Sample, SampleResult, default_views_dir, run_samples
from core.scenarios.repo.kind import SERVICES, answer_code
from core.scenarios.repo.postgres import PostgresService
from core.scenarios.repo.prompts import header_of, prompt_of, reference_code
from core.scenarios.repo.scoring import (EXECUTIONS_FILE, GRADING_VERSION, _key, _load_done,
                                         source_root)
from core.scenarios.selfalign.sandbox import INVALID, SandboxInfraError, UnitOutcome
from core.scenarios.selfalign.units import VALID, UnitCheck, check_unit, ran_nothing
from core.testenvmanager.sandbox.types import ExecutorClosedError

T = TypeVar("T")

logger = logging.getLogger(__name__)

#: the pytest module of a try's units, at the root of its view
UNITS_FILE = "test_selfalign_units.py"
#: a gold control's unit naming one of the repository's tests
HIDDEN_PREFIX = "repo-test:"
#: the cache of unit runs in the test case folder
REPO_UNITS_FILE = "selfalign_repo_units.jsonl"
#: isolation levels, weakest first (the sandbox's order)
_LEVELS = ("none", "process", "netns", "kernel", "full")
#: the trusted test of a probe run (:meth:`RepoUnitRunner._attributed`)
PROBE_FILE = "test_selfalign_probe.py"
PROBE_TEST = "def test_probe():\n    pass\n"
#: part of the unit cache's keys: bumped when how units are graded changes (2: a view without
#: the repository's tests, run-time assert counts, infra_error attributed by trusted runs)
UNITS_VERSION = 2
#: directories that hold a repository's tests, left out of the units' view whole
TEST_DIRS = frozenset({"test", "tests"})
#: files left out of the units' view wherever they are: test modules as pytest finds them by
#: default, pytest's per-directory plugins (fixtures, test helpers), compiled files
TEST_FILES = ("test_*.py", "*_test.py", "conftest.py", "*.pyc", "*.pyo")


def is_repo_record(record: Mapping[str, Any]) -> bool:
    """True for a repo kind record (``signature``, ``repo`` and a ``tests`` object)."""
    return "signature" in record and isinstance(record.get("repo"), Mapping) \
        and isinstance(record.get("tests"), Mapping)


def _unknown_services(record: Mapping[str, Any]) -> list[str]:
    return sorted(set(record.get("services") or []) - SERVICES)


def check_task(record: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` for a repo record the loop cannot run: one naming a service
    the repo kind does not know."""
    unknown = _unknown_services(record)
    if unknown:
        raise ConfigError(f"{record['task_id']}: needs the unknown service {unknown[0]!r}",
                          hint=f"known services: {', '.join(sorted(SERVICES))}")


def function_tasks(records: Iterable[Mapping[str, Any]], methods: bool = True,
                   services: bool = True) -> list[dict[str, Any]]:
    """The records the loop can run (:func:`check_task`); ``methods=False`` keeps module-level
    functions only, ``services=False`` only the tasks that need no service."""
    return [dict(r) for r in records
            if not _unknown_services(r)
            and (methods or not r.get("class_name")) and (services or not r.get("services"))]


def entry_label(record: Mapping[str, Any]) -> str:
    """How the loop names the task's function to the model: ``name``, or ``Class.name`` for a
    method."""
    owner = record.get("class_name")
    return f"{owner}.{record['name']}" if owner else str(record["name"])


def loop_prompt(record: Mapping[str, Any]) -> str:
    """What the model is shown: the repo kind's completion prompt (context, file, header)."""
    return prompt_of(record)


def hidden_tests(record: Mapping[str, Any]) -> list[str]:
    """The repository's tests of the task (FAIL_TO_PASS then PASS_TO_PASS node ids)."""
    tests = record["tests"]
    return [*tests.get("fail_to_pass", []), *tests.get("pass_to_pass", [])]


def final_code(raw_code: str, record: Mapping[str, Any]) -> str:
    """The function a reply's ``code`` field stands for (the repo kind's reading)."""
    return answer_code(raw_code, record)


def stub_code(record: Mapping[str, Any]) -> str:
    """What is graded when a try has no code: the header alone (fails as a function would)."""
    return answer_code("", record)


def _module_parts(record: Mapping[str, Any]) -> list[str]:
    """The dotted module of the task's file, as parts (import roots stripped)."""
    parts = list(Path(str(record["file"])).with_suffix("").parts)
    for root in record.get("env", {}).get("import_roots", ["."]):
        prefix = [p for p in Path(root).parts if p != "."]
        if prefix and parts[:len(prefix)] == prefix:
            parts = parts[len(prefix):]
            break
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return parts


def target_import(record: Mapping[str, Any]) -> str:
    """``from <module> import <name>`` for the task's function (for a method: its outermost
    class), the module named from its file and the environment's import roots
    (``src/pkg/m.py`` with root ``src`` -> ``pkg.m``)."""
    parts = _module_parts(record)
    owner = record.get("class_name")
    return f"from {'.'.join(parts)} import {str(owner).split('.')[0] if owner else record['name']}"


def check_units(tests: Sequence[str], record: Mapping[str, Any],
                control: bool = False) -> list[UnitCheck]:
    """Each test as a unit (:func:`.units.check_unit` against the loop prompt, the repository's
    own package importable besides, no count of calls: a unit reaches a method through its
    class, a function through its module too); a control's ``repo-test:<node id>`` naming one
    of the task's hidden tests is valid as it is."""
    hidden = set(hidden_tests(record))
    package = frozenset(_module_parts(record)[:1])  # the repository's own package: importable
    out = []
    for unit in tests:
        if control and unit.startswith(HIDDEN_PREFIX) and unit[len(HIDDEN_PREFIX):] in hidden:
            out.append(UnitCheck(VALID, unit))
        else:
            out.append(check_unit(unit, str(record["name"]), loop_prompt(record),
                                  owner=str(record["class_name"]) if record.get("class_name") else None,
                                  modules=package, count_calls=False))
    return out


def units_module(checks: Sequence[tuple[int, UnitCheck]], record: Mapping[str, Any]
                 ) -> tuple[str, dict[int, str]]:
    """The pytest module of the valid model-written units (index, check) and the node id of
    each: ``test_unit_<index>`` calls the unit's ``check`` on the imported function (a method:
    ``Class.name``, the function as the class holds it). pytest does not rewrite its asserts
    (``PYTEST_DONT_REWRITE``): it compiles what :func:`.units.check_unit` compiled, and each
    assert's ``got ...`` message is the unit's own."""
    target = entry_label(record)
    lines = ['"""PYTEST_DONT_REWRITE"""', target_import(record), ""]
    ids: dict[int, str] = {}
    for index, check in checks:
        tree = pyast.parse(check.test)
        for node in tree.body:  # judge_test's shape: its exception class, then def check
            if isinstance(node, ast.FunctionDef) and node.name == "check":
                node.name = f"_check_{index}"
        lines += ["", ast.unparse(tree), "", "",
                  f"def test_unit_{index}():", f"    _check_{index}({target})", ""]
        ids[index] = f"{UNITS_FILE}::test_unit_{index}"
    return "\n".join(lines) + "\n", ids


def _test_file(rel: str) -> bool:
    parts = Path(rel).parts
    return any(p in TEST_DIRS for p in parts[:-1]) or \
        any(fnmatch.fnmatch(parts[-1], pattern) for pattern in TEST_FILES)


def blind_root(root: Path, also: Iterable[str] = (), cache: Path | None = None) -> Path:
    """A copy of ``root`` (hard links, made once and kept) without its tests: directories named
    in :data:`TEST_DIRS`, files matching :data:`TEST_FILES`, ``__pycache__`` and ``.git``, and
    the files ``also`` names (paths relative to ``root``). The units' views are made from it."""
    extra = sorted({str(Path(p)) for p in also if not _test_file(str(p))})
    digest = hashlib.sha256(json.dumps([str(root.resolve()), extra, UNITS_VERSION]).encode())
    base = cache or default_views_dir().parent / "selfalign-units-src"
    final = base / digest.hexdigest()[:24]
    if final.is_dir():
        return final
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=base))
    try:
        for dirpath, dirnames, filenames in os.walk(root):
            rel = os.path.relpath(dirpath, root)
            dirnames[:] = [d for d in dirnames
                           if d not in TEST_DIRS and d not in (".git", "__pycache__")]
            target = tmp if rel == "." else tmp / rel
            target.mkdir(exist_ok=True)
            for name in filenames:
                path = name if rel == "." else os.path.join(rel, name)
                if _test_file(path) or str(Path(path)) in extra:
                    continue
                src = os.path.join(dirpath, name)
                if os.path.islink(src):
                    os.symlink(os.readlink(src), target / name)
                    continue
                try:
                    os.link(src, target / name)
                except OSError:
                    shutil.copy2(src, target / name)
        tmp.chmod(0o755)
        try:
            tmp.rename(final)
        except OSError:  # made meanwhile by another run: theirs is the same
            if not final.is_dir():
                raise
        return final
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def control_fields(record: Mapping[str, Any], variant: str) -> dict[str, Any]:
    """A gold control's reply fields (module docstring)."""
    code = reference_code(record) if variant == "reference" \
        else header_of(record) + BROKEN_BODIES["raise"]
    return {"code": code, "tests": [HIDDEN_PREFIX + t for t in hidden_tests(record)]}


def _statuses(tests: Mapping[str, str], node: str) -> list[tuple[str, str]]:
    return [(k, v) for k, v in tests.items()
            if k == node or k.startswith((node + "[", node + "::"))]


class RepoUnitRunner:
    """Runs a try's units against its code in a view of the repository (module docstring),
    with an on-disk cache keyed by (task, source, code, units, timeout). Threads share it:
    one run at a time."""

    def __init__(self, sources: Mapping[str, Path], cache_path: Path | None = None,
                 timeout: float = 120.0, min_isolation: str = "kernel",
                 workers: int = 1) -> None:
        self.sources = {name: Path(p) for name, p in sources.items()}
        self.cache_path = cache_path
        self.timeout = timeout
        self.min_isolation = min_isolation if _LEVELS.index(min_isolation) \
            >= _LEVELS.index("kernel") else "kernel"
        self.workers = workers
        self.runs = 0
        self._roots: dict[str, Path] = {}
        self._envs: dict[str, RepoEnv] = {}
        self._cache: dict[str, list[dict[str, Any]]] = {}
        self._postgres: PostgresService | None = None
        self._lock = threading.Lock()
        if cache_path is not None and cache_path.exists():
            for line in cache_path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    self._cache[row["key"]] = row["units"]
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut by a kill: that run is made again

    def root(self, record: Mapping[str, Any]) -> Path:
        """The materialised source of the record's repository (checked by content hash)."""
        name, want = str(record["repo"]["name"]), str(record["repo"]["content_hash"])
        if want not in self._roots:
            if name not in self.sources:
                raise ConfigError(f"no source for repository {name!r}",
                                  hint=f"add {name}: <archive, bundle or folder> to sources "
                                       "(or put <name>.tar.gz in sources_dir)")
            self._roots[want] = source_root(self.sources[name], want)
        return self._roots[want]

    def units_root(self, record: Mapping[str, Any]) -> Path:
        """The source without its tests (:func:`blind_root`) that the model's units run in:
        the hidden tests' files go too, whatever their names (the task's own file stays)."""
        root = self.root(record)
        files = {t.split("::")[0] for t in hidden_tests(record)} - {str(record["file"])}
        return blind_root(root, sorted(f for f in files if (root / f).exists()))

    def env(self, record: Mapping[str, Any]) -> RepoEnv:
        """The repository's environment (a cached venv; created once, needing the index)."""
        env = record.get("env", {})
        key = json.dumps([env.get("requirements") or [], env.get("project")], sort_keys=True)
        if key not in self._envs:
            self._envs[key] = record_env(record)
        return self._envs[key]

    def service(self, record: Mapping[str, Any]) -> PostgresService | None:
        """The PostgreSQL service when the record needs one (started at the first such record,
        stopped by :meth:`close`), else None."""
        if "postgres" not in (record.get("services") or []):
            return None
        if self._postgres is None:
            service = PostgresService()
            service.start()
            self._postgres = service
        return self._postgres

    def _key(self, record: Mapping[str, Any], code: str, tests: list[str]) -> str:
        doc = [record["task_id"], record["repo"]["content_hash"], code, tests, self.timeout,
               record["tests"].get("deselect", []), GRADING_VERSION, UNITS_VERSION,
               *([sorted(record["services"])] if record.get("services") else [])]
        return hashlib.sha256(json.dumps(doc).encode("utf-8")).hexdigest()

    def run(self, code: str, checks: Sequence[UnitCheck],
            record: Mapping[str, Any]) -> list[UnitOutcome]:
        """The outcome of every unit (in order) against ``code`` (a full ``def``).

        Raises:
            SandboxInfraError: the sandbox failed (nothing of the run is cached).
            ConfigError: the task cannot run here (:func:`check_task`, no source).
        """
        check_task(record)
        with self._lock:
            return self._run(code, checks, record)

    def _run(self, code: str, checks: Sequence[UnitCheck],
             record: Mapping[str, Any]) -> list[UnitOutcome]:
        out: dict[int, UnitOutcome] = {}
        valid: list[tuple[int, UnitCheck]] = []
        for i, check in enumerate(checks):
            if not check.valid:
                out[i] = UnitOutcome(i, INVALID, reason=check.status)
            elif not code.strip():
                out[i] = UnitOutcome(i, "syntax_error", detail="no code")
            else:
                valid.append((i, check))
        if valid:
            key = self._key(record, code, [c.test for _, c in valid])
            rows = self._cache.get(key)
            ran = rows is None
            if rows is None:
                rows = self._rows(code, valid, record)
                self._cache[key] = rows
                self._append(key, rows)
            for (i, _), row in zip(valid, rows):
                out[i] = UnitOutcome(i, row["outcome"], reason=row.get("reason", ""),
                                     detail=row["detail"], output="", ran=ran,
                                     duration_s=row["duration_s"])
        return [out[i] for i in range(len(checks))]

    def _rows(self, code: str, valid: list[tuple[int, UnitCheck]],
              record: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Each valid unit's row: a gold control's hidden units in a view of the whole source,
        model-written units in a view without the repository's tests (:meth:`units_root`)."""
        hidden = [(i, c) for i, c in valid if c.test.startswith(HIDDEN_PREFIX)]
        written = [(i, c) for i, c in valid if not c.test.startswith(HIDDEN_PREFIX)]
        rows: dict[int, dict[str, Any]] = {}
        if hidden:
            rows.update(self._attributed(code, hidden, record, self.root(record)))
        if written:
            rows.update(self._attributed(code, written, record, self.units_root(record)))
        return [rows[i] for i, _ in valid]

    def _attributed(self, code: str, units: list[tuple[int, UnitCheck]],
                    record: Mapping[str, Any], root: Path) -> dict[int, dict[str, Any]]:
        """The rows of one run of ``units`` against ``code`` in a view of ``root``; when it ends
        ``infra_error``, whose fault it was (module docstring).

        Raises:
            SandboxInfraError: the original function with a trivial test fails too.
        """
        res, nodes = self._execute(code, units, record, root)
        if res.outcome != "infra_error":
            return {i: _unit_row(res, nodes[i]) for i, _ in units}
        control, _ = self._execute(reference_code(record), [], record, root)
        if control.outcome == "infra_error":
            raise SandboxInfraError(f"sandbox infra_error: {control.detail[:200]}")
        res, nodes = self._execute(code, units, record, root)
        if res.outcome != "infra_error":
            return {i: _unit_row(res, nodes[i]) for i, _ in units}
        rows = {}
        for unit in units:  # each unit alone, against the original function and this code
            alone, _ = self._execute(reference_code(record), [unit], record, root)
            if alone.outcome == "infra_error":  # the unit breaks the harness whatever the code
                rows[unit[0]] = {"duration_s": 0.0, "outcome": INVALID,
                                 "reason": "harness:" + " ".join(alone.detail.split())[:120],
                                 "detail": alone.detail[:500]}
                continue
            res, nodes = self._execute(code, [unit], record, root)
            rows[unit[0]] = _unit_row(res, nodes[unit[0]]) if res.outcome != "infra_error" \
                else {"duration_s": 0.0, "outcome": "error",  # the code did: no pass
                      "detail": f"the code broke the test harness: {res.detail}"[:500]}
        return rows

    def _execute(self, code: str, units: list[tuple[int, UnitCheck]], record: Mapping[str, Any],
                 root: Path) -> tuple[SampleResult, dict[int, str]]:
        """One run of ``units`` (none: the trusted probe test alone) against ``code`` in a view of
        ``root``: its result and each unit's node id."""
        hidden = {i: c.test[len(HIDDEN_PREFIX):] for i, c in units if c.test.startswith(HIDDEN_PREFIX)}
        written = [(i, c) for i, c in units if not c.test.startswith(HIDDEN_PREFIX)]
        module, ids = units_module(written, record)
        files = [{"file": UNITS_FILE, "code": module, "tests": list(ids.values())}] if written \
            else [] if units else [{"file": PROBE_FILE, "code": PROBE_TEST,
                                    "tests": [f"{PROBE_FILE}::test_probe"]}]
        task = {**record, "tests": {"fail_to_pass": list(hidden.values()), "pass_to_pass": [],
                                    "deselect": record["tests"].get("deselect", [])},
                "model_written_tests": files}
        sample = Sample(f"{record['task_id']}#units", task, code)
        res = _retrying(lambda: next(iter(run_samples(
            [sample], root, self.env(record), default_views_dir(),
            workers=self.workers, timeout=self.timeout, min_isolation=self.min_isolation,
            preload=False, service=self.service(record)))))  # one sample: preloading would not pay
        self.runs += 1
        return res, {**hidden, **ids}

    def _append(self, key: str, rows: list[dict[str, Any]]) -> None:
        if self.cache_path is None:
            return
        append_durably(self.cache_path, json.dumps({"key": key, "units": rows}) + "\n")

    def close(self) -> None:
        """Stop the PostgreSQL service if one was started (each run starts and stops its own
        executor)."""
        if self._postgres is not None:
            service, self._postgres = self._postgres, None
            service.close()

    def __enter__(self) -> "RepoUnitRunner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: attempts at starting a run whose executor did not start (a loaded machine)
START_ATTEMPTS = 3


def _retrying(run: Callable[[], T]) -> T:
    """``run()``, again when the sandbox's executor did not start (``ExecutorClosedError``,
    an infrastructure failure: the fork server sent no hello in time), at most
    :data:`START_ATTEMPTS` times; then :class:`SandboxInfraError` (never scored)."""
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return run()
        except ExecutorClosedError as exc:
            logger.warning("the sandbox did not start (attempt %d of %d): %s", attempt,
                           START_ATTEMPTS, exc)
            if attempt == START_ATTEMPTS:
                raise SandboxInfraError(f"the sandbox did not start: {exc}") from exc
    raise AssertionError("unreachable")


def _unit_row(res: SampleResult, node: str) -> dict[str, Any]:
    """One unit's outcome in a run: ``passed`` when every test of its node passed; ``failed``
    (with the report's message) when one failed or was skipped; the run's own outcome
    (``error`` for a run that failed without running it) when it never ran."""
    found = _statuses(res.tests, node)
    base = {"duration_s": round(res.duration_s, 4)}
    if not found:
        outcome = res.outcome if res.outcome not in ("passed", "failed") else "error"
        return {**base, "outcome": outcome,
                "detail": (f"the test did not run: {res.detail}")[:500]}
    bad = [(k, v) for k, v in found if v != "passed"]
    if not bad:
        return {**base, "outcome": "passed", "detail": ""}
    k, v = bad[0]
    message = res.messages.get(k, "") if v == "failed" else v
    nothing = ran_nothing("failed", message) if v == "failed" else None
    if nothing is not None:  # the judge program's own end: the unit checked nothing
        return {**base, "outcome": INVALID, "reason": nothing, "detail": message[:500]}
    return {**base, "outcome": "failed", "detail": message[:500]}


def resolve_sources(sources: Mapping[str, str] | None, base: Path | None = None,
                    sources_dir: str | os.PathLike[str] | None = None) -> dict[str, Path]:
    """Repository name -> source path: ``sources`` entries (relative to ``base``), and every
    ``<name>.tar.gz`` (or folder, bundle) in ``sources_dir`` under its name without suffix."""
    out: dict[str, Path] = {}
    if sources_dir is not None:
        folder = Path(sources_dir)
        if not folder.is_dir():
            raise ConfigError(f"sources_dir {folder} is not a folder")
        for path in sorted(folder.iterdir()):
            name = path.name
            for suffix in (".tar.gz", ".tgz", ".bundle", ".zip"):
                if name.endswith(suffix):
                    name = name[:-len(suffix)]
                    break
            out[name] = path
    for name, spec in (sources or {}).items():
        out[str(name)] = ((base or Path(".")) / spec).resolve()
    return out


def grade_hidden(items: Sequence[tuple[Mapping[str, Any], str]], sources: Mapping[str, Path],
                 workspace: Path, timeout: float = 120.0, min_isolation: str = "kernel",
                 workers: int = 2, runner: RepoUnitRunner | None = None) -> list[bool]:
    """Whether each (record, code) passes the record's own tests, run like the ``repo_tests``
    metric (a view, the environment, the sandbox) and cached in its file
    (:data:`core.scenarios.repo.scoring.EXECUTIONS_FILE`, sample index 0), in order.

    Raises:
        SandboxInfraError: a run ended ``infra_error`` (not cached).
    """
    log_path = workspace / EXECUTIONS_FILE
    done = _load_done(log_path)
    helper = runner or RepoUnitRunner(sources, timeout=timeout, min_isolation=min_isolation)
    keys = []
    pending: dict[str, list[tuple[str, Sample]]] = {}
    for n, (record, code) in enumerate(items):
        check_task(record)
        rec = {**record, "id": record["task_id"]}
        key = _key(rec, 0, code)
        keys.append(key)
        if key not in done and all(key != k for group in pending.values() for k, _ in group):
            group = pending.setdefault(json.dumps([record["repo"]["content_hash"],
                                                   sorted(record.get("services") or [])]), [])
            group.append((key, Sample(f"{record['task_id']}#{n}", rec, code)))
    with open_append(log_path) as log:
        for items_ in pending.values():
            first = items_[0][1].task
            by_id = {s.sample_id: k for k, s in items_}
            results = _retrying(lambda: list(run_samples(
                [s for _, s in items_], helper.root(first), helper.env(first),
                default_views_dir(), workers=workers, timeout=timeout,
                min_isolation=helper.min_isolation, service=helper.service(first))))
            for res in results:
                if res.outcome == "infra_error":
                    raise SandboxInfraError(f"sandbox infra_error: {res.detail[:200]}")
                done[by_id[res.sample_id]] = res
                log.write(json.dumps({"key": by_id[res.sample_id], **res.__dict__}) + "\n")
                log.flush()
    return [done[k].outcome == "passed" for k in keys]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m core.scenarios.selfalign.repo TASKS.jsonl [...] -o OUT.jsonl [--ids ID ...]``:
    the tasks the loop can run (:func:`function_tasks`), optionally only the named ones."""
    import argparse  # noqa: PLC0415 - the command line only

    parser = argparse.ArgumentParser(description="Select the repo tasks the self-align loop "
                                                 "can run (functions and methods, with or "
                                                 "without the PostgreSQL service).")
    parser.add_argument("tasks", type=Path, nargs="+")
    parser.add_argument("--functions-only", action="store_true", help="leave methods out")
    parser.add_argument("--no-services", action="store_true",
                        help="leave out the tasks that need a service (PostgreSQL)")
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--ids", nargs="*", help="only these task ids, in this order")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    records = [json.loads(line) for path in args.tasks
               for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    chosen = function_tasks(records, methods=not args.functions_only, services=not args.no_services)
    if args.ids:
        by_id = {r["task_id"]: r for r in chosen}
        missing = [i for i in args.ids if i not in by_id]
        if missing:
            parser.error(f"not a usable task: {missing[0]}")
        chosen = [by_id[i] for i in args.ids]
    args.output.write_text("".join(json.dumps(r) + "\n" for r in chosen), encoding="utf-8")
    logger.info("%d of %d tasks written to %s", len(chosen), len(records), args.output)
    return 0


if __name__ == "__main__":
    import sys  # noqa: PLC0415

    sys.exit(main())
