"""Resolving testenv metrics and calling them.

Calling convention (upstream-compatible, with an opt-in extension):

* an ordinary metric is called ``metric(y_true, y_pred)``;
* if it declares a parameter named ``context``, it also gets ``context=`` a
  :class:`MetricContext` (the test case's records, its workspace folder, sandbox settings);
* extra keys of the metric's testenv entry (e.g. ``k: [1, 10]``) are passed as keyword
  arguments; the metric must declare them (checked before anything runs);
* a system metric (exact name in ``SYSTEM_METRICS``) gets ``system_metric_info`` only.

A metric may return one value, or a mapping of column name -> value: each key then becomes
a rank column (e.g. ``pass@1``, ``pass@10``, ``timeout``). A metric function may declare
the columns it will produce as ``fn.columns(**params) -> list[str]`` so ``ianvs validate``
can check ``sort_by`` names.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.common.class_factory import ClassFactory, ClassType
from core.common.errors import ConfigError, IanvsError, RegistryError, suggest
from core.common.requires import missing_requirements
from core.common.signatures import keyword_parameters
from core.compat.plugin_loader import load_plugin
from core.testcasecontroller.metrics.builtin import BUILTINS, SYSTEM_METRICS
from core.testcasecontroller.metrics.per_task import PerTaskValues
from core.testenvmanager.testenv.testenv import MetricSpec


@dataclass
class MetricContext:
    """What a context-aware metric may use besides ``(y_true, y_pred)``.

    Attributes:
        records: callable returning an iterator over the test records (all fields), in
            dataset order, aligned with ``y_pred``.
        workspace: the test case's folder (exists); metrics may cache work there.
        sandbox: the testenv ``sandbox:`` settings (backend, limits), possibly empty.
        predictions_meta: per-sample extra data the model stored (may be empty).
        show_progress: whether progress bars are wanted.
        config_dir: the testenv file's folder; relative paths in metric parameters resolve
            against it (None outside a job).
        code_hooks: the functions the job trusts as record hooks (testenv ``code_hooks:``);
            the project's own hooks are always allowed, nothing else.
        per_task: where a metric records the per-task values of the columns it averages
            (:mod:`.per_task`); the test case writes them beside its results for the
            report's intervals and paired tests.
    """

    records: Callable[[], Iterator[dict[str, Any]]]
    workspace: Path
    sandbox: dict[str, Any] = field(default_factory=dict)
    predictions_meta: list[Any] = field(default_factory=list)
    show_progress: bool = True
    config_dir: Path | None = None
    code_hooks: tuple[str, ...] = ()
    per_task: PerTaskValues = field(default_factory=PerTaskValues)


def resolve_metric(spec: MetricSpec) -> Callable[..., Any]:
    """The callable for a testenv metric entry (loading its url if it has one).

    Raises:
        RegistryError / PluginError: unknown alias or broken plugin file.
        ConfigError: extra keys the metric does not accept; an optional package the metric
            declares (``fn.requires``) is not installed.
    """
    if spec.url is not None:
        fn = load_plugin(spec.url).lookup(ClassType.GENERAL, spec.name)
    elif ClassFactory.is_exists(ClassType.GENERAL, spec.name):
        fn = ClassFactory.get_cls(ClassType.GENERAL, spec.name)
    else:
        fn = BUILTINS.get(spec.name.lower())
        if fn is None:
            known = sorted(set(BUILTINS) | set(ClassFactory.aliases(ClassType.GENERAL)))
            raise RegistryError(f"unknown metric {spec.name!r}", source=spec.source,
                                line=spec.line, hint=suggest(spec.name, known) or
                                "give the metric a url, or use one of: " + ", ".join(known))
    if not callable(fn):
        raise RegistryError(f"metric {spec.name!r} is not callable", source=spec.source,
                            line=spec.line)
    check_params(fn, spec)
    check_requirements(fn, spec)
    return fn


def check_requirements(fn: Callable[..., Any], spec: MetricSpec) -> None:
    """Insist that the optional packages ``fn`` declares (``fn.requires``) are installed, so
    that a job stops here, before any model runs, rather than when its first test case is
    scored (:mod:`core.common.requires`)."""
    try:
        missing = missing_requirements(fn, spec.params)
    except TypeError as exc:
        raise ConfigError(f"metric {spec.name!r}: {exc}", source=spec.source, line=spec.line,
                          hint="fix the metric's plugin file") from exc
    if missing:
        names = ", ".join(repr(req.package) for req in missing)
        raise ConfigError(f"metric {spec.name!r} needs {names}, not installed",
                          source=spec.source, line=spec.line,
                          hint="; ".join(dict.fromkeys(req.hint() for req in missing)))


def check_params(fn: Callable[..., Any], spec: MetricSpec) -> None:
    """Insist that ``fn`` accepts every extra key of its testenv entry."""
    names = set(keyword_parameters(fn).accepted)
    for key in spec.params:
        if key not in names:
            raise ConfigError(f"metric {spec.name!r} does not accept parameter {key!r}",
                              source=spec.source, line=spec.line,
                              hint=suggest(key, names - {"y_true", "y_pred", "context"}) or
                              "remove the key")


def declared_columns(fn: Callable[..., Any], spec: MetricSpec) -> list[str]:
    """Rank columns a metric will produce: its ``columns(**params)`` or just its name.

    ``columns`` also validates the parameter values (e.g. ``k: [0]``), without any data.

    Raises:
        ConfigError: ``columns`` rejected the parameters (naming the testenv file and line,
            and the parameter when it is the only one or the message names it).
    """
    columns = getattr(fn, "columns", None)
    if not callable(columns):
        return [spec.name]
    try:
        return list(columns(**spec.params))
    except IanvsError as exc:
        if exc.source is not None:
            raise
        key = exc.key or _named_param(spec, exc.message)
        raise ConfigError(f"metric {spec.name!r}" + (f" parameter {key!r}" if key else "")
                          + f": {exc.message}", source=spec.source, line=spec.line,
                          hint=exc.hint or "fix the metric's parameters in testenv.yaml",
                          key=key) from exc
    except (TypeError, ValueError) as exc:
        key = _named_param(spec, str(exc))
        raise ConfigError(f"metric {spec.name!r}: {exc}", source=spec.source, line=spec.line,
                          hint=f"fix the metric's parameter {key!r} in testenv.yaml" if key
                          else "fix the metric's parameters in testenv.yaml", key=key) from exc


def _named_param(spec: MetricSpec, message: str) -> str | None:
    """The parameter of ``spec`` a message is about: the only one, or the one it names."""
    if len(spec.params) == 1:
        return str(next(iter(spec.params)))
    named = [str(k) for k in spec.params if str(k) in message]
    return named[0] if len(named) == 1 else None


def check_metrics(specs: Iterable[MetricSpec]) -> list[str]:
    """Resolve every metric and its parameters once; return all rank columns they produce.

    Raises:
        IanvsError: the first metric that cannot be used (unknown alias, broken plugin file,
            unaccepted or invalid parameter).
    """
    columns: list[str] = []
    for spec in specs:
        columns += [c for c in declared_columns(resolve_metric(spec), spec) if c not in columns]
    return columns


class PlainPredictions:
    """``y_pred`` for metrics, materialised at most once.

    Metrics that declare ``context`` (this project's) get the stored predictions as they are (a
    lazy sequence read from disk, so memory stays flat); plain upstream-style metrics get a real
    ``list``, which they may copy, index, print or extend as upstream metrics do.
    """

    def __init__(self, predictions: Any) -> None:
        self.lazy = predictions
        self._plain: Any = None

    @property
    def plain(self) -> Any:
        if self._plain is None:
            lazy = self.lazy
            is_lazy = isinstance(lazy, Sequence) and not isinstance(lazy, (list, tuple, str))
            self._plain = list(lazy) if is_lazy else lazy
        return self._plain


def call_metric(fn: Callable[..., Any], spec: MetricSpec, y_true: Any, y_pred: Any,
                context: MetricContext, system_metric_info: Mapping[str, Any]) -> dict[str, Any]:
    """Call one metric per the convention above; returns column -> value.

    ``y_pred`` may be a :class:`PlainPredictions`: context-aware metrics then get its lazy
    sequence, the others a plain list.
    """
    if spec.name in SYSTEM_METRICS:
        value = fn(system_metric_info)
    else:
        names = set(keyword_parameters(fn).accepted)
        kwargs = dict(spec.params)
        if "context" in names:
            kwargs["context"] = context
        if isinstance(y_pred, PlainPredictions):
            y_pred = y_pred.lazy if "context" in names else y_pred.plain
        value = fn(y_true, y_pred, **kwargs)
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    return {spec.name: value}
