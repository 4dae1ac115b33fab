"""The ``dask`` executor backend: requests graded on edge nodes through Dask distributed.

Contract (beyond :class:`~core.testenvmanager.sandbox.base.Executor`):

* Construction connects to the scheduler (mutual TLS unless loopback ``tcp://``) and prepares
  every worker present (``node``-filtered): the node's executor is started once and passes the
  gold check. Unreachable scheduler or refused TLS: :class:`EdgeConnectionError` (one line).
  No allowed worker joins within ``node_timeout``: :class:`NoEdgeNodeError` ("no edge node
  joined scheduler ... within node_timeout=...s"), raised once, before any grading.
  Workers present but none passing its gold check or reaching ``min_isolation``:
  :class:`NoGoodNodeError` naming each node and why.
* ``min_isolation`` is the job's isolation floor: every node reports the level its executor
  reached, and a node below the floor is refused (named in one warning, never given work),
  whatever its own node options say.
* Node events are logged once each, with the node's name: a node lost (WARNING) or joined
  (INFO) while this executor is open, never per sample. A node that joins is gold-checked
  before it gets work.
* ``run`` sends requests in batches of ``batch_size`` (one Dask task each, restricted to the
  good nodes) and yields each request's result exactly once: Dask may run a task twice (a
  worker lost mid-batch), results are deduplicated by request id. A batch whose task fails
  (e.g. every allowed worker was killed too often) yields ``infra_error`` for its requests.
  When no good node is connected for ``node_timeout`` seconds, workers that (re)joined are
  prepared and unfinished batches resubmitted to them; if none joined, the remaining requests
  are ``infra_error`` and one warning says so. The executor then remembers that no node is
  there: later runs (other metrics, other test cases share it) do not wait again but return
  ``infra_error`` at once, until a node joins.
* A worker that does not answer its preparation within :attr:`DaskExecutor.prepare_timeout_s`
  fails its gold check (named in the warning) and is not asked again while it stays connected.
* A run never waits forever on a task that does not come back (a worker frozen while still
  connected, a task lost in the cluster): when no batch has finished for
  :meth:`DaskExecutor.stall_limit` seconds (twice the longest pending batch's time budget plus
  :attr:`DaskExecutor.stall_grace_s`), the pending batches are cancelled and resubmitted once,
  to the good nodes other than those holding them (one WARNING naming them); if they stall
  again, or no other node is there, their requests are ``infra_error`` (one WARNING).
* Every result names the node that graded it (``node``), the backend (``dask:<node backend>``)
  and the isolation achieved there. :attr:`isolation` is the lowest over the good nodes.
"""
from __future__ import annotations

import logging
import queue
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from core.testenvmanager.sandbox.base import Executor
from core.testenvmanager.sandbox.types import (ExecRequest, ExecResult, IsolationLevel, Outcome,
                                               SandboxError)

from .settings import (MISSING_EXTRA, EdgeSettings, OptionError, check_options, is_loopback,
                       parse_address, security)

__all__ = ["DaskExecutor", "EdgeConnectionError", "NoGoodNodeError", "NoEdgeNodeError",
           "allowed_workers", "holders_of"]

LOGGER = logging.getLogger(__name__)
#: a node whose gold time is within this factor of the fastest counts as equally fast
SLOWDOWN_NOISE = 1.5
_POLL_S = 0.25


class EdgeConnectionError(SandboxError):
    """The scheduler cannot be reached or refused this client (TLS)."""


class NoGoodNodeError(SandboxError):
    """Workers are connected but none passed its gold check or reached ``min_isolation``."""


class NoEdgeNodeError(SandboxError):
    """No allowed worker joined the scheduler within ``node_timeout``."""


def _level(value: Any) -> IsolationLevel:
    """A node's reported isolation as a level (``NONE`` when missing or unknown)."""
    try:
        return IsolationLevel.parse(str(value)) if value else IsolationLevel.NONE
    except ValueError:
        return IsolationLevel.NONE


def allowed_workers(client: Any, nodes: Iterable[str] = ()) -> dict[str, str]:
    """The workers connected to ``client``'s scheduler, address -> name, only those named in
    ``nodes`` when it is not empty.

    Asks the scheduler directly rather than through ``Client.scheduler_info``: that method
    refreshes a cache the client's own periodic callback also rewrites (with no workers listed),
    so read from another thread it can come back empty while every worker is connected (seen in
    CI as two healthy nodes "leaving" and being prepared again)."""
    info = client.sync(client.scheduler.identity)
    found = {addr: str(w.get("name", addr)) for addr, w in info.get("workers", {}).items()}
    allowed = set(nodes)
    return {a: n for a, n in found.items() if n in allowed} if allowed else found


