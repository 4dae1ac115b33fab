"""``ianvs validate``: everything that can be checked without running a model.

Checks: the three YAML kinds parse and validate; every algorithm's paradigm is one this
project runs (a paradigm upstream knows but this project does not implement is an error, not
"OK"); every module url imports and registers
its alias in the right group; every hyperparameter combination is accepted by its module
(``check_hyperparameters`` or the ``__init__`` signature); every metric resolves and accepts
its extra keys (a metric that fails to import is reported as that import error, and a
``sort_by`` on it is not reported again as "not produced"); every ``sort_by`` metric is a
column some metric produces; the test set
exists, is not empty and every line parses (JSONL records are streamed and must carry
``x_field``); records' execution fields are checked (a hook a record names must be the
project's or trusted in testenv ``code_hooks:``; container images are not built).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from core.cmd.job import load_job
from core.common.class_factory import ClassFactory
from core.common.errors import IanvsError, suggest
from core.common.plugin_loader import load_plugin
from core.common.signatures import keyword_parameters
from core.testcasecontroller.algorithm.config import IMPLEMENTED_PARADIGMS, ModuleSpec
from core.testcasecontroller.metrics.calling import check_metrics


def _check_hyperparameters(cls: Any, spec: ModuleSpec, source: Path) -> list[str]:
    """Problems with the hyperparameter names/values of one module, without building it.

    A class with a ``check_hyperparameters(mapping)`` classmethod decides itself (it raises
    :class:`IanvsError`); otherwise, when its ``__init__`` takes no ``**kwargs``, every name
    must be one of its keyword parameters. One problem per distinct message.
    """
    found: list[str] = []
    check = getattr(cls, "check_hyperparameters", None)
    accepted: list[str] | None = None
    if check is None and isinstance(cls, type):
        takes = keyword_parameters(cls)
        if not takes.takes_any:
            accepted = list(takes.accepted)
    for hps in spec.variants:
        message = None
        if check is not None:
            try:
                check(dict(hps))
            except IanvsError as exc:
                message = f"{exc.message}" + (f" ({exc.hint})" if exc.hint else "")
        elif accepted is not None:
            unknown = sorted(set(hps) - set(accepted))
            if unknown:
                message = (f"hyperparameter {unknown[0]!r} is not a parameter of "
                           f"{cls.__name__}.__init__ ("
                           + (suggest(unknown[0], accepted) or
                              f"it takes: {', '.join(accepted) or 'nothing'}") + ")")
        if message:
            text = f"{source}: module {spec.type} {spec.name!r}: {message}"
            if text not in found:
                found.append(text)
    return found


def validate_job(path: Path) -> tuple[list[str], list[str]]:
    """Return ``(problems, warnings)``; config errors that stop parsing are raised."""
    job = load_job(path)
    problems: list[str] = []
    for _, algorithm in job.algorithms:
        if algorithm.paradigm_type not in IMPLEMENTED_PARADIGMS:
            problems.append(f"{algorithm.source}: paradigm_type {algorithm.paradigm_type!r} is "
                            "an upstream Ianvs paradigm this project does not implement "
                            f"(implemented: {', '.join(IMPLEMENTED_PARADIGMS)}); its test "
                            "cases would fail")
        if algorithm.paradigm_type == "jointinference":
            have = {spec.type for spec in algorithm.modules}
            need = ("edgemodel", "cloudmodel", "hard_example_mining")
            if not set(need) <= have:
                problems.append(f"{algorithm.source}: jointinference needs modules of type "
                                f"{', '.join(need)}; missing: "
                                f"{', '.join(t for t in need if t not in have)}")
        for spec in algorithm.modules:
            try:
                if spec.url is not None:
                    cls = load_plugin(spec.url).lookup(spec.group, spec.name)
                    if spec.type != "hard_example_mining":
                        problems += _check_hyperparameters(cls, spec, algorithm.source)
                elif spec.type in ("basemodel",) and not ClassFactory.is_exists(
                        spec.group, spec.name):
                    problems.append(f"{algorithm.source}: module {spec.type} {spec.name!r} "
                                    "has no url and no built-in of that name")
            except IanvsError as exc:
                problems.append(str(exc))
    columns: list[str] = []
    broken: set[str] = set()
    for metric_spec in job.testenv.metrics:
        try:
            columns += check_metrics([metric_spec])
        except IanvsError as exc:
            problems.append(str(exc))
            broken.add(metric_spec.name)
    for metric, _ in job.rank.sort_by:
        if metric in broken:
            continue  # its own error is reported above
        if columns and metric not in columns:
            hint = suggest(metric, columns) or f"metric columns: {', '.join(columns)}"
            problems.append(f"{job.source}: rank.sort_by metric {metric!r} is not produced "
                            f"by any testenv metric ({hint})")
    try:
        job.testenv.dataset.check_test_split()
        if job.testenv.task_kind:
            from core.scenarios import check_records

            check_records(job.testenv.task_kind, job.testenv.dataset)
        from core.cmd.runner import check_code_records

        check_code_records(job, prepare=False)
    except IanvsError as exc:
        problems.append(str(exc))
    return problems, list(job.warnings)
