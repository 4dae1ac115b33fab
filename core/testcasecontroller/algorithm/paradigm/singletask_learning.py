"""Paradigm ``singletasklearning``: train (optional), predict (resumable), return predictions.

Call sequence on the ``basemodel`` instance (each step only if the method exists):
``preprocess()`` once with no arguments (upstream made it mandatory and sometimes called it
twice), ``train(train_dataset)``, ``save(<case>/output/train/)``, ``load(path or
initial_model_url)``, then ``predict``.

``predict`` receives what upstream gives it -- the test ``x`` array, or the whole dataset
object for ``metadata.json`` datasets -- but only for samples without a stored prediction,
in chunks of ``predict_chunk_size`` (default 1 for arrays, everything for dataset objects),
each chunk's predictions stored before the next starts. A ``predict`` that declares a
``context`` parameter is called with windows of pending samples (``predict_chunk_size``,
default :data:`CONTEXT_WINDOW`) and a :class:`PredictContext` (``final`` is True on the last
window), and may store predictions itself as they finish. For JSONL test sets the inputs of a
window are read from the file as it goes: memory does not grow with the size of the test set.

When every prediction is already stored, the model is not even constructed: re-scoring a
finished run costs no model time.

**Whole-set predictions.** Upstream hands whatever ``predict`` returned to the metrics. When a
``predict`` call does not return one item per input -- a mapping (many upstream metrics read
``y_pred`` as a dict keyed by file name), a string, ``None``, or a sequence of another length --
the test case switches to upstream's behaviour: ``predict`` is called *once* over the whole test
set and its result reaches the metrics unchanged (never iterated: iterating a mapping would
yield its keys). Such a test case cannot resume mid-way: ``predict_mode.json`` in the case folder
remembers the mode so a re-run calls ``predict`` once over the whole set straight away, and the
per-sample log is not used for it.
"""
from __future__ import annotations

import inspect
import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.common.errors import PluginError
from core.testcasecontroller.predictions import KeyList, PredictionStore, sample_key
from core.testenvmanager.dataset.parsers import ParsedDataset, subset
from core.common.progress import progress_bar

logger = logging.getLogger(__name__)


@dataclass
class PredictContext:
    """Handed to ``predict(x, context=...)`` by models that ask for it.

    Attributes:
        indices: dataset indices of the samples in ``x``, in order.
        records: the full test records for those samples (all fields).
        workspace: the test case folder (exists).
        save: ``save(position, prediction)`` stores the prediction of ``x[position]``
            durably at once; a killed run will not redo it.
        show_progress: whether progress bars are wanted.
        retry: positions marked with :meth:`retry_later`.
        final: True on the last call of this run (release expensive resources then).
    """

    indices: list[int]
    records: list[dict[str, Any]]
    workspace: Path
    save: Callable[[int, Any], None]
    show_progress: bool = True
    saved: set[int] = field(default_factory=set)
    retry: set[int] = field(default_factory=set)
    final: bool = True

    def retry_later(self, position: int) -> None:
        """Use the returned prediction of ``x[position]`` in this run's metrics but do not
        store it, so the next run asks for it again (e.g. it holds an infrastructure error)."""
        self.retry.add(position)


MODE_FILE = "predict_mode.json"
#: pending samples per call of a context-aware ``predict`` (bounded memory, enough parallelism)
CONTEXT_WINDOW = 1024


class WholeSetPrediction(Exception):
    """``predict`` did not return one item per input (raised inside :func:`_predict`).

    ``result`` is that call's return value when the call covered the whole test set (it is then
    used as is), else ``None`` (``predict`` is called again over the whole set)."""

    def __init__(self, result: Any, covers_all: bool, why: str) -> None:
        super().__init__(why)
        self.result, self.covers_all, self.why = result, covers_all, why


def per_sample(result: Any, expected: int) -> list[Any] | None:
    """``result`` as one prediction per input, or None when it is not shaped that way.

    Lists, tuples, numpy arrays (first axis) and other non-string, non-mapping iterables of
    exactly ``expected`` items are per-sample; a mapping, a string or bytes, ``None``, a scalar
    or a sequence of another length is not.
    """
    if result is None or isinstance(result, (str, bytes, bytearray, Mapping)):
        return None
    if isinstance(result, np.ndarray):
        if result.ndim == 0:
            return None
        items = list(result)
    elif isinstance(result, (list, tuple)):
        items = list(result)
    else:
        try:
            items = list(iter(result))
        except TypeError:
            return None
    return items if len(items) == expected else None


