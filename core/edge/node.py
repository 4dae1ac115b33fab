"""What runs on an edge node: the worker plugin, node preparation and the grading task.

* :class:`NodeSandbox` is a Dask worker plugin (installed by ``ianvs edge worker`` through
  :func:`dask_setup`, or added on first use). It keeps one warm executor per (node backend,
  options) for the worker's lifetime -- started once, not per task -- with the gold check that
  was run on it, and closes them when the worker stops. At worker start it prepares the default
  configuration (``local`` with the node's own options) so a restarted worker is checked
  before it is given work.
* :func:`prepare_node` (run on every worker through ``Client.run``) makes sure the executor the
  client asks for exists on the node and returns the node's gold report.
* :func:`grade_batch` is the task the client submits: it grades a list of requests with the
  node's executor and returns their results, each naming the node. A node whose gold check
  failed refuses (:class:`NodeRejected`).

Node options (``ianvs edge worker --node-option KEY=VALUE``) override the client's options for
the node backend: the operator of a node decides e.g. its ``workers`` or ``min_isolation``.
A node's ``min_isolation`` can only add to the job's: the client refuses any node whose reported
isolation is below the job's ``min_isolation`` (see :mod:`core.edge.executor`).
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import threading
from typing import Any, Iterable, Mapping

from core.testenvmanager.sandbox.base import Executor, get_executor
from core.testenvmanager.sandbox.types import ExecRequest, ExecResult

from .gold import GoldReport, gold_check

__all__ = ["PLUGIN_NAME", "NodeSandbox", "NodeRejected", "prepare_node", "grade_batch", "node_status",
           "dask_setup", "parse_node_options"]

LOGGER = logging.getLogger(__name__)
PLUGIN_NAME = "ianvs-node-sandbox"
DEFAULT_BACKEND = "local"

try:  # the plugin base class only when distributed is installed (importing stays cheap)
    from distributed.diagnostics.plugin import WorkerPlugin as _PluginBase
except ImportError:  # pragma: no cover - the edge extra is missing
    _PluginBase = object  # type: ignore[assignment,misc]


class NodeRejected(RuntimeError):
    """A task reached a node whose gold check failed (it must grade nothing)."""


def parse_node_options(items: Iterable[str]) -> dict[str, Any]:
    """``["workers=2", "min_isolation=kernel"]`` -> ``{"workers": 2, "min_isolation": "kernel"}``
    (values are read as JSON when they parse, otherwise kept as strings)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"node option {item!r} is not KEY=VALUE")
        try:
            out[key.strip()] = json.loads(raw)
        except ValueError:
            out[key.strip()] = raw
    return out


def _config_key(backend: str, options: Mapping[str, Any]) -> str:
    return json.dumps([backend, dict(options)], sort_keys=True, default=str)


class NodeSandbox(_PluginBase):  # type: ignore[misc,valid-type]
    """Worker plugin: the node's warm executors and their gold reports (see module doc)."""

    name = PLUGIN_NAME

    def __init__(self, node_options: Mapping[str, Any] | None = None) -> None:
        self.node_options = dict(node_options or {})
        self.node = ""
        self._lock = threading.Lock()
        self._prepared: dict[str, tuple[Executor | None, GoldReport]] = {}

    async def setup(self, worker: Any) -> None:
        self.node = str(worker.name)
        report = await asyncio.to_thread(self.prepare, DEFAULT_BACKEND, {})
        level = logging.INFO if report.ok else logging.WARNING
        LOGGER.log(level, "node %s: gold check %s (isolation %s, %.3fs)%s", self.node,
                   "passed" if report.ok else "FAILED", report.isolation, report.seconds,
                   f": {report.detail}" if report.detail else "")

    def teardown(self, worker: Any) -> None:
        with self._lock:
            for executor, _ in self._prepared.values():
                if executor is not None:
                    executor.close()
            self._prepared.clear()

    def prepare(self, backend: str, options: Mapping[str, Any]) -> GoldReport:
        """Build (once) the executor for ``backend``/``options`` merged with the node options and
        gold-check it. A node whose executor cannot start fails its check."""
        merged = {**dict(options), **self.node_options}
        key = _config_key(backend, merged)
        with self._lock:
            if key not in self._prepared:
                try:
                    executor: Executor | None = get_executor(backend, **merged)
                except Exception as exc:  # noqa: BLE001 - reported as a failed gold check
                    self._prepared[key] = (None, GoldReport(False, 0.0, "", f"the {backend} "
                                           f"executor did not start: {type(exc).__name__}: {exc}"))
                else:
                    assert executor is not None
                    self._prepared[key] = (executor, gold_check(executor))
            return self._prepared[key][1]

    def executor(self, backend: str, options: Mapping[str, Any]) -> Executor:
        """The prepared executor for this configuration; :class:`NodeRejected` when its gold
        check failed."""
        report = self.prepare(backend, options)
        executor, _ = self._prepared[_config_key(backend, {**dict(options), **self.node_options})]
        if executor is None or not report.ok:
            raise NodeRejected(f"node {self.node} failed its gold check: {report.detail}")
        return executor