def holders_of(client: Any, keys: set[str]) -> set[str]:
    """Addresses of the workers ``client``'s scheduler says are processing any of ``keys``
    (none when the scheduler cannot be asked)."""
    try:
        processing = client.processing()
    except Exception as exc:  # noqa: BLE001 - the scheduler may be gone too
        LOGGER.debug("asking the scheduler what is processing: %s", exc)
        return set()
    return {addr for addr, held in processing.items() if keys & {str(k) for k in held}}


def _distributed() -> Any:
    try:
        import distributed
    except ImportError:
        raise SandboxError(MISSING_EXTRA) from None
    return distributed


class DaskExecutor(Executor):
    """Grade on Dask workers (edge nodes); options as in ``sandbox:`` (see ``docs/edge.md``).

    ``scheduler``: ``tls://IP:PORT`` (or ``tcp://`` on loopback); ``tls``: ``{ca_file,
    cert_file, key_file}`` of this client; ``node_backend``: what each node grades with
    (``local``); ``node_options``: options of that backend; ``nodes``: worker names allowed
    (default all); ``batch_size``: requests per Dask task; ``node_timeout``: seconds without
    any good node before the remaining requests are ``infra_error`` (and, at construction,
    to wait for a first node); ``min_isolation``: the isolation floor every node must reach
    (nodes below it are refused); ``connect_timeout``: seconds to reach the scheduler.
    """

    name = "dask"
    #: connect before any generation starts (the runner's preflight)
    connect_early = True
    #: a batch's results come back together when the node returns the batch
    streams_each_result = False
    #: seconds added to a stalled run's limit (see :meth:`stall_limit`)
    stall_grace_s: float = 60.0
    #: seconds a worker has to answer its preparation (executor start and gold check)
    prepare_timeout_s: float = 180.0

    @classmethod
    def check_options(cls, options: Mapping[str, Any], base_dir: Path | None = None
                      ) -> dict[str, Any]:
        """Validate without connecting; returns the options with absolute TLS paths."""
        settings = check_options(options, base_dir)
        out = dict(options)
        if settings.tls is not None:
            out["tls"] = {"ca_file": settings.tls.ca_file, "cert_file": settings.tls.cert_file,
                          "key_file": settings.tls.key_file}
        return out

    def __init__(self, scheduler: str = "", tls: Mapping[str, str] | None = None,
                 node_backend: str = "local", nodes: list[str] | None = None,
                 batch_size: int = 16, node_timeout: float = 60.0,
                 node_options: Mapping[str, Any] | None = None,
                 connect_timeout: float = 10.0,
                 min_isolation: IsolationLevel | str | int = IsolationLevel.NONE) -> None:
        raw: dict[str, Any] = {"scheduler": scheduler, "node_backend": node_backend,
                               "nodes": nodes or [], "batch_size": batch_size,
                               "node_timeout": node_timeout, "node_options": node_options or {},
                               "min_isolation": min_isolation}
        if tls is not None:
            raw["tls"] = dict(tls)
        try:
            self.settings: EdgeSettings = check_options(raw)
        except OptionError as exc:
            raise ValueError(f"sandbox.{exc.key}: {exc}") from None
        distributed = _distributed()
        _scheme, host, _port = parse_address(self.settings.scheduler)
        if self.settings.tls is None and is_loopback(host):
            LOGGER.warning("dask backend: plain tcp:// to %s (loopback only): no encryption, no "
                           "authentication", self.settings.scheduler)
        self._closed = False
        self._good: dict[str, dict[str, Any]] = {}  # worker address -> gold report
        self._bad: dict[str, str] = {}               # node name -> why
        self._seen: dict[str, str] = {}              # worker address -> name, last looked at
        self._unavailable: str | None = None         # why no node is there (decided once)
        self._silent: set[str] = set()               # worker addresses that did not answer
        try:
            self._client = distributed.Client(
                self.settings.scheduler, security=security(self.settings.tls, "client"),
                timeout=connect_timeout, set_as_default=False, name="ianvs-edge-client")
        except Exception as exc:  # noqa: BLE001 - OSError, TimeoutError, ssl errors alike
            raise EdgeConnectionError(
                f"cannot connect to the Dask scheduler at {self.settings.scheduler}: "
                f"{type(exc).__name__}: {exc or 'no answer'} (is 'ianvs edge scheduler' running "
                "there, and are sandbox.tls certificates signed by the cluster's CA?)") from None
        try:
            self._first_nodes()
        except BaseException:
            self.close()
            raise

    def _first_nodes(self) -> None:
        """Prepare the workers present, waiting up to ``node_timeout`` for a first one; raise
        :class:`NoEdgeNodeError` or :class:`NoGoodNodeError` when the run cannot grade."""
        self._watch(announce=False)
        deadline = time.monotonic() + self.settings.node_timeout
        if not self._seen:
            LOGGER.info("no edge node at scheduler %s yet; waiting up to %gs (node_timeout)",
                        self.settings.scheduler, self.settings.node_timeout)
        while not self._seen and time.monotonic() < deadline:
            time.sleep(_POLL_S)
            self._watch()
        if not self._seen:
            allowed = (f" (allowed nodes: {', '.join(self.settings.nodes)})"
                       if self.settings.nodes else "")
            raise NoEdgeNodeError(f"no edge node joined scheduler {self.settings.scheduler} "
                                  f"within node_timeout={self.settings.node_timeout:g}s{allowed}")
        if not self._good:
            raise NoGoodNodeError(self._no_good_text())

    def _no_good_text(self) -> str:
        floor = self.settings.min_isolation
        head = (f"no edge node passed its gold check and meets min_isolation={floor}: "
                if floor > IsolationLevel.NONE else "no edge node passed its gold check: ")
        return head + "; ".join(f"{node}: {why}" for node, why in sorted(self._bad.items()))

    # ------------------------------------------------------------------ nodes
    def _workers(self) -> dict[str, str]:
        """Connected workers allowed by ``nodes``: address -> name."""
        return allowed_workers(self._client, self.settings.nodes)

    def _watch(self, announce: bool = True) -> bool:
        """Compare the allowed workers with the last look: log each node lost (WARNING) or
        joined (INFO) once, by name; prepare the new ones. True if a good node was added."""
        workers = self._workers()
        if announce:
            for addr in sorted(set(self._seen) - set(workers)):
                LOGGER.warning("edge node %s (%s) left the scheduler; %d other good node(s) "
                               "remain", self._seen[addr], addr,
                               len([a for a in self._good if a != addr and a in workers]))
            for addr in sorted(set(workers) - set(self._seen)):
                LOGGER.info("edge node %s (%s) joined the scheduler", workers[addr], addr)
        self._seen = dict(workers)
        return self._refresh_nodes(workers)

    def _refresh_nodes(self, workers: Mapping[str, str]) -> bool:
        """Prepare ``workers`` not prepared yet; drop departed ones; refuse nodes below
        ``min_isolation`` (one warning naming them). True if a good node was added."""
        for addr in list(self._good):
            if addr not in workers:
                del self._good[addr]
        self._silent &= set(workers)  # one that left and came back is asked again
        new = [a for a in workers if a not in self._good and a not in self._silent]
        if not new:
            return False
        reports = self._prepare(new)
        added = False
        refused: list[str] = []
        floor = self.settings.min_isolation
        for addr, report in reports.items():
            name = workers.get(addr, addr)
            if isinstance(report, TimeoutError):
                self._silent.add(addr)  # not asked again while it stays connected
            if isinstance(report, BaseException):
                report = {"node": name, "ok": False, "detail": f"{type(report).__name__}: {report}"}
            level = _level(report.get("isolation"))
            if report.get("ok") and level >= floor:
                self._good[addr] = report
                self._bad.pop(name, None)
                added = True
                LOGGER.info("edge node %s (%s): gold check passed, isolation %s", name, addr,
                            report.get("isolation"))
            elif report.get("ok"):
                why = f"isolation {level} is below the job's min_isolation={floor}"
                if self._bad.get(name) != why:
                    refused.append(f"{name} ({level})")
                self._bad[name] = why
            elif name not in self._bad:
                self._bad[name] = str(report.get("detail", "?"))
                LOGGER.warning("edge node %s failed its gold check and grades nothing: %s", name,
                               self._bad[name])
        if refused:
            LOGGER.warning("edge node(s) refused, below the job's min_isolation=%s, grade "
                           "nothing: %s", floor, ", ".join(sorted(refused)))
        return added

    def _prepare(self, workers: list[str]) -> dict[str, Any]:
        """Each worker's gold report (or the exception it raised), asked of all at once; a
        worker that does not answer within :attr:`prepare_timeout_s` gets a ``TimeoutError``
        (a frozen node must not hang the run; its thread is left to end when it answers)."""
        from .node import prepare_node

        pool = ThreadPoolExecutor(max_workers=len(workers), thread_name_prefix="ianvs-prepare")
        asked = {addr: pool.submit(self._client.run, prepare_node, self.settings.node_backend,
                                   dict(self.settings.node_options or {}), workers=[addr],
                                   on_error="return") for addr in workers}
        pool.shutdown(wait=False)
        deadline = time.monotonic() + self.prepare_timeout_s
        reports: dict[str, Any] = {}
        for addr, fut in asked.items():
            try:
                reports[addr] = fut.result(timeout=max(0.0, deadline - time.monotonic()))[addr]
            except FutureTimeout:
                reports[addr] = TimeoutError(f"no answer to its gold check within "
                                             f"{self.prepare_timeout_s:g}s")
            except Exception as exc:  # noqa: BLE001 - the worker left meanwhile, and the like
                reports[addr] = exc
        return reports

    @property
    def nodes(self) -> list[str]:
        """Names of the nodes that passed their gold check (sorted)."""
        return sorted({str(r["node"]) for r in self._good.values()})

    @property
    def isolation(self) -> IsolationLevel:
        levels = [_level(r.get("isolation")) for r in self._good.values() if r.get("isolation")]
        return min(levels) if levels else IsolationLevel.NONE

    def slowdown(self) -> dict[str, float]:
        """Timeout multiplier per good node: its gold time over the fastest node's, or 1.0 when
        within :data:`SLOWDOWN_NOISE`. Results from a node report the scaled ``timeout_s``."""
        times = {str(r["node"]): float(r["seconds"]) for r in self._good.values()}
        fastest = min((t for t in times.values() if t > 0), default=0.0)
        out: dict[str, float] = {}
        for node, seconds in times.items():
            ratio = seconds / fastest if fastest > 0 else 1.0
            out[node] = ratio if ratio > SLOWDOWN_NOISE else 1.0
        return out

    def stall_limit(self, batches: Iterable[list[ExecRequest]]) -> float:
        """Seconds without any finished batch after which ``batches`` (the pending ones) count as
        stalled: twice the longest one's budget (its requests' timeouts summed, scaled by the
        slowest good node) plus :attr:`stall_grace_s` (start-up, queueing, transfer)."""
        factor = max(self.slowdown().values(), default=1.0)
        longest = max((sum(float(r.timeout) for r in batch) for batch in batches), default=0.0)
        return 2.0 * longest * factor + self.stall_grace_s

    # ------------------------------------------------------------------ run
    def run(self, requests: Iterable[ExecRequest]) -> Iterator[ExecResult]:
        if self._closed:
            from core.testenvmanager.sandbox.types import ExecutorClosedError

            raise ExecutorClosedError("the dask executor is closed")
        reqs = list(requests)
        ids = [r.id for r in reqs]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"duplicate request ids {dup[:5]}: ids must be unique within one run")
        if not reqs:
            return
        todo = {r.id: r for r in reqs}
        size = self.settings.batch_size
        batches = [reqs[i:i + size] for i in range(0, len(reqs), size)]
        done: queue.Queue[Any] = queue.Queue()
        futures: dict[str, tuple[Any, int]] = {}  # future key -> (future, batch index)
        self._watch()
        if self._good:
            self._unavailable = None
        elif self._unavailable is not None:
            LOGGER.debug("dask run of %d request(s): still no edge node (%s)", len(reqs),
                         self._unavailable)
            for req in reqs:
                yield self._infra(req, self._unavailable)
            return

        stalled_nodes: set[str] = set()  # workers that held a stalled batch: not used again
        stalls = 0

        def submit(index: int) -> None:
            batch = [r for r in batches[index] if r.id in todo]
            if not batch:
                return
            from .node import grade_batch

            fut = self._client.submit(
                grade_batch, self.settings.node_backend, dict(self.settings.node_options or {}),
                batch, self.slowdown(), key=f"ianvs-grade-{uuid.uuid4().hex}", pure=False,
                workers=[a for a in self._good if a not in stalled_nodes] or list(self._good),
                allow_other_workers=False, retries=0)
            futures[fut.key] = (fut, index)
            fut.add_done_callback(done.put)

        lonely_since: float | None = None
        last_look = last_progress = time.monotonic()
        try:
            if self._good:
                for index in range(len(batches)):
                    submit(index)
            while todo:
                try:
                    fut = done.get(timeout=_POLL_S)
                except queue.Empty:
                    fut = None
                if fut is not None and fut.key in futures:
                    _, index = futures.pop(fut.key)
                    last_progress = time.monotonic()
                    yield from self._collect(fut, batches[index], todo)
                if time.monotonic() - last_look < _POLL_S or not todo:
                    continue
                last_look = time.monotonic()
                self._watch()
                if (futures and lonely_since is None and time.monotonic() - last_progress
                        > self.stall_limit(batches[i] for _, i in futures.values())):
                    yield from self._unstall(futures, batches, todo, stalled_nodes,
                                             stalls == 0, submit)
                    stalls += 1
                    last_progress = time.monotonic()
                    continue
                if self._good and lonely_since is None:
                    continue
                if self._good:  # a node (re)joined after all were gone
                    lonely_since = None
                    pending = sorted({i for _, i in futures.values()})
                    self._client.cancel([f for f, _ in futures.values()])
                    futures.clear()
                    for index in pending or range(len(batches)):
                        submit(index)
                    LOGGER.info("edge node(s) %s available again; resubmitted %d batch(es)",
                                ", ".join(self.nodes), len(futures))
                    continue
                lonely_since = lonely_since or time.monotonic()
                if time.monotonic() - lonely_since >= self.settings.node_timeout:
                    self._unavailable = (f"no edge node at scheduler {self.settings.scheduler} "
                                         f"within node_timeout={self.settings.node_timeout:g}s")
                    LOGGER.warning("%s: %d sample(s) are infra_error and not counted against the "
                                   "model; later runs do not wait again until a node joins",
                                   self._unavailable, len(todo))
                    for req in list(todo.values()):
                        yield self._infra(req, self._unavailable)
                    todo.clear()
        finally:
            if futures:
                self._client.cancel([f for f, _ in futures.values()])

    def _unstall(self, futures: dict[str, tuple[Any, int]], batches: list[list[ExecRequest]],
                 todo: dict[str, ExecRequest], stalled_nodes: set[str], first: bool,
                 submit: Any) -> Iterator[ExecResult]:
        """No batch finished within the stall limit: cancel the pending ones and, the ``first``
        time, resubmit them to the good nodes other than those the scheduler says hold them
        (all good nodes when it names none: the tasks were lost, not stuck); on a second stall,
        or with no node left, their requests are ``infra_error``."""
        pending = sorted({i for _, i in futures.values()})
        limit = self.stall_limit(batches[i] for i in pending)
        holders = holders_of(self._client, set(futures))
        stalled_nodes.update(holders)
        names = ", ".join(sorted(str(self._good.get(a, {}).get("node", a)) for a in holders)) \
            or "none named by the scheduler"
        self._client.cancel([f for f, _ in futures.values()])
        futures.clear()
        others = [a for a in self._good if a not in stalled_nodes]
        if first and others:
            LOGGER.warning("no batch came back for %.0fs (held by edge node(s): %s); resubmitted "
                           "%d batch(es) to %s", limit, names, len(pending),
                           ", ".join(sorted(str(self._good[a]["node"]) for a in others)))
            for index in pending:
                submit(index)
            return
        why = (f"no batch came back for {limit:.0f}s (held by edge node(s): {names}) "
               + ("twice" if not first else "and no other good node to resubmit to"))
        LOGGER.warning("%s: %d sample(s) are infra_error and not counted against the model",
                       why, sum(1 for i in pending for r in batches[i] if r.id in todo))
        for index in pending:
            for req in batches[index]:
                if todo.pop(req.id, None) is not None:
                    yield self._infra(req, why)

    def _collect(self, fut: Any, batch: list[ExecRequest],
                 todo: dict[str, ExecRequest]) -> Iterator[ExecResult]:
        """Results of one finished task, each request at most once (dedup by id)."""
        results: list[ExecResult] = []
        why = "node returned no result for this request"
        if fut.status == "finished":
            try:
                results = fut.result(timeout=30)
            except Exception as err:  # noqa: BLE001 - lost between finish and fetch
                why = f"{type(err).__name__}: {err}"
        else:
            problem: BaseException | None
            try:
                problem = fut.exception(timeout=30)
            except Exception as err:  # noqa: BLE001
                problem = err
            why = f"batch failed on the edge: {type(problem).__name__}: {problem}"
        for res in results:
            if todo.pop(res.id, None) is not None:
                yield res
        for req in batch:
            if req.id in todo:
                del todo[req.id]
                yield self._infra(req, why)

    def _infra(self, req: ExecRequest, detail: str) -> ExecResult:
        return ExecResult(id=req.id, outcome=Outcome.INFRA_ERROR, exit_status=None,
                          duration_s=0.0, backend=f"dask:{self.settings.node_backend}",
                          timeout_s=float(req.timeout), memory_mb=req.memory_mb,
                          detail=detail, grading=req.tier)

    def close(self) -> None:
        if getattr(self, "_closed", True):
            return
        self._closed = True
        try:
            self._client.close(timeout=10)
        except Exception as exc:  # noqa: BLE001 - closing must not raise
            LOGGER.debug("closing the dask client: %s", exc)
