"""The ``repo_tests`` metric: inject every sample into its repository and run the task's tests.

Used from testenv.yaml (``task_kind: repo``)::

    metrics:
      - name: repo_tests
        url: ./metrics.py
        k: [1]
        sources:                          # repository name (the tasks' repo.name) -> its source
          toolz: ../data/toolz-1.0.0.tar.gz   # relative to this testenv file
        timeout: 120                      # seconds per sample (all of its tests)

Per test record (``context.records()``) and sample, the answer (:meth:`RepoKind.answer`) is
injected by AST position into a private view of the repository and the task's FAIL_TO_PASS and
PASS_TO_PASS tests run in the sandbox with the repository's environment
(:func:`core.scenarios.repo.execute.run_samples`; grading tier ``in_process_confined``, since the
repository's code and its tests share one interpreter).

* **Sources** are materialised once per content hash into the cache (``repo-src/`` next to the
  environments) and must match the tasks' recorded ``repo.content_hash``; a mismatch or a
  repository without a ``sources`` entry is a ConfigError naming the fix.
* **Services**: tasks recording ``services: [postgres]`` run against a private PostgreSQL server
  started for them (:mod:`.postgres`: unix socket only, one database per sample, stopped
  afterwards); other tasks use what their tests default to (e.g. SQLite).
* **Environments** come from the tasks' ``env.requirements``: a venv on the ``local`` backend
  (:func:`.env.ensure_env`), an image on the ``docker`` backend (:func:`.image_env.ensure_image_env`,
  or the tasks' ``run_env`` image as is); created once, which needs the package index, then
  reused offline. Each environment used (backend, venv or image, ``pip freeze``) is appended to
  ``repo_environments.jsonl`` in the test case folder.
* **Resume**: each finished sample is appended to ``repo_executions.jsonl`` in the test case
  folder (with ``executed_by``, the backend) under a key of task, sample index, code and (other
  than ``local``) backend and ``run_env``; a rerun executes only what is missing.
* **Sandbox**: ``backend`` (``local`` or ``docker``), ``workers``, ``min_isolation`` and
  ``min_grading`` (:func:`core.scenarios.repo.policy.check_min_grading`) of testenv's
  ``sandbox:`` are honoured; on ``docker``, ``image`` is the base the repository
  images derive from, and the backend's other options (``runtime``, ``docker_host``,
  ``container_memory_mb``...) apply. PostgreSQL tasks run on both (on ``docker`` the service's
  socket directory is mounted into the containers, which keep no network); any other backend
  is a ConfigError.

Columns: ``pass@<k>`` overall and ``pass@<k>[<repo>]`` per ``sources`` entry, ``f2p_share`` and
``p2p_share`` (see :func:`.metrics.summarise`), outcome counts, ``generation_error`` (samples the
generator could not serve: never scored), ``grading``, ``isolation``, ``executed_by``; and
``per_task.jsonl`` (what the reports read for confidence intervals).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import shutil
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError
from core.common.jsonl import open_append
from core.common.progress import progress_bar
from core.scenarios.repo.env import RepoEnv, default_cache_dir, record_env
from core.scenarios.repo.execute import Sample, SampleResult, default_views_dir, run_samples
from core.scenarios.repo.image_env import ImageEnv, ensure_image_env
from core.scenarios.repo.metrics import OUTCOMES, summarise
from core.scenarios.repo.policy import GRADING as POLICY_GRADING
from core.scenarios.repo.policy import check_min_grading
from core.scenarios.repo.postgres import PostgresService
from core.scenarios.repo.source import materialise
from core.testenvmanager.sandbox.images import BASE_IMAGE, DEFAULT_DOCKER_HOST

__all__ = ["repo_tests", "EXECUTIONS_FILE", "ENVIRONMENTS_FILE", "source_root"]

LOG = logging.getLogger(__name__)

EXECUTIONS_FILE = "repo_executions.jsonl"
ENVIRONMENTS_FILE = "repo_environments.jsonl"
#: backends repo tasks run on
BACKENDS = ("local", "docker")
#: options of testenv's ``sandbox:`` that are not the docker backend's constructor options, or
#: that this metric sets itself
_NOT_DOCKER_OPTIONS = ("backend", "timeout", "timeout_factor", "timeout_floor", "timeout_ceiling",
                       "memory_mb", "workers", "min_isolation", "min_grading", "image", "docker_host", "read_mounts",
                       "request_read_roots", "socket_mounts")
_FIELDS = tuple(SampleResult.__dataclass_fields__)


def _ks(k: int | Sequence[int]) -> list[int]:
    ks = [k] if isinstance(k, int) else list(k)
    if not ks or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in ks):
        raise ValueError(f"k must be a positive integer or a list of them, got {k!r}")
    return ks


def source_root(spec: Path, want_hash: str, cache: Path | None = None) -> Path:
    """The materialised root of source ``spec`` (cached by content hash; checked against it).

    Raises:
        ConfigError: the source's content hash is not ``want_hash``.
    """
    base = (cache or default_cache_dir().parent / "repo-src") / want_hash[:16]
    marker = base / ".root"
    if marker.is_file() and Path(marker.read_text()).is_dir():
        return Path(marker.read_text())
    base.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=base.parent))
    try:
        src = materialise(str(spec), tmp)
        if src.content_hash != want_hash:
            raise ConfigError(f"repository source {spec} has content hash {src.content_hash[:12]}, "
                              f"the tasks were built from {want_hash[:12]}",
                              hint="point 'sources' at the archive or bundle the tasks were built from")
        shutil.rmtree(base, ignore_errors=True)
        tmp.rename(base)
        root = base / src.root.relative_to(tmp)
        marker.write_text(str(root))
        return root
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


#: bumped whenever how a sample is graded changes, so a resumed run never reuses older verdicts
#: (2: pass needs every selected test to have run and passed; nonce-marked per-test outcomes;
#: 3: bodies compiled under the grading policy, guards and tripwire in the runner)
GRADING_VERSION = 3


def _key(rec: Mapping[str, Any], index: int, code: str | None, backend: str = "local") -> str:
    """Cache key of one sample: what decides its result (task, tests, services, source, code,
    :data:`GRADING_VERSION`; the backend and ``run_env`` image when not ``local``)."""
    what = [rec["id"], index, code, rec["tests"], rec.get("services") or [], rec["repo"]["content_hash"],
            GRADING_VERSION]
    if backend != "local":
        what += [backend, rec.get("run_env")]
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:24]


def load_executions(path: Path) -> dict[str, tuple[SampleResult, dict[str, Any]]]:
    """An executions log (one JSON line per graded sample: its ``key``, the
    :class:`SampleResult` fields and any field a kind adds): ``key -> (result, the whole
    line)``. A line that does not parse (cut by a kill) is skipped: that sample runs again."""
    done: dict[str, tuple[SampleResult, dict[str, Any]]] = {}
    if not path.is_file():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
            done[rec["key"]] = (SampleResult(**{f: rec[f] for f in _FIELDS if f in rec}), rec)
        except (ValueError, KeyError, TypeError):
            continue
    return done


def _load_done(path: Path) -> dict[str, SampleResult]:
    return {key: res for key, (res, _line) in load_executions(path).items()}


def _samples(y_pred: Sequence[Any], context: Any,
             backend: str) -> Iterator[tuple[dict[str, Any], str, Sample | None]]:
    """Per generated sample: (task record, cache key, sample) -- sample None on generation error."""
    from core.scenarios import get_kind

    kind = get_kind("repo")
    if y_pred is None or isinstance(y_pred, (str, bytes, Mapping)):
        raise ConfigError("repo_tests needs one prediction per test record",
                          hint="use the repo kind's basemodel (core.scenarios.model.TaskKindModel)")
    for record, pred in zip(context.records(), y_pred):
        rec = kind.validate(record)
        for sample in (pred or {}).get("samples", []) if isinstance(pred, Mapping) else []:
            index = int(sample.get("sample_index", 0))
            if sample.get("error"):
                yield rec, "", None
                continue
            code = kind.answer(str(sample.get("raw_output") or ""), rec)
            yield rec, _key(rec, index, code, backend), Sample(f"{rec['id']}#{index}", rec, code)


@dataclass(frozen=True)
class _Sandbox:
    """What testenv's ``sandbox:`` says for repo tasks."""

    backend: str
    workers: int
    min_isolation: str
    base_image: str = BASE_IMAGE
    docker_host: str = DEFAULT_DOCKER_HOST
    docker_options: dict[str, Any] = field(default_factory=dict)


