"""Per task kind: what the model sees, what the reference is, and which leak can be masked.

:mod:`core.scenarios.leaks` measures whether a reference is in a shown text; this module knows,
for each kind, which record fields reach the model (read off the kind's ``messages`` and
``prompts.py``) and what the answer is:

=================== ======================================= ===================================
kind                shown (checked against the reference)   reference
=================== ======================================= ===================================
commit_message      ``pull_request_title`` (maskable),      ``message``: its subject line and
                    ``diff``, ``context``                   the whole message (prose)
comment             ``description``, ``code_snippet``       the annotations' texts (prose)
issue               ``question``, ``body``                  every ``answer_N.body`` (prose)
implement_change    ``message``, ``pull_request_title``;    the new code lines of
                    ``context`` (files)                     ``reference_files`` (code)
revise              ``message``, ``feedback``,              the new code lines of
                    ``pull_request.title``, ``previous``    ``reference_files`` (code)
                    message and diff; ``files``
repo                the prompt's context (its last          the function body ``reference``
                    ``PROMPT_CONTEXT_CHARS``), the header   (code)
codegen             ``prompt`` (signature and docstring)    ``canonical_solution`` (code)
=================== ======================================= ===================================

(``codegen`` sets -- HumanEval and the like -- are third-party, not built here; they are
checked, not rewritten.)

**Legitimate overlap, not leaks.** A code change's *before* files are the task (an
implement-change or revise reply edits them), so code the model is shown in those files is the
material of the change: only the change's *new* lines -- reference lines absent from every shown
file -- count, and they leak when the free text (message, title, review comments, the previous
commit's diff) already holds them. A change that leaves every shown file as it is (the answer *is*
the shown code) is the ``unchanged`` leak. A repo body leaks when the shown context holds it (a
duplicate or near-duplicate function). Identifiers a commit subject names, which also appear in
its diff, are vocabulary, not the answer: containment needs four words and 80 % of the subject's
word 4-grams (:mod:`core.scenarios.leaks`).

**Masking.** Only a field the task does not need is masked: a commit's pull-request title (the
diff is the task), a revise record's pull-request title, a repo task's model-written ``problem``
(the header falls back to the signature). Any other leak drops the task.
:func:`screen` returns the masked record (or None) and what was done; builders count
``leak_masked:<reason>`` / ``leak_dropped:<reason>`` in their reports.
"""
from __future__ import annotations

import copy
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from core.scenarios.leaks import Finding, code_leak, code_lines, first_leak, text_leak

__all__ = ["KINDS", "Screened", "find_leak", "screen", "screen_all", "tally"]

LOG = logging.getLogger(__name__)

Record = Mapping[str, Any]


@dataclass(frozen=True)
class Screened:
    """The outcome of :func:`screen`: ``action`` is ``clean``, ``masked`` or ``dropped``;
    ``record`` the record to keep (masked when ``masked``, None when ``dropped``); ``finding``
    the leak that decided (None when clean)."""

    action: str
    record: dict[str, Any] | None
    finding: Finding | None

    @property
    def key(self) -> str:
        """``leak_masked:<reason>`` / ``leak_dropped:<reason>`` (``<reason>`` is the match and
        the field, e.g. ``exact:pull_request_title``); ``clean`` for no leak."""
        if self.finding is None:
            return "clean"
        return f"leak_{self.action}:{self.finding.reason}:{self.finding.field}"


# --- prose kinds ------------------------------------------------------------------------------

def _subject(message: str) -> str:
    return next((line for line in message.splitlines() if line.strip()), "")


def _commit_message(record: Record) -> Finding | None:
    message = str(record["message"])
    shown = {"pull_request_title": str(record.get("pull_request_title") or ""),
             "context": str(record.get("context") or ""), "diff": str(record["diff"])}
    return first_leak(text_leak(_subject(message), shown), text_leak(message, shown))


def _comment(record: Record) -> Finding | None:
    reference = [str(a["annotation"]) for a in record["annotations"]]
    return text_leak(reference, {"description": str(record.get("description") or ""),
                                 "code_snippet": str(record["code_snippet"])})


def _issue(record: Record) -> Finding | None:
    shown = {"question": str(record["question"]), "body": str(record.get("body") or "")}
    answers = [str(record[k]["body"]) for k in sorted(record) if k.startswith("answer_")
               and isinstance(record[k], Mapping)]
    return first_leak(*(text_leak(a, shown) for a in answers))


# --- code kinds -------------------------------------------------------------------------------

def _new_lines(reference_files: Mapping[str, str], shown_files: Mapping[str, str]) -> list[str]:
    """Code lines of the reference files that no shown file has."""
    shown = {line for text in shown_files.values() for line in code_lines(text)}
    return [line for text in reference_files.values() for line in code_lines(text)
            if line not in shown]


def _unchanged(reference_files: Mapping[str, str], shown_files: Mapping[str, str]) -> Finding | None:
    if reference_files and all(shown_files.get(p) == t for p, t in reference_files.items()):
        return Finding("files", "unchanged", 1.0)
    return None


