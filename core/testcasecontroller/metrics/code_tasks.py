"""Per-record execution environment and hooks (eval-framework's code-execution fields).

A test record may carry, besides HumanEval's ``prompt``/``test``/``entry_point``:

===================== =========================================================================
``run_env``           the image the task runs in (``docker`` backend; must exist on the engine)
``package_downloads`` ``{import name: PyPI name or null}`` (null: the same name): installed into
                      a task image derived from ``run_env`` at build time, never at test time
``test_code``         test code run after the sample (script mode): the run passes iff it
                      completes (exit status 0), unless ``output_parse_fn`` decides
``snippet_merge_fn``  ``"package.module:function"``: ``f(code, test_code) -> str`` builds the
                      program to run (default :func:`append_test_code`: the sample, then the
                      test code)
``output_parse_fn``   ``"package.module:function"``: ``f(output) -> bool`` (or a mapping with
                      ``passed``/``success``, or an object with ``success``) judges the run from
                      its output (stdout then stderr). Such results are marked
                      ``grading = output_parse``: the sample can print what the parser looks
                      for, so this is the weakest tier and the leaderboard shows it
``benchmark_timeout`` seconds for the whole run of the sample with its tests (like ``timeout``)
===================== =========================================================================

Functions are resolved through the project's one registry
(:class:`core.common.class_factory.ClassFactory`, group ``code_hook``): a dotted path is
registered lazily under its own name and imported on first use; never pickled or serialised.
:func:`code_task` checks every field of one record and raises one :class:`ConfigError` naming
the record and the field.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from core.common.class_factory import ClassFactory
from core.common.errors import ConfigError, IanvsError

__all__ = ["CODE_HOOK", "CodeTask", "code_task", "resolve_hook", "append_test_code",
           "parse_verdict", "OUTPUT_PARSE", "last_line_is_ok"]

#: registry group of merge and parse functions
CODE_HOOK = "code_hook"
#: the grading tier of results decided by ``output_parse_fn``
OUTPUT_PARSE = "output_parse"
FIELDS = ("run_env", "package_downloads", "test_code", "snippet_merge_fn", "output_parse_fn",
          "benchmark_timeout")


def append_test_code(code: str, test_code: str) -> str:
    """Default ``snippet_merge_fn``: the sample, a blank line, then the test code."""
    return f"{code.rstrip()}\n\n\n{test_code}"


def last_line_is_ok(output: str) -> bool:
    """An ``output_parse_fn``: passed iff the last non-blank line of the output is ``OK``
    (what ``unittest`` prints on success)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return bool(lines) and lines[-1] == "OK"


for _fn in (append_test_code, last_line_is_ok):
    ClassFactory.register_cls(_fn, CODE_HOOK, f"{__name__}:{_fn.__name__}")


def resolve_hook(path: Any, where: str, field_name: str) -> Callable[..., Any]:
    """The function registered (or importable) as ``path`` (``"package.module:function"``).

    Raises :class:`ConfigError` naming ``where`` and ``field_name`` when the path is malformed,
    the module or attribute is missing, or the object is not callable.
    """
    if not isinstance(path, str) or path.count(":") != 1 or not all(path.split(":")):
        raise ConfigError(f"{where}: {field_name} must be 'package.module:function', got {path!r}")
    if not ClassFactory.is_exists(CODE_HOOK, path):
        ClassFactory.register_lazy(CODE_HOOK, path, path)
    try:
        fn = ClassFactory.get_cls(CODE_HOOK, path)
    except (ImportError, AttributeError, IanvsError) as exc:
        ClassFactory.unregister(CODE_HOOK, path)
        raise ConfigError(f"{where}: {field_name} {path!r} cannot be loaded: "
                          f"{type(exc).__name__}: {exc}") from None
    if not callable(fn):
        ClassFactory.unregister(CODE_HOOK, path)
        raise ConfigError(f"{where}: {field_name} {path!r} is not a function")
    return fn  # type: ignore[no-any-return]


