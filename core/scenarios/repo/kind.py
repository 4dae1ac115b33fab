"""The ``repo`` task kind: write a function's body inside a real repository; its own tests decide.

Records are the lines ``ianvs dataset repo`` writes (docs/proposals/scenarios/smart_coding/repo.md);
:meth:`RepoKind.validate` checks the fields the harness relies on and uses ``task_id`` as the
record id. Prompts (:mod:`.prompts`) show the nearest repository context, the file and the
function's header; the reference is the original function. The model's answer becomes a full
``def``: a reply that defines the function (fenced or not) is used as it is; anything else is
taken as the continuation of the header (completion mode). Grading is done by the ``repo_tests``
metric (:mod:`.scoring`), which injects the answer by AST position and runs the task's tests in
the sandbox.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from core.common.class_factory import ClassFactory
from core.common.errors import DatasetError
from core.scenarios.base import (TASK_KIND, LeftoverHooks, MetricFn, TaskKind, reject_unknown,
                                 require_object, require_str)
from core.scenarios.repo.functions import defines_function
from core.scenarios.repo.plugins import check_record as check_plugins
from core.scenarios.repo.prompts import chat_messages, header_of, prompt_of, reference_code

__all__ = ["RepoKind", "RECORD_FIELDS", "answer_code", "load_tasks"]

#: top-level fields of a task record (see module docstring); anything else is a typo
RECORD_FIELDS = {"task_id", "kind", "repo", "env", "file", "file_sha256", "qualname", "name",
                 "class_name", "position", "signature", "docstring", "context", "reference",
                 "tests", "problem", "problem_author", "model_written_tests", "services", "run_env",
                 "metadata"}
#: services a task may ask the harness for (see :mod:`core.scenarios.repo.postgres`)
SERVICES = {"postgres"}
#: the body indentation of :func:`header_of` (its docstring's)
_BODY_INDENT = "    "
_REQUIRED_STR = ("task_id", "file", "qualname", "name", "signature", "context", "reference")


def _statement_lines(text: str) -> Iterator[tuple[int, int]]:
    """(offset, indentation width) of every line of ``text`` that holds code (not blank, not
    only a comment)."""
    offset = 0
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip(" \t")
        if stripped.strip() and not stripped.startswith("#"):
            yield offset, len(line) - len(stripped)
        offset += len(line)


def _reindent(text: str, width: int) -> str:
    """``text`` with ``width`` leading characters of every line that has them as indentation
    replaced by the header's body indentation (other lines unchanged)."""
    lines = text.splitlines(keepends=True)
    return "".join(_BODY_INDENT + line[width:] if line[:width].strip(" \t") == "" and line[width:].strip()
                   else line for line in lines)


def _continuations(raw_output: str) -> Iterator[str]:
    """Ways to read a continuation as a function body, most literal first (see answer_code)."""
    yield raw_output
    lines = list(_statement_lines(raw_output))
    if not lines:
        return
    width = lines[0][1]
    cuts = [offset for offset, indent in lines[1:] if indent < width]
    yield from (raw_output[:cut] for cut in cuts)
    if width != len(_BODY_INDENT):
        for text in (raw_output, *(raw_output[:cut] for cut in cuts)):
            yield _reindent(text, width)


def answer_code(raw_output: str, record: Mapping[str, Any]) -> str:
    """The full ``def`` to inject for a model reply (see the module docstring).

    A continuation ends where the function ends, at the body's own indentation. Completion
    models often go on after the body (the next function's decorator, the class's next method,
    a module-level statement, a truncated second function), and for a method they may indent
    the body at the class's level (8 spaces) under a header shown at column 0: neither may turn
    a correct body into a syntax error. So when header + reply does not parse, the reply is cut
    before the first code line indented less than its first one (later such lines in turn: a
    cut inside a multi-line string does not parse), then the same re-indented to the header's
    body indentation; the first reading for which header + text parses and defines the
    function wins. A reply with no such reading is used whole, and injection reports it.
    """
    name = str(record["name"])
    if defines_function(raw_output, name):
        return raw_output
    header = header_of(record)
    for text in _continuations(raw_output):
        if defines_function(header + text, name):
            return header + text
    return header + raw_output


