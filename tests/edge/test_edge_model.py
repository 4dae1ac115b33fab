"""The edge model on an edge node (``edge_node`` generator): a real scheduler and real workers
(separate processes, mutual TLS on loopback) run the node's generator; answers come back with
their node, link time and sizes; an emulated link adds its delay and pacing; a lost node is
reported, and its requests resumed on a node that joins or reported lost -- never dropped."""
from __future__ import annotations

import json
import logging
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from core.common.errors import ConfigError
from core.generation import create_generator
from core.generation.types import DecodingSettings, GenerationRequest

from tests.runner.conftest import run_cli, start_cli
from tests.scenarios.conftest import rank_rows_by_algorithm

from .helpers import edge_cluster, tls_options

ROOT = Path(__file__).resolve().parents[2]
SUBSET = ROOT / "examples/smart_coding/smart_coding_learning_bench/codegen/data/humaneval_subset.jsonl"
LOG = "core.edge.models"


def _records(n: int) -> list[dict]:
    lines = SUBSET.read_text().splitlines()[:n]
    return [json.loads(line) for line in lines]


def _requests(n: int) -> list[GenerationRequest]:
    return [GenerationRequest(task_id=r["task_id"], prompt=r["prompt"],
                              entry_point=r["entry_point"], decoding=DecodingSettings())
            for r in _records(n)]


def _generator(cluster, **extra):
    options = {"scheduler": cluster.address, "tls": tls_options(cluster),
               "node_generator": "canonical", "node_params": {"dataset_path": str(SUBSET)},
               "batch_size": 1, **extra}
    return create_generator("edge_node", **options)


@pytest.fixture(scope="module")
def cluster():
    with edge_cluster(names=("edge1", "edge2")) as running:
        yield running


def test_answers_come_from_the_node_with_link_and_sizes(cluster) -> None:
    """Every answer is the node generator's (the canonical solution), made on an allowed node,
    with its link seconds and payload sizes; the identity is the node model's plus the link."""
    with _generator(cluster, nodes=["edge2"]) as gen:
        assert gen.describe()["generator"] == "edge_node"
        assert gen.describe()["model"]["generator"] == "canonical"
        assert gen.describe()["link"] == {"delay_ms": 0.0, "rate_kbps": 0.0}
        out = list(gen.generate(_requests(3)))
    by_task = {g.task_id: g for g in out}
    assert sorted(by_task) == sorted(r["task_id"] for r in _records(3))
    for record in _records(3):
        g = by_task[record["task_id"]]
        assert g.ok and record["canonical_solution"].strip() in g.code
        assert g.transport["node"] == "edge2"
        assert g.transport["bytes_up"] > len(record["prompt"])
        assert g.transport["bytes_down"] > len(record["canonical_solution"])
        assert 0 <= g.transport["link_s"] < 5


@pytest.mark.slow  # three connections through the emulated link: about 20 s
def test_an_emulated_link_adds_its_delay_and_paces_its_bytes(cluster) -> None:
    """link_delay_ms: each answer's link time grows by at least two crossings of the delay;
    link_rate_kbps: a slow link adds the payload's transmission time on top."""
    def median_link(**link) -> float:
        with _generator(cluster, **link) as gen:
            return statistics.median(g.transport["link_s"] for g in gen.generate(_requests(4)))

    plain = median_link()
    delayed = median_link(link_delay_ms=150)
    # the task goes out and its completion comes back across the link: two crossings at least
    # (an absolute bound: the plain link's own overhead varies with the machine's load)
    assert delayed >= 2 * 0.150 * 0.95 and delayed > plain, (plain, delayed)
    # 64 kbit/s = 8000 bytes/s: each request and answer (over 400 bytes each way) and Dask's
    # own messages around them take a good part of a second more (about 1 s in all here)
    slow = median_link(link_delay_ms=150, link_rate_kbps=64)
    assert slow >= delayed + 0.2, (delayed, slow)


