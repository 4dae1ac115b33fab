"""Reference-based text similarity through maintained libraries (no hand-written n-grams).

* chrF and BLEU: ``sacrebleu`` sentence scores, on sacrebleu's 0-100 scale (BLEU with its
  default exponential smoothing, so a short answer without 4-gram matches is not always 0);
* ROUGE-L: ``rouge-score``'s F-measure of the longest common subsequence, 0-1, with stemming.

An empty hypothesis or reference scores 0 on all three. The libraries are the ``[scenarios]``
extra; a metric using them declares :data:`SIMILARITY_REQUIRES` (``fn.requires``), so a missing
one stops the job before it starts, and an import here that still fails is an
:class:`IanvsError` saying how to install it.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from core.common.requires import Requirement, import_required

SIMILARITY_COLUMNS = ("chrf", "bleu", "rouge_l")
SACREBLEU = Requirement("sacrebleu", "sacrebleu", "scenarios")
ROUGE = Requirement("rouge_score.rouge_scorer", "rouge-score", "scenarios")
#: what a metric calling :func:`similarity` declares as ``fn.requires``
SIMILARITY_REQUIRES = (SACREBLEU, ROUGE)


def sacrebleu() -> Any:
    """The sacrebleu module (an :class:`IanvsError` with the install hint when missing)."""
    return import_required(SACREBLEU, "text-similarity metrics")


@lru_cache(maxsize=1)
def _rouge() -> Any:
    scorer = import_required(ROUGE, "text-similarity metrics")
    return scorer.RougeScorer(["rougeL"], use_stemmer=True)


def similarity(hypothesis: str, reference: str) -> dict[str, float]:
    """``{"chrf", "bleu", "rouge_l"}`` of one hypothesis against one reference."""
    if not hypothesis.strip() or not reference.strip():
        return {name: 0.0 for name in SIMILARITY_COLUMNS}
    bleu = sacrebleu()
    return {
        "chrf": float(bleu.sentence_chrf(hypothesis, [reference]).score),
        "bleu": float(bleu.sentence_bleu(hypothesis, [reference]).score),
        "rouge_l": float(_rouge().score(reference, hypothesis)["rougeL"].fmeasure),
    }


def best_similarity(hypothesis: str, references: list[str]) -> dict[str, float]:
    """Per measure, the best score over several references (the best-matching human answer)."""
    scores = [similarity(hypothesis, ref) for ref in references] or [similarity("", "")]
    return {name: max(s[name] for s in scores) for name in SIMILARITY_COLUMNS}
