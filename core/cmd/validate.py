"""``ianvs validate``: everything that can be checked without running a model, in one pass.

Every problem is reported, not only the first, each as one line ``<file>:<line>: <what> (<how
to fix>)``. The files are read part by part (:class:`core.common.errors.Problems`): a part with
a problem is reported and left out of the checks that depend on it (a metric that cannot be
resolved is not reported again as a missing ``sort_by`` column; a testenv whose ``dataset``
has a problem has its records unchecked), and every independent part is still checked. Only a
job file that cannot be read at all stops it (one error, as ``ianvs -f`` gives).

Checks: the three YAML kinds parse and validate (each metric entry, module, hyperparameter item
and rank item on its own); every algorithm's paradigm is one this project runs (a paradigm
upstream knows but this project does not implement is an error, not "OK"); every module url
imports and registers its alias in the right group; every hyperparameter combination is
accepted by its module (``check_hyperparameters`` or the ``__init__`` signature), reported on
the hyperparameter's line; a basemodel answering a task kind
(:class:`core.scenarios.model.TaskKindModel`) answers the testenv's ``task_kind``; a task kind
is registered under its own ``name`` (a kind copied from another keeps the other's name and
``kind`` otherwise); every metric resolves and accepts its extra keys; every ``sort_by`` metric
and every ``selected_dataitem.metrics`` name is a column some metric produces; the test set
exists, is not empty and every line parses (JSONL records are streamed and must carry
``x_field``); records' execution fields are checked (a hook a record names must be the
project's or trusted in testenv ``code_hooks:``; container images are not built).

Anything a plugin raises other than an :class:`IanvsError` (a bug in it) is a problem line too,
naming the plugin file and the line that raised; the traceback is logged at DEBUG level
(``ianvs validate --debug`` shows it).
"""
from __future__ import annotations

import functools
import inspect
import logging
import re
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from core.cmd.job import JobRead, read_job
from core.common.class_factory import ClassFactory
from core.common.errors import IanvsError, Problems, suggest
from core.common.signatures import keyword_parameters
from core.compat.plugin_loader import load_plugin
from core.storymanager.rank.types import ALL, RankConfig
from core.testcasecontroller.algorithm.config import (IMPLEMENTED_PARADIGMS, PARADIGMS,
                                                      AlgorithmConfig, ModuleSpec)
from core.testcasecontroller.metrics.calling import declared_columns, resolve_metric
from core.testenvmanager.testenv.testenv import TestEnvRead

logger = logging.getLogger(__name__)


def _at(source: Path | str | None, line: int | None) -> str:
    """``file:line`` (the file alone when the line is not known)."""
    return f"{source}:{line}" if line is not None else str(source)


def _problem(exc: IanvsError, source: Path | str | None, line: int | None,
             prefix: str = "") -> str:
    """One line for ``exc``: as it is when it names its file, else placed at ``source:line``
    after ``prefix``."""
    if exc.source is not None:
        return str(exc)
    text = f"{_at(source, line)}: {prefix}{exc.message}"
    return text + (f" ({exc.hint})" if exc.hint else "")


def _unexpected(exc: BaseException, what: str, plugin: Path | None, fallback: str) -> str:
    """One line for an exception that is not an :class:`IanvsError` (a bug in a plugin or in
    ianvs): where the plugin file raised it (``fallback`` when not in a plugin), its type and
    message. The traceback goes to the DEBUG log (``--debug``)."""
    logger.debug("%s raised %s", what, type(exc).__name__, exc_info=exc)
    where = fallback
    if plugin is not None:
        where = str(plugin)
        root = plugin.resolve()
        for frame in reversed(traceback.extract_tb(exc.__traceback__)):
            file = Path(frame.filename)
            if file.is_absolute() and (file == root or root in file.parents):
                where = f"{frame.filename}:{frame.lineno}"
                break
    owner = f"the plugin {plugin.name}" if plugin is not None else "ianvs"
    return (f"{where}: {what} raised {type(exc).__name__}: {exc} (a bug in {owner}; "
            "'ianvs validate --debug' shows the traceback)")


