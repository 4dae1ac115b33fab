"""Model-written problem statements and unit tests for repo tasks, validated before they are kept.

``ianvs dataset repo ... --llm-problems --llm-tests`` calls :func:`author` on the records the
builder kept (any generator of :mod:`core.generation`; ``embedded`` by default):

* **Problems** (``--llm-problems``): for a task whose function has no docstring, the model is
  shown the reference function and its context and asked for a docstring-like statement. A
  non-empty reply that does not repeat a code line of the reference (a line of >= 25 characters)
  becomes the record's ``problem`` (which the job's prompt uses when ``docstring`` is empty) and
  ``problem_author`` records ``{"written_by": "model", "model": <generator identity>}``.
* **Tests** (``--llm-tests``): for every task the model writes ``test_samples`` pytest modules.
  Each goes through the static checks of :mod:`.written_tests` (parse, at least one test, the
  import/name filter), then runs **in the sandbox**, exactly as the job runs samples
  (:func:`.execute.run_samples`: a private hard-link view of the repository with the module at its
  root, the repository environment, the kernel-enforced walls of the local backend, a timeout):
  once on the original function, once on the blanked one. A test is kept iff it *passed* on the
  original and *failed* on the blank. The surviving tests of each module are pruned into one file
  per module and the task is then run once more as the job will run it (its own FAIL_TO_PASS and
  PASS_TO_PASS tests plus every kept file) on the original and on the blank; if any own test no
  longer passes on the original, or a written test no longer passes on the original and fails on
  the blank, all of that task's written tests are dropped (``unstable``).
  Kept files go into ``model_written_tests``: ``[{"file", "code", "tests": [node ids], "model"}]``.

Counting: every collected test function is one *written* test; a module that does not parse or
defines no test counts as one written test dropped (``syntax_error`` / ``no_tests``); an ``unsafe``
or ``timeout`` module drops all its tests. Generation failures (backend errors) are counted apart.
Every dropped test has exactly one reason, so ``written == kept + sum(dropped)``.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.generation import DEFAULT_GENERATOR, create_generator
from core.generation.base import Generator
from core.generation.types import DecodingSettings, GenerationRequest
from core.scenarios.repo.authoring_prompts import (clean_problem, problem_messages, tests_code,
                                                   tests_messages)
from core.scenarios.repo.env import RepoEnv
from core.scenarios.repo.execute import Sample, SampleResult, default_views_dir, run_samples
from core.scenarios.repo.written_tests import Candidate, allowed_imports, parse_candidate, prune, unsafe_reason

__all__ = ["AuthoringOptions", "AuthoringReport", "author", "DROP_REASONS", "node_outcome", "written_file_name"]

LOG = logging.getLogger(__name__)

#: Why a written test is dropped (each dropped test has exactly one).
DROP_REASONS = ("syntax_error", "no_tests", "unsafe", "timeout", "fails_on_original", "passes_on_blank",
                "unstable")

#: A problem statement line-matching the reference body's lines at least this long is a copy.
COPY_LINE_CHARS = 25


@dataclass
class AuthoringOptions:
    """What to write and with which generator (``generator_options`` are its keyword arguments)."""

    problems: bool = False
    tests: bool = False
    generator: str = DEFAULT_GENERATOR
    generator_options: dict[str, Any] = field(default_factory=dict)
    test_samples: int = 1
    max_tokens: int = 512
    problem_max_tokens: int = 200
    timeout: float = 30.0
    workers: int = 2
    views_dir: Path | None = None


@dataclass
class AuthoringReport:
    """Counts of one authoring pass (see the module docstring for how tests are counted)."""

    model: dict[str, Any] | None = None
    problems_asked: int = 0
    problems_written: int = 0
    problems_dropped: Counter[str] = field(default_factory=Counter)
    tests_written: int = 0
    tests_kept: int = 0
    tests_dropped: Counter[str] = field(default_factory=Counter)
    tasks_with_kept_tests: int = 0
    generation_errors: int = 0
    generation_s: float = 0.0
    validation_s: float = 0.0

    def drop(self, reason: str, count: int = 1) -> None:
        self.tests_dropped[reason] += count

    def as_dict(self) -> dict[str, Any]:
        return {"model": self.model, "problems_asked": self.problems_asked,
                "problems_written": self.problems_written, "problems_dropped": dict(self.problems_dropped),
                "tests_written": self.tests_written, "tests_kept": self.tests_kept,
                "tests_dropped": {r: self.tests_dropped.get(r, 0) for r in DROP_REASONS},
                "tasks_with_kept_tests": self.tasks_with_kept_tests,
                "generation_errors": self.generation_errors,
                "generation_s": round(self.generation_s, 1), "validation_s": round(self.validation_s, 1)}


def node_outcome(tests: dict[str, str], node: str) -> str | None:
    """Outcome of test ``node`` in a run's ``{nodeid: outcome}``; a parametrised test (reported as
    ``node[...]`` cases) is ``failed`` if any case failed, ``passed`` if all passed, else
    ``skipped``; ``None`` when it never reported (e.g. a collection error)."""
    if node in tests:
        return tests[node]
    cases = [v for k, v in tests.items() if k.startswith(node + "[")]
    if not cases:
        return None
    if "failed" in cases:
        return "failed"
    return "passed" if all(v == "passed" for v in cases) else "skipped"


def written_file_name(task_id: str, index: int, root: Path) -> str:
    """A ``test_*.py`` name for the task's ``index``-th written module, absent from ``root``."""
    stem = f"test_ianvs_written_{hashlib.sha256(task_id.encode()).hexdigest()[:10]}_{index}"
    name = f"{stem}.py"
    while (root / name).exists():
        stem += "_"
        name = f"{stem}.py"
    return name


