"""testenv.yaml: the dataset, the metrics and (our extension) the sandbox settings.

Schema (top-level key ``testenv``)::

    testenv:
      dataset: {test_index: ./data.jsonl, ...}      # see core.testenvmanager.dataset
      metrics:                                      # non-empty, evaluated in this order
        - name: pass_at_k                           # alias registered by url, or a built-in
          url: ./op_eval.py                         # optional
          k: [1, 10]                                # extra keys: keyword arguments of the metric
      sandbox: {backend: local, timeout: 10}        # extension: settings for code-executing metrics
      task_kind: comment                            # extension: records follow this kind's schema
                                                    # ({name, url} for a kind in a plugin file)
      code_hooks: ["mypkg.hooks:parse"]             # extension: functions records may name as
                                                    # snippet_merge_fn/output_parse_fn (host code)
      model_eval: {...}; incremental_rounds: 2; round: 1; client_number: 1; use_gpu: false

Keys of other paradigms are kept in :attr:`TestEnvConfig.extra` and reported as unknown.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.common.config_base import Section, load_top_section, require_file
from core.common.errors import ConfigError, suggest
from core.testenvmanager.dataset.dataset import DatasetConfig, parse_dataset_section

logger = logging.getLogger(__name__)

KNOWN_KEYS = ("dataset", "metrics", "model_eval", "incremental_rounds", "round",
              "client_number", "use_gpu", "sandbox", "task_kind", "code_hooks",
              "hard_example_mining_mode")


@dataclass(frozen=True)
class MetricSpec:
    """One ``metrics:`` entry."""

    name: str
    url: Path | None
    params: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None
    line: int | None = None


@dataclass(frozen=True)
class TestEnvConfig:
    """Parsed testenv.yaml."""

    __test__ = False  # not a pytest class

    source: Path
    dataset: DatasetConfig
    metrics: tuple[MetricSpec, ...]
    sandbox: dict[str, Any] = field(default_factory=dict)
    model_eval: dict[str, Any] = field(default_factory=dict)
    incremental_rounds: int = 2
    round: int = 1
    client_number: int = 1
    use_gpu: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    task_kind: str | None = None
    #: ``"package.module:function"`` entries of ``code_hooks:``: the only functions besides the
    #: project's own that dataset records may name as hooks (they run in the ianvs process)
    code_hooks: tuple[str, ...] = ()
    #: the ``jointinference`` paradigm's mining mode (an algorithm's own setting wins)
    hard_example_mining_mode: str | None = None


#: sandbox keys the code-executing metrics read themselves; every other key is a backend option
SANDBOX_KEYS = ("backend", "timeout", "timeout_factor", "timeout_floor", "timeout_ceiling",
                "memory_mb")


def _other_backends_options(backend: str, options: dict[str, Any]) -> list[str]:
    """Keys ``backend`` does not take but another registered backend does (so switching
    ``backend`` alone switches a job between e.g. ``dask`` and ``local``); empty when
    ``backend`` is unknown or takes any keyword."""
    from core.common.class_factory import ClassFactory, ClassType
    from core.common.signatures import keyword_parameters
    from core.testenvmanager.sandbox import known_backends

    if not ClassFactory.is_exists(ClassType.SANDBOX, backend):
        return []
    own = keyword_parameters(ClassFactory.get_cls(ClassType.SANDBOX, backend))
    if own.takes_any:
        return []
    foreign = [k for k in options if k not in own.accepted]
    if not foreign:
        return []
    others: set[str] = set()
    for name in known_backends():
        if name != backend:
            others.update(keyword_parameters(ClassFactory.get_cls(ClassType.SANDBOX, name)).accepted)
    return [k for k in foreign if k in others]


def _sandbox_settings(sec: Section) -> dict[str, Any]:
    """Check ``sandbox:`` strictly, without starting anything: the backend is registered, every
    other key is an option its constructor accepts, and the values make sense."""
    from core.testenvmanager.sandbox import UnknownBackendError, check_backend_options

    data = dict(sec.data)
    backend = sec.get("backend", str, "local")
    timeout = data.get("timeout", "auto")
    if timeout != "auto" and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                              or timeout <= 0):
        raise sec.error("timeout", f"must be 'auto' or a positive number of seconds, got {timeout!r}")
    for key in ("timeout_factor", "timeout_floor", "timeout_ceiling"):
        value = data.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise sec.error(key, f"must be a positive number, got {value!r}")
    memory = data.get("memory_mb", 1024)
    if isinstance(memory, bool) or not isinstance(memory, int) or memory < 16:
        raise sec.error("memory_mb", f"must be a whole number of MB >= 16, got {memory!r}")
    options = {k: v for k, v in data.items() if k not in SANDBOX_KEYS}
    for key in _other_backends_options(backend, options):
        data.pop(key)
        options.pop(key)
        msg = (f"{sec.source}:{sec.line(key) or '?'}: '{sec.child(key)}' is an option of "
               f"another backend, ignored with backend '{backend}'")
        sec.warnings.append(msg)
        logger.warning(msg)
    base_dir = Path(sec.source).parent if sec.source else None
    try:
        options = check_backend_options(backend, options, base_dir)
    except UnknownBackendError as exc:
        raise sec.error("backend", str(exc)) from None
    except TypeError as exc:
        named = next((k for k in options if f"option {k!r}" in str(exc)), None)
        raise sec.error(named, str(exc)) from None
    except ValueError as exc:
        raise sec.error(getattr(exc, "key", "min_isolation"), str(exc)) from None
    return {**data, **options}


def _task_kind(sec: Section, path: Path) -> str | None:
    """``task_kind: name`` or ``task_kind: {name, url}`` (a plugin file registering a kind that
    is not built in); the kind must be registered once the url is loaded."""
    from core.common.errors import IanvsError
    from core.common.plugin_loader import load_plugin
    from core.scenarios import get_kind

    if not sec.has("task_kind") or sec.data.get("task_kind") is None:
        return None
    if isinstance(sec.data.get("task_kind"), dict):
        ksec = sec.section("task_kind")
        name = ksec.get("name", str)
        url_raw = ksec.get("url", str, None, allow_none=True)
        if url_raw:
            load_plugin(require_file(url_raw, path, "task kind file", ksec, "url"))
        where = "task_kind.name"
    else:
        name, where = sec.get("task_kind", str), "task_kind"
    try:
        get_kind(name)
    except IanvsError as exc:
        raise sec.error(where.split(".")[0], f"{exc.message}", hint=exc.hint) from None
    return str(name)


def _code_hooks(sec: Section) -> tuple[str, ...]:
    """``code_hooks:``: a list of ``"package.module:function"`` the job trusts as record hooks
    (:mod:`core.testcasecontroller.metrics.code_tasks`). Each is imported and checked now, so a
    typo is one error naming this file; this is the only place a hook is ever imported from a
    name, and it is the job's own configuration, never a dataset record."""
    from core.testcasecontroller.metrics.code_tasks import TRUST_KEY, check_trusted_hook

    entries = sec.get(TRUST_KEY, list, [], allow_none=True) or []
    hint = ("list functions you wrote, e.g. 'mypkg.hooks:parse' (the module must be importable "
            "by the ianvs process); they run in the ianvs process over the samples' output")
    for entry in entries:
        try:
            check_trusted_hook(entry)
        except ConfigError as exc:
            raise sec.error(TRUST_KEY, f"entry {exc.message}", hint=hint) from None
    return tuple(dict.fromkeys(entries))