def _guard(what: str, fallback: str, check: Callable[[], list[str]]) -> list[str]:
    """``check()``'s problems; a bug in it is one problem line instead of a traceback."""
    try:
        return check()
    except Exception as exc:  # noqa: BLE001 - reported as a problem line, traceback at DEBUG
        return [_unexpected(exc, what, None, fallback)]


def _named_key(message: str, hyperparameters: Mapping[str, Any]) -> str | None:
    """The hyperparameter a message quotes by name, if any (to find its line)."""
    return next((str(name) for name in hyperparameters
                 if f"'{name}'" in message or f'"{name}"' in message), None)


def _attribute_line(cls: type, attr: str) -> tuple[str, int | None]:
    """``(file, line)`` where ``attr`` is set in the class body of ``cls`` (or of the base
    class that sets it); the line of the class when it cannot be found, None when the source
    cannot be read."""
    owner = next((k for k in cls.__mro__ if attr in vars(k)), cls)
    try:
        file = inspect.getsourcefile(owner) or owner.__module__
        lines, start = inspect.getsourcelines(owner)
    except (OSError, TypeError):
        return owner.__module__, None
    pattern = re.compile(rf"\s*{re.escape(attr)}\s*(:[^=]*)?=(?!=)")
    return file, next((start + i for i, text in enumerate(lines) if pattern.match(text)), start)


def _check_hyperparameters(cls: Any, spec: ModuleSpec, source: Path,
                           plugin: Path | None = None) -> list[str]:
    """Problems with the hyperparameter names/values of one module, without building it.

    A class with a ``check_hyperparameters(mapping)`` classmethod decides itself (it raises
    :class:`IanvsError`); otherwise, when its ``__init__`` takes no ``**kwargs``, every name
    must be one of its keyword parameters. One problem per distinct message, on the line of
    the hyperparameter it is about (its ``key``, or the one it quotes; else the module's).
    A problem about an item left out of the grid (:attr:`ModuleSpec.skipped`) is not repeated;
    anything else the check raises is reported as a bug in ``plugin``.
    """
    found: list[str] = []
    check = getattr(cls, "check_hyperparameters", None)
    accepted: list[str] | None = None
    if check is None and isinstance(cls, type):
        takes = keyword_parameters(cls)
        if not takes.takes_any:
            accepted = list(takes.accepted)
    what = f"module {spec.type} {spec.name!r}: "
    for hps in spec.variants:
        text = None
        if check is not None:
            try:
                check(dict(hps))
            except IanvsError as exc:
                key = exc.key or _named_key(exc.message, hps)
                if key is not None and key in spec.skipped:
                    continue  # that item's own problem is reported
                text = _problem(exc, source, spec.line_of(key), what)
            except Exception as exc:  # noqa: BLE001 - a bug in the plugin: one problem line
                found.append(_unexpected(exc, f"{what}check_hyperparameters", plugin,
                                         _at(source, spec.line)))
                break  # the other combinations would most likely trip over the same bug
        elif accepted is not None:
            unknown = sorted(set(hps) - set(accepted))
            if unknown:
                text = (f"{_at(source, spec.line_of(unknown[0]))}: {what}hyperparameter "
                        f"{unknown[0]!r} is not a parameter of {cls.__name__}.__init__ ("
                        + (suggest(unknown[0], accepted) or
                           f"it takes: {', '.join(accepted) or 'nothing'}") + ")")
        if text and text not in found:
            found.append(text)
    return found


