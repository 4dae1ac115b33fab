"""``ianvs edge demo``: a scheduler and two workers on this machine, the codegen job's gold
generators graded through them, then everything stopped.

:func:`write_demo_job` writes a job beside the cluster's certificates that reuses the codegen
example's dataset, metrics and basemodel with ``generator: [canonical, broken]`` and
``sandbox: {backend: dask, ...}``; :func:`run_demo` starts an :class:`~.processes.EdgeCluster`
on loopback with mutual TLS, runs the job in this process and returns the rank rows
(canonical must score pass@1 = 1.0, broken 0.0).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from core.edge.certs import write_certs
from core.edge.processes import EdgeCluster, WorkerSpec, tls_files

__all__ = ["EXAMPLE", "write_demo_job", "run_demo"]

LOGGER = logging.getLogger(__name__)
EXAMPLE = (Path(__file__).resolve().parents[2] / "examples" / "smart_coding" /
           "smart_coding_learning_bench" / "codegen")


def write_demo_job(folder: Path, scheduler: str, certs: Path, subset: bool = True) -> Path:
    """Write ``benchmarkingjob.yaml`` (and its testenv and algorithm) into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    data = EXAMPLE / "data" / ("humaneval_subset.jsonl" if subset else "humaneval.jsonl")
    tls = tls_files(certs, "client")
    testenv = {"testenv": {
        "dataset": {"test_index": str(data), "x_field": "prompt", "y_field": "task_id"},
        "metrics": [{"name": "pass_at_k", "url": str(EXAMPLE / "testenv" / "op_eval.py"),
                     "k": [1]}],
        "sandbox": {"backend": "dask", "scheduler": scheduler, "timeout": "auto",
                    "tls": {"ca_file": tls.ca_file, "cert_file": tls.cert_file,
                            "key_file": tls.key_file},
                    "node_backend": "local", "batch_size": 8, "node_timeout": 60}}}
    algorithm = {"algorithm": {"paradigm_type": "singletasklearning", "initial_model_url": "",
                               "modules": [{"type": "basemodel", "name": "gen",
                                            "url": str(EXAMPLE / "testalgorithms" / "gen" /
                                                       "basemodel.py"),
                                            "hyperparameters": [
                                                {"generator": {"values": ["canonical", "broken"]}},
                                                {"mode": {"values": ["complete"]}}]}]}}
    job = {"benchmarkingjob": {
        "name": "edge_demo", "workspace": str(folder / "workspace"),
        "testenv": str(folder / "testenv.yaml"),
        "test_object": {"type": "algorithms", "algorithms": [
            {"name": "codegen", "url": str(folder / "algorithm.yaml")}]},
        "rank": {"sort_by": [{"pass@1": "descend"}],
                 "visualization": {"mode": "selected_only", "method": "print_table"},
                 "selected_dataitem": {"paradigms": ["all"], "modules": ["all"],
                                       "hyperparameters": ["basemodel-generator"],
                                       "metrics": ["pass@1", "passed", "failed", "infra_error",
                                                   "isolation", "executed_by"]},
                 "save_mode": "selected_and_all"}}}
    # JSON is valid YAML: no YAML writer needed
    (folder / "testenv.yaml").write_text(json.dumps(testenv, indent=1), encoding="utf-8")
    (folder / "algorithm.yaml").write_text(json.dumps(algorithm, indent=1), encoding="utf-8")
    path = folder / "benchmarkingjob.yaml"
    path.write_text(json.dumps(job, indent=1), encoding="utf-8")
    return path


def run_demo(folder: Path, show_progress: bool = True) -> list[dict[str, Any]]:
    """Certificates, cluster, job, teardown (see module doc); returns the rank rows."""
    from core.cmd.job import load_job
    from core.cmd.runner import run_job
    from core.testenvmanager.sandbox.pool import close_executors

    certs = folder / "certs"
    write_certs(certs, ["127.0.0.1"], ["edge1", "edge2"])
    cluster = EdgeCluster([WorkerSpec("edge1"), WorkerSpec("edge2")], certs,
                          log_dir=folder / "logs")
    with cluster:
        LOGGER.info("starting a scheduler and two workers on 127.0.0.1 (logs in %s)",
                    folder / "logs")
        cluster.start(timeout=90)
        job = load_job(write_demo_job(folder / "job", cluster.address, certs))
        try:
            summary = run_job(job, show_progress=show_progress, report=False)
        finally:
            close_executors()
    if summary.failed:
        raise RuntimeError("; ".join(str(o.error) for o in summary.failed))
    return [{"generator": o.to_rank().hyperparameters.get("basemodel", {}).get("generator"),
             **o.metrics} for o in summary.outcomes]
