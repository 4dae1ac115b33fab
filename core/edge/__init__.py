"""Sandboxed grading dispatched to edge nodes through Dask distributed (issue 9).

* :mod:`.settings`  -- the ``sandbox: {backend: dask, ...}`` options, checked without connecting;
  address rules (mutual TLS unless loopback) and the ``distributed.Security`` they build.
* :mod:`.gold`      -- the per-node gold check (reference solutions pass, broken ones fail).
* :mod:`.node`      -- what runs on a worker: the worker plugin holding the node's warm executor,
  node preparation (gold check and speed measurement) and the batch-grading task.
* :mod:`.executor`  -- :class:`~.executor.DaskExecutor`, the ``dask`` executor backend.
* :mod:`.certs`     -- a cluster CA and certificates (``ianvs edge certs``).
* :mod:`.processes` -- command lines of the real ``distributed`` scheduler and worker.
* :mod:`.cli`       -- ``ianvs edge scheduler|worker|certs|demo``.

Importing this package imports neither ``dask`` nor ``distributed``; the modules that need them
import them on use and say which extra to install (``pip install ianvs-smart-coding[edge]``).
"""
