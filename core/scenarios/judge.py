"""LLM-as-judge for the text-scored kinds: a control check, rubric scores and pairwise
preferences.

**Rubric, prompts and strict parsing**: :mod:`core.scenarios.rubric` (re-exported here).
Replies that fail parsing are counted in ``judge_parse_failures`` and left out of the means --
never dropped silently, never scored as zero.

**Control check first** (:mod:`core.scenarios.judge_controls`): the judge grades the reference
answers of up to ``control_tasks`` of the run's tasks against unrelated and broken answers. A
judge that does not rank the references clearly above them raises :class:`JudgeInvalid`: the
samples are not judged, the runner records the reason as the metric's error and every judge
column of the test case is NaN (``error`` in the report), so its numbers are never shown as
scores. A passing judge adds ``judge_valid`` (1), ``judge_control_auc`` and
``judge_control_low`` to its columns. Details of either outcome: ``judge_controls.json`` in
the test case folder.

**Pairwise** compares the sample with the record's reference answer twice, the sample as A
then as B. Each parsed verdict gives the sample 1 (preferred), 0.5 (TIE) or 0;
``judge_win_rate`` is their mean. When both orders parsed but name different winners (position
bias), the pair counts in ``judge_order_disagreements``.

**Caching.** Judge calls go through the generation cache (``judge_generations.jsonl`` in the
test case folder, keyed by judge model, prompt and decoding), so a killed run resumes and a
re-score costs no judge time; control calls are keyed independently of the test case, and test
cases run by one process share them. Per-sample verdicts are written to ``judge_items.jsonl``
(read by ``ianvs judge export`` and the human agreement metric; removed when the judge fails its
controls).
"""
from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError, IanvsError
from core.generation import create_generator
from core.generation.cache_key import GenerationCache, cached_generate, sample_key
from core.generation.types import DecodingSettings, Generation, GenerationRequest
from core.scenarios import get_kind
from core.scenarios.base import TaskKind
from core.scenarios.judge_controls import (CONTROL_FILE, DEFAULT_CONTROL_TASKS, DEFAULT_MIN_LOW,
                                           MIN_CONTROL_TASKS, JudgeInvalid, build_controls,
                                           control_requests, evaluate_controls)
from core.scenarios.rubric import (Rubric, kind_rubric, load_rubric, pairwise_messages,
                                   parse_preference, parse_scores, score_messages)
from core.scenarios.scoring import ScoredSample, iter_samples, mean, record_per_task

__all__ = ["JUDGE_CACHE", "JUDGE_ITEMS", "JudgeInvalid", "Rubric", "judge_columns",
           "load_rubric", "make_judge_metric", "pairwise_messages", "parse_preference",
           "parse_scores", "run_judge", "score_messages"]

JUDGE_CACHE = "judge_generations.jsonl"
JUDGE_ITEMS = "judge_items.jsonl"
LOGGER = logging.getLogger(__name__)


def _win(pref: str | None, sample_is: str) -> float | None:
    if pref is None:
        return None
    return 0.5 if pref == "TIE" else float(pref == sample_is)


_CONTROL_MEMO: dict[str, Generation] = {}
"""Control-check answers of this process by cache key: test cases of one job share a judge
and a test set, so the second case copies the first one's control answers into its own cache
instead of asking the judge again."""


def _generate(judge: Any, requests: list[GenerationRequest], cache: GenerationCache,
              replies: dict[str, str], memo: bool = False) -> int:
    """Ask ``judge`` (through ``cache``; with ``memo``, also through :data:`_CONTROL_MEMO`)
    and put the raw replies into ``replies``; returns the number of failed calls."""
    if memo:
        model = judge.describe()
        known = [_CONTROL_MEMO[k] for k in (sample_key(model, r, 0) for r in requests)
                 if k in _CONTROL_MEMO and cache.get(k) is None]
        for _gen in cache.append(known):
            pass
    failed = 0
    for gen in cached_generate(judge, requests, cache):
        if gen.error is None:
            replies[gen.task_id] = gen.raw_output
            if memo and gen.key:
                _CONTROL_MEMO[gen.key] = gen
        else:
            failed += 1
    return failed