def _kind_of_model(cls: Any, spec: ModuleSpec, algorithm: AlgorithmConfig,
                   testenv: TestEnvRead) -> list[str]:
    """A module answering a task kind (a :class:`~core.scenarios.model.TaskKindModel`) must
    answer the job's: a basemodel.py copied from another kind's example keeps that kind's
    ``kind``, and would prompt and answer as that kind while the records are checked and
    scored as the testenv's."""
    from core.scenarios import DEFAULT_KIND
    from core.scenarios.model import TaskKindModel

    if not (isinstance(cls, type) and issubclass(cls, TaskKindModel)):
        return []
    want = testenv.task_kind or DEFAULT_KIND
    have = getattr(cls, "kind", "")
    if have == want:
        return []
    file, line = _attribute_line(cls, "kind")
    said = (f"{_at(testenv.source, testenv.task_kind_line)} sets task_kind {want!r}"
            if testenv.task_kind else
            f"{testenv.source} sets no task_kind, so the job's kind is {want!r}")
    fix = f"set kind = {want!r} in {cls.__name__}"
    if have:
        fix += f", or task_kind: {have!r} in {testenv.source.name}"
    return [f"{_at(file, line)}: {cls.__name__} (module {spec.type} {spec.name!r} of "
            f"{_at(algorithm.source, spec.line)}) answers task kind {have!r}, but {said}; it "
            f"would prompt as {have!r} while the records are checked and scored as {want!r} "
            f"({fix})"]


def _check_module(spec: ModuleSpec, algorithm: AlgorithmConfig, read: JobRead) -> list[str]:
    """Problems of one module: its url and alias, its hyperparameters, its task kind."""
    what = f"module {spec.type} {spec.name!r}: "
    if spec.url is None:
        if spec.type == "basemodel" and not ClassFactory.is_exists(spec.group, spec.name):
            return [f"{_at(algorithm.source, spec.line)}: {what}has no url and no built-in of "
                    f"that name (add 'url:', the file that registers {spec.name!r})"]
        return []
    try:
        cls = load_plugin(spec.url).lookup(spec.group, spec.name)
    except IanvsError as exc:
        return [_problem(exc, algorithm.source, spec.line, what)]
    except Exception as exc:  # noqa: BLE001 - a bug in the plugin: one problem line
        return [_unexpected(exc, f"{what}looking up {spec.name!r}", spec.url,
                            _at(algorithm.source, spec.line))]
    found = []
    if spec.type != "hard_example_mining":
        found += _check_hyperparameters(cls, spec, algorithm.source, spec.url)
    if read.testenv is not None and _kind_known(read.testenv):
        found += _kind_of_model(cls, spec, algorithm, read.testenv)
    return found


def _kind_known(testenv: TestEnvRead) -> bool:
    """Whether the job's kind is known: ``task_kind:`` could be read and names a registered
    kind, or none (the default kind). A kind registered under an alias that is not its name
    is known (that problem is reported on its own)."""
    from core.scenarios.base import TASK_KIND

    return testenv.task_kind_ok and (not testenv.task_kind
                                     or ClassFactory.is_exists(TASK_KIND, testenv.task_kind))


def _check_algorithm(algorithm: AlgorithmConfig, read: JobRead) -> list[str]:
    """Problems of one algorithm file beyond its own reading: paradigm and modules."""
    found = []
    paradigm = algorithm.paradigm_type
    where = _at(algorithm.source, algorithm.lines.get("paradigm_type"))
    if paradigm in PARADIGMS and paradigm not in IMPLEMENTED_PARADIGMS:
        found.append(f"{where}: paradigm_type {paradigm!r} is an upstream Ianvs paradigm this "
                     "project does not implement, so its test cases would fail (implemented: "
                     f"{', '.join(IMPLEMENTED_PARADIGMS)})")
    if paradigm == "jointinference":
        have = {spec.type for spec in algorithm.modules}
        need = ("edgemodel", "cloudmodel", "hard_example_mining")
        if not set(need) <= have:
            found.append(f"{_at(algorithm.source, algorithm.lines.get('modules'))}: "
                         f"jointinference needs modules of type {', '.join(need)}; missing: "
                         f"{', '.join(t for t in need if t not in have)} (add them to "
                         "'modules:')")
    for spec in algorithm.modules:
        found += _guard(f"checking module {spec.type} {spec.name!r}",
                        _at(algorithm.source, spec.line),
                        functools.partial(_check_module, spec, algorithm, read))
    return found