def _sandbox_options(settings: Mapping[str, Any]) -> _Sandbox:
    backend = str(settings.get("backend", "local"))
    if backend not in BACKENDS:
        raise ConfigError(f"repo tasks run on the 'local' or 'docker' sandbox backend, not {backend!r}",
                          hint="set sandbox.backend: local (venvs on this machine) or docker (images "
                               "on the project's Docker engine)")
    workers, min_isolation = int(settings.get("workers", 2)), str(settings.get("min_isolation", "kernel"))
    check_min_grading(settings, "repo")
    if backend == "local":
        return _Sandbox(backend, workers, min_isolation)
    for key in ("read_mounts", "request_read_roots", "socket_mounts"):
        if key in settings:
            raise ConfigError(f"sandbox.{key} is set by repo_tests itself (the views directory, the "
                              "PostgreSQL service's socket)",
                              hint=f"remove {key} from testenv's sandbox section")
    return _Sandbox(backend, workers, min_isolation, str(settings.get("image", BASE_IMAGE)),
                    str(settings.get("docker_host", DEFAULT_DOCKER_HOST)),
                    {k: v for k, v in settings.items() if k not in _NOT_DOCKER_OPTIONS})


def _check_task(task: Mapping[str, Any], sandbox: _Sandbox) -> None:
    """Raise :class:`ConfigError` when ``task`` cannot run on the chosen backend (checked for
    every group before anything runs)."""
    if sandbox.backend == "local" and task.get("run_env"):
        raise ConfigError(f"task {task['id']} names run_env {task['run_env']!r}, an image: it needs "
                          "the docker backend", hint="set sandbox.backend: docker")