def _implement_change(record: Record) -> Finding | None:
    ref, shown = record["reference_files"], record["context"]
    new = _new_lines(ref, shown)
    return first_leak(_unchanged(ref, shown), code_leak(new, {
        "pull_request_title": code_lines(str(record.get("pull_request_title") or "")),
        "message": code_lines(str(record["message"]))}))


def _revise(record: Record) -> Finding | None:
    ref, shown = record["reference_files"], record["files"]
    prev = record["previous"]
    new = _new_lines(ref, shown)
    return first_leak(_unchanged(ref, shown), code_leak(new, {
        "pull_request.title": code_lines(str(record["pull_request"].get("title") or "")),
        "previous.diff": code_lines(str(prev.get("diff") or ""), diff=True),
        "previous.message": code_lines(str(prev.get("message") or "")),
        "feedback": code_lines(str(record.get("feedback") or "")),
        "message": code_lines(str(record["message"]))}))


def _repo(record: Record) -> Finding | None:
    from core.scenarios.repo.prompts import PROMPT_CONTEXT_CHARS, header_of

    context = str(record["context"])[-PROMPT_CONTEXT_CHARS:]
    return code_leak(code_lines(str(record["reference"])),
                     {"context": code_lines(context), "header": code_lines(header_of(record))})


def _codegen(record: Record) -> Finding | None:
    return code_leak(code_lines(str(record.get("canonical_solution") or "")),
                     {"prompt": code_lines(str(record["prompt"]))})


def _drop_problem(record: dict[str, Any]) -> None:
    """Mask a repo task's model-written problem (the header then shows the bare signature)."""
    record["problem"] = None
    record.pop("problem_author", None)


# --- masking ----------------------------------------------------------------------------------

def _clear(path: tuple[str, ...]) -> Callable[[dict[str, Any]], None]:
    def clear(record: dict[str, Any]) -> None:
        target = record
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = ""
    return clear


@dataclass(frozen=True)
class KindView:
    """A kind's leak finder and its maskable fields (finding field -> masking function)."""

    find: Callable[[Record], Finding | None]
    maskable: Mapping[str, Callable[[dict[str, Any]], None]]


KINDS: dict[str, KindView] = {
    "commit_message": KindView(_commit_message,
                               {"pull_request_title": _clear(("pull_request_title",))}),
    "comment": KindView(_comment, {}),
    "issue": KindView(_issue, {}),
    "implement_change": KindView(_implement_change, {}),
    "revise": KindView(_revise, {"pull_request.title": _clear(("pull_request", "title"))}),
    "repo": KindView(_repo, {"header": _drop_problem}),
    "codegen": KindView(_codegen, {}),
}


def _view(kind: str) -> KindView:
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"no leak view for task kind {kind!r}; known: {', '.join(KINDS)}") from None


def find_leak(kind: str, record: Record) -> Finding | None:
    """The leak of ``record``'s reference into what the model sees, or None.

    Raises:
        ValueError: ``kind`` has no view here.
    """
    return _view(kind).find(record)


def screen(kind: str, record: Record) -> Screened:
    """Check a record; mask the leaking field when it is maskable and the masked record is then
    clean, else drop it. The input record is not modified (a masked copy is returned)."""
    view = _view(kind)
    finding = view.find(record)
    if finding is None:
        return Screened("clean", dict(record), None)
    first = finding
    masked = copy.deepcopy(dict(record))
    while finding.field in view.maskable:
        view.maskable[finding.field](masked)
        after = view.find(masked)
        if after is None:
            return Screened("masked", masked, first)
        if after.field == finding.field:  # masking that field did not remove the leak
            break
        finding = after
    return Screened("dropped", None, finding)


def screen_all(kind: str, records: Iterable[Record], where: str = ""
               ) -> tuple[list[dict[str, Any]], Counter[str]]:
    """Screen many records: (records kept, masked ones masked; counts per :attr:`Screened.key`,
    ``clean`` included). Each masked or dropped record is logged at INFO with its id."""
    kept: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    for record in records:
        result = screen(kind, record)
        counts[result.key] += 1
        if result.finding is not None:
            LOG.info("%s%s %s: %s", f"{where}: " if where else "", result.action,
                     record.get("id") or record.get("task_id"), result.finding.describe())
        if result.record is not None:
            kept.append(result.record)
    return kept, counts


def tally(counts: Mapping[str, int]) -> dict[str, Any]:
    """The leak part of a build report: ``{"masked": n, "dropped": n, "by_reason": {...}}``
    (``by_reason`` sorted, ``clean`` left out)."""
    masked = sum(n for k, n in counts.items() if k.startswith("leak_masked:"))
    dropped = sum(n for k, n in counts.items() if k.startswith("leak_dropped:"))
    return {"masked": masked, "dropped": dropped,
            "by_reason": {k: counts[k] for k in sorted(counts) if k != "clean" and counts[k]}}