def _describe(result: Any) -> str:
    if isinstance(result, Mapping):
        return f"a {type(result).__name__} of {len(result)} entries"
    if result is None:
        return "None"
    try:
        return f"a {type(result).__name__} of length {len(result)}"
    except TypeError:
        return f"a {type(result).__name__}"


@dataclass
class SingleTaskInputs:
    """Everything one single-task test case needs (explicit, no globals)."""

    case_dir: Path
    test: ParsedDataset
    train: ParsedDataset
    make_model: Callable[[], Any]
    initial_model_url: str = ""
    predict_chunk_size: int | None = None
    show_progress: bool = True


def _accepts_context(method: Callable[..., Any]) -> bool:
    try:
        return "context" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def _call_optional(model: Any, name: str, *args: Any) -> Any:
    method = getattr(model, name, None)
    if method is None:
        return None
    if name == "preprocess":
        params = [p for p in inspect.signature(method).parameters.values()
                  if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY,
                                                         p.POSITIONAL_OR_KEYWORD)]
        if params:
            logger.warning("%s.preprocess needs arguments (%s); not called",
                           type(model).__name__, ", ".join(p.name for p in params))
            return None
    return method(*args)


def _read_mode(case_dir: Path) -> str:
    try:
        return str(json.loads((case_dir / MODE_FILE).read_text(encoding="utf-8")).get("mode"))
    except (OSError, ValueError, AttributeError):
        return "per_sample"


def _write_mode(case_dir: Path, mode: str, why: str) -> None:
    case_dir.mkdir(parents=True, exist_ok=True)
    tmp = case_dir / (MODE_FILE + ".tmp")
    tmp.write_text(json.dumps({"mode": mode, "why": why}), encoding="utf-8")
    tmp.replace(case_dir / MODE_FILE)


def _prepare(model: Any, inp: SingleTaskInputs) -> None:
    """preprocess, train, save and load, as upstream (each only when the method exists)."""
    _call_optional(model, "preprocess")
    os.environ["BASE_MODEL_URL"] = inp.initial_model_url
    if hasattr(model, "train"):
        _call_optional(model, "train", inp.train)
    train_dir = inp.case_dir / "output" / "train"
    path = _call_optional(model, "save", str(train_dir) + os.sep) if hasattr(model, "save") \
        else None
    os.environ["RESULT_SAVED_URL"] = str(inp.case_dir / "output" / "inference") + os.sep
    _call_optional(model, "load", path if path is not None else inp.initial_model_url)


def run_singletask(inp: SingleTaskInputs) -> tuple[Any, dict[str, Any]]:
    """Run one test case; returns ``(predictions, system_metric_info)``.

    ``predictions`` is a list in dataset order, or -- for a ``predict`` that does not return one
    item per input -- whatever its single call over the whole test set returned (see the module
    docstring). ``system_metric_info["predict_mode"]`` says which.
    """
    records_based = bool(getattr(inp.test, "per_sample", True))
    if not records_based or _read_mode(inp.case_dir) == "whole_set":
        logger.info("%s: calling predict once over the whole test set (no per-sample resume)",
                    inp.case_dir if records_based else inp.test.path)
        started = time.perf_counter()
        model = inp.make_model()
        _prepare(model, inp)
        result = _predict_whole(model, inp)
        return result, {"resumed_samples": 0, "predict_mode": "whole_set",
                        "predict_seconds": time.perf_counter() - started}
    records_iter: Callable[[], Iterator[dict[str, Any]]] = inp.test.records
    keys = KeyList(sample_key(rec) for rec in records_iter())
    store = PredictionStore(inp.case_dir, keys)
    info: dict[str, Any] = {"resumed_samples": store.stored, "predict_mode": "per_sample"}
    try:
        pending = store.pending()
        if not pending:
            logger.info("all %d predictions found in %s; the model is not called",
                        len(keys), store.path)
            return store.ordered(), info
        if store.stored:
            logger.info("resuming: %d of %d predictions already stored", store.stored,
                        len(keys))
        started = time.perf_counter()
        model = inp.make_model()
        _prepare(model, inp)
        try:
            provisional = _predict(model, inp, store, pending)
        except WholeSetPrediction as whole:
            _write_mode(inp.case_dir, "whole_set", whole.why)
            logger.warning("%s.predict returned %s; as upstream, predict is called once over "
                           "the whole test set and its result goes to the metrics unchanged "
                           "(this test case cannot resume mid-way)", type(model).__name__,
                           whole.why)
            result = whole.result if whole.covers_all else _predict_whole(model, inp)
            info.update(predict_mode="whole_set", resumed_samples=0,
                        predict_seconds=time.perf_counter() - started)
            return result, info
        info["predict_seconds"] = time.perf_counter() - started
        if provisional:
            logger.warning("%d prediction(s) are not stored and will be retried by the next "
                           "run (see the model's warnings)", len(provisional))
        return store.ordered(provisional), info
    finally:
        store.close()


