"""Paradigm ``jointinference``: an edge model answers, a router sends hard queries to a cloud model.

Modules (as upstream): ``edgemodel`` and ``cloudmodel`` (``general`` group), ``hard_example_mining``
(the router, ``hard_example_mining`` group) and an optional ``dataset_processor``. Per test item,
by ``hard_example_mining_mode`` (testenv or algorithm key; default ``mining-then-inference``):

* ``mining-then-inference``: ``is_hard = router(x)``; the cloud answers hard items
  (``cloudmodel.inference(x, mining_mode=...)``), the edge the others
  (``edgemodel.predict(x, mining_mode=...)``);
* ``inference-then-mining``: the edge answers first, ``is_hard = router(edge_answer)``, and the
  cloud answers hard items, whose cloud answer is the result;
* ``self-design``: the edge model does everything itself; its answer is the prediction as is.

Each prediction is upstream's list ``[is_hard, result, edge_result, cloud_result]`` (the item not
asked is ``None``). Before the first item the edge model's ``load(model_url=...)`` is called when
it has one (``initial_model_url``), the router is built as ``get_cls(HEM, name)(**params)``, and
for ``OracleRouter`` the two model instances are added to its params as ``edgemodel`` and
``cloudmodel``. A module or router with a ``bind(context)`` method is handed the run's
:class:`JointContext` (this project's code modules and routers use it to find the task record,
the sandbox settings and the shared answer cache); upstream modules do not have one. At the end
``cleanup()`` is called on every module and on the router that has it.

**An edge model that is unavailable** (its call raises
:class:`~core.common.errors.ModelUnavailable`, e.g. its edge node was lost and none took over)
is never a dropped item: in the two routed modes the cloud answers the item, the prediction is
``[True, cloud_answer, {"lost": <why>, ...}, cloud_answer]``, one warning per item names it, and
the case's ``routed`` counts say how many (``edge_lost``). In ``self-design`` there is no one to
route to: the case stops with the error (nothing stored for the item; a rerun asks again).

A router that notes the cost of its own checks in ``ctx.costs`` gets it stored with the answer
as ``result["perf"]["check_s"]`` (this project's routers do; others are left as they are).

Unlike upstream, every prediction is stored as soon as it exists (``predictions.jsonl`` of the
test case folder, keyed by the item): a killed run resumes where it stopped, and a finished one
is re-scored without building any module. A ``dataset_processor`` is applied to the parsed test
set before the run, as upstream does; its items then key the store.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError, ModelUnavailable, PluginError
from core.common.progress import progress_bar
from core.testcasecontroller.predictions import KeyList, PredictionStore, sample_key
from core.testenvmanager.testenv.testenv import MINING_MODES
from core.testenvmanager.dataset.parsers import ParsedDataset

logger = logging.getLogger(__name__)

MODES = MINING_MODES
DEFAULT_MODE = "mining-then-inference"
REQUIRED = ("edgemodel", "cloudmodel", "hard_example_mining")


@dataclass
class JointContext:
    """What this project's jointinference modules and routers may use (via ``bind``).

    Attributes:
        case_dir: the test case folder (exists).
        cache_dir: folder shared by every test case of the job (model answers cached by
            content there, so a router sweep generates each answer once).
        records: the test records, in dataset order.
        train_records: the train split's records (empty when the testenv has none); routers
            that fit before they route read them (their hidden tests too: the train split is
            for fitting), never the test records' hidden tests.
        sandbox: the testenv's ``sandbox`` settings (routers that run code use them).
        mode: the mining mode of this run.
        edgemodel, cloudmodel: the two model instances.
        show_progress: whether progress bars are wanted.
        current: index of the item being routed now.
        costs: per item index, the seconds a router spent checking (filled by routers).
        router_errors: per item index, the error a router raised on it (the item went to the
            cloud; see :func:`_hard`).
    """

    case_dir: Path
    cache_dir: Path
    records: list[dict[str, Any]]
    sandbox: dict[str, Any]
    mode: str
    edgemodel: Any = None
    cloudmodel: Any = None
    show_progress: bool = True
    current: int = -1
    costs: dict[int, float] = field(default_factory=dict)
    router_errors: dict[int, str] = field(default_factory=dict)
    train_records: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class JointInferenceInputs:
    """What :func:`run_joint_inference` needs from the test case.

    ``make_modules`` builds ``{type: instance}`` for the model modules (called only when some
    prediction is missing); ``router`` is ``(class, params)`` of the ``hard_example_mining``
    module, ``router_name`` its name in the YAML."""

    case_dir: Path
    cache_dir: Path
    test: ParsedDataset
    make_modules: Callable[[], dict[str, Any]]
    router: Callable[[], tuple[Any, dict[str, Any]]]
    router_name: str
    mode: str = DEFAULT_MODE
    initial_model_url: str = ""
    sandbox: dict[str, Any] = field(default_factory=dict)
    show_progress: bool = True
    #: the train split's records, read only when modules are built (empty: no train split)
    train: Callable[[], list[dict[str, Any]]] = list


def check_mode(mode: Any, source: Path | None = None) -> str:
    """The mining mode, or a :class:`ConfigError` naming the three accepted ones."""
    if mode not in MODES:
        raise ConfigError(f"hard_example_mining_mode is {mode!r}, which is not a mining mode",
                          source=source, hint=f"one of {', '.join(MODES)}")
    return str(mode)


def _bind(obj: Any, ctx: JointContext) -> None:
    bind = getattr(obj, "bind", None)
    if callable(bind):
        bind(ctx)


def _items(inp: JointInferenceInputs, processor: Any, records: list[dict[str, Any]]) -> list[Any]:
    """The items handed to the modules: the processed test set's, else each record's input."""
    if callable(processor):
        processed = processor(inp.test)
        return list(getattr(processed, "x", processed))
    return list(inp.test.x_of(list(range(len(records))), records))


def run_joint_inference(inp: JointInferenceInputs) -> tuple[Any, dict[str, Any]]:
    """Run (or resume) the paradigm; returns ``(predictions, system_metric_info)``.

    Raises:
        PluginError: a required module is missing, or a module/router call raised (naming the
            item's index).
    """
    modules: dict[str, Any] | None = None
    processor = None
    records = list(inp.test.records())
    keys = KeyList(sample_key(r) for r in records)
    store = PredictionStore(inp.case_dir, keys)
    info: dict[str, Any] = {"resumed_samples": store.stored, "mining_mode": inp.mode,
                            "router": inp.router_name}
    try:
        pending = store.pending()
        if not pending:
            logger.info("all %d predictions found in %s; no module is built", len(keys), store.path)
            return store.ordered(), info
        modules = inp.make_modules()
        missing = [t for t in ("edgemodel", "cloudmodel") if t not in modules]
        if missing:
            raise PluginError(f"jointinference needs modules of type {', '.join(REQUIRED)}; "
                              f"missing: {', '.join(missing)}")
        processor = modules.get("dataset_processor")
        x = _items(inp, processor, records)
        if len(x) != len(keys):
            raise PluginError(f"the dataset_processor returned {len(x)} items for "
                              f"{len(keys)} records", hint="it must keep one item per record")
        edge, cloud = modules["edgemodel"], modules["cloudmodel"]
        ctx = JointContext(case_dir=inp.case_dir, cache_dir=inp.cache_dir, records=records,
                           sandbox=dict(inp.sandbox), mode=inp.mode, edgemodel=edge,
                           cloudmodel=cloud, show_progress=inp.show_progress,
                           train_records=inp.train())
        for module in modules.values():
            _bind(module, ctx)
        load = getattr(edge, "load", None)
        if callable(load):
            load(model_url=inp.initial_model_url)
        cls, params = inp.router()
        params = dict(params)
        if inp.router_name == "OracleRouter":  # upstream hands the oracle both models
            params.update(edgemodel=edge, cloudmodel=cloud)
        try:
            router = cls(**params)
        except Exception as exc:
            raise PluginError(f"hard_example_mining {inp.router_name!r} could not be built: "
                              f"{type(exc).__name__}: {exc}",
                              hint="check the router's hyperparameters") from exc
        _bind(router, ctx)
        modules["hard_example_mining"] = router
        if store.stored:
            logger.info("resuming: %d of %d predictions already stored", store.stored, len(keys))
        counts = {"edge": 0, "cloud": 0, "edge_lost": 0}
        started = time.perf_counter()
        with progress_bar(total=len(pending), desc=f"jointinference[{inp.router_name}]",
                          unit="task", enabled=inp.show_progress) as bar:
            for index in pending:
                try:
                    result = _one(inp.mode, x[index], edge, cloud, router, ctx, index)
                except (ConfigError, PluginError):
                    raise
                except Exception as exc:
                    raise PluginError(f"jointinference failed on item {index}: "
                                      f"{type(exc).__name__}: {exc}") from exc
                if isinstance(result, list) and len(result) == 4:
                    counts["cloud" if result[0] else "edge"] += 1
                    if isinstance(result[2], dict) and result[2].get("lost"):
                        counts["edge_lost"] += 1
                    cost = ctx.costs.get(index)
                    if cost is not None and isinstance(result[1], dict):
                        # what the router's own checks cost, with the answer (upstream-shaped
                        # metrics ignore the extra key)
                        perf = result[1].setdefault("perf", {})
                        if isinstance(perf, dict):
                            perf["check_s"] = round(cost, 6)
                store.put(index, result)
                bar.update(1)
                if hasattr(bar, "set_postfix"):
                    bar.set_postfix(counts, refresh=False)
        info["predict_seconds"] = time.perf_counter() - started
        info["routed"] = counts
        return store.ordered(), info
    finally:
        store.close()
        for obj in (modules or {}).values():
            cleanup = getattr(obj, "cleanup", None)
            if callable(cleanup):
                try:
                    cleanup()
                except Exception as exc:  # noqa: BLE001 - release the others too
                    logger.warning("cleanup of %s failed: %s", type(obj).__name__, exc)


def _hard(router: Any, data: Any, ctx: JointContext, index: int, answer: bool) -> bool:
    """The router's decision for one item. A router that fails on the item (any router: a
    third-party one too) sends it to the cloud: the failure is logged, kept in
    ``ctx.router_errors`` and, when ``data`` is the edge's ``answer`` (a dict; never the test
    item itself), written on it as ``router_error``, so it is stored with the prediction; the
    case goes on. A :class:`ConfigError` (the router is misconfigured for every item) still
    ends the case."""
    try:
        return bool(router(data))
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - one item's failure, recorded on that item
        text = f"{type(router).__name__}: {type(exc).__name__}: {exc}"[:500]
        logger.warning("item %s goes to the cloud: the router failed (%s)", index, text)
        ctx.router_errors[index] = text
        if answer and isinstance(data, dict):
            data["router_error"] = text
        return True


def _one(mode: str, data: Any, edge: Any, cloud: Any, router: Any, ctx: JointContext,
         index: int) -> Any:
    """One item through the mode's flow (see the module docstring)."""
    ctx.current = index
    if mode == "self-design":
        return edge.predict(data, mining_mode=mode)
    if mode == "mining-then-inference":
        if _hard(router, data, ctx, index, answer=False):
            answer = cloud.inference(data, mining_mode=mode)
            return [True, answer, None, answer]
        try:
            answer = edge.predict(data, mining_mode=mode)
        except ModelUnavailable as exc:
            return _routed_lost(exc, data, cloud, mode, index)
        return [False, answer, answer, None]
    try:
        edge_result = edge.predict(data, mining_mode=mode)
    except ModelUnavailable as exc:
        return _routed_lost(exc, data, cloud, mode, index)
    is_hard = _hard(router, edge_result, ctx, index, answer=True)
    if not is_hard:
        return [False, edge_result, edge_result, None]
    cloud_result = cloud.inference(data, mining_mode=mode)
    return [True, cloud_result, edge_result, cloud_result]


def _routed_lost(exc: ModelUnavailable, data: Any, cloud: Any, mode: str, index: int) -> list[Any]:
    """The prediction of an item whose edge model was unavailable: the cloud's answer, with the
    edge's place holding why (module docstring)."""
    logger.warning("item %s goes to the cloud: %s", index, exc.message)
    answer = cloud.inference(data, mining_mode=mode)
    return [True, answer, {"lost": exc.message, "role": "edge"}, answer]
