"""``ianvs dataset repo``: reverse-engineer function-level tasks from a repository and its own tests.

Steps (each bounded so a build on a shared machine stays predictable; each logs its counts):

1. materialise the repository (:mod:`.source`) in the build's own folder (:mod:`.workdir`);
2. read what it declares (:mod:`.project`): build its package with its PEP 517 backend, find
   its import roots (``src/`` layouts) and its declared test dependencies, resolve them with the
   user's ``--requirement`` pins into exact pins; create the environment (:mod:`.env`) with a
   metadata-only stub of the package (``importlib.metadata`` works, the code comes from the tree);
   collect the selected tests once and disable, in every later run (``-p no:NAME``, recorded in
   every task), the installed pytest plugins none of them needs (:mod:`.plugins`);
3. run the suite once with per-test coverage contexts (:mod:`.coverage_map`); tests that do not
   pass here are the *baseline failures* and are excluded everywhere. A baseline in which no test
   passes stops the build (:class:`BuildError`) with pytest's collection errors or first failures
   (bounded), the environment used and the next step to try;
4. for every function with a real body (:mod:`.functions`) covered by passing tests, blank the
   body (docstring kept) and run only its covering tests (at most ``max_covering``, with a
   timeout); keep the task iff at least one fails (FAIL_TO_PASS). A sample of covering tests that
   still pass is recorded as PASS_TO_PASS;
   A kept task whose reference body is already in what its prompt shows (the context's last
   ``PROMPT_CONTEXT_CHARS`` characters and the header: a duplicate or copy-paste sibling
   function) is dropped by the leak check (:mod:`core.scenarios.leak_views`; counted as
   ``dropped.answer_in_prompt`` and per reason under ``leaks``);
5. optionally (``opts.authoring``) let a model write problem statements and extra tests, kept
   only when validated (:mod:`.authoring`); a written problem that shows the body is masked
   (the leak check again);
6. write one JSON record per task (see :func:`task_record`). A build that keeps no task is a
   :class:`BuildError` too (counts and reasons in the message), never an empty file and exit 0.

**Resumable.** Progress goes to ``<output>.progress`` (JSON lines, flushed per line): the
resolved environment, the baseline's counts and the functions to check, then one line per checked
function. A rerun with the same source and options (its *fingerprint*) after a kill continues from
there: only the unchecked functions run; ``opts.fresh`` starts over. The file is removed once the
output is written, and when the build stops with an error before its baseline or with a
:class:`BuildError` (nothing worth resuming).

Contract: a kept task's reference body passed all its tests in the baseline and its blanked body
failed every FAIL_TO_PASS test in the builder's run. ``tests/scenarios/repo`` re-checks both on
every shipped file (gold controls), in the sandbox.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from core.common.errors import IanvsError
from core.common.jsonl import open_append
from core.scenarios.leak_views import screen_all, tally
from core.scenarios.repo.authoring import AuthoringOptions, author
from core.scenarios.repo.coverage_map import measure
from core.scenarios.repo.env import TEST_TOOLS, RepoEnv, ensure_env
from core.scenarios.repo.functions import FunctionSite, blank, context_for, find_functions
from core.scenarios.repo.plugins import choose_plugins, pytest_plugin_args
from core.scenarios.repo.postgres import PostgresService, sweep_stale
from core.scenarios.repo.project import (ProjectFacts, inspect_project, requirements_of,
                                         resolve_requirements)
from core.scenarios.repo.source import RepoSource, materialise
from core.scenarios.repo.testrun import RunResult, config_file, run_tests
from core.scenarios.repo.view import make_view
from core.scenarios.repo.workdir import BuildDir, kill_inside
from core.testenvmanager.sandbox.runner import WITNESS_MARK

if TYPE_CHECKING:
    from core.scenarios.repo.execute import SampleResult

__all__ = ["BuildOptions", "BuildReport", "BuildError", "build", "task_record"]

LOG = logging.getLogger(__name__)

_SKIP_PARTS = {"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "build"}
#: characters of pytest text quoted in a :class:`BuildError`
_QUOTE = 1200
_PROGRESS_VERSION = 2  # 2: the pytest plugin choice (a stage of its own) precedes the baseline
#: characters of the sandbox's message kept per dropped task (log, report, final error)
_REFUSAL = 600


class BuildError(IanvsError):
    """The build cannot produce a task (no test passes, or no function is kept): says why."""


@dataclass
class BuildOptions:
    repo: str
    output: Path
    rev: str | None = None
    requirements: list[str] = field(default_factory=list)
    env: Path | None = None
    cache_dir: Path | None = None
    test_paths: list[str] = field(default_factory=list)
    deselect: list[str] = field(default_factory=list)
    max_tasks: int = 200
    max_covering: int = 40
    pass_to_pass: int = 10
    timeout: float = 60.0
    suite_timeout: float = 1800.0
    jobs: int = 2
    licence: str | None = None
    #: services started for the build's test runs (``postgres``: one database per run, its URL in
    #: ``DATABASE_URL``/``PG*`` of the test process); recorded in every task
    services: list[str] = field(default_factory=list)
    authoring: AuthoringOptions | None = None  # --llm-problems / --llm-tests
    #: the package's declarations (:mod:`.project`); ``None`` = the automatic choice
    extras: list[str] | None = None
    groups: list[str] | None = None
    declared_deps: bool = True
    project_version: str | None = None
    #: build the package to learn its name, modules and requirements (``--no-build``: no)
    build_package: bool = True
    import_roots: list[str] | None = None
    #: ignore ``<output>.progress`` and start over
    fresh: bool = False
    #: run every kept task's reference in the sandbox, as the job will (``--no-sandbox-check``: no)
    sandbox_check: bool = True
    #: where build folders go (default :func:`.workdir.default_builds_dir`)
    builds_dir: Path | None = None
    #: pytest plugins (entry-point names) kept enabled even when no selected test needs them
    #: (``--pytest-plugin``; :mod:`.plugins` decides for the others)
    keep_plugins: list[str] = field(default_factory=list)


@dataclass
class BuildReport:
    """Counts of every stage (``as_dict`` is printed by the CLI)."""
    collected: int = 0
    passed: int = 0
    skipped: int = 0
    collection_errors: int = 0
    functions: int = 0
    covered: int = 0
    blanked: int = 0
    kept: int = 0
    baseline_failures: list[str] = field(default_factory=list)
    dropped_no_failure: int = 0
    dropped_max_tasks: int = 0
    dropped_sandbox: int = 0
    dropped_leak: int = 0
    #: leak-check counts per ``leak_masked:`` / ``leak_dropped:`` reason (:mod:`core.scenarios.leak_views`)
    leaks: Counter[str] = field(default_factory=Counter)
    sandbox_tests_dropped: int = 0
    not_covered: int = 0
    unparsable_files: int = 0
    resumed: int = 0
    seconds: float = 0.0
    authoring: dict[str, object] | None = None
    #: the pytest plugins disabled in every run (``-p no:NAME``; :mod:`.plugins`)
    plugins_disabled: list[str] = field(default_factory=list)
    #: what the sandbox said about the first reference it refused (outcome: message), if any
    sandbox_refusal: str = ""

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "collected": self.collected, "passed": self.passed, "baseline_failures": len(self.baseline_failures),
            "skipped": self.skipped, "collection_errors": self.collection_errors,
            "functions": self.functions, "covered": self.covered, "blanked": self.blanked, "kept": self.kept,
            "dropped": {"not_covered_by_a_passing_test": self.not_covered,
                        "blank_still_passes": self.dropped_no_failure,
                        "reference_fails_in_sandbox": self.dropped_sandbox,
                        "answer_in_prompt": self.dropped_leak,
                        "over_max_tasks": self.dropped_max_tasks},
            "leaks": tally(self.leaks),
            "tests_left_out_in_sandbox": self.sandbox_tests_dropped,
            "dropped_blank_still_passes": self.dropped_no_failure,
            "unparsable_files": self.unparsable_files, "resumed_checks": self.resumed,
            "pytest_plugins_disabled": self.plugins_disabled,
            "seconds": round(self.seconds, 1)}
        if self.sandbox_refusal:
            out["sandbox_refusal"] = self.sandbox_refusal
        if self.authoring is not None:
            out["llm"] = self.authoring
        return out


def _candidate_files(root: Path) -> list[Path]:
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if set(rel.parts[:-1]) & _SKIP_PARTS or rel.name.startswith(("test_", "conftest")) \
                or rel.name.endswith("_test.py") or rel.name in ("setup.py", "versioneer.py", "_version.py"):
            continue
        out.append(path)
    return out


@dataclass
class _Environment:
    """What step 2 decided (stored in the progress file, recorded in every task);
    ``pytest_plugins``: the plugin choice made right after (:mod:`.plugins`), ``None`` when
    none was made (the collection run did not report)."""
    requirements: list[str]
    import_roots: list[str]
    project: dict[str, str] | None
    pytest_plugins: dict[str, list[str]] | None = None


def task_record(src: RepoSource, env: RepoEnv, rel: str, text: str, site: FunctionSite,
                f2p: list[str], p2p: list[str], opts: BuildOptions,
                decided: _Environment | None = None) -> dict[str, object]:
    """The JSON record of one task (field names are the dataset's contract; see docs).
    ``env.requirements`` are the pins the environment was made from; ``env.import_roots`` (when
    not just the top folder) and ``env.project`` (the package's metadata stub) tell the job how to
    rebuild it and where the package is imported from; ``env.pytest_plugins`` (when the build
    chose) which installed pytest plugins every run disables (:mod:`.plugins`)."""
    env_rec: dict[str, object] = {"requirements": decided.requirements if decided else opts.requirements,
                                  "pins": env.pins}
    if decided is not None and decided.import_roots != ["."]:
        env_rec["import_roots"] = decided.import_roots
    if decided is not None and decided.project:
        env_rec["project"] = decided.project
    if decided is not None and decided.pytest_plugins is not None:
        env_rec["pytest_plugins"] = decided.pytest_plugins
    return {
        "task_id": f"{src.name}/{rel}::{site.qualname}", "kind": "repo",
        "repo": {**src.identity(), "licence": opts.licence},
        "env": env_rec,
        "file": rel, "file_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "qualname": site.qualname, "name": site.name, "class_name": site.class_name,
        "position": {"def_line": site.def_line, "body_start": site.body_start, "end_line": site.end_line},
        "signature": site.signature, "docstring": site.docstring,
        "context": context_for(text, site),
        "reference": site.body_text(text),
        "tests": {"fail_to_pass": f2p, "pass_to_pass": p2p, "deselect": opts.deselect},
        "problem": None, "model_written_tests": [],
        "services": list(opts.services),
    }


def _guess_roots(root: Path) -> list[str]:
    src = root / "src"
    if src.is_dir() and any(p.suffix == ".py" or (p / "__init__.py").is_file() for p in src.iterdir()):
        return ["src"]
    return ["."]


def _decide_environment(src: RepoSource, opts: BuildOptions, work: Path) -> tuple[_Environment, ProjectFacts | None]:
    """Step 2 (see the module docstring); every choice logged."""
    facts = None
    packaged = any((src.root / f).is_file() for f in ("pyproject.toml", "setup.py"))
    if opts.build_package and not packaged:
        LOG.info("no pyproject.toml or setup.py: the tree is not a package, nothing to build; its tests import it "
                 "from the top folder and its requirements come only from --requirement")
    elif opts.build_package:
        facts = inspect_project(src.root, work, opts.project_version, opts.extras, opts.groups, opts.declared_deps)
    else:
        LOG.info("--no-build: the package is not built; its runtime and test requirements come only from --requirement")
    roots = opts.import_roots or (facts.import_roots if facts else _guess_roots(src.root))
    if opts.import_roots:
        LOG.info("import roots (--import-root): %s", ", ".join(roots))
    if opts.env is not None:
        LOG.info("using the existing environment %s as it is (nothing installed, no metadata stub)", opts.env)
        return _Environment(list(opts.requirements), roots, None), facts
    wanted = [*(requirements_of(facts) if facts else []), *opts.requirements]
    LOG.info("resolving %d requirement(s) with pip: %s", len(wanted), ", ".join(wanted) or "none")
    pins = resolve_requirements(wanted, TEST_TOOLS, work, exclude=facts.name if facts else None)
    LOG.info("environment pins: %s (+ %s)", ", ".join(pins) or "none", ", ".join(TEST_TOOLS))
    return _Environment(pins, roots, facts.stub() if facts else None), facts


def _quote(text: str, limit: int = _QUOTE) -> str:
    text = text.strip()
    return text if len(text) <= limit else "..." + text[-limit:]


def _next_step(run: RunResult, facts: ProjectFacts | None, decided: _Environment) -> str:
    text = "\n".join([run.output, *(t for _, t in run.errors), *(t for _, t in run.failures)])
    missing = re.findall(r"No module named '([\w.]+)'", text)
    if missing:
        mod = missing[0].split(".")[0]
        if facts is not None and mod in facts.modules or any((Path(r) / mod).exists() for r in decided.import_roots):
            return (f"the package's own module {mod!r} does not import from the import roots "
                    f"{decided.import_roots}: give --import-root DIR (the folder holding {mod}/)")
        return (f"module {mod!r} is not installed: add --requirement {mod}==<version> (the distribution's name "
                "may differ), or --extra/--group naming the declared group that has it")
    fixture = re.findall(r"fixture '(\w+)' not found", text)
    if fixture:
        return (f"fixture {fixture[0]!r} comes from a pytest plugin that is not installed: add it with "
                "--requirement <plugin>==<version>")
    if run.timed_out:
        return "the suite ran out of time: raise --suite-timeout, or choose fast tests with --tests"
    if run.exitstatus is None:
        return "pytest did not start (see its output above): fix the configuration or the missing dependency"
    if run.collected == 0 and not run.errors:
        return "pytest collected no test: name the test folder or files with --tests PATH"
    if run.errors:
        return "fix the import errors above (a missing dependency: --requirement; tests needing a service: --service)"
    return ("every collected test failed or was skipped: read the first failures above; tests that need the "
            "network or a service can be left out with --deselect")


def _baseline_error(run: RunResult, facts: ProjectFacts | None, decided: _Environment,
                    env: RepoEnv, src: RepoSource) -> BuildError:
    outcomes = list(run.outcomes.values())
    counts = (f"{run.collected} collected, {outcomes.count('passed')} passed, {outcomes.count('failed')} failed, "
              f"{outcomes.count('skipped')} skipped, {len(run.errors)} collection error(s)"
              + (", timed out" if run.timed_out else "") +
              (f", pytest exit status {run.exitstatus}" if run.exitstatus is not None else ", pytest did not finish"))
    parts = [f"baseline of {src.name}: {counts}; no test passed, so no task can be built."]
    for nodeid, text in run.errors[:3]:
        parts.append(f"collection error in {nodeid or '<session>'}:\n{_quote(text)}")
    if not run.errors:
        for nodeid, text in run.failures[:2]:
            parts.append(f"first failure {nodeid}:\n{_quote(text, 800)}")
    if not run.errors and not run.failures and run.output.strip():
        parts.append(f"pytest output (end):\n{_quote(run.output)}")
    parts.append(f"environment: {env.root} (python {env.python}); requirements: "
                 f"{', '.join(decided.requirements) or 'none'} + {', '.join(TEST_TOOLS)}; "
                 f"import roots: {', '.join(decided.import_roots)}; pytest config: "
                 f"{Path(config_file(src.root)).name}")
    return BuildError("\n".join(parts), hint="next step: " + _next_step(run, facts, decided))


def _fingerprint(src: RepoSource, opts: BuildOptions) -> str:
    keyed = {"content": src.content_hash, "commit": src.commit, "requirements": sorted(opts.requirements),
             "env": str(opts.env) if opts.env else None, "tests": opts.test_paths, "deselect": opts.deselect,
             "max_covering": opts.max_covering, "pass_to_pass": opts.pass_to_pass, "timeout": opts.timeout,
             "services": sorted(opts.services), "extras": opts.extras, "groups": opts.groups,
             "declared": opts.declared_deps, "version": opts.project_version, "build": opts.build_package,
             "roots": opts.import_roots, "licence": opts.licence, "keep_plugins": sorted(opts.keep_plugins),
             "v": _PROGRESS_VERSION}
    return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:20]


class _Progress:
    """``<output>.progress``: append-only JSON lines (see the module docstring)."""

    def __init__(self, path: Path, fingerprint: str, fresh: bool) -> None:
        self.path = path
        self.environment: dict[str, Any] | None = None
        self.plugins: dict[str, Any] | None = None
        self.baseline: dict[str, Any] | None = None
        self.checks: dict[str, dict[str, Any] | None] = {}
        lines = path.read_text(errors="replace").splitlines() if path.is_file() and not fresh else []
        entries = []
        for line in lines:
            try:
                entries.append(json.loads(line))
            except ValueError:  # a line torn by a kill
                continue
        if entries and entries[0].get("fingerprint") == fingerprint:
            for e in entries[1:]:
                if e.get("stage") == "environment":
                    self.environment = e
                elif e.get("stage") == "plugins":
                    self.plugins = e
                elif e.get("stage") == "baseline":
                    self.baseline = e
                elif e.get("stage") == "check":
                    self.checks[e["key"]] = e.get("record")
            LOG.info("resuming the build from %s: %s, %s, %d function(s) already checked", path,
                     "environment known" if self.environment else "environment to decide",
                     "baseline known" if self.baseline else "baseline to run", len(self.checks))
        else:
            if entries:
                LOG.info("%s belongs to another source or other options: starting over", path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"fingerprint": fingerprint}) + "\n")
        self._fh = open_append(path)

    def add(self, entry: dict[str, Any]) -> None:
        self._fh.write(json.dumps(entry, sort_keys=True) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


def _key(rel: str, site_qualname: str, def_line: int) -> str:
    return f"{rel}::{site_qualname}@{def_line}"


def _tests(record: dict[str, object]) -> dict[str, list[str]]:
    """A task record's ``tests`` (``fail_to_pass``, ``pass_to_pass``), typed."""
    return cast("dict[str, list[str]]", record["tests"])


def _refusal(res: SampleResult) -> str:
    """What the sandbox said about a reference run that did not pass: its outcome, the
    sandbox's own message (for a kill: what the kernel refused and, where the process reported
    it, the action and the code that attempted it; the stderr tail without the witness's raw
    line, which the message already quotes) and the first failed test's assertion lines; at
    most :data:`_REFUSAL` characters, on one line."""
    detail = "\n".join(line for line in res.detail.splitlines() if not line.startswith(WITNESS_MARK))
    parts = [detail, *(f"{t}: {m}" for t, m in list(res.messages.items())[:1])]
    text = " | ".join(" ".join(p.split()) for p in parts if p.strip())
    return f"{res.outcome}: {text}"[:_REFUSAL]


def _sandbox_check(records: list[dict[str, object]], src: RepoSource, env: RepoEnv,
                   pg: PostgresService | None, opts: BuildOptions, report: BuildReport) -> list[dict[str, object]]:
    """Run every candidate's reference as the job will: in the sandbox (``execute.run_samples``,
    the ``local`` backend). Tests that do not pass there (they start processes, use the network,
    write outside their folder...) leave the task's FAIL_TO_PASS/PASS_TO_PASS; when a run gives
    no per-test outcomes (the sandbox killed it), each of its tests runs alone to find them. A
    task left with no FAIL_TO_PASS test is dropped; one whose tests changed runs once more and is
    kept only if it passes. Raises :class:`IanvsError` (from ``run_samples``) when the
    environment provides the package under test."""
    from core.scenarios.repo.execute import Sample, default_views_dir, run_samples  # noqa: PLC0415 - the sandbox

    def run(samples: list[Sample]) -> dict[str, Any]:
        return {r.sample_id: r for r in run_samples(samples, src.root, env, default_views_dir(),
                                                    workers=max(1, opts.jobs), timeout=max(opts.timeout, 60.0),
                                                    reference=True, service=pg)}

    LOG.info("running %d reference(s) in the sandbox, as the job will", len(records))
    first = run([Sample(f"{r['task_id']}#ref", r, None) for r in records])
    ok = {str(r["task_id"]) for r in records if first[f"{r['task_id']}#ref"].outcome == "passed"}
    failing = [r for r in records if str(r["task_id"]) not in ok]
    if not failing:
        return records
    passed: dict[str, set[str]] = {}
    alone: list[Sample] = []
    why: dict[str, str] = {}  # per task, what the sandbox said first
    for rec in failing:
        res, tests = first[f"{rec['task_id']}#ref"], _tests(rec)
        why[str(rec["task_id"])] = _refusal(res)
        listed = [*tests["fail_to_pass"], *tests["pass_to_pass"]]
        if all(t in res.tests for t in listed):
            passed[str(rec["task_id"])] = {t for t in listed if res.tests[t] == "passed"}
        else:  # no outcome per test: try each alone
            alone += [Sample(f"{rec['task_id']}#ref#{i}", {**rec, "tests": {**tests, "fail_to_pass": [t],
                                                                              "pass_to_pass": []}}, None)
                      for i, t in enumerate(listed)]
    alone_said: set[str] = set()
    if alone:
        LOG.info("%d reference run(s) gave no per-test outcome in the sandbox: running their %d tests one by one",
                 len({s.task["task_id"] for s in alone}), len(alone))
        for sid, res in sorted(run(alone).items()):
            tid, _, _ = sid.rpartition("#ref#")
            test = next(s.task["tests"]["fail_to_pass"][0] for s in alone if s.sample_id == sid)
            if res.outcome == "passed":
                passed.setdefault(tid, set()).add(test)
            else:
                passed.setdefault(tid, set())
                if tid not in alone_said:  # the first test that fails alone says more than the batch
                    alone_said.add(tid)
                    why[tid] = f"{test}: {_refusal(res)}"[:_REFUSAL]
    changed: dict[str, dict[str, object]] = {}
    for rec in failing:
        tid, tests = str(rec["task_id"]), _tests(rec)
        good = passed.get(tid, set())
        f2p = [t for t in tests["fail_to_pass"] if t in good]
        p2p = [t for t in tests["pass_to_pass"] if t in good]
        report.sandbox_refusal = report.sandbox_refusal or why[tid]
        if not f2p:
            report.dropped_sandbox += 1
            LOG.info("%s: dropped, none of its FAIL_TO_PASS tests passes in the sandbox: %s", tid, why[tid])
            continue
        left_out = len(tests["fail_to_pass"]) + len(tests["pass_to_pass"]) - len(f2p) - len(p2p)
        LOG.info("%s: %d test(s) do not pass in the sandbox, left out: %s", tid, left_out, why[tid])
        changed[tid] = {**rec, "tests": {**tests, "fail_to_pass": f2p, "pass_to_pass": p2p}}
    if changed:
        again = run([Sample(f"{tid}#ref", rec, None) for tid, rec in changed.items()])
        for tid, rec in changed.items():
            if again[f"{tid}#ref"].outcome == "passed":
                ok.add(tid)
                tests = _tests(rec)
                old = _tests(next(r for r in failing if str(r["task_id"]) == tid))
                report.sandbox_tests_dropped += (len(old["fail_to_pass"]) + len(old["pass_to_pass"])
                                                 - len(tests["fail_to_pass"]) - len(tests["pass_to_pass"]))
            else:
                report.dropped_sandbox += 1
                LOG.info("%s: dropped, its reference still fails in the sandbox with the remaining tests: %s",
                         tid, _refusal(again[f"{tid}#ref"]))
    return [changed.get(str(r["task_id"]), r) for r in records if str(r["task_id"]) in ok]


def build(opts: BuildOptions) -> BuildReport:
    """Build ``opts.output`` (JSON lines); return counts. Raises :class:`BuildError` when no
    task can be built, :class:`IanvsError` on a broken source, package or environment."""
    started = time.monotonic()
    report = BuildReport()
    unknown = sorted(set(opts.services) - {"postgres"})
    if unknown:
        raise IanvsError(f"--service {unknown[0]}: unknown service", hint="known services: postgres")
    sweep_stale(Path(tempfile.gettempdir()))  # PostgreSQL run folders of killed harnesses
    with BuildDir(opts.builds_dir) as work, ExitStack() as services:
        src = materialise(opts.repo, work / "src", opts.rev)
        progress = _Progress(opts.output.with_name(opts.output.name + ".progress"), _fingerprint(src, opts), opts.fresh)
        services.callback(progress.close)
        try:
            return _build(opts, report, started, work, services, src, progress)
        except IanvsError as exc:  # nothing worth resuming (no baseline yet, or nothing to keep)
            if isinstance(exc, BuildError) or progress.baseline is None:
                progress.close()
                progress.path.unlink(missing_ok=True)
            raise


def _build(opts: BuildOptions, report: BuildReport, started: float, work: Path, services: ExitStack,
           src: RepoSource, progress: _Progress) -> BuildReport:
    """Steps 2-6 of :func:`build` inside its build folder."""
    pg = services.enter_context(PostgresService()) if "postgres" in opts.services else None

    def database_env(label: str) -> dict[str, str]:
        """Variables of one test run: a fresh database when the postgres service is on."""
        return services.enter_context(pg.database(label)).env if pg is not None else {}

    facts: ProjectFacts | None = None
    if progress.environment is not None:
        decided = _Environment(progress.environment["requirements"], progress.environment["import_roots"],
                               progress.environment["project"])
    else:
        decided, facts = _decide_environment(src, opts, work / "project")
        progress.add({"stage": "environment", **asdict(decided)})
    env = ensure_env(decided.requirements, opts.cache_dir, opts.env, decided.project)
    LOG.info("environment %s (%d packages)", env.root, len(env.pins))
    deselect = [f"--deselect={d}" for d in opts.deselect]
    if progress.plugins is None:
        own = (decided.project or {}).get("name") or (facts.name if facts else None)
        choice = choose_plugins(env.python, src.root, opts.test_paths, opts.suite_timeout, deselect,
                                env_extra=database_env("plugins"), import_roots=decided.import_roots, scratch=work,
                                keep=frozenset(opts.keep_plugins), project=own)
        progress.plugins = {"stage": "plugins", "choice": choice.record() if choice is not None else None}
        progress.add(progress.plugins)
    decided.pytest_plugins = progress.plugins["choice"]
    report.plugins_disabled = list((decided.pytest_plugins or {}).get("disabled", []))
    # the same plugins in every run: the baseline, the blanked bodies and (through the records)
    # the sandbox check and the job
    extra = [*pytest_plugin_args({"env": {"pytest_plugins": decided.pytest_plugins}}), *deselect]

    if progress.baseline is None:
        LOG.info("baseline run with coverage contexts of %s", src.name)
        run, cov = measure(env.python, src.root, opts.suite_timeout, opts.test_paths, extra,
                           env_extra=database_env("baseline"), import_roots=decided.import_roots, scratch=work)
        passing = {t for t, o in run.outcomes.items() if o == "passed"}
        counts: dict[str, Any] = {"collected": run.collected, "passed": len(passing),
                  "failed": sorted(t for t, o in run.outcomes.items() if o == "failed"),
                  "skipped": sum(1 for o in run.outcomes.values() if o == "skipped"),
                  "collection_errors": len(run.errors)}
        LOG.info("baseline: %d collected, %d passed, %d failed (excluded), %d skipped, %d collection error(s)",
                 run.collected, len(passing), len(counts["failed"]), counts["skipped"], len(run.errors))
        for nodeid, text in run.errors[:5]:
            LOG.warning("collection error in %s: %s", nodeid or "<session>", _quote(text, 400))
        if not passing:
            raise _baseline_error(run, facts, decided, env, src)
        jobs: list[list[Any]] = []
        for path in _candidate_files(src.root):
            rel = str(path.relative_to(src.root))
            try:
                sites = find_functions(path.read_text())
            except (SyntaxError, UnicodeDecodeError):
                counts["unparsable_files"] = counts.get("unparsable_files", 0) + 1
                continue
            lines = cov.get(rel, {})
            for site in sites:
                covering: set[str] = set()
                for ln in range(site.body_start, site.end_line + 1):
                    covering |= lines.get(ln, set())
                jobs.append([rel, site.qualname, site.def_line, sorted(covering & passing)[:opts.max_covering]])
        progress.add({"stage": "baseline", **counts, "jobs": jobs})
        progress.baseline = {**counts, "jobs": jobs}
    base = progress.baseline
    report.collected, report.passed = base["collected"], base["passed"]
    report.baseline_failures, report.skipped = list(base["failed"]), base["skipped"]
    report.collection_errors, report.unparsable_files = base["collection_errors"], base.get("unparsable_files", 0)
    all_jobs = base["jobs"]
    report.functions = len(all_jobs)
    covered = [j for j in all_jobs if j[3]]
    report.covered, report.not_covered = len(covered), len(all_jobs) - len(covered)
    texts: dict[str, str] = {}

    def site_of(rel: str, qualname: str, def_line: int) -> tuple[str, FunctionSite]:
        if rel not in texts:
            texts[rel] = (src.root / rel).read_text()
        text = texts[rel]
        return text, next(s for s in find_functions(text) if s.qualname == qualname and s.def_line == def_line)

    def check(job: list[Any]) -> dict[str, object] | None:
        rel, qualname, def_line, tests = job
        text, site = site_of(rel, qualname, def_line)
        with tempfile.TemporaryDirectory(prefix="blank-", dir=work) as scratch:
            view = make_view(src.root, Path(scratch, "r"), {rel: blank(text, site)})
            env_extra = {}
            with ExitStack() as dbs:
                if pg is not None:
                    env_extra = dbs.enter_context(pg.database(site.name)).env
                got = run_tests(env.python, view, tests, opts.timeout, extra, env_extra=env_extra,
                                import_roots=decided.import_roots, scratch=Path(scratch))
        f2p = [t for t in tests if got.get(t) != "passed"]
        if not f2p:
            return None
        p2p = [t for t in tests if got.get(t) == "passed"][:opts.pass_to_pass]
        return task_record(src, env, rel, text, site, f2p, p2p, opts, decided)

    report.resumed = sum(1 for j in covered if _key(*j[:3]) in progress.checks)
    LOG.info("%d functions, %d covered by passing tests (%d not covered): blanking them in order until %d "
             "task(s) are kept%s", report.functions, report.covered, report.not_covered, opts.max_tasks,
             f" ({report.resumed} already checked before the interruption)" if report.resumed else "")
    results: dict[str, dict[str, object] | None] = dict(progress.checks)
    pool = ThreadPoolExecutor(max(1, opts.jobs))

    def check_all(chunk: list[list[Any]]) -> None:
        """Blank every function of ``chunk`` not checked yet, in parallel, recording each."""
        todo = [j for j in chunk if _key(*j[:3]) not in results]
        for job, rec in zip(todo, pool.map(check, todo)):
            key = _key(*job[:3])
            results[key] = rec
            progress.add({"stage": "check", "key": key, "record": rec})

    records: list[dict[str, object]] = []
    checked = 0
    try:
        # rounds: blank as many functions as tasks are still missing (at least one per job), then
        # run the round's candidates in the sandbox; stop once max_tasks are kept. The kept tasks
        # are the first max_tasks functions, in file order, that pass both checks: the same set as
        # checking every function first, without blanking the ones past the cap.
        while checked < len(covered) and len(records) < opts.max_tasks:
            chunk = covered[checked:checked + max(opts.max_tasks - len(records), opts.jobs, 1)]
            checked += len(chunk)
            check_all(chunk)
            candidates = [rec for rec in (results[_key(*j[:3])] for j in chunk) if rec is not None]
            report.blanked += len(chunk)
            report.dropped_no_failure += len(chunk) - len(candidates)
            screened, leaks = screen_all("repo", candidates, where=src.name)
            report.dropped_leak += len(candidates) - len(screened)
            report.leaks.update({k: n for k, n in leaks.items() if k != "clean"})
            candidates = screened
            if opts.sandbox_check and candidates:
                candidates = _sandbox_check(candidates, src, env, pg, opts, report)
            records += candidates
            LOG.info("checked %d/%d functions, %d kept so far", checked, len(covered), len(records))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        kill_inside(work)  # running test processes: the threads waiting on them return at once
        raise
    finally:
        pool.shutdown(wait=True)
    # over the cap: the functions never blanked, and the last round's surplus
    report.dropped_max_tasks = len(covered) - checked + max(0, len(records) - opts.max_tasks)
    records = records[:opts.max_tasks]
    report.kept = len(records)
    LOG.info("blanked %d: kept %d, dropped %d (blank still passes every covering test), %d (reference fails in "
             "the sandbox), %d over --max-tasks", report.blanked, report.kept, report.dropped_no_failure,
             report.dropped_sandbox, report.dropped_max_tasks)
    if not records:
        raise BuildError(
            f"no task kept from {src.name}: {report.functions} functions, {report.covered} covered by the "
            f"{report.passed} passing tests, {report.blanked} blanked, {report.dropped_no_failure} still passed "
            f"every covering test when blanked, {report.dropped_sandbox} whose reference fails in the sandbox",
            hint="next step: " + ("no function is covered by a passing test: run the tests that exercise the "
                                  "package (--tests PATH)" if not report.covered else
                                  "the tests need what the sandbox forbids (processes, network, files outside "
                                  f"the repository); the sandbox said: {report.sandbox_refusal or 'nothing'}; "
                                  "choose other tests with --tests/--deselect (a pytest plugin that does it "
                                  "is kept only when the selected tests use it: see the log's 'pytest plugin' "
                                  "lines)" if report.dropped_sandbox else
                                  "the covering tests do not check results; raise --max-covering"))
    if opts.authoring is not None:  # model-written problems/tests, validated (authoring.py)
        report.authoring = author(records, src.root, env, opts.authoring).as_dict()
        authored, leaks = screen_all("repo", records, where=f"{src.name} (model-written problems)")
        report.dropped_leak += len(records) - len(authored)
        report.leaks.update({k: n for k, n in leaks.items() if k != "clean"})
        records = authored
        report.kept = len(records)
    opts.output.parent.mkdir(parents=True, exist_ok=True)
    partial = opts.output.with_name(opts.output.name + ".tmp")
    with open(partial, "w") as fh:
        for rec in records:
            fh.write(json.dumps(rec, sort_keys=True) + "\n")
    os.replace(partial, opts.output)
    progress.close()
    progress.path.unlink(missing_ok=True)
    report.seconds = time.monotonic() - started
    return report