@dataclass(frozen=True)
class CodeTask:
    """What one record says about how its samples run (see the module docstring)."""

    run_env: str | None = None
    packages: Mapping[str, str] = field(default_factory=dict)
    test_code: str | None = None
    merge_fn: str = ""
    parse_fn: str = ""
    timeout: float | None = None

    @property
    def needs_container(self) -> bool:
        return bool(self.run_env or self.packages)

    def program(self, code: str) -> str:
        """The program to run for a sample's ``code`` (merged with ``test_code`` when set)."""
        if self.test_code is None:
            return code
        merge = resolve_hook(self.merge_fn, "snippet_merge_fn", "snippet_merge_fn") \
            if self.merge_fn else append_test_code
        merged = merge(code, self.test_code)
        if not isinstance(merged, str):
            raise ConfigError(f"snippet_merge_fn {self.merge_fn!r} returned "
                              f"{type(merged).__name__}, not the program text")
        return merged

    def cache_key(self) -> list[Any]:
        return [self.run_env, sorted(self.packages.items()), self.test_code, self.merge_fn,
                self.parse_fn]


def code_task(record: Mapping[str, Any]) -> CodeTask:
    """Check and collect a record's execution fields; raises one :class:`ConfigError` naming
    the record's ``task_id`` and the bad field (functions are resolved here, so an unknown one
    fails before anything runs)."""
    from core.testenvmanager.sandbox.images import parse_package_downloads

    where = f"record {record.get('task_id', '?')!r}"
    if not any(record.get(name) is not None for name in FIELDS):
        return CodeTask()
    run_env = record.get("run_env")
    if run_env is not None and (not isinstance(run_env, str) or not run_env.strip()):
        raise ConfigError(f"{where}: run_env must be an image name, got {run_env!r}")
    try:
        packages = parse_package_downloads(record.get("package_downloads"), where)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    test_code = record.get("test_code")
    if test_code is not None and not isinstance(test_code, str):
        raise ConfigError(f"{where}: test_code must be text, got {type(test_code).__name__}")
    names: dict[str, str] = {}
    for key in ("snippet_merge_fn", "output_parse_fn"):
        value = record.get(key)
        if value is not None:
            resolve_hook(value, where, key)
            names[key] = str(value)
    if "snippet_merge_fn" in names and test_code is None:
        raise ConfigError(f"{where}: snippet_merge_fn needs test_code to merge with")
    timeout = record.get("benchmark_timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not math.isfinite(timeout) or timeout <= 0):
        raise ConfigError(f"{where}: benchmark_timeout must be a positive number of seconds, "
                          f"got {timeout!r}")
    return CodeTask(run_env=run_env.strip() if run_env else None, packages=packages,
                    test_code=test_code, merge_fn=names.get("snippet_merge_fn", ""),
                    parse_fn=names.get("output_parse_fn", ""),
                    timeout=float(timeout) if timeout is not None else None)


def parse_verdict(task: CodeTask, outcome: str, stdout: str, stderr: str) -> tuple[str, str]:
    """``(outcome, detail)`` after ``output_parse_fn``. Only a run that finished (``passed``,
    ``failed`` or ``error`` by exit status) is re-judged; limits, syntax errors, sandbox
    violations and infra errors stand. A parser that raises is a ``failed`` run (its message
    in the detail), never an infra error the sample could provoke on purpose."""
    if not task.parse_fn or outcome not in ("passed", "failed", "error"):
        return outcome, ""
    parse = resolve_hook(task.parse_fn, "output_parse_fn", "output_parse_fn")
    try:
        verdict = parse(stdout + stderr)
    except Exception as exc:  # noqa: BLE001 - the output is the sample's; its parse may fail
        return "failed", f"output_parse_fn raised {type(exc).__name__}: {exc}"
    if isinstance(verdict, Mapping):
        ok = verdict.get("passed", verdict.get("success"))
    else:
        ok = getattr(verdict, "success", verdict)
    return ("passed" if ok is True else "failed"), f"graded by {task.parse_fn} on the output"
