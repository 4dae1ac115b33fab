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

from core.common.config_base import Section, load_top_section, require_file, resolve_path
from core.common.errors import ConfigError, Problems, suggest
from core.testenvmanager.dataset.dataset import DatasetConfig, parse_dataset_section
from core.testenvmanager.sandbox.pool import SANDBOX_KEYS

logger = logging.getLogger(__name__)

KNOWN_KEYS = ("dataset", "metrics", "model_eval", "incremental_rounds", "round",
              "client_number", "use_gpu", "sandbox", "task_kind", "code_hooks",
              "hard_example_mining_mode")


#: the ``jointinference`` paradigm's hard-example mining modes (upstream's names)
MINING_MODES = ("mining-then-inference", "inference-then-mining", "self-design")


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
    #: the line of ``task_kind:`` (for errors about the kind)
    task_kind_line: int | None = None
    #: ``"package.module:function"`` entries of ``code_hooks:``: the only functions besides the
    #: project's own that dataset records may name as hooks (they run in the ianvs process)
    code_hooks: tuple[str, ...] = ()
    #: the ``jointinference`` paradigm's mining mode (an algorithm's own setting wins)
    hard_example_mining_mode: str | None = None




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


def _task_kind(sec: Section, path: Path) -> tuple[str | None, int | None]:
    """``task_kind: name`` or ``task_kind: {name, url}`` (a plugin file registering a kind that
    is not built in; loaded now), with the line it is on. Whether a kind of that name is
    registered is checked where the kinds are known (:func:`core.cmd.job.load_job`): this
    layer knows no kind."""
    from core.compat.plugin_loader import load_plugin

    if not sec.has("task_kind") or sec.data.get("task_kind") is None:
        return None, None
    if isinstance(sec.data.get("task_kind"), dict):
        ksec = sec.section("task_kind")
        name = ksec.get("name", str)
        url_raw = ksec.get("url", str, None, allow_none=True)
        if url_raw:
            load_plugin(require_file(url_raw, path, "task kind file", ksec, "url",
                                     package=True))
    else:
        name = sec.get("task_kind", str)
    return str(name), sec.line("task_kind")


def _code_hooks(sec: Section) -> tuple[str, ...]:
    """``code_hooks:``: a list of ``"package.module:function"`` the job trusts as record hooks
    (:mod:`core.common.hooks`; the codegen kind's records name them). Each is imported and checked now, so a
    typo is one error naming this file; this is the only place a hook is ever imported from a
    name, and it is the job's own configuration, never a dataset record."""
    from core.common.hooks import TRUST_KEY, check_trusted_hook

    entries = sec.get(TRUST_KEY, list, [], allow_none=True) or []
    hint = ("list functions you wrote, e.g. 'mypkg.hooks:parse' (the module must be importable "
            "by the ianvs process); they run in the ianvs process over the samples' output")
    for entry in entries:
        try:
            check_trusted_hook(entry)
        except ConfigError as exc:
            raise sec.error(TRUST_KEY, f"entry {exc.message}", hint=hint) from None
    return tuple(dict.fromkeys(entries))


@dataclass(frozen=True)
class TestEnvRead:
    """What :func:`read_testenv` could read of a testenv file, problems or not (``ianvs
    validate`` checks the rest of a job with it).

    Attributes:
        config: the whole configuration; None when the ``dataset`` section has a problem.
        metrics: the ``metrics`` entries that could be read.
        unread_metrics: names of the entries left out (their problem is reported).
        task_kind / task_kind_line / task_kind_url: what ``task_kind:`` names, where, and the
            plugin file it loads (None: a built-in kind, or none).
        task_kind_ok: False when ``task_kind:`` has a problem (already reported).
    """

    __test__ = False  # not a pytest class

    source: Path
    config: TestEnvConfig | None
    metrics: tuple[MetricSpec, ...] = ()
    unread_metrics: tuple[str, ...] = ()
    task_kind: str | None = None
    task_kind_line: int | None = None
    task_kind_url: Path | None = None
    task_kind_ok: bool = True


