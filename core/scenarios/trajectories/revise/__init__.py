"""The ``revise`` task kind: revise a pull request's code after feedback, as its next commit did.

From pull requests with several commits (the trajectory steps, ``position`` >= 2 whose parent is
the PR's previous step), the model gets the PR's title, the previous step's message and diff,
the review comments made on that commit when an exported code-host file supplied them, the next
commit's message (what the revision says it addresses) and the files that commit changes, as
they are after the previous step. It produces the revision (whole files or a unified diff, parsed
like implement_change replies, :mod:`core.scenarios.trajectories.implement_change.answer`).

Each record says how it is graded (``grading``, chosen by ``ianvs dataset revise
--grade-tests``): ``tests`` when the step touches tested code and flips a test of its pull
request in the one pinned environment (the record then has ``tests`` -- FAIL_TO_PASS and a
PASS_TO_PASS sample --, ``test_files``, ``env`` and the task root's ``repo.source`` /
``repo.content_hash``, as implement_change records do), else ``similarity`` to the real revision.
The metric (:mod:`.metrics`) reports both. Record schema: docs/proposals/scenarios/smart_coding/
trajectories.md.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.common.class_factory import ClassFactory
from core.common.errors import DatasetError
from core.scenarios.base import (TASK_KIND, MetricFn, TaskKind, finish_record, reject_unknown,
                                 require_object, require_str)
from core.scenarios.trajectories.implement_change import fenced_file, whole_files_reply
from core.scenarios.trajectories.revise import prompts

FIELDS = {"id", "grading", "repo", "commit", "committed_at", "pull_request", "previous", "feedback", "message",
          "files", "reference_files", "metadata", "tests", "test_files", "env"}
GRADINGS = ("tests", "similarity")


def _check_test_graded(rec: dict[str, Any], record: Mapping[str, Any], source: str | None,
                       line: int | None) -> None:
    """The fields a ``grading: tests`` record needs (copied into ``rec``)."""
    repo = rec["repo"]
    if not all(isinstance(repo.get(k), str) and repo.get(k) for k in ("source", "content_hash", "commit")):
        raise DatasetError("a test-graded record's 'repo' needs string source, content_hash and commit",
                           source=source, line=line, hint="rebuild with 'ianvs dataset revise --grade-tests'")
    tests = record.get("tests")
    if not isinstance(tests, Mapping) or not tests.get("fail_to_pass") or not all(
            isinstance(t, str) and t for k in ("fail_to_pass", "pass_to_pass") for t in tests.get(k, [])):
        raise DatasetError("a test-graded record's 'tests.fail_to_pass' must be a non-empty list of pytest "
                           "node ids (and 'tests.pass_to_pass' a list)", source=source, line=line)
    test_files = record.get("test_files")
    if not isinstance(test_files, list) or not all(isinstance(p, str) for p in test_files):
        raise DatasetError("field 'test_files' must be a list of paths", source=source, line=line)
    env = record.get("env")
    if not isinstance(env, Mapping) or not isinstance(env.get("requirements"), list):
        raise DatasetError("a test-graded record's 'env' must be an object with a 'requirements' list",
                           source=source, line=line)
    if not rec["files"] and not rec["reference_files"]:
        raise DatasetError("a test-graded record changes no file", source=source, line=line)
    rec["tests"] = {"fail_to_pass": list(tests["fail_to_pass"]), "pass_to_pass": list(tests.get("pass_to_pass", [])),
                    "deselect": list(tests.get("deselect", []))}
    rec["test_files"], rec["env"] = list(test_files), dict(env)


def _paths_to_text(record: Mapping[str, Any], key: str, source: str | None, line: int | None) -> dict[str, str]:
    value = record.get(key)
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in value.items()):
        raise DatasetError(f"field '{key}' must map paths to file texts", source=source, line=line)
    return dict(value)


@ClassFactory.register(TASK_KIND, alias="revise")
class ReviseKind(TaskKind):
    """Revise after feedback; the PR's real next commit is the reference (module docstring)."""

    name = "revise"
    input_field = "message"

    def leak_view(self) -> Any:
        from core.scenarios.trajectories.revise.leaks import VIEW

        return VIEW

    def validate(self, record: Mapping[str, Any], source: str | None = None,
                 line: int | None = None) -> dict[str, Any]:
        reject_unknown(require_object(record, source, line), FIELDS, source, line)
        from core.scenarios.trajectories.periods import commit_time

        rec: dict[str, Any] = {k: require_str(record, k, source, line, allow_empty=k == "feedback")
                               for k in ("commit", "committed_at", "message", "feedback")}
        commit_time(rec["committed_at"], source, line)
        for key in ("repo", "pull_request", "previous"):
            if not isinstance(record.get(key), Mapping):
                raise DatasetError(f"field '{key}' must be an object", source=source, line=line)
            rec[key] = dict(record[key])
        for key in ("message", "diff"):
            require_str(rec["previous"], key, source, line, where="previous.")
        rec["files"] = _paths_to_text(record, "files", source, line)
        rec["reference_files"] = _paths_to_text(record, "reference_files", source, line)
        rec["grading"] = record.get("grading")
        if rec["grading"] not in GRADINGS:
            raise DatasetError(f"field 'grading' must be one of {', '.join(GRADINGS)}", source=source, line=line,
                               hint="rebuild with 'ianvs dataset revise'")
        if rec["grading"] == "tests":
            _check_test_graded(rec, record, source, line)
        return finish_record(rec, record, "revise", source, line)

    def messages(self, record: Mapping[str, Any]) -> list[dict[str, str]]:
        prev = record["previous"]
        diff = prev["diff"] if prev["diff"].endswith("\n") else prev["diff"] + "\n"
        files = "".join(fenced_file(p, t) for p, t in record["files"].items())
        feedback = prompts.FEEDBACK.format(comments=record["feedback"]) if record.get("feedback") else ""
        return [{"role": "system", "content": prompts.SYSTEM},
                {"role": "user", "content": prompts.USER.format(
                    repo=record["repo"].get("name", ""), title=record["pull_request"].get("title") or "-",
                    previous_message=prev["message"], previous_diff=diff, feedback=feedback,
                    message=record["message"], files=files or "(none: the commit only adds files)\n")}]

    def reference(self, record: Mapping[str, Any]) -> str:
        """The real revision, as whole files (files the commit deletes are not representable
        and left out)."""
        return whole_files_reply(record["reference_files"])

    def answer_chars(self, record: Mapping[str, Any]) -> int | None:
        """The prompt asks for every changed file whole: the reference reply's length."""
        return len(self.reference(record))

    def answer(self, raw_output: str, record: Mapping[str, Any]) -> str:
        return raw_output

    def judge_view(self, record: Mapping[str, Any]) -> dict[str, str]:
        return {"task": record["message"], "reference": self.reference(record)}

    def metrics(self) -> dict[str, MetricFn]:
        from core.scenarios.trajectories.revise.metrics import revise_scores

        return {"revise_scores": revise_scores}
