"""Edge runs say what happened: nodes lost or joined are logged once by name, a run whose nodes
are all gone decides that once, the job's min_isolation is enforced per node, and the manifest
names the nodes that graded (against a real TLS cluster: tests/edge/helpers.py)."""
from __future__ import annotations

import json
import logging
import platform
import time
from pathlib import Path

import pytest

from core.edge.processes import WorkerSpec
from core.testenvmanager.sandbox import ExecRequest, ExecResult, Outcome

from .helpers import DaskExecutor, edge_cluster, sandbox_options

CHECK = "def check(f):\n    assert f(1) == 1\n"
EXECUTOR_LOG = "core.edge.executor"


def _sleepy(n: int, seconds: float, tag: str = "s") -> list[ExecRequest]:
    return [ExecRequest(id=f"{tag}{i}", program=f"import time\ndef f(x):\n    time.sleep({seconds})"
                        f"\n    return x  # {tag}{i}\n", test=CHECK, entry_point="f", timeout=10)
            for i in range(n)]


def _lines(caplog: pytest.LogCaptureFixture, *words: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == EXECUTOR_LOG and all(w in r.getMessage() for w in words)]


@pytest.mark.slow  # over 5 s: the fast tier stays under 5 minutes
def test_node_lost_and_joined_mid_run_are_logged_once_by_name(caplog) -> None:
    """edge2 is killed -9 while grading: one WARNING naming it, its samples graded by edge1;
    edge3 joins afterwards: one INFO naming it, and it grades in the next run."""
    with edge_cluster(extra_certs=("edge3",)) as cl:
        with caplog.at_level(logging.INFO, logger=EXECUTOR_LOG):
            with DaskExecutor(**sandbox_options(cl, batch_size=1)) as ex:
                results: list[ExecResult] = []
                for res in ex.run(_sleepy(16, 0.3)):
                    results.append(res)
                    if res.node == "edge2" and cl.procs["edge2"].poll() is None:
                        cl.kill("edge2")
                assert cl.procs["edge2"].poll() is not None, "edge2 graded nothing to kill"
                assert sorted(r.id for r in results) == sorted(f"s{i}" for i in range(16))
                assert all(r.passed for r in results), [r for r in results if not r.passed]
                cl.start_worker(WorkerSpec("edge3"))
                cl.wait_for_workers(2, timeout=90)
                second = list(ex.run(_sleepy(8, 0.0, "t")))
                assert all(r.passed for r in second)
                assert ex.nodes == ["edge1", "edge3"]
    assert len(_lines(caplog, "edge2", "left the scheduler")) == 1, caplog.text
    assert len(_lines(caplog, "edge3", "joined the scheduler")) == 1, caplog.text
    assert len(_lines(caplog, "edge1", "left")) == 0
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING
                and r.name == EXECUTOR_LOG]
    assert len(warnings) <= 2, [r.getMessage() for r in warnings]  # per event, not per sample


def test_every_node_lost_is_decided_once_not_per_run(caplog) -> None:
    """The only node dies: the running batch's samples are infra_error after node_timeout
    with one warning; the next runs (other metrics) do not wait again."""
    with edge_cluster(names=("edge1",)) as cl:
        with DaskExecutor(**sandbox_options(cl, node_timeout=2, batch_size=2)) as ex:
            assert all(r.passed for r in ex.run(_sleepy(2, 0.0)))
            cl.kill("edge1")
            with caplog.at_level(logging.INFO, logger=EXECUTOR_LOG):
                start = time.monotonic()
                first = list(ex.run(_sleepy(4, 0.0, "a")))
                took = time.monotonic() - start
                assert 2 <= took < 30
                for tag in ("b", "c", "d"):
                    start = time.monotonic()
                    later = list(ex.run(_sleepy(3, 0.0, tag)))
                    assert time.monotonic() - start < 2
                    assert [r.outcome for r in later] == [Outcome.INFRA_ERROR] * 3
    assert [r.outcome for r in first] == [Outcome.INFRA_ERROR] * 4
    assert all("node_timeout=2s" in r.detail for r in first)
    assert len(_lines(caplog, "edge1", "left the scheduler")) == 1, caplog.text
    assert len(_lines(caplog, "within node_timeout=2s")) == 1, caplog.text


