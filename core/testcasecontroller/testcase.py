"""Test cases: one per algorithm x module combination, each with a stable folder.

A test case's folder is ``<workspace>/<job>/<algorithm>/<uuid1>`` as upstream, but the uuid
is *reused* for the same configuration (same algorithm name, modules, urls and
hyperparameters): ``case.json`` in the folder records the configuration key, so a second
``ianvs -f`` finds the folder and resumes from its stored predictions. ``fresh=True``
always makes a new folder. Module urls under the working directory enter the key relative to
it, so a job folder and its workspace copied elsewhere (a shipped archive of a run unpacked in
another clone) resume and re-score there without running the model again.

Nothing secret is written or logged: hyperparameters under credential-like names are
redacted in ``case.json``, the rank row and the log lines, and their values are scrubbed from
error messages and tracebacks (:mod:`core.common.redact`).

A metric that raises (other than :class:`IanvsError`, a configuration or infrastructure
problem that fails the test case) does not lose the test case: its column(s) are NaN in the
row, the failure is logged once as a warning naming the metric and the exception, and
``case.json`` records it under ``metric_errors`` (``{metric: {"error", "columns"}}``).
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.common.class_factory import ClassFactory, ClassType
from core.common.errors import IanvsError, MetricInvalid, PluginError
from core.common.names import inside_workspace
from core.common.redact import redact, register_secrets, scrub, secret_values
from core.compat.plugin_loader import load_plugin
from core.storymanager.rank.types import CaseResult, format_completion_time
from core.testcasecontroller.algorithm.config import (IMPLEMENTED_PARADIGMS, AlgorithmConfig,
                                                     ModuleSpec, resolve_path_hyperparameters)
from core.testcasecontroller.algorithm.paradigm.singletask_learning import (
    SingleTaskInputs, run_singletask)
from core.testcasecontroller.metrics.calling import (MetricContext, PlainPredictions,
                                                     call_metric, declared_columns,
                                                     resolve_metric)
from core.testcasecontroller.metrics.per_task import PER_TASK_VALUES_FILE
from core.testcasecontroller.predictions import JOINT_CACHE_DIR
from core.testenvmanager.testenv.testenv import TestEnvConfig

logger = logging.getLogger(__name__)

CASE_FILE = "case.json"


@dataclass
class TestCase:
    """One configured run of one algorithm variant."""

    __test__ = False

    algorithm_name: str
    algorithm: AlgorithmConfig
    combination: dict[str, tuple[ModuleSpec, dict[str, Any]]]
    key: str
    case_dir: Path
    url: str
    public_url: str = ""
    """``url`` as written in the rank files (see :class:`CaseResult`); ``url`` when empty."""

    @property
    def id(self) -> str:
        return self.case_dir.name

    def secrets(self) -> list[str]:
        """Values of this test case's hyperparameters stored under credential-like names."""
        return secret_values({t: h for t, (_, h) in self.combination.items()})

    def describe(self) -> str:
        """One line for logs: algorithm, modules and hyperparameters (secrets redacted)."""
        parts = []
        for mtype, (spec, hps) in self.combination.items():
            hp = ", ".join(f"{k}={v}" for k, v in redact(hps).items())
            parts.append(f"{mtype}={spec.name}" + (f"({hp})" if hp else ""))
        return f"{self.algorithm_name}: " + "; ".join(parts)


@dataclass
class CaseOutcome:
    """Result of running one test case."""

    case: TestCase
    ok: bool
    metrics: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    time: str = ""
    metric_errors: dict[str, str] = field(default_factory=dict)
    """metric name -> ``"ExceptionType: message"`` of metrics that raised (their columns NaN)."""

    def to_rank(self) -> CaseResult:
        """The rank row: secrets redacted, ``url`` in its published form."""
        return CaseResult(
            algorithm=self.case.algorithm_name, paradigm=self.case.algorithm.paradigm_type,
            metrics=self.metrics,
            modules={t: s.name for t, (s, _) in self.case.combination.items()},
            hyperparameters={t: redact(dict(h)) for t, (_, h) in self.case.combination.items()},
            time=self.time, url=self.case.public_url or self.case.url, folder=self.case.url)


