"""A model on an edge node: the ``edge_node`` generator, which runs another generator on a worker
of the Dask edge cluster (:mod:`core.edge.executor` grades there; this module generates there).

The client side, :class:`EdgeNodeGenerator`, is an ordinary :class:`Generator` registered as
``edge_node``, so a cloud-edge job places its edge model on a node by naming it as the edge
module's generator (``docs/edge.md``, "The edge model on a node")::

    - generator: {values: ["edge_node"]}
    - scheduler: {values: ["tls://10.0.0.10:8786"]}
    - tls: {values: [{ca_file: ..., cert_file: ..., key_file: ...}]}
    - nodes: {values: [["edge1"]]}
    - node_generator: {values: ["embedded"]}          # what runs on the node
    - node_params: {values: [{logprobs: true}]}       # its parameters
    - link_delay_ms: {values: [50]}                   # optional emulated link
    - link_rate_kbps: {values: [2000]}

Contract:

* Construction checks the options as the ``dask`` sandbox does (``tls://`` with certificates, or
  ``tcp://`` on loopback only), connects (an unreachable scheduler: one-line
  :class:`~core.common.errors.ConfigError`), waits up to ``node_timeout`` for an allowed worker
  and loads the model on every allowed worker present (a task on the node, not in this
  process); the nodes must report the same model identity; a node that has not loaded it
  within :data:`LOAD_TIMEOUT_S` stops the job with an error naming it (never a silent wait).
  :meth:`describe` is
  ``{"generator": "edge_node", "model": <the node generator's identity>, "link": {...}}``.
* :meth:`generate` sends the requests in batches of ``batch_size``, at most one batch in flight
  per connected allowed node (so a batch's round trip minus the node's own time is the link's and Dask's time, not
  a queue's). Each generation carries ``transport``: the ``node`` that made it, ``link_s`` (its
  share of its batch's round trip beyond the node's time), ``bytes_up`` / ``bytes_down`` (the
  pickled request and the pickled answer, the payload that crossed the link); ``latency_s`` is
  the node's own time.
* **A lost node** (it leaves the scheduler, e.g. killed or partitioned): logged once by name
  (WARNING). Its batch is rerun by Dask on another allowed node if one is there; when none is,
  the batches in flight are taken back and sent to the first allowed node that joins within
  ``node_timeout`` (resumed; the joiner is named, INFO); if none is there for that long,
  every unanswered request is yielded with ``error`` saying so and ``transport.lost: true`` --
  never dropped -- with one warning; later calls do not wait again (their requests are lost at
  once) until an allowed node joins. The cloud-edge model turns such an edge answer into
  :class:`~core.common.errors.ModelUnavailable`, which the paradigm routes to the cloud.
* **A node that stops answering but stays connected** (frozen, swapped out): when no batch has
  come back for the longest pending batch's budget (its ``max_tokens`` x samples at
  :attr:`EdgeNodeGenerator.min_tokens_per_s`, one token a second) plus
  :attr:`~EdgeNodeGenerator.stall_grace_s` (two minutes: a model loading on a node that joined),
  the batches in flight are cancelled and sent once more to the allowed nodes other than those
  the scheduler says hold them (one warning naming them); the nodes that stalled get nothing
  more in this call. A second stall, or no other node, and their requests come back with
  ``error`` saying so and ``transport.lost: true`` (retried by the next run, routed to the cloud
  by the cloud-edge model). A call never waits forever on one node.
* ``link_delay_ms`` / ``link_rate_kbps`` emulate the link in this process: the client reaches the
  scheduler through a :class:`~core.edge.relay.LinkRelay` that delays every byte by the delay
  each way and paces it to the rate, so requests and answers (which come back through the
  scheduler: ``direct_to_workers`` is off) pay both. On a real deployment leave them at 0.
* :meth:`close` releases the model on the nodes and disconnects; idempotent.

The node side (:func:`load_on_node`, :func:`generate_on_node`, :func:`release_on_node`) keeps one
warm generator per configuration in the worker process, closed at release or when the worker
exits.
"""
from __future__ import annotations

import atexit
import json
import logging
import pickle
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from core.common.errors import ConfigError
from core.generation.base import Generator
from core.generation.types import Generation, GenerationRequest

from .executor import allowed_workers, holders_of
from .settings import (DEFAULT_NODE_TIMEOUT, MISSING_EXTRA, OptionError, check_options,
                       is_loopback, parse_address, security)

__all__ = ["EdgeNodeGenerator", "load_on_node", "generate_on_node", "release_on_node"]