def _default_columns(fn: Any) -> list[str]:
    """The columns a metric declares with its default parameters (none if it cannot say)."""
    columns = getattr(fn, "columns", None)
    try:
        return list(columns()) if callable(columns) else []
    except Exception:  # noqa: BLE001 - only a guess at what a broken metric would produce
        return []


def _check_metrics(testenv: TestEnvRead) -> tuple[list[str], list[str], set[str]]:
    """``(problems, columns, unchecked)``: each metric entry resolved and its parameters
    checked on its own; the rank columns the good ones produce; and the names that may be
    columns of the ones that could not be checked (not reported again as missing columns)."""
    found: list[str] = []
    columns: list[str] = []
    unchecked = set(testenv.unread_metrics)
    for spec in testenv.metrics:
        fn = None
        try:
            fn = resolve_metric(spec)
            columns += [c for c in declared_columns(fn, spec) if c not in columns]
            continue
        except IanvsError as exc:
            found.append(_problem(exc, spec.source, spec.line, f"metric {spec.name!r}: "))
        except Exception as exc:  # noqa: BLE001 - a bug in the metric: one problem line
            found.append(_unexpected(exc, f"metric {spec.name!r}", spec.url,
                                     _at(spec.source, spec.line)))
        unchecked.add(spec.name)
        unchecked.update(_default_columns(fn))
    return found, columns, unchecked


def _check_rank(rank: RankConfig, source: Path, columns: list[str],
                unchecked: set[str]) -> list[str]:
    """Every ``sort_by`` metric and ``selected_dataitem.metrics`` name must be a column some
    testenv metric produces (a selected name that is not would be an empty column)."""
    if not columns:
        return []

    def hint(metric: str) -> str:
        return suggest(metric, columns) or f"metric columns: {', '.join(columns)}"

    found = []
    for i, (metric, _) in enumerate(rank.sort_by):
        if metric not in columns and metric not in unchecked:
            found.append(f"{_at(source, rank.line(f'sort_by[{i}]'))}: rank.sort_by metric "
                         f"{metric!r} is not produced by any testenv metric ({hint(metric)})")
    if tuple(rank.selected_metrics) != (ALL,):
        for i, metric in enumerate(rank.selected_metrics):
            if metric not in columns and metric not in unchecked:
                line = rank.line(f"selected_dataitem.metrics[{i}]")
                found.append(f"{_at(source, line)}: rank.selected_dataitem.metrics name "
                             f"{metric!r} is not produced by any testenv metric, so its column "
                             f"would stay empty ({hint(metric)})")
    return found


def _kind_names(testenv: TestEnvRead) -> list[str]:
    """Every task kind a ``task_kind: {name, url}`` file registers must be registered under its
    own ``name`` (a kind copied from another's folder keeps the other's name otherwise). The
    kind the testenv names is left out: looking it up (:func:`core.scenarios.get_kind`, when
    the job was read) already refuses that mismatch."""
    from core.scenarios.base import TASK_KIND

    if testenv.task_kind_url is None:
        return []
    try:
        plugin = load_plugin(testenv.task_kind_url)
    except IanvsError:
        return []  # reported when the testenv was read
    found: list[str] = []
    for reg in plugin.registrations:
        obj, alias = reg.obj, reg.alias
        name = getattr(obj, "name", None)
        if reg.group != TASK_KIND or name == alias or alias == testenv.task_kind:
            continue
        label = getattr(obj, "__name__", repr(obj))
        file, line = (_attribute_line(obj, "name") if isinstance(obj, type)
                      else (str(testenv.task_kind_url), None))
        text = (f"{_at(file, line)}: task kind class {label} is registered as {alias!r} "
                f"but its name is {name!r}; a kind's name and alias must be the same (set "
                f"name = {alias!r} in {label}, or register it with alias={name!r})")
        if text not in found:
            found.append(text)
    return found


