"""Paradigm ``singletasklearning``: train (optional), predict (resumable), return predictions.

Call sequence on the ``basemodel`` instance (each step only if the method exists):
``preprocess()`` once with no arguments (upstream made it mandatory and sometimes called it
twice), ``train(train_dataset)``, ``save(<case>/output/train/)``, ``load(path or
initial_model_url)``, then ``predict``.

``predict`` receives what upstream gives it -- the test ``x`` array, or the whole dataset
object for ``metadata.json`` datasets -- but only for samples without a stored prediction,
in chunks of ``predict_chunk_size`` (default 1 for arrays, everything for dataset objects),
each chunk's predictions stored before the next starts. A ``predict`` that declares a
``context`` parameter is called once with every pending sample and a
:class:`PredictContext`, and may store predictions itself as they finish.

When every prediction is already stored, the model is not even constructed: re-scoring a
finished run costs no model time.
"""
from __future__ import annotations

import inspect
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.common.errors import PluginError
from core.testcasecontroller.predictions import PredictionStore, sample_key
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
    """

    indices: list[int]
    records: list[dict[str, Any]]
    workspace: Path
    save: Callable[[int, Any], None]
    show_progress: bool = True
    saved: set[int] = field(default_factory=set)
    retry: set[int] = field(default_factory=set)

    def retry_later(self, position: int) -> None:
        """Use the returned prediction of ``x[position]`` in this run's metrics but do not
        store it, so the next run asks for it again (e.g. it holds an infrastructure error)."""
        self.retry.add(position)


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


def run_singletask(inp: SingleTaskInputs) -> tuple[list[Any], dict[str, Any]]:
    """Run one test case; returns ``(predictions in dataset order, system_metric_info)``."""
    records_iter: Callable[[], Iterator[dict[str, Any]]] = inp.test.records
    keys = [sample_key(rec) for rec in records_iter()]
    store = PredictionStore(inp.case_dir, keys)
    info: dict[str, Any] = {"resumed_samples": len(store.done)}
    try:
        pending = store.pending()
        if not pending:
            logger.info("all %d predictions found in %s; the model is not called",
                        len(keys), store.path)
            return store.ordered(), info
        if store.done:
            logger.info("resuming: %d of %d predictions already stored", len(store.done),
                        len(keys))
        started = time.perf_counter()
        model = inp.make_model()
        _call_optional(model, "preprocess")
        os.environ["BASE_MODEL_URL"] = inp.initial_model_url
        if hasattr(model, "train"):
            _call_optional(model, "train", inp.train)
        train_dir = inp.case_dir / "output" / "train"
        path = _call_optional(model, "save", str(train_dir) + os.sep) if hasattr(model, "save") \
            else None
        os.environ["RESULT_SAVED_URL"] = str(inp.case_dir / "output" / "inference") + os.sep
        _call_optional(model, "load", path if path is not None else inp.initial_model_url)
        provisional = _predict(model, inp, store, pending)
        info["predict_seconds"] = time.perf_counter() - started
        if provisional:
            logger.warning("%d prediction(s) are not stored and will be retried by the next "
                           "run (see the model's warnings)", len(provisional))
        return store.ordered(provisional), info
    finally:
        store.close()


def _predict(model: Any, inp: SingleTaskInputs, store: PredictionStore,
             pending: list[int]) -> dict[int, Any]:
    """Call predict on the pending samples; return the predictions not stored (by index)."""
    predict = getattr(model, "predict", None)
    if predict is None:
        raise PluginError(f"{type(model).__name__} has no predict method",
                          hint="a basemodel must define predict(data)")
    as_object = bool(getattr(inp.test, "need_other_info", False))
    if _accepts_context(predict):
        records = list(inp.test.records())
        picked = [records[i] for i in pending]
        ctx = PredictContext(pending, picked, inp.case_dir, lambda pos, p: None,
                             inp.show_progress)

        def save(position: int, prediction: Any) -> None:
            store.put(pending[position], prediction)
            ctx.saved.add(position)

        ctx.save = save
        data = subset(inp.test, pending) if as_object else inp.test.x[np.asarray(pending)]
        result = list(predict(data, context=ctx))
        _check_count(model, result, len(pending))
        store.put_many((pending[i], p) for i, p in enumerate(result)
                       if i not in ctx.saved and i not in ctx.retry)
        return {pending[i]: result[i] for i in sorted(ctx.retry)}
    size = inp.predict_chunk_size or (len(pending) if as_object else 1)
    chunks = [pending[i:i + size] for i in range(0, len(pending), size)]
    with progress_bar(total=len(pending), desc="predict", unit="sample",
                      enabled=inp.show_progress) as bar:
        for chunk in chunks:
            data = subset(inp.test, chunk) if as_object else inp.test.x[np.asarray(chunk)]
            result = predict(data)
            result = list(result) if result is not None else []
            _check_count(model, result, len(chunk))
            store.put_many(zip(chunk, result))
            bar.update(len(chunk))
    return {}


def _check_count(model: Any, result: list[Any], expected: int) -> None:
    if len(result) != expected:
        raise PluginError(f"{type(model).__name__}.predict returned {len(result)} "
                          f"predictions for {expected} inputs",
                          hint="predict must return one prediction per input, in order")