def _ask(gen: Generator, requests: list[GenerationRequest], report: AuthoringReport) -> dict[str, list[str]]:
    started = time.perf_counter()
    replies: dict[str, list[str]] = {}
    for g in gen.generate(requests):
        if g.error is not None:
            report.generation_errors += 1
            LOG.warning("%s: generation failed: %s", g.task_id, g.error)
            continue
        replies.setdefault(g.task_id, []).append(g.raw_output)
        LOG.info("generated %s#%d: %s tokens in %.1fs", g.task_id, g.sample_index, g.completion_tokens, g.latency_s)
    report.generation_s += time.perf_counter() - started
    return replies


def _write_problems(records: list[dict[str, Any]], gen: Generator, opts: AuthoringOptions,
                    report: AuthoringReport) -> None:
    todo = [r for r in records if not r.get("docstring") and not r.get("problem")]
    report.problems_asked = len(todo)
    decoding = DecodingSettings(temperature=0.0, max_tokens=opts.problem_max_tokens)
    replies = _ask(gen, [GenerationRequest(f"problem:{r['task_id']}", "", mode="chat", decoding=decoding,
                                           messages=tuple(problem_messages(r))) for r in todo], report)
    for r in todo:
        raw = replies.get(f"problem:{r['task_id']}")
        if not raw:
            report.problems_dropped["generation_error"] += 1
            continue
        text = clean_problem(raw[0])
        copied = [ln.strip() for ln in r["reference"].splitlines() if len(ln.strip()) >= COPY_LINE_CHARS]
        if not text:
            report.problems_dropped["empty"] += 1
        elif any(ln in text for ln in copied):
            report.problems_dropped["repeats_code"] += 1
        else:
            r["problem"] = text
            r["problem_author"] = {"written_by": "model", "model": report.model}
            report.problems_written += 1


@dataclass
class _Module:
    task: dict[str, Any]
    file: str
    cand: Candidate

    def node_ids(self, names: set[str] | None = None) -> list[str]:
        return [f"{self.file}::{n}" for n in self.cand.tests if names is None or n in names]


def _run_both(tasks: dict[str, dict[str, Any]], root: Path, env: RepoEnv, opts: AuthoringOptions,
              report: AuthoringReport) -> dict[str, tuple[SampleResult, SampleResult]]:
    """Run every ``sample id -> task`` on the original and on the blank, in the sandbox."""
    started = time.perf_counter()
    views = opts.views_dir or default_views_dir()
    samples = [Sample(sid, task, None) for sid, task in tasks.items()]
    orig = {r.sample_id: r for r in run_samples(samples, root, env, views, opts.workers, opts.timeout,
                                                reference=True)}
    blank = {r.sample_id: r for r in run_samples(samples, root, env, views, opts.workers, opts.timeout)}
    report.validation_s += time.perf_counter() - started
    return {sid: (orig[sid], blank[sid]) for sid in tasks}


def _with_tests(task: dict[str, Any], written: list[dict[str, Any]], own: bool) -> dict[str, Any]:
    spec = dict(task["tests"])
    if not own:
        spec["fail_to_pass"], spec["pass_to_pass"] = [], []
    return {**task, "tests": spec, "model_written_tests": written}