def load_testenv(path: Path, warnings: list[str] | None = None) -> TestEnvConfig:
    """Load and validate a testenv YAML file.

    Raises:
        ConfigError: anything wrong, naming file, line and key.
    """
    sec = load_top_section(path, "testenv", KNOWN_KEYS, warnings, what="file")
    dataset = parse_dataset_section(sec.section("dataset"))
    metric_secs = sec.sections("metrics")
    if not metric_secs:
        raise sec.error("metrics", "is empty", hint="list at least one metric")
    metrics = []
    for msec in metric_secs:
        name = msec.get("name", str)
        url_raw = msec.get("url", str, None, allow_none=True)
        url = require_file(url_raw, path, "metric file", msec, "url") if url_raw else None
        params = {k: v for k, v in msec.data.items() if k not in ("name", "url")}
        metrics.append(MetricSpec(name, url, params, path, msec.line()))
    rounds = sec.get("incremental_rounds", int, 2)
    task_kind = _task_kind(sec, path)
    return TestEnvConfig(
        source=path, dataset=dataset, metrics=tuple(metrics),
        sandbox=_sandbox_settings(sec.section("sandbox", {})),
        model_eval=dict(sec.get("model_eval", dict, {})),
        incremental_rounds=rounds, round=sec.get("round", int, 1),
        client_number=sec.get("client_number", int, 1),
        use_gpu=sec.get("use_gpu", bool, False),
        extra={k: v for k, v in sec.data.items() if k not in KNOWN_KEYS},
        task_kind=task_kind, code_hooks=_code_hooks(sec),
        hard_example_mining_mode=_mining_mode(sec))


def _mining_mode(sec: Section) -> str | None:
    """``hard_example_mining_mode`` (one of the jointinference paradigm's modes) or None."""
    if "hard_example_mining_mode" not in sec.data:
        return None
    from core.testcasecontroller.algorithm.paradigm.joint_inference import MODES

    mode = sec.get("hard_example_mining_mode", str)
    if mode not in MODES:
        raise sec.error("hard_example_mining_mode", f"is {mode!r}, which is not a mining mode",
                        hint=suggest(mode, MODES) or f"one of {', '.join(MODES)}")
    return mode
