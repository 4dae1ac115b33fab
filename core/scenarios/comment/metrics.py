"""Metrics of the comment kind: an AST gate, then line coverage and text similarity.

Per sample (the reply's first fenced block, else the whole reply):

1. **Gate.** The reply must parse and be the same program as ``code_snippet`` once comments
   and docstrings are removed (:func:`~core.scenarios.comment.annotate.same_program`). A
   sample that fails scores **0 on every comment metric** and is counted in ``code_altered``.
2. **line_coverage**: the share of reference-annotated lines the reply also annotates.
3. **chrf / bleu / rouge_l**: the reply's annotation texts (in line order, one per line)
   against the reference annotation texts (:mod:`core.scenarios.text_similarity`).

Columns: ``code_preserved`` (share of scored samples passing the gate), ``code_altered``
(count), ``line_coverage``, ``chrf``, ``bleu`` (0-100), ``rouge_l`` (0-1), ``scored_samples``,
``generation_error``. A perfect answer (the reference annotations) scores 1 / 100 / 100 / 1;
an unchanged uncommented function 0 everywhere but ``code_preserved``; anything that changes
the code 0 everywhere.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from core.common.jsonl import write_jsonl
from core.scenarios.comment.annotate import extract_annotations
from core.scenarios.scoring import ScoredSample, iter_samples, mean, record_per_task
from core.scenarios.text_similarity import SIMILARITY_COLUMNS, SIMILARITY_REQUIRES, similarity

COLUMNS = ("code_preserved", "code_altered", "line_coverage", *SIMILARITY_COLUMNS,
           "scored_samples", "generation_error")
PER_SAMPLE_FILE = "comment_scores.jsonl"


def score_comment_sample(sample: ScoredSample) -> dict[str, Any]:
    """The per-sample scores of one reply (see the module docstring)."""
    rec = sample.record
    found = extract_annotations(sample.answer, rec["code_snippet"])
    if found is None:
        return {"preserved": False, "line_coverage": 0.0,
                **{name: 0.0 for name in SIMILARITY_COLUMNS}}
    ref_lines = {a["line_number"] for a in rec["annotations"]}
    got_lines = {a.line_number for a in found}
    hyp = "\n".join(a.annotation for a in found)
    ref = "\n".join(a["annotation"] for a in sorted(rec["annotations"],
                                                    key=lambda a: a["line_number"]))
    return {"preserved": True, "line_coverage": len(ref_lines & got_lines) / len(ref_lines),
            **similarity(hyp, ref)}


def comment_scores(y_true: Any, y_pred: Any, context: Any = None) -> dict[str, Any]:
    """The comment kind's columns (module docstring); per-sample scores are written to
    ``comment_scores.jsonl`` in the test case folder."""
    from core.scenarios import get_kind

    kind = get_kind("comment")
    errors: list[str] = []
    rows: list[dict[str, Any]] = []
    for sample in iter_samples(kind, y_pred, context, errors):
        rows.append({"task_id": sample.task_id, "sample_index": sample.sample_index,
                     **score_comment_sample(sample)})
    workspace = getattr(context, "workspace", None)
    if workspace is not None:
        write_jsonl(Path(workspace, PER_SAMPLE_FILE), rows)
    record_per_task(context, rows, ["preserved", "line_coverage", *SIMILARITY_COLUMNS],
                    rename={"preserved": "code_preserved"})
    out: dict[str, Any] = {
        "code_preserved": mean([float(r["preserved"]) for r in rows]),
        "code_altered": sum(1 for r in rows if not r["preserved"]),
        "line_coverage": mean([r["line_coverage"] for r in rows]),
    }
    for name in SIMILARITY_COLUMNS:
        out[name] = mean([r[name] for r in rows], 2 if name != "rouge_l" else 4)
    out["scored_samples"] = len(rows)
    out["generation_error"] = len(errors)
    return out


comment_scores.columns = lambda: list(COLUMNS)  # type: ignore[attr-defined]
comment_scores.requires = SIMILARITY_REQUIRES  # type: ignore[attr-defined]
