"""Per-record execution environment and hooks (eval-framework's code-execution fields).

A test record may carry, besides HumanEval's ``prompt``/``test``/``entry_point``:

===================== =========================================================================
``run_env``           the image the task runs in (``docker`` backend; must exist on the engine)
``package_downloads`` ``{import name: PyPI name or null}`` (null: the same name): installed into
                      a task image derived from ``run_env`` at build time, never at test time
``test_code``         test code run after the sample (script mode): the run passes iff it
                      completes (exit status 0), unless ``output_parse_fn`` decides
``snippet_merge_fn``  the name of an allowed hook ``f(code, test_code) -> str`` that builds the
                      program to run (default ``append_test_code``: the sample, then the test
                      code)
``output_parse_fn``   the name of an allowed hook ``f(output) -> bool`` (or a mapping with
                      ``passed``/``success``, or an object with ``success``) that judges the run
                      from its output (stdout then stderr). Such results are marked
                      ``grading = output_parse``: the sample can print what the parser looks
                      for, so this is the weakest tier and the leaderboard shows it
``benchmark_timeout`` seconds for the whole run of the sample with its tests (like ``timeout``)
===================== =========================================================================

Hooks are host code, and a dataset is untrusted input, so a record can only *name* a hook
that is already allowed; it never supplies code or an import path of its own:

* the project's hooks (:data:`BUILTIN_HOOKS`), by short name (``append_test_code``,
  ``last_line_is_ok``) or by dotted name (``core.scenarios.codegen.records:
  last_line_is_ok``). They work on plain data: strings in, a string or a bool out;
* a function the *job* trusts: listed as ``"package.module:function"`` under ``code_hooks:``
  in testenv.yaml (:func:`check_trusted_hook` checks and imports it when the file is loaded).
  A trusted hook runs in the ``ianvs`` process, unsandboxed, over the sample's output (which
  the sample controls): only trust code you wrote or reviewed.

**Executable records.** A metric that runs each record's code (marked with
:func:`executes_code`, e.g. ``pass_at_k``) needs every record to be runnable:
:func:`check_executable` requires a non-empty string ``task_id`` and a string ``prompt``, and
either ``test`` (Python defining ``check(candidate)``) with an identifier ``entry_point``
(HumanEval style) or ``test_code`` (script style); optional fields have their documented types
(``canonical_solution`` text, ``timeout`` positive seconds, ``grading`` a tier).

Any other value is refused by :func:`code_task` with one :class:`ConfigError` naming the record,
the field, the value, the allowed hooks and how to trust a function in testenv.yaml, *before*
anything is imported or called: a module named only by a dataset is never imported (importing
alone can run code). The allowed set is the explicit ``trusted`` argument plus
:data:`BUILTIN_HOOKS`, never whatever happens to be registered in the process. Functions are
kept in the project's one registry (:class:`core.common.class_factory.ClassFactory`, group
``code_hook``); a resolved :class:`CodeTask` holds its functions, never pickled or serialised.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from core.common.class_factory import ClassFactory
from core.common.errors import ConfigError
from core.common.hooks import CODE_HOOK, TRUST_KEY, check_trusted_hook, load_hook

__all__ = ["CODE_HOOK", "BUILTIN_HOOKS", "HOOK_FIELDS", "CodeTask", "code_task", "resolve_hook",
           "check_trusted_hook", "allowed_hooks", "append_test_code", "parse_verdict",
           "OUTPUT_PARSE", "last_line_is_ok", "executes_code", "runs_code", "check_executable"]

#: the grading tier of results decided by ``output_parse_fn``
OUTPUT_PARSE = "output_parse"
#: record fields that name a hook
HOOK_FIELDS = ("snippet_merge_fn", "output_parse_fn")
FIELDS = ("run_env", "package_downloads", "test_code", *HOOK_FIELDS, "benchmark_timeout")
#: where the project's hooks lived before the codegen kind had its own folder: datasets that
#: name them by that dotted name keep working
_OLD_MODULE = "core.testcasecontroller.metrics.code_tasks"


_F = TypeVar("_F", bound=Callable[..., Any])
#: the attribute :func:`executes_code` sets on a metric function
_EXECUTES = "executes_code"
_EXECUTABLE_HINT = ("a record that a code-executing metric runs needs task_id, prompt, and test "
                    "with entry_point (HumanEval style) or test_code (script style); see "
                    "docs/proposals/scenarios/smart_coding/codegen.md")


def executes_code(fn: _F) -> _F:
    """Mark the metric function ``fn`` as one that runs each test record's code: a job using it
    has every record checked with :func:`check_executable` before anything runs. Returns
    ``fn``."""
    setattr(fn, _EXECUTES, True)
    return fn


def runs_code(fn: Any) -> bool:
    """Whether the metric ``fn`` was marked with :func:`executes_code`."""
    return getattr(fn, _EXECUTES, False) is True


def _text_field(record: Mapping[str, Any], name: str, where: str, required: bool) -> None:
    value = record.get(name)
    if value is None and not required:
        return
    if name not in record:
        raise ConfigError(f"{where}: field {name!r} is missing", hint=_EXECUTABLE_HINT)
    if not isinstance(value, str):
        raise ConfigError(f"{where}: field {name!r} must be text, got "
                          f"{type(value).__name__} {value!r}"[:200], hint=_EXECUTABLE_HINT)


def check_executable(record: Mapping[str, Any]) -> None:
    """Check that a code-executing metric can run ``record`` (see the module docstring).

    Raises:
        ConfigError: the first missing or mistyped field, naming the record (its ``task_id``)
            and the field; without location (the caller adds file and line).
    """
    from core.testenvmanager.sandbox.types import GradingTier

    task_id = record.get("task_id")
    where = f"record {task_id!r}" if isinstance(task_id, str) else "record"
    _text_field(record, "task_id", where, required=True)
    if not str(task_id).strip():
        raise ConfigError(f"{where}: field 'task_id' is empty", hint=_EXECUTABLE_HINT)
    script = record.get("test_code") is not None
    _text_field(record, "prompt", where, required=True)
    _text_field(record, "test", where, required=not script)
    _text_field(record, "entry_point", where, required=not script)
    _text_field(record, "canonical_solution", where, required=False)
    entry = record.get("entry_point")
    if isinstance(entry, str) and not entry.isidentifier():
        raise ConfigError(f"{where}: field 'entry_point' must be a Python identifier (the "
                          f"function under test), got {entry!r}", hint=_EXECUTABLE_HINT)
    timeout = record.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not math.isfinite(timeout) or timeout <= 0):
        raise ConfigError(f"{where}: field 'timeout' must be a positive number of seconds, got "
                          f"{timeout!r}")
    tiers = [tier.value for tier in GradingTier]
    grading = record.get("grading")
    if grading is not None and grading not in tiers:
        raise ConfigError(f"{where}: field 'grading' must be one of {', '.join(tiers)}, got "
                          f"{grading!r}")


def append_test_code(code: str, test_code: str) -> str:
    """Default ``snippet_merge_fn``: the sample, a blank line, then the test code."""
    return f"{code.rstrip()}\n\n\n{test_code}"


def last_line_is_ok(output: str) -> bool:
    """An ``output_parse_fn``: passed iff the last non-blank line of the output is ``OK``
    (what ``unittest`` prints on success)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return bool(lines) and lines[-1] == "OK"