def run_judge(kind: TaskKind, y_pred: Any, context: Any, generator: str = "embedded",
              generator_options: Mapping[str, Any] | None = None,
              rubric: str | None = None, pairwise: bool = True,
              max_tokens: int = 48, control_tasks: int = DEFAULT_CONTROL_TASKS,
              control_min: float = DEFAULT_MIN_LOW) -> dict[str, Any]:
    """Judge the control set, then (if the judge passed) every sample of a test case; returns
    the ``judge_*`` columns (module docstring).

    Raises:
        JudgeInvalid: the judge failed its control check (the samples are not judged then;
            ``judge_controls.json`` in the test case folder has the details).
        ConfigError: bad settings (``control_tasks`` below the check's minimum, ``control_min``
            outside 0..1, an unusable generator).
    """
    if isinstance(control_tasks, bool) or not isinstance(control_tasks, int) \
            or control_tasks < MIN_CONTROL_TASKS:
        raise ConfigError(f"llm_judge: 'control_tasks' must be an integer >= "
                          f"{MIN_CONTROL_TASKS}, got {control_tasks!r}")
    if isinstance(control_min, bool) or not isinstance(control_min, (int, float)) \
            or not 0.0 <= control_min <= 1.0:
        raise ConfigError(f"llm_judge: 'control_min' must be a number in 0..1, "
                          f"got {control_min!r}")
    rub = kind_rubric(kind, rubric)
    errors: list[str] = []
    samples: list[ScoredSample] = list(iter_samples(kind, y_pred, context, errors))
    decoding = DecodingSettings(temperature=0.0, max_tokens=max_tokens)
    controls = build_controls(kind, context.records(), control_tasks)
    control_reqs = control_requests(rub, controls, decoding, pairwise)
    requests = sample_requests(rub, kind, samples, decoding, pairwise)
    workspace = Path(context.workspace)
    replies: dict[str, str] = {}
    try:
        judge = create_generator(generator, **dict(generator_options or {}))
    except TypeError as exc:
        raise ConfigError(f"judge generator {generator!r}: {exc}") from exc
    try:
        cache = GenerationCache(workspace / JUDGE_CACHE)
        failed_calls = _generate(judge, control_reqs, cache, replies, memo=True)
        check = evaluate_controls(rub, controls, replies, pairwise, float(control_min))
        if failed_calls:
            check.reason += (f"; {failed_calls} control call(s) of the judge failed (counted "
                             "against it; the next run asks again)")
        (workspace / CONTROL_FILE).write_text(json.dumps(check.to_dict(), indent=1),
                                              encoding="utf-8")
        if not check.valid:
            (workspace / JUDGE_ITEMS).unlink(missing_ok=True)  # no stale verdicts of a run before
            raise JudgeInvalid(check.reason, {  # the runner logs it and marks the columns
                "judge_valid": 0, "judge_control_auc": check.auc, "judge_control_low": check.low})
        LOGGER.info("llm_judge (%s): %s", generator, check.reason)
        failed_calls += _generate(judge, requests, cache, replies)
    finally:
        judge.close()
    out: dict[str, Any] = {"judge_valid": 1, "judge_control_auc": check.auc,
                           "judge_control_low": check.low}
    out.update(_sample_columns(rub, samples, replies, pairwise, workspace, context))
    out["judge_errors"] = failed_calls
    return out


def sample_requests(rub: Rubric, kind: TaskKind, samples: list[ScoredSample],
                    decoding: DecodingSettings, pairwise: bool) -> list[GenerationRequest]:
    """The rubric call of every sample and, with ``pairwise``, its two reference comparisons."""
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
    return requests