def _predict_method(model: Any) -> Callable[..., Any]:
    predict = getattr(model, "predict", None)
    if predict is None:
        raise PluginError(f"{type(model).__name__} has no predict method",
                          hint="a basemodel must define predict(data)")
    return predict


def _predict_whole(model: Any, inp: SingleTaskInputs) -> Any:
    """upstream's single call: ``predict(x)`` (or the dataset object), result unchanged."""
    predict = _predict_method(model)
    as_object = bool(getattr(inp.test, "need_other_info", False))
    return predict(inp.test if as_object else inp.test.x)


def _predict(model: Any, inp: SingleTaskInputs, store: PredictionStore,
             pending: list[int]) -> dict[int, Any]:
    """Call predict on the pending samples; return the predictions not stored (by index)."""
    predict = _predict_method(model)
    as_object = bool(getattr(inp.test, "need_other_info", False))
    if _accepts_context(predict):
        size = inp.predict_chunk_size or CONTEXT_WINDOW
        provisional: dict[int, Any] = {}
        for chunk, records, final in _windows(inp.test, pending, size):
            ctx = PredictContext(chunk, records, inp.case_dir, lambda pos, p: None,
                                 inp.show_progress, final=final)

            def save(position: int, prediction: Any, ctx: PredictContext = ctx,
                     chunk: list[int] = chunk) -> None:
                store.put(chunk[position], prediction)
                ctx.saved.add(position)

            ctx.save = save
            data = subset(inp.test, chunk) if as_object else inp.test.x_of(chunk, records)
            result = _check_count(model, predict(data, context=ctx), len(chunk))
            store.put_many((chunk[i], p) for i, p in enumerate(result)
                           if i not in ctx.saved and i not in ctx.retry)
            provisional.update({chunk[i]: result[i] for i in sorted(ctx.retry)})
        return provisional
    size = inp.predict_chunk_size or (len(pending) if as_object else 1)
    total = len(store.keys)
    with progress_bar(total=len(pending), desc="predict", unit="sample",
                      enabled=inp.show_progress) as bar:
        for number, (chunk, records, _final) in enumerate(_windows(inp.test, pending, size)):
            data = subset(inp.test, chunk) if as_object else inp.test.x_of(chunk, records)
            raw = predict(data)
            if isinstance(raw, Iterator):  # a generator: keep its items for either use
                raw = list(raw)
            items = per_sample(raw, len(chunk))
            if items is None:
                if number or store.stored:  # earlier chunks were per-sample: a broken model
                    raise PluginError(
                        f"{type(model).__name__}.predict returned {_describe(raw)} for "
                        f"{len(chunk)} inputs after returning one prediction per input before",
                        hint="predict must answer the same way for every call")
                raise WholeSetPrediction(raw, len(chunk) == total, _describe(raw)
                                         + f" for {len(chunk)} input(s)")
            store.put_many(zip(chunk, items))
            bar.update(len(chunk))
    return {}


def _windows(test: ParsedDataset, pending: list[int], size: int
             ) -> Iterator[tuple[list[int], list[dict[str, Any]], bool]]:
    """``(indices, their records, is_last)`` for consecutive windows of ``pending``, reading
    the records once, in order, without holding more than one window."""
    wanted = set(pending)
    chunk: list[int] = []
    records: list[dict[str, Any]] = []
    seen = 0
    for index, record in enumerate(test.records()):
        if index not in wanted:
            continue
        chunk.append(index)
        records.append(record)
        seen += 1
        if len(chunk) == size:
            yield chunk, records, seen == len(pending)
            chunk, records = [], []
    if chunk:
        yield chunk, records, True


def _check_count(model: Any, result: Any, expected: int) -> list[Any]:
    """A context-aware predict (this project's API) must return one prediction per input."""
    items = per_sample(result, expected)
    if items is None:
        raise PluginError(f"{type(model).__name__}.predict returned {_describe(result)} "
                          f"for {expected} inputs",
                          hint="a predict that takes context= must return one prediction per "
                               "input, in order")
    return items
