"""Metric of the revise kind: how close the model's edits are to the real revision.

Per sample the reply is parsed like an implement_change reply (whole files or a unified diff,
:func:`core.scenarios.implement_change.answer.parse_change`) against a scratch tree holding the
task's ``files`` (the state after the previous step); nothing of it runs. Then:

* ``edit_chrf`` -- chrF (sacrebleu, 0-100) of the *changed lines* of the model's edits (the
  ``+``/``-`` lines of their unified diff against the files as they were, in path order) against
  the changed lines of the real revision. Why this measure: a revision is an edit, so unchanged
  context must not earn credit (whole-file similarity would give an unchanged reply a high
  score), and chrF's character n-grams credit near-identical lines (a renamed variable, another
  quote style) partially where an exact line match gives nothing;
* ``exact_match`` -- 1 when the files after the model's edits are exactly the real revision's
  (trailing newlines aside: a whole-file reply always ends its file with one).

A reply that gives no usable change scores 0 on both and is counted under its failure kind
(``malformed_diff``, ``diff_does_not_apply``, ``no_change``, ``bad_path``). Columns: the means,
``scored_samples``, the failure counts, ``form_files``/``form_diff``, ``generation_error``; with
``periods``, ``edit_chrf[<period>]`` and ``samples[<period>]``. The reference revision scores
100 / 1; an unchanged reply 0.
"""
from __future__ import annotations

import difflib
import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core.scenarios.implement_change.answer import FAILURE_KINDS, parse_change
from core.scenarios.scoring import iter_samples, mean
from core.scenarios.trajectories.periods import commit_time, period_labels, period_of

PER_SAMPLE_FILE = "revise_scores.jsonl"


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
    import sacrebleu

    files: dict[str, str] = dict(record["files"])
    with tempfile.TemporaryDirectory(prefix="ianvs-revise-") as tmp:
        root = Path(tmp)
        for path, text in files.items():
            (root / path).parent.mkdir(parents=True, exist_ok=True)
            (root / path).write_text(text, encoding="utf-8")
        only = next(iter(files)) if len(files) == 1 else None
        parsed = parse_change(reply, root, [], default_path=only)
    if parsed.failure:
        return {"failure": parsed.failure, "form": parsed.form, "edit_chrf": 0.0, "exact_match": 0.0}
    result = {**files, **parsed.edits}
    reference = {**files, **record["reference_files"]}
    model_lines = changed_lines(files, parsed.edits)
    ref_lines = changed_lines(files, record["reference_files"])
    chrf = float(sacrebleu.sentence_chrf(model_lines, [ref_lines]).score) if model_lines and ref_lines else 0.0
    same = {p: t.rstrip("\n") for p, t in result.items()} == {p: t.rstrip("\n") for p, t in reference.items()}
    return {"failure": "", "form": parsed.form, "edit_chrf": chrf, "exact_match": float(same)}


def revise_scores(y_true: Any, y_pred: Any, context: Any = None,
                  periods: Sequence[str] | None = None) -> dict[str, Any]:
    """The kind's columns (module docstring); per-sample scores go to ``revise_scores.jsonl``."""
    from core.scenarios import get_kind

    kind = get_kind("revise")
    errors: list[str] = []
    rows: list[dict[str, Any]] = []
    for sample in iter_samples(kind, y_pred, context, errors):
        rec = sample.record
        rows.append({"task_id": sample.task_id, "sample_index": sample.sample_index,
                     "period": period_of(commit_time(rec["committed_at"]), periods),
                     **score_revision(sample.answer, rec)})
    workspace = getattr(context, "workspace", None)
    if workspace is not None:
        Path(workspace, PER_SAMPLE_FILE).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out: dict[str, Any] = {"edit_chrf": mean([r["edit_chrf"] for r in rows], 2),
                           "exact_match": mean([r["exact_match"] for r in rows]),
                           "scored_samples": len(rows)}
    for name in FAILURE_KINDS:
        out[name] = sum(r["failure"] == name for r in rows)
    out["form_files"] = sum(r["form"] == "files" for r in rows)
    out["form_diff"] = sum(r["form"] == "diff" for r in rows)
    out["generation_error"] = len(errors)
    for label in period_labels(periods):
        mine = [r for r in rows if r["period"] == label]
        out[f"edit_chrf[{label}]"] = mean([r["edit_chrf"] for r in mine], 2)
        out[f"samples[{label}]"] = len(mine)
    return out


def _columns(periods: Sequence[str] | None = None) -> list[str]:
    cols = ["edit_chrf", "exact_match", "scored_samples", *FAILURE_KINDS, "form_files", "form_diff",
            "generation_error"]
    for label in period_labels(periods):
        cols += [f"edit_chrf[{label}]", f"samples[{label}]"]
    return cols


revise_scores.columns = _columns  # type: ignore[attr-defined]