def _check_data(read: JobRead) -> list[str]:
    """The test set and, when the task kind is known, its records and what the kind needs of
    the job (as before a run, building nothing)."""
    job, testenv = read.job(), read.testenv
    if job is None or testenv is None:
        return []
    try:
        job.testenv.dataset.check_test_split()
        if not (testenv.task_kind_ok and read.kind_ok):
            return []  # the kind's problem is reported; its checks would be guesses
        if job.testenv.task_kind:
            from core.scenarios import check_records

            check_records(job.testenv.task_kind, job.testenv.dataset)
        from core.cmd.runner import check_kind

        check_kind(job, prepare=False)
    except IanvsError as exc:
        return [_problem(exc, testenv.source, testenv.task_kind_line)]
    except Exception as exc:  # noqa: BLE001 - a bug in the kind's checks: one problem line
        return [_unexpected(exc, "the task kind's checks of the records", testenv.task_kind_url,
                            _at(testenv.source, testenv.task_kind_line))]
    return []


def _check_budget(read: JobRead) -> list[str]:
    """Warnings for module variants whose ``max_tokens`` or ``n_ctx`` cannot hold the whole
    answers the kind's prompts ask for (:mod:`core.scenarios.budget`), one per variant and
    limit, at the hyperparameter's line."""
    from core.cmd.runner import answer_sizes_of
    from core.scenarios import job_kind
    from core.scenarios.budget import budget_problems, consequence

    job, testenv = read.job(), read.testenv
    if job is None or testenv is None or not (testenv.task_kind_ok and read.kind_ok):
        return []
    sizes = answer_sizes_of(job)
    if not sizes:
        return []
    effect = consequence(job_kind(job.testenv.task_kind).name)
    found: list[str] = []
    for _, algorithm in read.algorithms:
        for spec in algorithm.modules:
            for variant in spec.variants:
                for problem in budget_problems(sizes, variant):
                    found.append(f"{_at(algorithm.source, spec.line_of(problem.limit))}: "
                                 f"{problem.text}: {effect} (raise {problem.limit})")
    return list(dict.fromkeys(found))


def validate_job(path: Path) -> tuple[list[str], list[str]]:
    """Every problem of the job at ``path``, found in one pass: ``(problems, warnings)``, each
    problem one line ``<file>:<line>: <what> (<how to fix>)``.

    Raises:
        IanvsError: the job file itself cannot be read (missing, malformed YAML, no
            ``benchmarkingjob:``): nothing else can be checked.
    """
    collected = Problems(collect=True)
    try:
        read = read_job(path, collected)
    except IanvsError:
        raise
    except Exception as exc:  # noqa: BLE001 - a bug: one problem line, traceback at DEBUG
        return [_unexpected(exc, "reading the job", None, str(path))], []
    problems = [str(exc) for exc in collected.found]
    for _, algorithm in read.algorithms:
        problems += _guard("checking the algorithm", str(algorithm.source),
                           functools.partial(_check_algorithm, algorithm, read))
    testenv = read.testenv
    if testenv is not None:
        found, columns, unchecked = _check_metrics(testenv)
        problems += found
        if read.rank is not None:
            problems += _guard("checking the rank section", str(read.source), functools.partial(
                _check_rank, read.rank, read.source, columns, unchecked))
        problems += _guard("checking the task kind", str(testenv.source),
                           functools.partial(_kind_names, testenv))
        problems += _check_data(read)
    warnings = list(read.warnings)
    if not problems:
        warnings += _guard("checking the token budget", str(path),
                           functools.partial(_check_budget, read))
    return list(dict.fromkeys(problems)), warnings