def _sample_columns(rub: Rubric, samples: list[ScoredSample], replies: Mapping[str, str],
                    pairwise: bool, workspace: Path, context: Any) -> dict[str, Any]:
    """The score columns from the samples' replies; writes ``judge_items.jsonl`` and hands the
    per-sample values of the rubric columns (means over parsed samples) to the test case's
    per-task values (:func:`core.scenarios.scoring.record_per_task`). ``judge_win_rate``, a
    mean over verdicts rather than samples, is not recorded."""
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
    Path(workspace, JUDGE_ITEMS).write_text(
        "".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    parsed = [i for i in items if i["scores"] is not None]
    rows = [{"task_id": i["task_id"], "judge_score": sum(i["scores"].values()) / len(i["scores"]),
             "judge_accept_rate": float(i["accept"]),
             **{f"judge_{d}": i["scores"][d] for d in rub.dimensions}} for i in parsed]
    record_per_task(context, rows, ["judge_score", *(f"judge_{d}" for d in rub.dimensions),
                                    "judge_accept_rate"])
    out: dict[str, Any] = {
        "judge_score": mean([sum(i["scores"].values()) / len(i["scores"]) for i in parsed], 3)}
    for name in rub.dimensions:
        out[f"judge_{name}"] = mean([i["scores"][name] for i in parsed], 3)
    out["judge_accept_rate"] = mean([float(i["accept"]) for i in parsed])
    if pairwise:
        out["judge_win_rate"] = mean([w for i in items for w in i["wins"]])
        out["judge_order_disagreements"] = disagreements
    out["judge_parse_failures"] = parse_failures
    return out


def judge_columns(kind_name: str, pairwise: bool = True, rubric: str | None = None,
                  generator: str = "embedded") -> list[str]:
    """The judge's columns; checks the rubric file and the judge generator's name on the way
    (``ianvs validate`` calls this without running anything)."""
    from core.generation import generator_parameters

    generator_parameters(generator)  # RegistryError (with suggestions) for an unknown name
    rub = kind_rubric(get_kind(kind_name), rubric)
    cols = ["judge_valid", "judge_control_auc", "judge_control_low", "judge_score",
            *(f"judge_{d}" for d in rub.dimensions), "judge_accept_rate"]
    if pairwise:
        cols += ["judge_win_rate", "judge_order_disagreements"]
    return cols + ["judge_parse_failures", "judge_errors"]


def make_judge_metric(kind_name: str) -> Any:
    """The ``llm_judge`` metric of one kind (testenv keys: ``generator``,
    ``generator_options``, ``rubric``, ``pairwise``, ``max_tokens``, ``control_tasks``,
    ``control_min``; see :func:`run_judge`)."""

    def llm_judge(y_true: Any, y_pred: Any, context: Any = None, generator: str = "embedded",
                  generator_options: Mapping[str, Any] | None = None,
                  rubric: str | None = None, pairwise: bool = True,
                  max_tokens: int = 48, control_tasks: int = DEFAULT_CONTROL_TASKS,
                  control_min: float = DEFAULT_MIN_LOW) -> dict[str, Any]:
        try:
            return run_judge(get_kind(kind_name), y_pred, context, generator,
                             generator_options, rubric, pairwise, max_tokens, control_tasks,
                             control_min)
        except IanvsError:
            raise
        except (ValueError, KeyError) as exc:
            raise ConfigError(f"llm_judge: {exc}") from exc

    def columns(generator: str = "embedded", generator_options: Any = None,
                rubric: str | None = None, pairwise: bool = True, max_tokens: int = 48,
                control_tasks: int = DEFAULT_CONTROL_TASKS,
                control_min: float = DEFAULT_MIN_LOW) -> list[str]:
        return judge_columns(kind_name, pairwise, rubric, generator)

    llm_judge.columns = columns  # type: ignore[attr-defined]
    llm_judge.__qualname__ = f"llm_judge_{kind_name}"
    # one registry identity per kind, so two kinds' plugin files may both register llm_judge
    llm_judge.__module__ = f"{__name__}.{kind_name}"
    return llm_judge