def test_min_isolation_is_enforced_on_every_node(caplog) -> None:
    """edge2's operator turned the network namespace off (isolation 'process'): with the
    job's min_isolation=netns it is refused in one warning and grades nothing; with only edge2
    allowed the run cannot start and the error names the node and the floor."""
    from core.edge.executor import NoGoodNodeError

    with edge_cluster(worker_options={"edge2": ["netns=false"]}) as cl:
        with caplog.at_level(logging.WARNING, logger=EXECUTOR_LOG):
            with DaskExecutor(**sandbox_options(cl, batch_size=1, min_isolation="netns")) as ex:
                assert ex.nodes == ["edge1"]
                assert ex.isolation >= ex.settings.min_isolation
                results = list(ex.run(_sleepy(6, 0.0)))
        assert {r.node for r in results} == {"edge1"} and all(r.passed for r in results)
        refused = _lines(caplog, "min_isolation=netns", "edge2")
        assert len(refused) == 1 and "process" in refused[0], caplog.text
        assert not _lines(caplog, "edge1", "refused")
        with pytest.raises(NoGoodNodeError, match=r"min_isolation=netns.*edge2: isolation process"):
            DaskExecutor(**sandbox_options(cl, nodes=["edge2"], min_isolation="netns"))
        # without a floor the same node grades
        with DaskExecutor(**sandbox_options(cl, nodes=["edge2"])) as ex:
            assert ex.nodes == ["edge2"]


def test_manifest_counts_the_samples_each_node_graded(tmp_path: Path) -> None:
    """report/manifest.json: per test case, graded_by maps each node to its number of graded
    samples (the nodes for dask; this host for local results, whose node is empty)."""
    from core.scenarios import get_kind
    from core.storymanager.report.manifest import case_entry

    case = tmp_path / "case"
    case.mkdir()
    lines = [{"key": f"k{i}", "result": {"timeout_s": 3.0, "node": node}}
             for i, node in enumerate(["edge1", "edge2", "edge1", "", "token-node"])]
    (case / "executions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    # the graders are what the job's kind reports of the case folder (codegen: its execution cache)
    entry = case_entry(case, {"url": str(case)}, {"backend": "dask"},
                       get_kind("codegen").run_facts)
    assert entry["sandbox"]["graded_by"] == {"edge1": 2, "edge2": 1, platform.node(): 1,
                                             "token-node": 1}
    assert entry["sandbox"]["ianvs_host"] == platform.node()
    assert "node" not in entry["sandbox"]


def test_dask_run_manifest_names_the_graders(tmp_path: Path) -> None:
    """`ianvs` through the cluster with the report on: graded_by holds edge1/edge2 and counts
    every executed sample."""
    from core.cmd.job import load_job
    from core.cmd.runner import run_job
    from core.cmd.edge_demo import write_demo_job
    from core.testenvmanager.sandbox.pool import close_executors

    with edge_cluster() as cl:
        job = write_demo_job(tmp_path, cl.address, cl.certs, subset=True)
        try:
            summary = run_job(load_job(job), show_progress=False, report=True)
        finally:
            close_executors()
    assert not summary.failed, [o.error for o in summary.failed]
    (manifest_path,) = list(tmp_path.rglob("manifest.json"))
    manifest = json.loads(manifest_path.read_text())
    assert len(manifest["test_cases"]) == 2
    for case in manifest["test_cases"]:
        graded = case["sandbox"]["graded_by"]
        assert set(graded) <= {"edge1", "edge2"} and graded, graded
        # published urls are relative to the workspace (<workspace>/<job>/report/manifest.json)
        executed = (manifest_path.parents[2] / case["url"] / "executions.jsonl").read_text().splitlines()
        assert sum(graded.values()) == len(executed)


