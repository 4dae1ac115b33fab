"""``ianvs dataset repo``: reverse-engineer function-level tasks from a repository and its own tests.

Steps (each bounded so a build on a shared machine stays predictable):

1. materialise the repository (:mod:`.source`) and its environment (:mod:`.env`);
2. run the suite once with per-test coverage contexts (:mod:`.coverage_map`); tests that do not
   pass here are the *baseline failures* and are excluded everywhere;
3. for every function with a real body (:mod:`.functions`) covered by passing tests, blank the
   body (docstring kept) and run only its covering tests (at most ``max_covering``, with a
   timeout); keep the task iff at least one fails (FAIL_TO_PASS). A sample of covering tests that
   still pass is recorded as PASS_TO_PASS;
4. optionally (``opts.authoring``) let a model write problem statements and extra tests, kept
   only when validated (:mod:`.authoring`);
5. write one JSON record per task (see :func:`task_record`).

Contract: a kept task's reference body passed all its tests in the baseline and its blanked body
failed every FAIL_TO_PASS test in the builder's run. ``tests/scenarios/repo`` re-checks both on
every shipped file (gold controls), in the sandbox.
"""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from contextlib import ExitStack
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from core.common.errors import IanvsError
from core.scenarios.repo.authoring import AuthoringOptions, author
from core.scenarios.repo.coverage_map import measure
from core.scenarios.repo.env import RepoEnv, ensure_env
from core.scenarios.repo.functions import FunctionSite, blank, context_for, find_functions
from core.scenarios.repo.postgres import PostgresService
from core.scenarios.repo.source import RepoSource, materialise
from core.scenarios.repo.testrun import run_tests
from core.scenarios.repo.view import make_view

__all__ = ["BuildOptions", "BuildReport", "build", "task_record"]

LOG = logging.getLogger(__name__)

_SKIP_PARTS = {"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "build"}


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


@dataclass
class BuildReport:
    functions: int = 0
    covered: int = 0
    kept: int = 0
    baseline_failures: list[str] = field(default_factory=list)
    dropped_no_failure: int = 0
    authoring: dict[str, object] | None = None

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"functions": self.functions, "covered": self.covered, "kept": self.kept,
                                  "baseline_failures": len(self.baseline_failures),
                                  "dropped_blank_still_passes": self.dropped_no_failure}
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


def task_record(src: RepoSource, env: RepoEnv, rel: str, text: str, site: FunctionSite,
                f2p: list[str], p2p: list[str], opts: BuildOptions) -> dict[str, object]:
    """The JSON record of one task (field names are the dataset's contract; see docs)."""
    return {
        "task_id": f"{src.name}/{rel}::{site.qualname}", "kind": "repo",
        "repo": {**src.identity(), "licence": opts.licence},
        "env": {"requirements": opts.requirements, "pins": env.pins},
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


def build(opts: BuildOptions) -> BuildReport:
    """Build ``opts.output`` (JSON lines); return counts. Raises on a broken source or env."""
    report = BuildReport()
    unknown = sorted(set(opts.services) - {"postgres"})
    if unknown:
        raise IanvsError(f"--service {unknown[0]}: unknown service", hint="known services: postgres")
    with tempfile.TemporaryDirectory(prefix="ianvs-repo-build-") as tmp, ExitStack() as services:
        pg = services.enter_context(PostgresService()) if "postgres" in opts.services else None

        def database_env(label: str) -> dict[str, str]:
            """Variables of one test run: a fresh database when the postgres service is on."""
            return services.enter_context(pg.database(label)).env if pg is not None else {}

        src = materialise(opts.repo, Path(tmp), opts.rev)
        env = ensure_env(opts.requirements, opts.cache_dir, opts.env)
        extra = [f"--deselect={d}" for d in opts.deselect]
        LOG.info("baseline run with coverage contexts of %s", src.name)
        outcomes, cov = measure(env.python, src.root, opts.suite_timeout, opts.test_paths, extra,
                                env_extra=database_env("baseline"))
        passing = {t for t, o in outcomes.items() if o == "passed"}
        report.baseline_failures = sorted(t for t, o in outcomes.items() if o == "failed")
        LOG.info("baseline: %d passed, %d failed (excluded)", len(passing), len(report.baseline_failures))

        jobs: list[tuple[str, str, FunctionSite, list[str]]] = []
        for path in _candidate_files(src.root):
            rel = str(path.relative_to(src.root))
            text = path.read_text()
            try:
                sites = find_functions(text)
            except SyntaxError:
                continue
            lines = cov.get(rel, {})
            for site in sites:
                report.functions += 1
                covering = set()
                for ln in range(site.body_start, site.end_line + 1):
                    covering |= lines.get(ln, set())
                tests = sorted(covering & passing)
                if tests:
                    report.covered += 1
                    jobs.append((rel, text, site, tests[:opts.max_covering]))

        def check(job: tuple[str, str, FunctionSite, list[str]]) -> dict[str, object] | None:
            rel, text, site, tests = job
            with tempfile.TemporaryDirectory(prefix="ianvs-repo-blank-") as work:
                view = make_view(src.root, Path(work, "r"), {rel: blank(text, site)})
                if pg is not None:
                    with pg.database(site.name) as db:
                        got = run_tests(env.python, view, tests, opts.timeout, extra, env_extra=db.env)
                else:
                    got = run_tests(env.python, view, tests, opts.timeout, extra)
            f2p = [t for t in tests if got.get(t) != "passed"]
            if not f2p:
                return None
            p2p = [t for t in tests if got.get(t) == "passed"][:opts.pass_to_pass]
            return task_record(src, env, rel, text, site, f2p, p2p, opts)

        records: list[dict[str, object]] = []
        LOG.info("%d functions, %d covered by passing tests: blanking each", report.functions, report.covered)
        with ThreadPoolExecutor(max(1, opts.jobs)) as pool:
            for done, rec in enumerate(pool.map(check, jobs), 1):
                if done % 10 == 0:
                    LOG.info("checked %d/%d functions, %d kept", done, len(jobs), len(records))
                if rec is None:
                    report.dropped_no_failure += 1
                elif len(records) < opts.max_tasks:
                    records.append(rec)
        report.kept = len(records)
        if opts.authoring is not None:  # model-written problems/tests, validated (authoring.py)
            report.authoring = author(records, src.root, env, opts.authoring).as_dict()
        opts.output.parent.mkdir(parents=True, exist_ok=True)
        with open(opts.output, "w") as fh:
            for rec in records:
                fh.write(json.dumps(rec, sort_keys=True) + "\n")
    return report