def load_testenv(path: Path, warnings: list[str] | None = None) -> TestEnvConfig:
    """Load and validate a testenv YAML file.

    Raises:
        ConfigError: anything wrong, naming file, line and key.
    """
    config = read_testenv(path, warnings, Problems()).config
    if config is None:  # a raising Problems() never lets a part fail silently
        raise ConfigError("the testenv file could not be read", source=path)
    return config


def read_testenv(path: Path, warnings: list[str] | None, problems: Problems) -> TestEnvRead:
    """Read a testenv YAML file part by part: with a collecting ``problems`` (``ianvs
    validate``) every problem of the file is added to it (the dataset, each metric entry and
    each setting on its own) and the result holds what is left; otherwise the first raises.

    Raises:
        ConfigError: the file cannot be read at all (missing, malformed YAML, no ``testenv:``).
    """
    sec = load_top_section(path, "testenv", KNOWN_KEYS, warnings, what="file")
    dataset: DatasetConfig | None = None
    with problems.part():
        dataset = parse_dataset_section(sec.section("dataset"))
    metric_secs: list[Section] = []
    with problems.part():
        metric_secs = sec.sections("metrics")
        if not metric_secs:
            raise sec.error("metrics", "is empty", hint="list at least one metric")
    metrics = []
    unread: list[str] = []
    for msec in metric_secs:
        before = len(problems.found)
        with problems.part():
            name = msec.get("name", str)
            url_raw = msec.get("url", str, None, allow_none=True)
            url = require_file(url_raw, path, "metric file", msec, "url") if url_raw else None
            params = {k: v for k, v in msec.data.items() if k not in ("name", "url")}
            metrics.append(MetricSpec(name, url, params, path, msec.line()))
        if len(problems.found) > before and isinstance(msec.data.get("name"), str):
            unread.append(msec.data["name"])
    settings: dict[str, Any] = {}
    with problems.part():
        settings["incremental_rounds"] = sec.get("incremental_rounds", int, 2)
    task_kind: str | None = None
    task_kind_line: int | None = None
    task_kind_url: Path | None = None
    task_kind_ok = False
    with problems.part():
        task_kind, task_kind_line = _task_kind(sec, path)
        task_kind_url = _task_kind_url(sec, path)
        task_kind_ok = True
    with problems.part():
        settings["sandbox"] = _sandbox_settings(sec.section("sandbox", {}))
    with problems.part():
        settings["model_eval"] = dict(sec.get("model_eval", dict, {}))
    for key, kind, default in (("round", int, 1), ("client_number", int, 1),
                               ("use_gpu", bool, False)):
        with problems.part():
            settings[key] = sec.get(key, kind, default)
    with problems.part():
        settings["code_hooks"] = _code_hooks(sec)
    with problems.part():
        settings["hard_example_mining_mode"] = _mining_mode(sec)
    config = None
    if dataset is not None:
        config = TestEnvConfig(
            source=path, dataset=dataset, metrics=tuple(metrics),
            extra={k: v for k, v in sec.data.items() if k not in KNOWN_KEYS},
            task_kind=task_kind, task_kind_line=task_kind_line, **settings)
    return TestEnvRead(path, config, tuple(metrics), tuple(unread), task_kind, task_kind_line,
                       task_kind_url, task_kind_ok)


def _task_kind_url(sec: Section, path: Path) -> Path | None:
    """The plugin file of ``task_kind: {name, url}`` (None without one); :func:`_task_kind`
    has checked it exists."""
    value = sec.data.get("task_kind")
    if isinstance(value, dict) and isinstance(value.get("url"), str) and value["url"]:
        return resolve_path(value["url"], path)
    return None


def _mining_mode(sec: Section) -> str | None:
    """``hard_example_mining_mode`` (one of the jointinference paradigm's modes) or None."""
    if "hard_example_mining_mode" not in sec.data:
        return None
    mode = sec.get("hard_example_mining_mode", str)
    if mode not in MINING_MODES:
        raise sec.error("hard_example_mining_mode", f"is {mode!r}, which is not a mining mode",
                        hint=suggest(mode, MINING_MODES) or f"one of {', '.join(MINING_MODES)}")
    return mode