def _portable(url: str) -> str:
    """A module url as the case key sees it: an absolute path inside the working directory as
    the path relative to it (what a relative ``-f`` gives), anything else as it is. The
    workspace is relative to the working directory too, so a job folder copied or unpacked
    elsewhere, with its workspace, keeps its test cases' keys however ``-f`` names it."""
    if not url or not os.path.isabs(url):
        return url
    try:
        return str(Path(os.path.realpath(url)).relative_to(os.path.realpath(os.getcwd())))
    except ValueError:
        return url


def _case_key(alg_name: str, algorithm: AlgorithmConfig,
              combination: dict[str, tuple[ModuleSpec, dict[str, Any]]],
              portable: bool = True) -> str:
    """The configuration key of a test case; ``portable=False`` gives the key of releases
    before :func:`_portable` (absolute urls as they were), still matched by
    :func:`build_testcases` so their workspaces resume."""
    desc = {"algorithm": alg_name, "paradigm": algorithm.paradigm_type,
            "modules": [[t, s.name, _portable(str(s.url or "")) if portable
                         else str(s.url or ""), hps]
                        for t, (s, hps) in combination.items()]}
    text = json.dumps(desc, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _case_index(alg_dir: Path) -> dict[str, Path]:
    """``configuration key -> folder`` of the test case folders in ``alg_dir`` (read once per
    algorithm; an unreadable ``case.json`` is skipped; the first folder by name wins)."""
    found: dict[str, Path] = {}
    if not alg_dir.is_dir():
        return found
    for candidate in sorted(alg_dir.iterdir()):
        meta = candidate / CASE_FILE
        try:
            if meta.is_file():
                found.setdefault(json.loads(meta.read_text())["key"], candidate)
        except (ValueError, KeyError, OSError):
            continue
    return found


def build_testcases(algorithms: list[tuple[str, AlgorithmConfig]], workspace: str,
                    job_name: str, fresh: bool = False) -> list[TestCase]:
    """Test cases in algorithm order, then combination order (last module fastest).

    A relative ``workspace`` gives urls joined from it as upstream; an absolute one gives
    rank-file urls relative to the workspace (``<job>/<algorithm>/<uuid>``), so published
    files do not show the user's directory layout.

    Raises:
        ConfigError: a test case folder would resolve outside ``workspace`` (a job or
            algorithm name that is not a plain name, or a folder linking elsewhere); checked
            before any folder is looked into or created.
    """
    cases = []
    for alg_name, algorithm in algorithms:
        alg_url = os.path.join(workspace, job_name, alg_name)
        inside_workspace(workspace, alg_url, "the folder of algorithm " + repr(alg_name),
                         algorithm.source)
        index = {} if fresh else _case_index(Path(alg_url))
        for combination in algorithm.combinations():
            key = _case_key(alg_name, algorithm, combination)
            found = index.get(key) or index.get(
                _case_key(alg_name, algorithm, combination, portable=False))
            case_id = found.name if found else str(uuid.uuid1())
            url = os.path.join(alg_url, case_id)
            inside_workspace(workspace, url, "the test case folder", algorithm.source)
            public = (os.path.join(job_name, alg_name, case_id)
                      if os.path.isabs(os.path.expanduser(workspace)) else url)
            cases.append(TestCase(alg_name, algorithm, combination, key, Path(url), url,
                                  public))
    return cases


def instantiate_module(spec: ModuleSpec, hps: dict[str, Any],
                       yaml_file: Path | None = None) -> Any:
    """Build one module per upstream rules (see ianvs-compat §6.3). With ``yaml_file`` (the
    algorithm YAML), path-valued hyperparameters are resolved as YAML paths
    (:func:`resolve_path_hyperparameters`)."""
    if yaml_file is not None:
        hps = resolve_path_hyperparameters(hps, yaml_file)
    plugin = load_plugin(spec.url) if spec.url else None
    if spec.type == "hard_example_mining":
        return {"method": spec.name, "param": hps} if (plugin or hps) else {"method": spec.name}
    if plugin is None and not ClassFactory.is_exists(spec.group, spec.name):
        if spec.type == "aggregation":
            return (spec.name, None)
        return {"method": spec.name, "param": hps} if hps else {"method": spec.name}
    cls = plugin.lookup(spec.group, spec.name) if plugin else \
        ClassFactory.get_cls(spec.group, spec.name)
    try:
        instance = cls(**hps)
    except Exception as exc:
        raise PluginError(f"module(type={spec.type}) loads class(name={spec.name}) failed, "
                          f"error: {type(exc).__name__}: {exc}", source=spec.url,
                          hint="check the module's hyperparameters against its __init__") \
            from exc
    return (spec.name, instance) if spec.type == "aggregation" else instance


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float (a failed metric's NaN) as ``None``: ``case.json``
    stays strict JSON, and ``metric_errors`` says why the value is missing."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _write_case_file(case: TestCase, **status: Any) -> None:
    """Write ``case.json`` atomically; hyperparameters are redacted, and string ``status``
    values (error, traceback) scrubbed of the case's secrets."""
    case.case_dir.mkdir(parents=True, exist_ok=True)
    secrets = case.secrets()
    status = {k: scrub(v, secrets) if isinstance(v, str) else v for k, v in status.items()}
    data = {"key": case.key, "algorithm": case.algorithm_name,
            "modules": {t: {"name": s.name, "url": str(s.url or ""),
                            "hyperparameters": redact(h)}
                        for t, (s, h) in case.combination.items()}, **status}
    tmp = case.case_dir / (CASE_FILE + ".tmp")
    tmp.write_text(json.dumps(_finite(data), indent=2, default=str, allow_nan=False))
    tmp.replace(case.case_dir / CASE_FILE)


def run_testcase(case: TestCase, testenv: TestEnvConfig, show_progress: bool = True,
                 debug: bool = False) -> CaseOutcome:
    """Run one test case; any failure is captured in the outcome, never raised.

    A metric that raises makes its columns NaN instead (see the module docstring)."""
    started = time.time()
    register_secrets(case.secrets())
    _write_case_file(case, status="running", started=started)
    try:
        if case.algorithm.paradigm_type not in IMPLEMENTED_PARADIGMS:
            raise IanvsError(f"paradigm {case.algorithm.paradigm_type!r} is recognised but "
                             "not implemented in this project yet",
                             source=case.algorithm.source,
                             hint="use paradigm_type: singletasklearning")
        metric_fns = [(spec, resolve_metric(spec)) for spec in testenv.metrics]
        for package in case.algorithm.third_party_packages:
            load_plugin(package)
        test = testenv.dataset.parse("test", "inference")
        train = testenv.dataset.parse("train", "train")

        if case.algorithm.paradigm_type == "jointinference":
            predictions, info = _run_joint(case, testenv, test, show_progress)
        else:
            def make_model() -> Any:
                instances = {t: instantiate_module(s, h, case.algorithm.source)
                             for t, (s, h) in case.combination.items()}
                os.environ["LOCAL_TEST"] = "TRUE"
                if "basemodel" not in instances:
                    raise IanvsError("singletasklearning needs a module of type 'basemodel'",
                                     source=case.algorithm.source)
                return instances["basemodel"]

            predictions, info = run_singletask(SingleTaskInputs(
                case_dir=case.case_dir, test=test, train=train, make_model=make_model,
                initial_model_url=case.algorithm.initial_model_url,
                predict_chunk_size=case.algorithm.predict_chunk_size,
                show_progress=show_progress))
        context = MetricContext(records=test.records, workspace=case.case_dir,
                                sandbox=dict(testenv.sandbox), show_progress=show_progress,
                                config_dir=Path(testenv.source).parent,
                                code_hooks=testenv.code_hooks)
        metrics: dict[str, Any] = {}
        failed: dict[str, dict[str, Any]] = {}
        y_pred = PlainPredictions(predictions)
        for spec, fn in metric_fns:
            try:
                metrics.update(call_metric(fn, spec, test.y, y_pred, context, info))
            except IanvsError:
                raise
            except Exception as exc:  # noqa: BLE001 - one metric must not lose the case
                failed[spec.name] = _metric_failed(case, spec, fn, exc, metrics)
        context.per_task.write(case.case_dir / PER_TASK_VALUES_FILE)
        finished = format_completion_time()
        _write_case_file(case, status="completed", started=started, finished=finished,
                         metrics=metrics, **({"metric_errors": failed} if failed else {}))
        return CaseOutcome(case, True, metrics, time=finished,
                           metric_errors={n: e["error"] for n, e in failed.items()})
    except Exception as exc:  # noqa: BLE001 - one case failing must not stop the others
        text = str(exc) if isinstance(exc, IanvsError) else f"{type(exc).__name__}: {exc}"
        text = scrub(text, case.secrets())
        logger.error("testcase(id=%s) %s failed: %s", case.id, case.describe(), text)
        if debug or not isinstance(exc, IanvsError):
            logger.debug("traceback:\n%s", scrub(traceback.format_exc(), case.secrets()))
        _write_case_file(case, status="failed", started=started, error=text,
                         traceback=traceback.format_exc())
        return CaseOutcome(case, False, error=text, time=format_completion_time())


def _run_joint(case: TestCase, testenv: TestEnvConfig, test: Any, show_progress: bool
               ) -> tuple[Any, dict[str, Any]]:
    """The ``jointinference`` paradigm for one test case (see its module). The mining mode is
    the algorithm's ``hard_example_mining_mode``, else the testenv's, else upstream's default."""
    from core.testcasecontroller.algorithm.paradigm.joint_inference import (
        DEFAULT_MODE, JointInferenceInputs, check_mode, run_joint_inference)

    algorithm = case.algorithm
    mode = algorithm.settings.get("hard_example_mining_mode") or \
        testenv.hard_example_mining_mode or DEFAULT_MODE
    check_mode(mode, algorithm.source)
    if "hard_example_mining" not in case.combination:
        raise IanvsError("jointinference needs a module of type 'hard_example_mining' (the router)",
                         source=algorithm.source, hint="add e.g. {type: hard_example_mining, "
                                                        "name: EdgeOnly}")
    router_spec, router_hps = case.combination["hard_example_mining"]

    def make_modules() -> dict[str, Any]:
        instances = {t: instantiate_module(s, h, algorithm.source)
                     for t, (s, h) in case.combination.items() if t != "hard_example_mining"}
        os.environ["LOCAL_TEST"] = "TRUE"
        return instances

    def router() -> tuple[Any, dict[str, Any]]:
        hps = resolve_path_hyperparameters(router_hps, algorithm.source)
        plugin = load_plugin(router_spec.url) if router_spec.url else None
        cls = plugin.lookup(router_spec.group, router_spec.name) if plugin else \
            ClassFactory.get_cls(router_spec.group, router_spec.name)
        return cls, hps

    return run_joint_inference(JointInferenceInputs(
        case_dir=case.case_dir, cache_dir=case.case_dir.parent.parent / JOINT_CACHE_DIR,
        test=test, make_modules=make_modules, router=router, router_name=router_spec.name,
        mode=str(mode), initial_model_url=algorithm.initial_model_url,
        sandbox=dict(testenv.sandbox), show_progress=show_progress,
        train=lambda: _train_records(testenv)))


def _train_records(testenv: TestEnvConfig) -> list[dict[str, Any]]:
    """The train split's records (JSONL or JSON sets; none when the testenv has no train
    split or its format has no per-item records)."""
    if testenv.dataset.train is None:
        return []
    train = testenv.dataset.parse("train", "train")
    records = getattr(train, "records", None)
    return list(records()) if callable(records) else []


def _metric_failed(case: TestCase, spec: Any, fn: Any, exc: Exception,
                   metrics: dict[str, Any]) -> dict[str, Any]:
    """Record a metric that raised: its columns become NaN in ``metrics`` (those another
    metric already produced are kept), one warning is logged; returns the ``case.json``
    entry ``{"error": "Type: message", "columns": [...]}``. A :class:`MetricInvalid` (a
    metric that failed its own check) keeps the values it carries, and its entry says
    ``"invalid": true`` and lists only the columns left NaN: the report shows those as
    ``invalid``, not as an error."""
    kept = exc.values if isinstance(exc, MetricInvalid) else None
    text = scrub(f"{type(exc).__name__}: {exc}", case.secrets())
    try:
        columns = declared_columns(fn, spec)
    except Exception:  # noqa: BLE001 - the metric is already broken; fall back to its name
        columns = [spec.name]
    if kept is not None:
        metrics.update(kept)
        columns = [c for c in columns if c not in kept]
    for column in columns:
        metrics.setdefault(column, math.nan)
    if kept is not None:
        logger.warning("testcase(id=%s) metric %r is invalid: %s (its column %s is not a score)",
                       case.id, spec.name, text, ", ".join(repr(c) for c in columns))
        return {"error": text, "columns": columns, "invalid": True}
    logger.warning("testcase(id=%s) metric %r failed: %s (its column %s is NaN)", case.id,
                   spec.name, text, ", ".join(repr(c) for c in columns))
    logger.debug("metric %r traceback:\n%s", spec.name,
                 scrub(traceback.format_exc(), case.secrets()))
    return {"error": text, "columns": columns}