LOGGER = logging.getLogger(__name__)
_POLL_S = 0.25
#: seconds a node has to load its model before the job stops with an error naming it
LOAD_TIMEOUT_S = 900.0
DEFAULT_MODEL_BATCH = 4
#: seconds :meth:`EdgeNodeGenerator.close` waits for the nodes to release the model
RELEASE_TIMEOUT_S = 30.0

# -- the node side ---------------------------------------------------------------------------
_NODE_LOCK = threading.Lock()
_NODE_MODELS: dict[str, Generator] = {}


def _config(generator: str, params: Mapping[str, Any]) -> str:
    return json.dumps([generator, dict(params)], sort_keys=True, default=str)


def _node_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except (ImportError, ValueError):  # not inside a worker (direct calls in tests)
        import socket

        return socket.gethostname()


def _node_model(generator: str, params: Mapping[str, Any]) -> Generator:
    from core.generation import create_generator

    key = _config(generator, params)
    with _NODE_LOCK:
        model = _NODE_MODELS.get(key)
        if model is None:
            model = create_generator(generator, **dict(params))
            _NODE_MODELS[key] = model
        return model


def _unanswered(batches: Sequence[Sequence[GenerationRequest]], why: str) -> list[Generation]:
    """One generation per sample of ``batches`` that no node answered: ``error`` ``why``,
    ``transport.lost`` (retried by the next run, never a model failure)."""
    return [Generation(task_id=request.task_id, sample_index=index, raw_output="", code="",
                       error=why, transport={"node": None, "lost": True})
            for batch in batches for request in batch for index in request.sample_indices]


def load_on_node(generator: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Load (or find warm) the configured generator on this node; its identity and the node."""
    started = time.perf_counter()
    model = _node_model(generator, params)
    return {"node": _node_name(), "identity": model.describe(),
            "load_s": round(time.perf_counter() - started, 3)}


def generate_on_node(generator: str, params: Mapping[str, Any],
                     requests: Sequence[GenerationRequest]) -> dict[str, Any]:
    """Generate ``requests`` with the node's warm generator: ``{"node", "node_s",
    "generations": [Generation.to_dict(), ...]}``."""
    model = _node_model(generator, params)
    started = time.perf_counter()
    gens = [g.to_dict() for g in model.generate(list(requests))]
    return {"node": _node_name(), "node_s": time.perf_counter() - started, "generations": gens}


def release_on_node(generator: str, params: Mapping[str, Any]) -> bool:
    """Close the node's generator of this configuration (its model servers stop)."""
    with _NODE_LOCK:
        model = _NODE_MODELS.pop(_config(generator, params), None)
    if model is not None:
        model.close()
    return model is not None


@atexit.register
def _release_all() -> None:  # pragma: no cover - at worker exit
    with _NODE_LOCK:
        models = list(_NODE_MODELS.values())
        _NODE_MODELS.clear()
    for model in models:
        try:
            model.close()
        except Exception:  # noqa: BLE001 - exiting
            pass


# -- the client side -------------------------------------------------------------------------