#: the project's own hooks by every name a record may use: the short alias and the dotted
#: ``module:function`` name (both registered in the ``code_hook`` group)
BUILTIN_HOOKS: dict[str, Callable[..., Any]] = {}
for _fn in (append_test_code, last_line_is_ok):
    for _name in (_fn.__name__, f"{__name__}:{_fn.__name__}", f"{_OLD_MODULE}:{_fn.__name__}"):
        BUILTIN_HOOKS[_name] = _fn
        ClassFactory.register_cls(_fn, CODE_HOOK, _name)


def allowed_hooks(trusted: Iterable[str] = ()) -> list[str]:
    """Every name a record may give a hook field: the built-in hooks, then ``trusted``."""
    return [*BUILTIN_HOOKS, *(t for t in trusted if t not in BUILTIN_HOOKS)]


def _refusal(where: str, field_name: str, value: Any, trusted: Iterable[str]) -> ConfigError:
    return ConfigError(
        f"{where}: {field_name} {value!r} is not an allowed hook; a dataset can only name "
        f"these: {', '.join(allowed_hooks(trusted))}",
        hint=f"to use a function you wrote, list it as 'package.module:function' under "
             f"'{TRUST_KEY}:' in testenv.yaml; it then runs in the ianvs process over the "
             "sample's output, outside the sandbox")


def resolve_hook(path: Any, where: str, field_name: str,
                 trusted: Iterable[str] = ()) -> Callable[..., Any]:
    """The function a record's ``field_name`` names, if it is allowed.

    Allowed are the names in :data:`BUILTIN_HOOKS` and the ``"package.module:function"``
    entries of ``trusted`` (the job's ``code_hooks:``). Anything else raises
    :class:`ConfigError` naming ``where``, ``field_name``, the value, the allowed hooks and
    the fix, and nothing is imported or called. A trusted entry that cannot be loaded also
    raises :class:`ConfigError`.
    """
    trusted = tuple(trusted)
    if not isinstance(path, str) or (path not in BUILTIN_HOOKS and path not in trusted):
        raise _refusal(where, field_name, path, trusted)
    if path in BUILTIN_HOOKS:
        return BUILTIN_HOOKS[path]
    try:
        return load_hook(path)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {field_name} {exc.message}",
                          hint=f"it is trusted in testenv.yaml '{TRUST_KEY}:'") from None


