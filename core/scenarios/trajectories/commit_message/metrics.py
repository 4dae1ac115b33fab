"""Metrics of the commit-message kind: the reply against the developer's message.

Per sample (the reply's message, see :meth:`CommitMessageKind.answer`):

* ``chrf`` and ``bleu`` (sacrebleu, 0-100) and ``rouge_l`` (rouge-score F-measure, 0-1) against
  the whole reference message -- the measures the comment and issue kinds use
  (:mod:`core.scenarios.text_similarity`);
* ``subject_chrf``: chrF of the reply's first line against the message's first line (the
  summary line is what ``git log --oneline`` shows; bodies are often absent on one side).

Columns are means over scored samples, plus ``scored_samples``, ``empty_answers``,
``generation_error``. The reference itself scores 100 / 100 / 1 / 100; an empty reply 0
everywhere; an unrelated text near 0.

**Periods** (``periods: [cut dates]`` in the testenv entry, e.g. a model's training cut-off):
every column above is also given per period, as ``<column>[<period>]`` (``chrf[before
2024-06-01]``, ``chrf[from 2024-06-01]``), from the tasks' commit dates, so a model can be
compared on changes before and after its cut-off; ``samples[<period>]`` counts each period's
scored samples.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.common.jsonl import write_jsonl
from core.scenarios.scoring import iter_samples, mean, record_per_task, record_periods
from core.scenarios.text_similarity import SIMILARITY_COLUMNS, SIMILARITY_REQUIRES, similarity
from core.scenarios.trajectories.periods import commit_time, period_labels, period_of

SCORE_COLUMNS = (*SIMILARITY_COLUMNS, "subject_chrf")
COLUMNS = (*SCORE_COLUMNS, "scored_samples", "empty_answers", "generation_error")
PER_SAMPLE_FILE = "commit_message_scores.jsonl"


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0].strip()


def score_message(answer: str, reference: str) -> dict[str, float]:
    """The per-sample scores of one reply against one reference message."""
    scores = similarity(answer, reference)
    scores["subject_chrf"] = similarity(_first_line(answer), _first_line(reference))["chrf"]
    return scores


def _means(rows: list[dict[str, Any]]) -> dict[str, float]:
    return {name: mean([r[name] for r in rows], 4 if name == "rouge_l" else 2)
            for name in SCORE_COLUMNS}


def commit_message_scores(y_true: Any, y_pred: Any, context: Any = None,
                          periods: Sequence[str] | None = None) -> dict[str, Any]:
    """The kind's columns (module docstring); per-sample scores (with each task's period) go to
    ``commit_message_scores.jsonl`` in the test case folder."""
    from core.scenarios import get_kind

    kind = get_kind("commit_message")
    errors: list[str] = []
    rows: list[dict[str, Any]] = []
    for sample in iter_samples(kind, y_pred, context, errors):
        rec = sample.record
        rows.append({"task_id": sample.task_id, "sample_index": sample.sample_index,
                     "committed_at": rec["committed_at"],
                     "period": period_of(commit_time(rec["committed_at"]), periods),
                     "empty": not sample.answer.strip(),
                     **score_message(sample.answer, kind.reference(rec))})
    workspace = getattr(context, "workspace", None)
    if workspace is not None:
        write_jsonl(Path(workspace, PER_SAMPLE_FILE), rows)
    record_per_task(context, rows, SCORE_COLUMNS)
    record_periods(context, rows, SCORE_COLUMNS, period_labels(periods))
    out: dict[str, Any] = _means(rows)
    out["scored_samples"] = len(rows)
    out["empty_answers"] = sum(1 for r in rows if r["empty"])
    out["generation_error"] = len(errors)
    for label in period_labels(periods):
        mine = [r for r in rows if r["period"] == label]
        out.update({f"{k}[{label}]": v for k, v in _means(mine).items()})
        out[f"samples[{label}]"] = len(mine)
    return out


def _columns(periods: Sequence[str] | None = None) -> list[str]:
    cols = list(COLUMNS)
    for label in period_labels(periods):
        cols += [f"{k}[{label}]" for k in SCORE_COLUMNS] + [f"samples[{label}]"]
    return cols


commit_message_scores.columns = _columns  # type: ignore[attr-defined]
commit_message_scores.requires = SIMILARITY_REQUIRES  # type: ignore[attr-defined]