def test_the_only_node_lost_then_rejoining_resumes_its_requests(cluster, caplog) -> None:
    """The allowed node is killed after the model loaded: one warning names it; a node of that
    name joining within node_timeout answers every request (none dropped, none lost), the
    model loaded on it at its first batch."""
    from core.edge.processes import WorkerSpec

    with caplog.at_level(logging.INFO, logger=LOG):
        with _generator(cluster, nodes=["edge1"], node_timeout=60) as gen:
            cluster.kill("edge1")
            cluster.procs["edge1"].wait(10)
            # from this thread: a worker dies with the thread that started it (PDEATHSIG); it
            # registers a few seconds later, while generate() waits for an allowed node
            cluster.start_worker(WorkerSpec("edge1"))
            out = list(gen.generate(_requests(3)))
    assert len(out) == 3 and all(g.ok for g in out), [g.error for g in out]
    assert all(g.transport["node"] == "edge1" for g in out)
    lines = [r.getMessage() for r in caplog.records if r.name == LOG]
    assert len([m for m in lines if "edge1" in m and "left the scheduler" in m]) == 1, lines
    assert len([m for m in lines if "edge1" in m and "joined the scheduler" in m]) == 1, lines
    assert any("no allowed node is connected; waiting up to 60s" in m for m in lines), lines


def test_a_node_that_never_returns_reports_every_request_lost(caplog) -> None:
    """The only node dies and none joins: after node_timeout each request comes back with an
    error and ``transport.lost``, and one warning says how many."""
    with edge_cluster(names=("edge1",)) as cl:
        with caplog.at_level(logging.INFO, logger=LOG):
            with _generator(cl, node_timeout=2, batch_size=2) as gen:
                cl.kill("edge1")
                cl.procs["edge1"].wait(10)
                out = list(gen.generate(_requests(3)))
    assert sorted(g.task_id for g in out) == sorted(r["task_id"] for r in _records(3))
    assert all(not g.ok and g.transport == {"node": None, "lost": True} for g in out)
    assert all("edge node lost" in g.error and "node_timeout=2s" in g.error for g in out)
    warnings = [r.getMessage() for r in caplog.records
                if r.name == LOG and r.levelno >= logging.WARNING]
    assert any("3 request(s) unanswered, reported lost" in m for m in warnings), warnings


def test_bad_options_and_no_scheduler_are_one_line_errors(tmp_path: Path) -> None:
    """Plain tcp:// to a remote address, a negative link, edge_node on the node, and an
    unreachable scheduler: ConfigError naming the key or the address, nothing started."""
    with pytest.raises(ConfigError, match="scheduler.*only accepted on loopback"):
        create_generator("edge_node", scheduler="tcp://10.1.2.3:8786")
    with pytest.raises(ConfigError, match="link_delay_ms must be a number >= 0"):
        create_generator("edge_node", scheduler="tcp://127.0.0.1:1", link_delay_ms=-1)
    with pytest.raises(ConfigError, match="node_generator must be"):
        create_generator("edge_node", scheduler="tcp://127.0.0.1:1", node_generator="edge_node")
    with pytest.raises(ConfigError, match="cannot connect to the Dask scheduler at tcp://127.0.0.1:1"):
        create_generator("edge_node", scheduler="tcp://127.0.0.1:1", connect_timeout=1)


BENCH = ROOT / "examples" / "smart_coding" / "smart_coding_learning_bench"
JOB = "examples/smart_coding/smart_coding_learning_bench/cloudedge/benchmarkingjob_edge_node.yaml"


