"""The ``implement_change`` task kind: given the repository at a commit's parent and the commit's
message, produce the change; the tests the commit added or changed decide.

Records are the lines ``ianvs dataset implement-change`` writes (docs/proposals/scenarios/
smart_coding/trajectories.md): the message (and the pull request's title), the changed code
files at the parent (``context``), the developer's change (``reference_files``,
``reference_patch``), the task root's archive and content hash (``repo``), the one pinned
environment (``env``) and the tests (``tests.fail_to_pass``, ``tests.pass_to_pass``). The reply
is parsed by :mod:`.answer` (whole files or a unified diff; malformed diffs are their own
failure kind) and graded by the ``implement_tests`` metric (:mod:`.scoring`), which reuses the
repo kind's views, environment and sandboxed runs (:mod:`core.scenarios.repo.execute`).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from core.common.class_factory import ClassFactory
from core.common.errors import DatasetError
from core.scenarios.base import TASK_KIND, MetricFn, TaskKind, reject_unknown, require_object, require_str
from core.scenarios.trajectories.implement_change import prompts

__all__ = ["ImplementChangeKind", "RECORD_FIELDS", "whole_files_reply"]

RECORD_FIELDS = {"task_id", "kind", "repo", "env", "file", "message", "pull_request_title", "committed_at",
                 "files", "context", "reference_files", "reference_patch", "test_files", "tests", "metadata"}


def fenced_file(path: str, text: str) -> str:
    """One file in the whole-file form: ``FILE: <path>`` and a fenced block holding ``text``
    (a final newline added, except to an empty file). The fence has more backticks than the longest run in ``text``
    (at least three), so a file that holds fences itself -- Markdown, a docstring with an
    example -- is read back whole (:mod:`.answer` closes a block only at its own fence)."""
    text = text if not text or text.endswith("\n") else text + "\n"
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return prompts.FILE.format(path=path, text=text, fence="`" * max(3, longest + 1))


def whole_files_reply(files: Mapping[str, str]) -> str:
    """A reply giving ``files`` (path -> text) in the whole-file form the prompt asks for."""
    return "".join(fenced_file(p, t) for p, t in files.items())


def _check(record: Mapping[str, Any], source: str | None, line: int | None) -> None:
    repo = record.get("repo")
    if not isinstance(repo, Mapping) or not all(isinstance(repo.get(k), str)
                                                for k in ("name", "content_hash", "source", "commit")):
        raise DatasetError("field 'repo' must be an object with string name, commit, source and content_hash",
                           source=source, line=line, hint="rebuild with 'ianvs dataset implement-change'")
    for key in ("context", "reference_files"):
        value = record.get(key)
        if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
            raise DatasetError(f"field '{key}' must map paths to file texts", source=source, line=line)
    tests = record.get("tests")
    if not isinstance(tests, Mapping) or not tests.get("fail_to_pass") or not all(
            isinstance(t, str) and t for k in ("fail_to_pass", "pass_to_pass") for t in tests.get(k, [])):
        raise DatasetError("field 'tests.fail_to_pass' must be a non-empty list of pytest node ids "
                           "(and 'tests.pass_to_pass' a list)", source=source, line=line)
    for key in ("files", "test_files"):
        value = record.get(key)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise DatasetError(f"field '{key}' must be a list of paths", source=source, line=line)


@ClassFactory.register(TASK_KIND, alias="implement_change")
class ImplementChangeKind(TaskKind):
    """Implement a commit's change from its message (module docstring)."""

    name = "implement_change"
    input_field = "message"

    def leak_view(self) -> Any:
        from core.scenarios.trajectories.implement_change.leaks import VIEW

        return VIEW

    def validate(self, record: Mapping[str, Any], source: str | None = None,
                 line: int | None = None) -> dict[str, Any]:
        reject_unknown(require_object(record, source, line), RECORD_FIELDS, source, line)
        for key in ("task_id", "file", "message", "pull_request_title", "committed_at", "reference_patch"):
            require_str(record, key, source, line, allow_empty=key in ("pull_request_title", "reference_patch"))
        from core.scenarios.trajectories.periods import commit_time

        commit_time(record["committed_at"], source, line)
        _check(record, source, line)
        rec = dict(record)
        rec["id"] = record["task_id"]
        rec.setdefault("metadata", {})
        return rec

    def messages(self, record: Mapping[str, Any]) -> list[dict[str, str]]:
        title = record.get("pull_request_title") or ""
        files = "".join(fenced_file(p, t) for p, t in record["context"].items())
        return [{"role": "system", "content": prompts.SYSTEM},
                {"role": "user", "content": prompts.USER.format(
                    repo=record["repo"]["name"], message=record["message"],
                    pull_request=f"\n(pull request: {title})" if title else "", files=files)}]

    def reference(self, record: Mapping[str, Any]) -> str:
        """The developer's change as whole files (parsed like any reply)."""
        return whole_files_reply(record["reference_files"])

    def answer_chars(self, record: Mapping[str, Any]) -> int | None:
        """The prompt asks for every changed file whole: the reference reply's length."""
        return len(self.reference(record))

    def answer(self, raw_output: str, record: Mapping[str, Any]) -> str:
        return raw_output

    def judge_view(self, record: Mapping[str, Any]) -> dict[str, str]:
        return {"task": record["message"], "reference": record["reference_patch"]}

    def metrics(self) -> dict[str, MetricFn]:
        from core.scenarios.trajectories.implement_change.scoring import implement_tests

        return {"implement_tests": implement_tests}
