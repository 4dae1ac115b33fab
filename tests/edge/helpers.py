"""A real Dask cluster for tests: scheduler and workers as separate processes, mutual TLS on
loopback (also used by the sandbox suites' ``dask`` backend entry)."""
from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest

distributed = pytest.importorskip("distributed", reason="the edge extra (dask, distributed) "
                                                        "is not installed")

from core.edge.certs import write_certs  # noqa: E402
from core.edge.executor import DaskExecutor  # noqa: E402
from core.edge.processes import EdgeCluster, WorkerSpec  # noqa: E402


def tls_options(cluster: EdgeCluster) -> dict[str, str]:
    tls = cluster.client_tls()
    assert tls is not None
    return {"ca_file": tls.ca_file, "cert_file": tls.cert_file, "key_file": tls.key_file}


def sandbox_options(cluster: EdgeCluster, **extra: Any) -> dict[str, Any]:
    """``sandbox:`` options of the dask backend for ``cluster``."""
    return {"scheduler": cluster.address, "tls": tls_options(cluster), **extra}


@contextlib.contextmanager
def edge_cluster(names: Sequence[str] = ("edge1", "edge2"),
                 worker_options: dict[str, list[str]] | None = None,
                 wait: int | None = None, env: dict[str, str] | None = None,
                 extra_certs: Sequence[str] = ()) -> Iterator[EdgeCluster]:
    """Certificates in a temp folder, a started cluster, everything removed afterwards (also
    when the test fails). ``worker_options`` maps a node name to its ``--node-option`` items;
    ``extra_certs`` issues certificates for workers started later."""
    folder = Path(tempfile.mkdtemp(prefix="ianvs-edge-test-"))
    try:
        write_certs(folder / "certs", ["127.0.0.1"], [*names, *extra_certs])
        cluster = EdgeCluster([WorkerSpec(n, node_options=list((worker_options or {}).get(n, [])))
                               for n in names],
                              folder / "certs", log_dir=folder / "logs", env=env)
        with cluster:
            cluster.start(timeout=90, wait_workers=wait)
            yield cluster
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class ClusterExecutor(DaskExecutor):
    """A :class:`DaskExecutor` that owns its test cluster (closing it stops the cluster)."""

    def __init__(self, stack: contextlib.ExitStack, **options: Any) -> None:
        self._stack = stack
        super().__init__(**options)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._stack.close()


def cluster_executor(env: dict[str, str] | None = None, **options: Any) -> ClusterExecutor:
    """A two-worker TLS cluster and a dask executor on it (``options``: the backend's, e.g.
    ``node_options``), torn down together by ``close``."""
    stack = contextlib.ExitStack()
    try:
        cluster = stack.enter_context(edge_cluster(env=env))
        return ClusterExecutor(stack, **sandbox_options(cluster, **options))
    except BaseException:
        stack.close()
        raise
