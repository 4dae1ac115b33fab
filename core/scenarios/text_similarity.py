"""Reference-based text similarity through maintained libraries (no hand-written n-grams).

* chrF and BLEU: ``sacrebleu`` sentence scores, on sacrebleu's 0-100 scale (BLEU with its
  default exponential smoothing, so a short answer without 4-gram matches is not always 0);
* ROUGE-L: ``rouge-score``'s F-measure of the longest common subsequence, 0-1, with stemming.

An empty hypothesis or reference scores 0 on all three. The libraries are the ``[scenarios]``
extra; a missing one is an :class:`IanvsError` saying how to install it.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any

from core.common.errors import IanvsError

SIMILARITY_COLUMNS = ("chrf", "bleu", "rouge_l")


def _need(module: str, package: str) -> Any:
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as exc:
        raise IanvsError(f"text-similarity metrics need the {package!r} package",
                         hint=f"pip install {package} (or the project's [scenarios] extra)"
                         ) from exc


@lru_cache(maxsize=1)
def _rouge() -> Any:
    scorer = _need("rouge_score.rouge_scorer", "rouge-score")
    return scorer.RougeScorer(["rougeL"], use_stemmer=True)


def similarity(hypothesis: str, reference: str) -> dict[str, float]:
    """``{"chrf", "bleu", "rouge_l"}`` of one hypothesis against one reference."""
    if not hypothesis.strip() or not reference.strip():
        return {name: 0.0 for name in SIMILARITY_COLUMNS}
    sacrebleu = _need("sacrebleu", "sacrebleu")
    return {
        "chrf": float(sacrebleu.sentence_chrf(hypothesis, [reference]).score),
        "bleu": float(sacrebleu.sentence_bleu(hypothesis, [reference]).score),
        "rouge_l": float(_rouge().score(reference, hypothesis)["rougeL"].fmeasure),
    }


def best_similarity(hypothesis: str, references: list[str]) -> dict[str, float]:
    """Per measure, the best score over several references (the best-matching human answer)."""
    scores = [similarity(hypothesis, ref) for ref in references] or [similarity("", "")]
    return {name: max(s[name] for s in scores) for name in SIMILARITY_COLUMNS}