class EdgeNodeGenerator(Generator):
    """Generate on an edge node of the Dask cluster (see the module docstring).

    ``scheduler``/``tls``/``nodes``/``node_timeout`` as for the ``dask`` sandbox;
    ``node_generator`` and ``node_params``: the generator the node runs and its parameters;
    ``batch_size``: requests per task (the node's generator decodes a batch side by side);
    ``link_delay_ms``, ``link_rate_kbps``: the emulated link (0: none);
    ``connect_timeout``: seconds to reach the scheduler.
    """

    name = "edge_node"

    def __init__(self, scheduler: str = "", tls: Mapping[str, str] | None = None,
                 nodes: Sequence[str] | None = None, node_generator: str = "embedded",
                 node_params: Mapping[str, Any] | None = None,
                 node_timeout: float = DEFAULT_NODE_TIMEOUT,
                 batch_size: int = DEFAULT_MODEL_BATCH, link_delay_ms: float = 0.0,
                 link_rate_kbps: float = 0.0, connect_timeout: float = 10.0) -> None:
        raw: dict[str, Any] = {"scheduler": scheduler, "nodes": list(nodes or []),
                               "node_timeout": node_timeout, "batch_size": batch_size}
        if tls is not None:
            raw["tls"] = dict(tls)
        try:
            self.settings = check_options(raw)
        except OptionError as exc:
            raise ConfigError(f"edge_node generator: {exc.key}: {exc}", key=exc.key) from None
        if node_generator == self.name:
            raise ConfigError("edge_node generator: node_generator must be the generator the "
                              "node runs (e.g. 'embedded'), not edge_node", key="node_generator")
        for key, value in (("link_delay_ms", link_delay_ms), ("link_rate_kbps", link_rate_kbps)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"edge_node generator: {key} must be a number >= 0, got "
                                  f"{value!r}", key=key)
        self.node_generator = node_generator
        self.node_params = dict(node_params or {})
        self.link = {"delay_ms": float(link_delay_ms), "rate_kbps": float(link_rate_kbps)}
        try:
            import distributed
        except ImportError:
            raise ConfigError(MISSING_EXTRA) from None
        self._relay: Any = None
        self._client: Any = None
        self._closed = False
        self._seen: dict[str, str] = {}
        self._identity: dict[str, Any] | None = None
        self._unavailable: str | None = None  # why no node answers (decided once, see _lost)
        address = self._link_address()
        try:
            self._client = distributed.Client(
                address, security=security(self.settings.tls, "client"),
                timeout=connect_timeout, set_as_default=False, name="ianvs-edge-model",
                direct_to_workers=False)
        except Exception as exc:  # noqa: BLE001 - OSError, TimeoutError, ssl errors alike
            self.close()
            raise ConfigError(
                f"edge_node generator: cannot connect to the Dask scheduler at "
                f"{self.settings.scheduler}: {type(exc).__name__}: {exc or 'no answer'}",
                hint="is 'ianvs edge scheduler' running there, and are the tls certificates "
                     "signed by the cluster's CA?") from None
        try:
            self._load()
        except BaseException:
            self.close()
            raise

    # -- set-up ------------------------------------------------------------------------------
    def _link_address(self) -> str:
        scheme, host, port = parse_address(self.settings.scheduler)
        if self.settings.tls is None and is_loopback(host):
            LOGGER.warning("edge_node generator: plain tcp:// to %s (loopback only): no "
                           "encryption, no authentication", self.settings.scheduler)
        if not (self.link["delay_ms"] or self.link["rate_kbps"]):
            return self.settings.scheduler
        from .relay import LinkRelay

        self._relay = LinkRelay((host, port), self.link["delay_ms"] / 1000.0,
                                self.link["rate_kbps"] * 1000.0 / 8.0).start()
        LOGGER.info("edge_node generator: emulated link to %s: %g ms each way, %s",
                    self.settings.scheduler, self.link["delay_ms"],
                    f"{self.link['rate_kbps']:g} kbit/s" if self.link["rate_kbps"]
                    else "unlimited bandwidth")
        return f"{scheme}://127.0.0.1:{self._relay.port}"

    def _workers(self) -> dict[str, str]:
        """Connected allowed workers: address -> name."""
        return allowed_workers(self._client, self.settings.nodes)

    def _watch(self) -> dict[str, str]:
        """The allowed workers now; each node lost or joined since the last look is logged once
        by name."""
        workers = self._workers()
        for addr in sorted(set(self._seen) - set(workers)):
            LOGGER.warning("edge model: node %s (%s) left the scheduler; %d allowed node(s) "
                           "remain", self._seen[addr], addr, len(workers))
        for addr in sorted(set(workers) - set(self._seen)):
            if self._seen or self._identity is not None:
                LOGGER.info("edge model: node %s (%s) joined the scheduler", workers[addr], addr)
        self._seen = workers
        return workers

    def _load(self) -> None:
        deadline = time.monotonic() + self.settings.node_timeout
        workers = self._watch()
        if not workers:
            LOGGER.info("edge model: no allowed node at %s yet; waiting up to %gs "
                        "(node_timeout)", self.settings.scheduler, self.settings.node_timeout)
        while not workers and time.monotonic() < deadline:
            time.sleep(_POLL_S)
            workers = self._watch()
        if not workers:
            allowed = (f" (allowed nodes: {', '.join(self.settings.nodes)})"
                       if self.settings.nodes else "")
            raise ConfigError(f"edge_node generator: no edge node joined scheduler "
                              f"{self.settings.scheduler} within node_timeout="
                              f"{self.settings.node_timeout:g}s{allowed}")
        futures = {addr: self._client.submit(load_on_node, self.node_generator,
                                             self.node_params, workers=[addr],
                                             allow_other_workers=False, pure=False)
                   for addr in workers}
        identities: dict[str, Any] = {}
        for addr, fut in futures.items():
            try:
                report = fut.result(timeout=LOAD_TIMEOUT_S)
            except FutureTimeout:
                raise ConfigError(f"edge_node generator: node {workers[addr]} did not load "
                                  f"{self.node_generator!r} within {LOAD_TIMEOUT_S:g}s",
                                  hint="is the node frozen or out of memory? restrict nodes to "
                                       "the ones that answer") from None
            except Exception as exc:  # noqa: BLE001 - the node's error, named
                raise ConfigError(f"edge_node generator: node {workers[addr]} could not load "
                                  f"{self.node_generator!r}: {type(exc).__name__}: {exc}",
                                  hint="check node_generator and node_params, and that the "
                                       "node has the model's extra installed") from None
            identities[report["node"]] = report["identity"]
            LOGGER.info("edge model %s loaded on node %s in %.1fs", self.node_generator,
                        report["node"], report["load_s"])
        distinct = {json.dumps(i, sort_keys=True, default=str) for i in identities.values()}
        if len(distinct) > 1:
            raise ConfigError("edge_node generator: the nodes run different models: "
                              + "; ".join(f"{n}: {i}" for n, i in sorted(identities.items())),
                              hint="give every allowed node the same model, or restrict nodes")
        self._identity = next(iter(identities.values()))

    # -- Generator ----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        return {"generator": self.name, "model": self._identity, "link": dict(self.link)}

    #: generation slower than this many tokens a second counts as a stalled node
    min_tokens_per_s: float = 1.0
    #: seconds added to a batch's budget before it counts as stalled (a model loading on a
    #: node that joined mid-run, a slow link)
    stall_grace_s: float = 120.0

    def _budget(self, batch: Sequence[GenerationRequest]) -> float:
        """Seconds a batch may take: its tokens at :attr:`min_tokens_per_s`."""
        tokens = sum(r.decoding.max_tokens * len(r.sample_indices) for r in batch)
        return tokens / self.min_tokens_per_s

    def generate(self, requests: Iterable[GenerationRequest]) -> Iterator[Generation]:
        todo = list(requests)
        size = self.settings.batch_size
        batches = [todo[i:i + size] for i in range(0, len(todo), size)]
        inflight: dict[Any, tuple[list[GenerationRequest], float]] = {}
        arrived: dict[str, float] = {}
        answered = threading.Event()

        def on_arrival(fut: Any) -> None:
            arrived.setdefault(fut.key, time.perf_counter())
            answered.set()

        lost_since: float | None = None
        stalled: set[str] = set()       # worker addresses that held a stalled batch
        stalls = 0
        last_progress = time.monotonic()
        while batches or inflight:
            workers = self._watch()
            if not workers and inflight:
                # every allowed node is gone: take the batches back (Dask would keep them for a
                # worker address that will not return) and send them to the next node to join
                for fut, (batch, _sent) in list(inflight.items()):
                    fut.cancel()
                    batches.insert(0, batch)
                inflight.clear()
            targets = [a for a in workers if a not in stalled]
            if workers and not targets and not inflight:  # every node here stalled already
                yield from self._stalled(batches, "every allowed node stalled in this call")
                return
            while batches and len(inflight) < len(targets):
                batch = batches.pop(0)
                where = targets if stalls else (list(self.settings.nodes) or None)
                if not inflight:
                    last_progress = time.monotonic()
                fut = self._client.submit(generate_on_node, self.node_generator,
                                          self.node_params, batch, workers=where,
                                          allow_other_workers=False, pure=False)
                inflight[fut] = (batch, time.perf_counter())
                # the moment the answer arrived, not when this loop next looks (a look at the
                # scheduler crosses the link too)
                fut.add_done_callback(on_arrival)
            done = [f for f in inflight if f.done()]
            for fut in done:
                batch, sent = inflight.pop(fut)
                rtt = arrived.pop(fut.key, time.perf_counter()) - sent
                yield from self._answers(fut, batch, rtt)
            if done:
                last_progress = time.monotonic()
                continue
            if inflight and workers:
                limit = max(self._budget(b) for b, _ in inflight.values()) + self.stall_grace_s
                if time.monotonic() - last_progress > limit:
                    yield from self._unstall(inflight, batches, workers, stalled, limit,
                                             first=stalls == 0)
                    stalls += 1
                    last_progress = time.monotonic()
                    continue
            if workers:
                lost_since = None
                self._unavailable = None
            elif self._unavailable is not None:  # decided before: no second wait per call
                yield from self._lost(batches)
                return
            elif lost_since is None:
                lost_since = time.monotonic()
                LOGGER.warning("edge model: no allowed node is connected; waiting up to %gs "
                               "(node_timeout) for one before the %d unanswered request(s) "
                               "are reported lost", self.settings.node_timeout,
                               sum(len(b) for b in batches))
            elif time.monotonic() - lost_since > self.settings.node_timeout:
                yield from self._lost(batches)
                return
            answered.wait(_POLL_S)
            answered.clear()

    def _answers(self, fut: Any, batch: list[GenerationRequest], rtt: float
                 ) -> Iterator[Generation]:
        try:
            result = fut.result()
        except Exception as exc:  # noqa: BLE001 - the node's failure, on each request
            why = f"the edge node failed: {type(exc).__name__}: {exc}"[:300]
            for request in batch:
                for index in request.sample_indices:
                    yield Generation(task_id=request.task_id, sample_index=index,
                                     raw_output="", code="", error=why)
            return
        gens = [Generation.from_dict(g) for g in result["generations"]]
        link_s = max(0.0, rtt - float(result["node_s"])) / max(1, len(gens))
        by_task = {r.task_id: r for r in batch}
        for gen in gens:
            asked = by_task.get(gen.task_id)
            transport = {"node": result["node"], "link_s": round(link_s, 6),
                         "bytes_up": len(pickle.dumps(asked)) if asked else 0,
                         "bytes_down": len(pickle.dumps(gen.to_dict()))}
            yield Generation.from_dict({**gen.to_dict(), "transport": transport})

    def _unstall(self, inflight: dict[Any, tuple[list[GenerationRequest], float]],
                 batches: list[list[GenerationRequest]], workers: Mapping[str, str],
                 stalled: set[str], limit: float, first: bool) -> Iterator[Generation]:
        """No batch came back within ``limit``: cancel the batches in flight; the ``first``
        time, send them again (first in the queue) to the allowed nodes other than those the
        scheduler says hold them (to all when it names none: the tasks were lost, not stuck),
        else report their requests (module docstring)."""
        holders = holders_of(self._client, {str(f.key) for f in inflight})
        stalled.update(holders)
        names = ", ".join(sorted(workers.get(a, a) for a in holders)) or \
            "none named by the scheduler"
        pending = [batch for batch, _sent in inflight.values()]
        for fut in inflight:
            fut.cancel()
        inflight.clear()
        others = [a for a in workers if a not in stalled]
        if first and others:
            LOGGER.warning("edge model: no batch came back for %.0fs (held by node(s): %s); "
                           "%d batch(es) sent again to %s", limit, names, len(pending),
                           ", ".join(sorted(workers[a] for a in others)))
            batches[:0] = pending
            return
        yield from self._stalled(pending, f"no answer for {limit:.0f}s from edge node(s) "
                                          f"{names}" + ("" if first else ", twice"))

    def _stalled(self, batches: list[list[GenerationRequest]], why: str) -> Iterator[Generation]:
        """Every request of ``batches`` back with ``error`` (an edge node stalled: retried by
        the next run, never a model failure) and ``transport.lost``; one warning."""
        why = f"edge node stalled: {why}"
        answers = _unanswered(batches, why)
        yield from answers
        LOGGER.warning("edge model: %d request(s) unanswered (%s)", len(answers), why)

    def _lost(self, queued: list[list[GenerationRequest]]) -> Iterator[Generation]:
        allowed = ", ".join(self.settings.nodes) or "any"
        why = self._unavailable or (
            f"edge node lost: no allowed node ({allowed}) connected to "
            f"{self.settings.scheduler} for node_timeout={self.settings.node_timeout:g}s")
        announce = self._unavailable is None
        self._unavailable = why
        answers = _unanswered(queued, why)
        yield from answers
        if announce:
            LOGGER.warning("edge model: %d request(s) unanswered, reported lost (%s); later "
                           "requests are reported lost at once until an allowed node joins",
                           len(answers), why)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._client is not None:
            try:
                if self._identity is not None and self._workers():
                    # bounded: a frozen node never answers, and closing must not wait for it
                    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ianvs-release")
                    asked = pool.submit(self._client.run, release_on_node, self.node_generator,
                                        self.node_params, workers=list(self._workers()),
                                        on_error="return")
                    pool.shutdown(wait=False)
                    asked.result(timeout=RELEASE_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - closing: the nodes may be gone or frozen
                LOGGER.debug("edge model: release on the nodes failed: %s", exc)
            try:
                self._client.close()
            except Exception:  # noqa: BLE001 - closing
                pass
        if self._relay is not None:
            self._relay.close()