@dataclass(frozen=True)
class CodeTask:
    """What one record says about how its samples run (see the module docstring).

    ``merge_fn``/``parse_fn`` are the hook names the record gave (part of the cache key);
    ``merge``/``parse`` the allowed functions :func:`code_task` resolved for them. Build it with
    :func:`code_task`: a name without its function is refused when used.
    """

    run_env: str | None = None
    packages: Mapping[str, str] = field(default_factory=dict)
    test_code: str | None = None
    merge_fn: str = ""
    parse_fn: str = ""
    timeout: float | None = None
    merge: Callable[[str, str], Any] | None = field(default=None, compare=False, repr=False)
    parse: Callable[[str], Any] | None = field(default=None, compare=False, repr=False)

    @property
    def needs_container(self) -> bool:
        return bool(self.run_env or self.packages)

    def program(self, code: str) -> str:
        """The program to run for a sample's ``code`` (merged with ``test_code`` when set)."""
        if self.test_code is None:
            return code
        if self.merge_fn and self.merge is None:
            raise ConfigError(f"snippet_merge_fn {self.merge_fn!r} was not resolved "
                              "(build CodeTask with code_task)")
        merged = (self.merge or append_test_code)(code, self.test_code)
        if not isinstance(merged, str):
            raise ConfigError(f"snippet_merge_fn {self.merge_fn!r} returned "
                              f"{type(merged).__name__}, not the program text")
        return merged

    def cache_key(self) -> list[Any]:
        return [self.run_env, sorted(self.packages.items()), self.test_code, self.merge_fn,
                self.parse_fn]


def code_task(record: Mapping[str, Any], trusted: Iterable[str] = ()) -> CodeTask:
    """Check and collect a record's execution fields; raises one :class:`ConfigError` naming
    the record's ``task_id`` and the bad field. Hook fields must name an allowed hook (see
    :func:`resolve_hook`; ``trusted`` is the job's ``code_hooks:``): they are resolved here, so
    a refused or unknown one fails before anything runs, and a refused one before anything is
    imported."""
    from core.testenvmanager.sandbox.images import parse_package_downloads

    where = f"record {record.get('task_id', '?')!r}"
    if not any(record.get(name) is not None for name in FIELDS):
        return CodeTask()
    trusted = tuple(trusted)
    hooks: dict[str, tuple[str, Callable[..., Any]]] = {}
    for key in HOOK_FIELDS:  # first: a hostile name is refused whatever else is wrong
        value = record.get(key)
        if value is not None:
            hooks[key] = (str(value), resolve_hook(value, where, key, trusted))
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
    if "snippet_merge_fn" in hooks and test_code is None:
        raise ConfigError(f"{where}: snippet_merge_fn needs test_code to merge with")
    timeout = record.get("benchmark_timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not math.isfinite(timeout) or timeout <= 0):
        raise ConfigError(f"{where}: benchmark_timeout must be a positive number of seconds, "
                          f"got {timeout!r}")
    merge_fn, merge = hooks.get("snippet_merge_fn", ("", None))
    parse_fn, parse = hooks.get("output_parse_fn", ("", None))
    return CodeTask(run_env=run_env.strip() if run_env else None, packages=packages,
                    test_code=test_code, merge_fn=merge_fn, parse_fn=parse_fn,
                    timeout=float(timeout) if timeout is not None else None,
                    merge=merge, parse=parse)


def parse_verdict(task: CodeTask, outcome: str, stdout: str, stderr: str) -> tuple[str, str]:
    """``(outcome, detail)`` after ``output_parse_fn``. Only a run that finished (``passed``,
    ``failed`` or ``error`` by exit status) is re-judged; limits, syntax errors, sandbox
    violations and infra errors stand. A parser that raises is a ``failed`` run (its message
    in the detail), never an infra error the sample could provoke on purpose. The parser is
    the function :func:`code_task` resolved (an allowed hook); nothing is looked up here."""
    if not task.parse_fn or outcome not in ("passed", "failed", "error"):
        return outcome, ""
    if task.parse is None:
        raise ConfigError(f"output_parse_fn {task.parse_fn!r} was not resolved "
                          "(build CodeTask with code_task)")
    try:
        verdict = task.parse(stdout + stderr)
    except Exception as exc:  # noqa: BLE001 - the output is the sample's; its parse may fail
        return "failed", f"output_parse_fn raised {type(exc).__name__}: {exc}"
    if isinstance(verdict, Mapping):
        ok = verdict.get("passed", verdict.get("success"))
    else:
        ok = getattr(verdict, "success", verdict)
    return ("passed" if ok is True else "failed"), f"graded by {task.parse_fn} on the output"