def _environment(first: Mapping[str, Any], sandbox: _Sandbox) -> RepoEnv | ImageEnv:
    """The environment a group of tasks (one repository, services, ``run_env``) runs in."""
    _check_task(first, sandbox)
    requirements = list(first.get("env", {}).get("requirements") or [])
    if sandbox.backend == "local":
        return record_env(first)
    env = ensure_image_env(requirements, run_env=first.get("run_env"), base=sandbox.base_image,
                           docker_host=sandbox.docker_host)
    return replace(env, options=dict(sandbox.docker_options))


def _describe(env: RepoEnv | ImageEnv, repo: str) -> dict[str, Any]:
    """One line of :data:`ENVIRONMENTS_FILE`."""
    where = env.image if isinstance(env, ImageEnv) else str(env.root)
    return {"repo": repo, "backend": env.backend, "environment": where, "pins": list(env.pins)}


def repo_tests(y_true: Any, y_pred: Sequence[Any], context: Any = None, k: int | Sequence[int] = 1,
               sources: Mapping[str, str] | None = None, timeout: float = 120.0) -> dict[str, Any]:
    """The repo kind's columns (module docstring)."""
    ks = _ks(k)
    if context is None:
        raise ConfigError("repo_tests needs the framework's context", hint="run it through 'ianvs -f'")
    sandbox = _sandbox_options(getattr(context, "sandbox", {}) or {})
    base = Path(getattr(context, "config_dir", None) or ".")
    workspace = Path(context.workspace)
    log_path = workspace / EXECUTIONS_FILE
    done = _load_done(log_path)
    tasks: dict[str, dict[str, Any]] = {}
    results: list[SampleResult] = []
    pending: dict[tuple[str, tuple[str, ...], str], list[tuple[str, Sample]]] = defaultdict(list)
    generation_errors = 0
    for rec, key, sample in _samples(y_pred, context, sandbox.backend):
        tasks[rec["id"]] = rec
        if sample is None:
            generation_errors += 1
        elif key in done:
            results.append(done[key])
        else:
            group = (rec["repo"]["content_hash"], tuple(rec.get("services") or ()), str(rec.get("run_env") or ""))
            pending[group].append((key, sample))
    for items in pending.values():
        _check_task(items[0][1].task, sandbox)
    total = sum(len(v) for v in pending.values())
    with open_append(log_path) as log, \
            progress_bar(total, "repo tests", "sample", getattr(context, "show_progress", True)) as bar:
        for (want, services, _run_env), items in pending.items():
            first = items[0][1].task
            name = first["repo"]["name"]
            if not sources or name not in sources:
                raise ConfigError(f"repo_tests: no source for repository {name!r}",
                                  hint=f"add 'sources: {{{name}: <archive, bundle or folder>}}' to the "
                                       "repo_tests entry of testenv.yaml")
            root = source_root((base / sources[name]).resolve(), want)
            env = _environment(first, sandbox)
            with open_append(workspace / ENVIRONMENTS_FILE) as envs:
                envs.write(json.dumps(_describe(env, name)) + "\n")
            keys = {s.sample_id: key for key, s in items}
            with ExitStack() as stack:
                service = stack.enter_context(PostgresService()) if "postgres" in services else None
                for res in run_samples([s for _k, s in items], root, env, default_views_dir(),
                                       workers=sandbox.workers, timeout=float(timeout),
                                       min_isolation=sandbox.min_isolation, service=service):
                    log.write(json.dumps({"key": keys[res.sample_id], **res.__dict__}) + "\n")
                    log.flush()
                    results.append(res)
                    bar.update(1)
    return _row(results, tasks, ks, sources or {}, generation_errors, workspace)


