"""LLM-as-judge for the text-scored kinds: rubric scores and pairwise preferences.

**Rubric** (a YAML file; defaults in ``core/scenarios/rubrics/<kind>.yaml``): ``scale: [low,
high]``, ``accept_threshold``, ``dimensions`` (name -> what to grade; the Smart Coding
proposal's functionality, reliability and interpretability) and the two prompt templates
``score_prompt`` (fields ``{task} {reference} {answer} {low} {high} {dimensions} {format}``)
and ``pairwise_prompt`` (``{task} {answer_a} {answer_b}``).

**Strict parsing.** A score reply is accepted only if every dimension appears exactly once as a
line ``<name>: <integer>`` with the integer on the scale (other lines are ignored; a missing,
repeated or out-of-range dimension fails). A pairwise reply must be exactly ``A``, ``B`` or
``TIE`` (case-insensitive, optionally ``Answer A``, a final period allowed). Replies that fail
are counted in ``judge_parse_failures`` and left out of the means -- never dropped silently,
never scored as zero.

**Pairwise** compares the sample with the record's reference answer twice, the sample as A
then as B. Each parsed verdict gives the sample 1 (preferred), 0.5 (TIE) or 0;
``judge_win_rate`` is their mean. When both orders parsed but name different winners (position
bias), the pair counts in ``judge_order_disagreements``.

**Caching.** Judge calls go through the generation cache (``judge_generations.jsonl`` in the
test case folder, keyed by judge model, prompt and decoding), so a killed run resumes and a
re-score costs no judge time. Per-sample verdicts are written to ``judge_items.jsonl`` (read by
``ianvs judge export`` and the human agreement metric).
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError, IanvsError
from core.common.yaml_loader import load_yaml
from core.generation import create_generator
from core.generation.cache_key import GenerationCache, cached_generate
from core.generation.types import DecodingSettings, GenerationRequest
from core.scenarios.base import TaskKind
from core.scenarios.scoring import ScoredSample, iter_samples, mean

RUBRIC_DIR = Path(__file__).parent / "rubrics"
JUDGE_CACHE = "judge_generations.jsonl"
JUDGE_ITEMS = "judge_items.jsonl"
_PREF = re.compile(r"^\s*\**\s*(?:answer\s+)?(A|B|TIE)\s*\**\s*\.?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Rubric:
    """A parsed rubric file (see the module docstring)."""

    low: int
    high: int
    accept_threshold: float
    dimensions: dict[str, str]
    score_prompt: str
    pairwise_prompt: str
    source: str = ""


def load_rubric(path: str | Path) -> Rubric:
    """Read (with :func:`core.common.yaml_loader.load_yaml`, the loader of every YAML file:
    ``.yaml``/``.yml``, bounded aliases) and check a rubric YAML file.

    Raises:
        ConfigError: naming the file (and line) and the key that is missing or wrong.
    """
    file = Path(path)
    data = load_yaml(file)
    if not isinstance(data, Mapping):
        raise ConfigError("a rubric must be a mapping", source=file)
    scale = data.get("scale")
    if (not isinstance(scale, list) or len(scale) != 2 or not all(isinstance(v, int) for v in scale)
            or scale[0] >= scale[1]):
        raise ConfigError("'scale' must be [low, high] integers with low < high", source=file)
    dims = data.get("dimensions")
    if not isinstance(dims, Mapping) or not dims or not all(
            isinstance(k, str) and re.fullmatch(r"[a-z_]+", k) and isinstance(v, str)
            for k, v in dims.items()):
        raise ConfigError("'dimensions' must map lower-case names to descriptions", source=file)
    threshold = data.get("accept_threshold")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise ConfigError("'accept_threshold' must be a number", source=file)
    prompts = {}
    for key, fields in (("score_prompt", ("{task}", "{answer}", "{format}")),
                        ("pairwise_prompt", ("{task}", "{answer_a}", "{answer_b}"))):
        text = data.get(key)
        if not isinstance(text, str) or any(f not in text for f in fields):
            raise ConfigError(f"{key!r} must be a template using {', '.join(fields)}",
                              source=file)
        prompts[key] = text
    return Rubric(scale[0], scale[1], float(threshold), dict(dims), prompts["score_prompt"],
                  prompts["pairwise_prompt"], str(file))


def parse_scores(text: str, rubric: Rubric) -> dict[str, int] | None:
    """Dimension -> score from a judge reply, or None if it breaks the format (see module)."""
    found: dict[str, list[str]] = {name: [] for name in rubric.dimensions}
    for line in text.splitlines():
        m = re.fullmatch(r"\s*[*_`]*\s*([A-Za-z_]+)\s*[*_`]*\s*:\s*[*_`]*\s*(-?\d+)\s*[*_`]*"
                         r"(?:\s*/\s*\d+)?\s*", line)
        if m and m.group(1).lower() in found:
            found[m.group(1).lower()].append(m.group(2))
    scores = {}
    for name, values in found.items():
        if len(values) != 1:
            return None
        value = int(values[0])
        if not rubric.low <= value <= rubric.high:
            return None
        scores[name] = value
    return scores


def parse_preference(text: str) -> str | None:
    """``"A"``, ``"B"`` or ``"TIE"`` from a pairwise reply; None if it is anything else."""
    m = _PREF.match(text.strip())
    return m.group(1).upper() if m else None


def score_messages(rubric: Rubric, view: Mapping[str, str], answer: str) -> list[dict[str, str]]:
    dims = "\n".join(f"- {name}: {desc}" for name, desc in rubric.dimensions.items())
    fmt = "\n".join(f"{name}: <{rubric.low}-{rubric.high}>" for name in rubric.dimensions)
    text = rubric.score_prompt.format(task=view["task"], reference=view["reference"],
                                      answer=answer or "(empty answer)", low=rubric.low,
                                      high=rubric.high, dimensions=dims, format=fmt)
    return [{"role": "user", "content": text}]


def pairwise_messages(rubric: Rubric, view: Mapping[str, str], a: str, b: str
                      ) -> list[dict[str, str]]:
    text = rubric.pairwise_prompt.format(task=view["task"], answer_a=a or "(empty answer)",
                                         answer_b=b or "(empty answer)")
    return [{"role": "user", "content": text}]


def _win(pref: str | None, sample_is: str) -> float | None:
    if pref is None:
        return None
    return 0.5 if pref == "TIE" else float(pref == sample_is)


def run_judge(kind: TaskKind, y_pred: Any, context: Any, generator: str = "embedded",
              generator_options: Mapping[str, Any] | None = None,
              rubric: str | None = None, pairwise: bool = True,
              max_tokens: int = 48) -> dict[str, Any]:
    """Judge every sample of a test case; returns the ``judge_*`` columns (module docstring)."""
    rub = load_rubric(Path(rubric) if rubric else RUBRIC_DIR / f"{kind.name}.yaml")
    errors: list[str] = []
    samples: list[ScoredSample] = list(iter_samples(kind, y_pred, context, errors))
    decoding = DecodingSettings(temperature=0.0, max_tokens=max_tokens)
    requests: list[GenerationRequest] = []
    for s in samples:
        view = kind.judge_view(s.record)
        ref = kind.answer(view["reference"], s.record)
        base = f"{s.task_id}#{s.sample_index}"
        requests.append(GenerationRequest(f"{base}/score", "", mode="chat", decoding=decoding,
                                          messages=tuple(score_messages(rub, view, s.answer))))
        if pairwise:
            requests.append(GenerationRequest(
                f"{base}/ab", "", mode="chat", decoding=decoding,
                messages=tuple(pairwise_messages(rub, view, s.answer, ref))))
            requests.append(GenerationRequest(
                f"{base}/ba", "", mode="chat", decoding=decoding,
                messages=tuple(pairwise_messages(rub, view, ref, s.answer))))
    replies: dict[str, str] = {}
    failed_calls = 0
    if requests:
        try:
            judge = create_generator(generator, **dict(generator_options or {}))
        except TypeError as exc:
            raise ConfigError(f"judge generator {generator!r}: {exc}") from exc
        try:
            cache = GenerationCache(Path(context.workspace) / JUDGE_CACHE)
            for gen in cached_generate(judge, requests, cache):
                if gen.error is None:
                    replies[gen.task_id] = gen.raw_output
                else:
                    failed_calls += 1
        finally:
            judge.close()
    items, parse_failures, disagreements = [], 0, 0
    for s in samples:
        base = f"{s.task_id}#{s.sample_index}"
        item: dict[str, Any] = {"task_id": s.task_id, "sample_index": s.sample_index}
        raw = replies.get(f"{base}/score")
        scores = parse_scores(raw, rub) if raw is not None else None
        parse_failures += raw is not None and scores is None
        item["scores"] = scores
        item["accept"] = (None if scores is None else
                          sum(scores.values()) / len(scores) >= rub.accept_threshold)
        if pairwise:
            ab, ba = replies.get(f"{base}/ab"), replies.get(f"{base}/ba")
            pa = parse_preference(ab) if ab is not None else None
            pb = parse_preference(ba) if ba is not None else None
            parse_failures += (ab is not None and pa is None) + (ba is not None and pb is None)
            wins = [w for w in (_win(pa, "A"), _win(pb, "B")) if w is not None]
            if pa is not None and pb is not None:
                winner_ab = {"A": "sample", "B": "reference", "TIE": "tie"}[pa]
                winner_ba = {"A": "reference", "B": "sample", "TIE": "tie"}[pb]
                disagreements += winner_ab != winner_ba
            item.update(pairwise=[pa, pb], wins=wins)
        items.append(item)
    Path(context.workspace, JUDGE_ITEMS).write_text(
        "".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    parsed = [i for i in items if i["scores"] is not None]
    out: dict[str, Any] = {
        "judge_score": mean([sum(i["scores"].values()) / len(i["scores"]) for i in parsed], 3)}
    for name in rub.dimensions:
        out[f"judge_{name}"] = mean([i["scores"][name] for i in parsed], 3)
    out["judge_accept_rate"] = mean([float(i["accept"]) for i in parsed])
    if pairwise:
        out["judge_win_rate"] = mean([w for i in items for w in i["wins"]])
        out["judge_order_disagreements"] = disagreements
    out["judge_parse_failures"] = parse_failures
    out["judge_errors"] = failed_calls
    return out


def judge_columns(kind_name: str, pairwise: bool = True, rubric: str | None = None,
                  generator: str = "embedded") -> list[str]:
    """The judge's columns; checks the rubric file and the judge generator's name on the way
    (``ianvs validate`` calls this without running anything)."""
    from core.generation import generator_parameters

    generator_parameters(generator)  # RegistryError (with suggestions) for an unknown name
    rub = load_rubric(Path(rubric) if rubric else RUBRIC_DIR / f"{kind_name}.yaml")
    cols = ["judge_score", *(f"judge_{d}" for d in rub.dimensions), "judge_accept_rate"]
    if pairwise:
        cols += ["judge_win_rate", "judge_order_disagreements"]
    return cols + ["judge_parse_failures", "judge_errors"]


def make_judge_metric(kind_name: str) -> Any:
    """The ``llm_judge`` metric of one kind (testenv keys: ``generator``,
    ``generator_options``, ``rubric``, ``pairwise``, ``max_tokens``)."""

    def llm_judge(y_true: Any, y_pred: Any, context: Any = None, generator: str = "embedded",
                  generator_options: Mapping[str, Any] | None = None,
                  rubric: str | None = None, pairwise: bool = True,
                  max_tokens: int = 48) -> dict[str, Any]:
        from core.scenarios import get_kind

        try:
            return run_judge(get_kind(kind_name), y_pred, context, generator,
                             generator_options, rubric, pairwise, max_tokens)
        except IanvsError:
            raise
        except (ValueError, KeyError) as exc:
            raise ConfigError(f"llm_judge: {exc}") from exc

    llm_judge.columns = (lambda generator="embedded", generator_options=None, rubric=None,  # type: ignore[attr-defined]
                         pairwise=True, max_tokens=48: judge_columns(kind_name, pairwise, rubric,
                                                                     generator))
    llm_judge.__qualname__ = f"llm_judge_{kind_name}"
    # one registry identity per kind, so two kinds' plugin files may both register llm_judge
    llm_judge.__module__ = f"{__name__}.{kind_name}"
    return llm_judge
