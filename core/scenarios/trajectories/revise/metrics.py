"""Metric of the revise kind: test-graded tasks by their tests, the others by similarity.

testenv.yaml::

    metrics:
      - name: revise_scores
        url: ./metrics.py
        sources_dir: ../data/revise-sources   # test-graded tasks' root archives (repo.source)
        timeout: 300                          # seconds per test-graded sample (all of its tests)
        periods: ["2024-06-01"]               # optional: columns per commit-date period

**Similarity** (every task). The reply is parsed like an implement_change reply (whole files or
a unified diff, :func:`core.scenarios.trajectories.implement_change.answer.parse_change`) against a scratch
tree holding the task's ``files`` (the state after the previous step); nothing of it runs. Then:

* ``edit_chrf`` -- chrF (sacrebleu, 0-100) of the *changed lines* of the model's edits (the
  ``+``/``-`` lines of their unified diff against the files as they were, in path order) against
  the changed lines of the real revision. Why this measure: a revision is an edit, so unchanged
  context must not earn credit (whole-file similarity would give an unchanged reply a high
  score), and chrF's character n-grams credit near-identical lines (a renamed variable, another
  quote style) partially where an exact line match gives nothing;
* ``exact_match`` -- 1 when the files after the model's edits are exactly the real revision's
  (trailing newlines aside: a whole-file reply always ends its file with one).

**Tests** (tasks with ``grading: tests``). The same reply is graded exactly as an
implement_change sample (:func:`core.scenarios.trajectories.implement_change.scoring.grade`): parsed against
the task root -- where the task's *test side* (its tests and what pytest reads to configure,
collect and import them, :mod:`core.scenarios.trajectories.implement_change.paths`) is off limits: a reply
that writes it is ``bad_path`` --, its edits written into a private hard-link view of the root,
the test side written there again from the root, and the task's FAIL_TO_PASS + PASS_TO_PASS
tests run in the sandbox in the pinned environment (``local`` backend; the repo kind's
machinery). A sample passes when every one of those tests passes. The similarity parse
guards nothing but the paths' form (nothing of it runs; real revisions edit tests and
configuration too); a test-graded task's reply refused against its root counts under that
failure kind and scores 0 on every column (the reason is in ``revise_executions.jsonl``).

Per task one ``score`` in [0, 1], from the grading the task got: 1/0 (passed or not) for a
test-graded task, ``edit_chrf / 100`` for a similarity-graded one. The real revision scores 1
on both; an unchanged reply 0 (``no_change``, nothing run).

A reply that gives no usable change scores 0 everywhere and is counted under its failure kind
(``malformed_diff``, ``diff_does_not_apply``, ``no_change``, ``bad_path``). Columns: ``score``
(mean over tasks), ``tests_pass@1`` (share of test-graded tasks passed), ``test_graded`` /
``similarity_graded`` (task counts), ``edit_chrf`` and ``exact_match`` (over every task, the
test-graded ones included), ``scored_samples``, the failure counts, ``form_files`` /
``form_diff``, ``generation_error``, ``grading`` (``in_process_confined`` when a sample ran in the
sandbox), ``isolation``; with ``periods``, ``score[<period>]``, ``edit_chrf[<period>]`` and
``samples[<period>]``. Per sample, ``revise_scores.jsonl`` in the test case folder has both
gradings' results and which one the task got (``grading``).

Resume: every test-graded sample's result is appended to ``revise_executions.jsonl`` in the test
case folder as soon as it is known (:func:`core.scenarios.trajectories.implement_change.scoring.grade_logged`);
a rerun after a kill runs only the samples that were missing.
"""
from __future__ import annotations

import difflib
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError
from core.common.jsonl import write_jsonl
from core.scenarios.trajectories.implement_change.answer import FAILURE_KINDS, parse_change
from core.scenarios.repo.policy import GRADING as POLICY_GRADING
from core.scenarios.scoring import iter_samples, mean, record_per_task, record_periods
from core.scenarios.text_similarity import SACREBLEU, sacrebleu
from core.scenarios.trajectories.periods import commit_time, period_labels, period_of

PER_SAMPLE_FILE = "revise_scores.jsonl"
#: every test-graded sample's sandbox result as it arrives, keyed by task, sample, reply and
#: grading version: a killed scoring run re-runs only the samples it had not finished
EXECUTIONS_FILE = "revise_executions.jsonl"


def changed_lines(before: Mapping[str, str], after: Mapping[str, str]) -> str:
    """The ``+``/``-`` lines of the unified diff from ``before`` to ``after`` (path order)."""
    out: list[str] = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path, ""), after.get(path, before.get(path, ""))
        for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0):
            if line[:1] in "+-" and not line.startswith(("+++", "---")):
                out.append(line)
    return "\n".join(out)


def score_revision(reply: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """Per-sample scores of one reply (module docstring)."""
    bleu = sacrebleu()
    files: dict[str, str] = dict(record["files"])
    with tempfile.TemporaryDirectory(prefix="ianvs-revise-") as tmp:
        root = Path(tmp)
        for path, text in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text, encoding="utf-8")
        only = next(iter(files)) if len(files) == 1 else None
        parsed = parse_change(reply, root, None, default_path=only)  # nothing of it runs: no test side
    if parsed.failure:
        return {"failure": parsed.failure, "form": parsed.form, "edit_chrf": 0.0, "exact_match": 0.0}
    result = {**files, **parsed.edits}
    reference = {**files, **record["reference_files"]}
    model_lines = changed_lines(files, parsed.edits)
    ref_lines = changed_lines(files, record["reference_files"])
    chrf = float(bleu.sentence_chrf(model_lines, [ref_lines]).score) if model_lines and ref_lines else 0.0
    same = {p: t.rstrip("\n") for p, t in result.items()} == {p: t.rstrip("\n") for p, t in reference.items()}
    return {"failure": "", "form": parsed.form, "edit_chrf": chrf, "exact_match": float(same)}