def _plugin(worker: Any) -> NodeSandbox:
    plugin = worker.plugins.get(PLUGIN_NAME)
    if plugin is None:
        raise NodeRejected(f"worker {worker.name} has no {PLUGIN_NAME} plugin")
    return plugin  # type: ignore[no-any-return]


async def prepare_node(backend: str, options: Mapping[str, Any],
                       dask_worker: Any = None) -> dict[str, Any]:
    """``Client.run`` target: prepare the executor on this node (adding the plugin when the
    worker was started without it) and return ``{node, ok, seconds, isolation, detail}``."""
    if PLUGIN_NAME not in dask_worker.plugins:
        await dask_worker.plugin_add(NodeSandbox(), name=PLUGIN_NAME)
    plugin = _plugin(dask_worker)
    report = await asyncio.to_thread(plugin.prepare, backend, dict(options))
    return {"node": str(dask_worker.name), **report.to_dict()}


def node_status(dask_worker: Any = None) -> dict[str, Any]:
    """``Client.run`` target: this node's prepared configurations (backend, gold check,
    isolation and the pid of its executor's server when it has one)."""
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    configs = []
    for key, (executor, report) in (plugin._prepared.items() if plugin else []):
        proc = getattr(executor, "_proc", None)
        configs.append({"config": key, "ok": report.ok, "isolation": report.isolation,
                        "server_pid": proc.pid if proc is not None else None})
    return {"node": str(dask_worker.name), "configs": configs}


def grade_batch(backend: str, options: Mapping[str, Any], requests: list[ExecRequest],
                slowdown: Mapping[str, float]) -> list[ExecResult]:
    """Dask task: grade ``requests`` on this node; every result names the node and the backend
    ``dask:<node backend>``. Timeouts are multiplied by this node's ``slowdown`` (its gold time
    over the fastest node's, >= 1) so a slower node gets proportionally longer limits."""
    from distributed import get_worker

    worker = get_worker()
    plugin = _plugin(worker)
    executor = plugin.executor(backend, options)
    factor = max(1.0, float(slowdown.get(str(worker.name), 1.0)))
    if factor > 1.0:
        requests = [dataclasses.replace(r, timeout=r.timeout * factor) for r in requests]
    return [dataclasses.replace(res, node=str(worker.name), backend=f"dask:{res.backend}")
            for res in executor.run(requests)]


def _click_setup() -> Any:
    import click

    @click.command()
    @click.option("--node-option", "node_option", multiple=True,
                  help="KEY=VALUE option of the node backend that overrides the client's")
    async def setup(worker: Any, node_option: tuple[str, ...]) -> None:
        await worker.plugin_add(NodeSandbox(parse_node_options(node_option)), name=PLUGIN_NAME)

    return setup


try:  # ``dask worker --preload core.edge.node --node-option workers=2``
    dask_setup = _click_setup()
except ImportError:  # pragma: no cover - click comes with distributed
    dask_setup = None
