"""The judge-based metrics a text-scored kind adds to its own: the LLM judge and human ratings."""
from __future__ import annotations

from core.scenarios.base import MetricFn
from core.scenarios.human import human_judgment
from core.scenarios.judge import make_judge_metric


def judged_metrics(kind_name: str) -> dict[str, MetricFn]:
    """The judge-based metrics every text-scored kind offers: ``llm_judge`` (see
    :mod:`core.scenarios.judge`) and ``human_judgment`` (see :mod:`core.scenarios.human`)."""
    return {"llm_judge": make_judge_metric(kind_name), "human_judgment": human_judgment}