def grader_record(rec: Mapping[str, Any]) -> dict[str, Any]:
    """A test-graded revise record in the shape :func:`grade` and the repo kind's runner read."""
    files = sorted(set(rec["files"]) | set(rec["reference_files"]))
    return {**rec, "task_id": rec["id"], "files": files, "file": files[0]}


def revise_scores(y_true: Any, y_pred: Any, context: Any = None, periods: Sequence[str] | None = None,
                  sources_dir: str = "", timeout: float = 300.0) -> dict[str, Any]:
    """The kind's columns (module docstring); per-sample scores go to ``revise_scores.jsonl``."""
    from core.scenarios import get_kind
    from core.scenarios.trajectories.implement_change.scoring import grade_logged, sample_key

    kind = get_kind("revise")
    errors: list[str] = []
    rows: list[dict[str, Any]] = []
    todo: list[tuple[str, dict[str, Any], str]] = []
    keys: dict[str, str] = {}
    for sample in iter_samples(kind, y_pred, context, errors):
        rec = sample.record
        row = {"task_id": sample.task_id, "sample_index": sample.sample_index, "grading": rec["grading"],
               "period": period_of(commit_time(rec["committed_at"]), periods),
               **score_revision(sample.answer, rec), "test_outcome": "", "tests": {}}
        rows.append(row)
        if rec["grading"] == "tests" and not row["failure"]:
            todo.append((f"{len(rows) - 1}", grader_record(rec), sample.answer))
            keys[todo[-1][0]] = sample_key(rec, sample.sample_index, sample.answer, "revise")
    if todo:
        settings = getattr(context, "sandbox", {}) or {}
        if not sources_dir:
            raise ConfigError("revise_scores needs 'sources_dir' for test-graded tasks: the folder of their "
                              "root archives", hint="add 'sources_dir: ../data/<tasks>-sources' to its testenv entry")
        if str(settings.get("backend", "local")) != "local":
            raise ConfigError("test-graded revise tasks run on the 'local' sandbox backend",
                              hint="set sandbox.backend: local")
        base = Path(getattr(context, "config_dir", None) or ".")
        workspace = getattr(context, "workspace", None)
        log_path = Path(workspace, EXECUTIONS_FILE) if workspace is not None else None
        graded = grade_logged(todo, keys, log_path, (base / sources_dir).resolve(), settings, float(timeout),
                              "revise tests", getattr(context, "show_progress", True))
        for sid, (res, _form) in graded.items():
            rows[int(sid)].update(test_outcome=res.outcome, tests=res.tests, isolation=res.isolation)
            if res.outcome in FAILURE_KINDS:  # refused against the task root (its test side): no usable change
                rows[int(sid)].update(failure=res.outcome, edit_chrf=0.0, exact_match=0.0)  # why: the log
    for row in rows:
        if row["grading"] == "tests":
            row["score"] = float(row["test_outcome"] == "passed")
        else:
            row["score"] = round(row["edit_chrf"] / 100.0, 4)
    workspace = getattr(context, "workspace", None)
    if workspace is not None:
        write_jsonl(Path(workspace, PER_SAMPLE_FILE), rows)
    tested = [r for r in rows if r["grading"] == "tests"]
    record_per_task(context, rows, ["score", "edit_chrf", "exact_match"])
    record_per_task(context, tested, ["score"], rename={"score": "tests_pass@1"})
    record_periods(context, rows, ["score", "edit_chrf"], period_labels(periods))
    ran = [r for r in tested if r["test_outcome"] and r["test_outcome"] not in FAILURE_KINDS]
    out: dict[str, Any] = {"score": mean([r["score"] for r in rows]),
                           "tests_pass@1": mean([r["score"] for r in tested]),
                           "test_graded": len(tested), "similarity_graded": len(rows) - len(tested),
                           "edit_chrf": mean([r["edit_chrf"] for r in rows], 2),
                           "exact_match": mean([r["exact_match"] for r in rows]),
                           "scored_samples": len(rows)}
    for name in FAILURE_KINDS:
        out[name] = sum(r["failure"] == name for r in rows)
    out["form_files"] = sum(r["form"] == "files" for r in rows)
    out["form_diff"] = sum(r["form"] == "diff" for r in rows)
    out["generation_error"] = len(errors)
    out["grading"] = POLICY_GRADING if ran else ""
    out["isolation"] = "+".join(sorted({str(r.get("isolation")) for r in ran if r.get("isolation")}))
    for label in period_labels(periods):
        mine = [r for r in rows if r["period"] == label]
        out[f"score[{label}]"] = mean([r["score"] for r in mine])
        out[f"edit_chrf[{label}]"] = mean([r["edit_chrf"] for r in mine], 2)
        out[f"samples[{label}]"] = len(mine)
    return out


def _columns(periods: Sequence[str] | None = None, sources_dir: str = "", timeout: float = 300.0) -> list[str]:
    cols = ["score", "tests_pass@1", "test_graded", "similarity_graded", "edit_chrf", "exact_match",
            "scored_samples", *FAILURE_KINDS, "form_files", "form_diff", "generation_error", "grading", "isolation"]
    for label in period_labels(periods):
        cols += [f"score[{label}]", f"edit_chrf[{label}]", f"samples[{label}]"]
    return cols


revise_scores.columns = _columns  # type: ignore[attr-defined]
revise_scores.requires = (SACREBLEU,)  # type: ignore[attr-defined]