def _write_tests(records: list[dict[str, Any]], gen: Generator, root: Path, env: RepoEnv,
                 opts: AuthoringOptions, report: AuthoringReport) -> None:
    n = max(1, opts.test_samples)
    decoding = DecodingSettings(n=n, max_tokens=opts.max_tokens, temperature=0.0 if n == 1 else 0.8, seed=1234)
    replies = _ask(gen, [GenerationRequest(f"tests:{r['task_id']}", "", mode="chat", decoding=decoding,
                                           messages=tuple(tests_messages(r))) for r in records], report)
    allowed = allowed_imports(root, env.site_packages())
    modules: dict[str, _Module] = {}
    for r in records:
        for j, raw in enumerate(replies.get(f"tests:{r['task_id']}", [])):
            parsed = parse_candidate(tests_code(raw))
            if isinstance(parsed, str):
                report.tests_written += 1
                report.drop(parsed)
                continue
            report.tests_written += len(parsed.tests)
            why = unsafe_reason(parsed.code, allowed)
            if why is not None:
                LOG.info("%s: written tests dropped as unsafe: %s", r["task_id"], why)
                report.drop("unsafe", len(parsed.tests))
                continue
            modules[f"{r['task_id']}#w{j}"] = _Module(r, written_file_name(r["task_id"], j, root), parsed)
    if not modules:
        return
    # round 1: each module alone (no own tests), on the original and on the blank
    runs = _run_both({sid: _with_tests(m.task, [{"file": m.file, "code": m.cand.code, "tests": m.node_ids()}],
                                       own=False) for sid, m in modules.items()}, root, env, opts, report)
    kept: dict[str, list[dict[str, Any]]] = {}
    for sid, m in modules.items():
        orig, blank = runs[sid]
        if "timeout" in (orig.outcome, blank.outcome):
            report.drop("timeout", len(m.cand.tests))
            continue
        good: set[str] = set()
        for name, node in zip(m.cand.tests, m.node_ids()):
            if node_outcome(orig.tests, node) != "passed":
                LOG.debug("%s: %s does not pass on the original: %s", m.task["task_id"], name, orig.detail[-400:])
                report.drop("fails_on_original")
            elif node_outcome(blank.tests, node) != "failed":
                report.drop("passes_on_blank")
            else:
                good.add(name)
        if good:
            kept.setdefault(m.task["task_id"], []).append(
                {"file": m.file, "code": prune(m.cand, good), "tests": m.node_ids(good), "model": report.model})
    if not kept:
        return
    # round 2: the task as the job will run it (own tests + every kept file)
    by_id = {r["task_id"]: r for r in records}
    finals = _run_both({f"{tid}#final": _with_tests(by_id[tid], written, own=True) for tid, written in kept.items()},
                       root, env, opts, report)
    for tid, written in kept.items():
        orig, blank = finals[f"{tid}#final"]
        task = by_id[tid]
        own = [*task["tests"]["fail_to_pass"], *task["tests"]["pass_to_pass"]]
        ids = [t for w in written for t in w["tests"]]
        stable = (orig.outcome != "timeout" and blank.outcome != "timeout"
                  and all(orig.tests.get(t) == "passed" for t in own)
                  and all(node_outcome(orig.tests, t) == "passed" and node_outcome(blank.tests, t) == "failed"
                          for t in ids))
        if not stable:
            LOG.info("%s: written tests dropped: unstable with the task's own tests", tid)
            report.drop("unstable", len(ids))
            continue
        task["model_written_tests"] = written
        report.tests_kept += len(ids)
        report.tasks_with_kept_tests += 1


def author(records: list[dict[str, Any]], root: Path, env: RepoEnv, opts: AuthoringOptions,
           generator: Generator | None = None) -> AuthoringReport:
    """Write problems and/or tests for ``records`` (updated in place); return the counts.

    ``root`` is the repository the records were built from (unchanged: every run happens in a
    view of it) and ``env`` its environment. ``generator`` overrides ``opts.generator`` (the
    caller then owns it and closes it). Raises :class:`~core.common.errors.ConfigError` /
    :class:`~core.common.errors.RegistryError` for a generator that cannot be created.
    """
    report = AuthoringReport()
    if not (opts.problems or opts.tests) or not records:
        return report
    gen = generator or create_generator(opts.generator, **opts.generator_options)
    try:
        report.model = gen.describe()
        if opts.problems:
            _write_problems(records, gen, opts, report)
        if opts.tests:
            _write_tests(records, gen, root, env, opts, report)
    finally:
        if generator is None:
            gen.close()
    LOG.info("model-written problems: %d asked, %d written, dropped %s", report.problems_asked,
             report.problems_written, dict(report.problems_dropped) or "none")
    LOG.info("model-written tests: %d written, %d kept (in %d tasks), dropped %s; %.1fs generating, "
             "%.1fs validating", report.tests_written, report.tests_kept, report.tasks_with_kept_tests,
             {k: v for k, v in report.tests_dropped.items() if v} or "none", report.generation_s,
             report.validation_s)
    return report