def _row(results: list[SampleResult], tasks: dict[str, dict[str, Any]], ks: list[int],
         sources: Mapping[str, str], generation_errors: int, workspace: Path) -> dict[str, Any]:
    row: dict[str, Any] = dict(summarise(results, tasks, ks))
    for name in sources:
        mine = {t: rec for t, rec in tasks.items() if rec["repo"]["name"] == name}
        part = summarise([r for r in results if r.task_id in mine], mine, ks) if mine else {}
        for kk in ks:
            row[f"pass@{kk}[{name}]"] = part.get(f"pass@{kk}", math.nan)
    for col, value in row.items():
        if isinstance(value, float) and not math.isnan(value):
            row[col] = round(value, 4)
    row["generation_error"] = generation_errors
    row["grading"] = POLICY_GRADING if results else ""
    row["isolation"] = "+".join(sorted({r.isolation for r in results if r.isolation}))
    # results logged before executed_by was recorded all ran on ``local`` (the only backend then)
    row["executed_by"] = "+".join(sorted({r.executed_by or "local" for r in results}))
    per_task: dict[str, list[SampleResult]] = defaultdict(list)
    for r in results:
        per_task[r.task_id].append(r)
    lines = []
    for task_id in tasks:
        mine_r = [r for r in per_task.get(task_id, []) if r.outcome != "infra_error"]
        lines.append(json.dumps({"task_id": task_id, "n": len(mine_r),
                                 "c": sum(r.outcome == "passed" for r in mine_r),
                                 "outcomes": dict(Counter(r.outcome for r in per_task.get(task_id, [])))}))
    (workspace / "per_task.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return row


def _columns(k: int | Sequence[int] = 1, sources: Mapping[str, str] | None = None,
             timeout: float = 120.0) -> list[str]:
    ks = _ks(k)
    if sources is not None and not isinstance(sources, Mapping):
        raise ValueError("sources must map repository names to source paths")
    if float(timeout) <= 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    return ([f"pass@{kk}" for kk in ks] + [f"pass@{kk}[{n}]" for n in (sources or {}) for kk in ks]
            + ["f2p_share", "p2p_share", "samples", *OUTCOMES, "generation_error", "grading",
               "isolation", "executed_by"])


repo_tests.columns = _columns  # type: ignore[attr-defined]