def _shipped_job_copy(root: Path, address: str, tasks: int, **edge: str) -> list[dict]:
    """The shipped edge-node job under ``root`` (a copy of the repository's layout) on the first
    ``tasks`` subset tasks, pointed at ``address``; the node replays known answers (right for
    even tasks, wrong for odd ones), the cloud is the canonical generator. ``edge``: YAML
    lines of the edge module to replace (old -> new)."""
    bench = root / "examples" / "smart_coding" / "smart_coding_learning_bench"
    shutil.copytree(BENCH / "cloudedge", bench / "cloudedge",
                    ignore=shutil.ignore_patterns("workspace"))
    (bench / "codegen" / "data").mkdir(parents=True)
    records = _records(tasks)
    (bench / "codegen" / "data" / "humaneval_subset.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records))
    answers = root / "edge_answers.jsonl"
    answers.write_text("".join(
        json.dumps({"task_id": r["task_id"], "completion": r["canonical_solution"] if i % 2 == 0
                    else "    return None\n"}) + "\n" for i, r in enumerate(records)))
    routing = bench / "cloudedge" / "testalgorithms" / "routing"
    for name in ("cloud_only.yaml", "example_tests_on_node.yaml"):
        path = routing / name
        edge_part, cloud_part = path.read_text().split('type: "cloudmodel"')
        if name == "example_tests_on_node.yaml":
            edge_part = edge_part.replace("tcp://127.0.0.1:8786", address)
            edge_part = edge_part.replace('node_generator: {values: ["embedded"]}',
                                          'node_generator: {values: ["replay"]}')
            edge_part = edge_part.replace("node_params: {values: [{logprobs: true}]}",
                                          f'node_params: {{values: [{{samples_path: "{answers}"}}]}}')
            for old, new in edge.items():
                assert old in edge_part, old
                edge_part = edge_part.replace(old, new)
        cloud_part = cloud_part.replace('generator: {values: ["embedded"]}',
                                        'generator: {values: ["canonical"]}')
        cloud_part = cloud_part.replace('        - model: {values: ["qwen2.5-coder-1.5b"]}\n', "")
        path.write_text(edge_part + 'type: "cloudmodel"' + cloud_part)
    return records


def _rank(root: Path) -> dict[str, list[dict[str, str]]]:
    ranks = list(root.rglob("all_rank.csv"))
    assert len(ranks) == 1, ranks
    return rank_rows_by_algorithm(ranks[0])


@pytest.fixture()
def loopback_cluster():
    """One plain-tcp worker named edge1 on loopback (as the shipped job's comment says to start:
    ``ianvs edge scheduler --insecure`` and ``ianvs edge worker --insecure``)."""
    from core.edge.processes import EdgeCluster, WorkerSpec

    with tempfile.TemporaryDirectory(prefix="ianvs-edge-test-") as folder:
        with EdgeCluster([WorkerSpec("edge1")], None, log_dir=Path(folder) / "logs") as cl:
            cl.start(timeout=90)
            yield cl


@pytest.mark.slow  # the shipped job, two edge-node cases: about 16 s
def test_the_shipped_edge_node_job_reports_the_link_in_its_latency_split(
        tmp_path: Path, loopback_cluster) -> None:
    """The shipped job from the repository root: every edge answer is made on edge1 and crosses
    the link; the case with 200 ms added each way shows it in link_s (and latency_s), not in
    edge_s; link_kb counts the bytes; no task is lost, and the answers are graded as usual."""
    records = _shipped_job_copy(tmp_path, loopback_cluster.address, 4)
    res = run_cli("-f", JOB, "--no-progress", cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = _rank(tmp_path)
    assert float(rows["cloud_only"][0]["link_s"]) == 0.0
    by_delay = {float(r["edgemodel-link_delay_ms"]): r for r in rows["example_tests_on_node"]}
    assert set(by_delay) == {0.0, 200.0}
    fast, slow = by_delay[0.0], by_delay[200.0]
    for row in (fast, slow):
        assert float(row["pass@1"]) == 1.0  # wrong edge answers fail their examples: cloud
        assert float(row["edge_lost"]) == 0.0 and float(row["link_kb"]) > 0.5
    # two crossings of 200 ms per answer (the task out, its completion back)
    assert float(slow["link_s"]) >= 2 * 0.200 * 0.95 > float(fast["link_s"]), (fast, slow)
    assert abs(float(slow["edge_s"]) - float(fast["edge_s"])) < 0.2  # the node's own time
    preds = [json.loads(line) for p in tmp_path.rglob("predictions.jsonl")
             for line in p.read_text().splitlines()]
    edge_answers = [p["prediction"][2] for p in preds if isinstance(p.get("prediction"), list)
                    and isinstance(p["prediction"][2], dict)]
    assert len(edge_answers) == 2 * len(records)
    assert all(a["perf"]["node"] == "edge1" and a["perf"]["bytes_down"] > 0 for a in edge_answers)


@pytest.mark.slow  # the node is killed mid-run; node_timeout passes once: about 30 s
def test_an_edge_node_lost_mid_run_routes_its_tasks_to_the_cloud(tmp_path: Path,
                                                                  loopback_cluster) -> None:
    """edge1 is killed after the first prediction of the edge-node case: the run finishes, every
    task has a prediction, the lost ones went to the cloud (edge_lost > 0, named in a warning)."""
    records = _shipped_job_copy(tmp_path, loopback_cluster.address, 8, **{
        "link_delay_ms: {values: [0, 200]}": "link_delay_ms: {values: [300]}",
        "node_timeout: {values: [60]}": "node_timeout: {values: [3]}"})
    proc = start_cli("-f", JOB, "--no-progress", cwd=tmp_path, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        case = None
        while time.monotonic() < deadline and case is None:
            found = [p for p in tmp_path.rglob("predictions.jsonl")
                     if "example_tests_on_node" in str(p) and p.read_text().strip()]
            case = found[0] if found else None
            assert proc.poll() is None, proc.stderr.read()[-3000:]
            time.sleep(0.05)
        assert case is not None, "the edge-node case never stored a prediction"
        loopback_cluster.kill("edge1")
        _out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-3000:]
    assert "edge1" in err and "left the scheduler" in err, err[-3000:]
    assert "goes to the cloud: the edge model could not answer" in err, err[-3000:]
    row, = _rank(tmp_path)["example_tests_on_node"]
    lost = float(row["edge_lost"])
    assert 0 < lost < 1, row
    assert float(row["pass@1"]) == 1.0  # the cloud answered the lost ones
    stored = case.read_text().splitlines()
    assert len(stored) == len(records)
    lost_preds = [json.loads(line)["prediction"] for line in stored
                  if (json.loads(line)["prediction"][2] or {}).get("lost")]
    assert len(lost_preds) == round(lost * len(records))
    assert all(p[0] is True and p[3] is not None for p in lost_preds)


@pytest.mark.slow
@pytest.mark.parametrize("stopped", [("edge1",), ("edge1", "edge2")])
def test_a_frozen_node_does_not_hang_generation(stopped: tuple[str, ...], caplog,
                                                monkeypatch) -> None:
    """A node frozen (SIGSTOP) after the model loaded, still connected: its batch is sent once
    more to the other node, which answers everything (one warning names the frozen node);
    both frozen: every request comes back as stalled (lost, retried by the next run) within
    the stall limit, and closing does not wait for the frozen nodes."""
    import signal

    import core.edge.models as models

    monkeypatch.setattr(models, "RELEASE_TIMEOUT_S", 5.0)
    with edge_cluster(names=("edge1", "edge2")) as cl:
        gen = _generator(cl)
        gen.stall_grace_s = 4.0
        gen.min_tokens_per_s = 1e6  # budget: the grace alone
        try:
            for name in stopped:
                cl.kill(name, signal.SIGSTOP)
            start = time.monotonic()
            with caplog.at_level(logging.WARNING, logger=LOG):
                out = list(gen.generate(_requests(4)))
            took = time.monotonic() - start
            closing = time.monotonic()
            gen.close()
            closed_in = time.monotonic() - closing
        finally:
            for name in stopped:
                cl.kill(name, signal.SIGCONT)
            gen.close()
    assert sorted(g.task_id for g in out) == sorted(r["task_id"] for r in _records(4))
    warnings = [r.getMessage() for r in caplog.records if r.name == LOG]
    if len(stopped) == 1:
        assert all(g.ok for g in out), [g.error for g in out]
        assert {g.transport["node"] for g in out} == {"edge2"}
        assert any("edge1" in m and "sent again to edge2" in m for m in warnings), warnings
    else:
        assert all(not g.ok and "edge node stalled" in (g.error or "") for g in out)
        assert all(g.transport == {"node": None, "lost": True} for g in out)
        assert took < 60, took
        assert closed_in < 20, closed_in