def load_tasks(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The first ``limit`` (all when None) task records of a tasks file, unvalidated (tests and
    benchmarks; jobs read files through :meth:`RepoKind.read`)."""
    tasks = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return tasks[:limit] if limit is not None else tasks


def _check_nested(record: Mapping[str, Any], source: str | None, line: int | None) -> None:
    repo = record.get("repo")
    if not isinstance(repo, Mapping) or not isinstance(repo.get("content_hash"), str) \
            or not isinstance(repo.get("name"), str):
        raise DatasetError("field 'repo' must be an object with string 'name' and 'content_hash'",
                           source=source, line=line, hint="rebuild the file with 'ianvs dataset repo'")
    env = record.get("env", {})
    if not isinstance(env, Mapping) or not isinstance(env.get("requirements", []), list):
        raise DatasetError("field 'env.requirements' must be a list of pins", source=source, line=line)
    roots = env.get("import_roots", ["."])
    if not isinstance(roots, list) or not all(isinstance(r, str) and r and not r.startswith("/")
                                              and ".." not in r.split("/") for r in roots):
        raise DatasetError(f"field 'env.import_roots' must be a list of folders relative to the repository, "
                           f"got {roots!r}", source=source, line=line)
    project = env.get("project")
    if project is not None and not (isinstance(project, Mapping) and isinstance(project.get("name"), str)
                                    and isinstance(project.get("version"), str)
                                    and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+!-]*", project["version"])
                                    and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", project["name"])):
        raise DatasetError("field 'env.project' must be {name, version, entry_points} of the package under test",
                           source=source, line=line)
    plugins = check_plugins(env.get("pytest_plugins"))
    if plugins is not None:
        raise DatasetError(f"field 'env.pytest_plugins' {plugins}", source=source, line=line,
                           hint="rebuild the file with 'ianvs dataset repo'")
    pos = record.get("position")
    if not isinstance(pos, Mapping) or not isinstance(pos.get("def_line"), int) \
            or isinstance(pos.get("def_line"), bool):
        raise DatasetError("field 'position.def_line' must be an integer", source=source, line=line)
    tests = record.get("tests")
    if not isinstance(tests, Mapping):
        raise DatasetError("field 'tests' must be an object", source=source, line=line)
    for key in ("fail_to_pass", "pass_to_pass"):
        names = tests.get(key, [])
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            raise DatasetError(f"field 'tests.{key}' must be a list of pytest node ids",
                               source=source, line=line)
    run_env = record.get("run_env")
    if run_env is not None and (not isinstance(run_env, str) or not run_env.strip()):
        raise DatasetError(f"field 'run_env' must be an image name, got {run_env!r}", source=source, line=line,
                           hint="an image on the project's Docker engine with pytest and the repository's "
                                "requirements (docker backend); omit it to build one from env.requirements")
    services = record.get("services") or []
    if not isinstance(services, list) or set(services) - SERVICES:
        raise DatasetError(f"field 'services' must be a list of known services, got {services!r}",
                           source=source, line=line, hint=f"known services: {', '.join(sorted(SERVICES))}")
    if not tests.get("fail_to_pass"):
        raise DatasetError("field 'tests.fail_to_pass' must not be empty (a task nothing can fail "
                           "is not a task)", source=source, line=line)


@ClassFactory.register(TASK_KIND, alias="repo")
class RepoKind(TaskKind):
    """Function bodies inside a real repository (see module docstring)."""

    name = "repo"
    input_field = "signature"
    default_mode = "complete"

    def leftovers(self) -> Mapping[str, LeftoverHooks]:
        from core.scenarios.repo.leftovers import LEFTOVERS

        return LEFTOVERS

    def leak_view(self) -> Any:
        from core.scenarios.repo.leaks import VIEW

        return VIEW

    def validate(self, record: Mapping[str, Any], source: str | None = None,
                 line: int | None = None) -> dict[str, Any]:
        reject_unknown(require_object(record, source, line), RECORD_FIELDS, source, line)
        for name in _REQUIRED_STR:
            require_str(record, name, source, line, allow_empty=name == "context")
        _check_nested(record, source, line)
        rec = dict(record)
        rec["id"] = record["task_id"]
        rec.setdefault("metadata", {})
        return rec

    def messages(self, record: Mapping[str, Any]) -> list[dict[str, str]]:
        return chat_messages(record)

    def prompt(self, record: Mapping[str, Any]) -> str:
        return prompt_of(record)

    def reference(self, record: Mapping[str, Any]) -> str:
        return reference_code(record)

    def answer(self, raw_output: str, record: Mapping[str, Any]) -> str:
        return answer_code(raw_output, record)

    def judge_view(self, record: Mapping[str, Any]) -> dict[str, str]:
        return {"task": prompt_of(record), "reference": reference_code(record)}

    def metrics(self) -> dict[str, MetricFn]:
        from core.scenarios.repo.scoring import repo_tests

        return {"repo_tests": repo_tests}

