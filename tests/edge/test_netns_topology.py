"""Dispatch across a real network stack: `cloud`, `edge1`, `edge2` network namespaces joined by
veth pairs, the scheduler in `cloud`, one worker in each edge namespace, `ianvs` (this process)
on a link to `cloud`. Edge-link latency: ``tc netem`` is not in this kernel, so each edge reaches
the scheduler through a relay in `cloud` that delays every byte, by 20 ms each way for edge1
and 150 ms for edge2 (:mod:`core.edge.relay`). Needs root and iproute2; skipped otherwise. Every namespace, link and
process is removed afterwards, also when a test fails."""
from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from .helpers import edge_cluster  # noqa: F401  (skips without the edge extra)

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                                reason="network namespaces need root and iproute2 ('ip')")

from core.edge.certs import write_certs  # noqa: E402
from core.edge.processes import EdgeCluster, WorkerSpec  # noqa: E402
from core.testenvmanager.sandbox.leftovers import netns_name  # noqa: E402

SCHED_PORT, RELAY_PORT = 8786, 8790
#: each edge's link delay, each way: edge2's link is the slow one
DELAY_MS = {1: 20, 2: 150}


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class Topology:
    """Namespaces and links (see module doc); ``net`` is the second octet of 10.net.x.y."""

    def __init__(self) -> None:
        self.tag = f"i9{os.getpid() % 100000}"  # host veth names (at most 15 characters)
        # ianvs-<pid>-<label>: `ianvs sandbox clean` removes them if this process dies first
        self.ns = {"cloud": netns_name("c"), "edge1": netns_name("e1"), "edge2": netns_name("e2")}
        used = subprocess.run(["ip", "-4", "addr"], capture_output=True, text=True).stdout
        self.net = next(n for n in random.sample(range(150, 250), 100) if f" 10.{n}." not in used)

    def addr(self, link: int, side: int) -> str:
        return f"10.{self.net}.{link}.{side}"

    def up(self) -> None:
        for ns in self.ns.values():
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        cloud = self.ns["cloud"]
        _ip("link", "add", f"{self.tag}r", "type", "veth", "peer", "name", "ianvs", "netns", cloud)
        _ip("addr", "add", f"{self.addr(0, 1)}/24", "dev", f"{self.tag}r")
        _ip("link", "set", f"{self.tag}r", "up")
        _ip("-n", cloud, "addr", "add", f"{self.addr(0, 2)}/24", "dev", "ianvs")
        _ip("-n", cloud, "link", "set", "ianvs", "up")
        for i in (1, 2):
            edge = self.ns[f"edge{i}"]
            _ip("-n", cloud, "link", "add", f"edge{i}", "type", "veth", "peer", "name", "cloud",
                "netns", edge)
            _ip("-n", cloud, "addr", "add", f"{self.addr(i, 1)}/24", "dev", f"edge{i}")
            _ip("-n", edge, "addr", "add", f"{self.addr(i, 2)}/24", "dev", "cloud")
            _ip("-n", cloud, "link", "set", f"edge{i}", "up")
            _ip("-n", edge, "link", "set", "cloud", "up")

    def down(self) -> None:
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", f"{self.tag}r"], capture_output=True)

    def exec(self, name: str) -> list[str]:
        return ["ip", "netns", "exec", self.ns[name]]


@pytest.fixture(scope="module")
def topo() -> Iterator[tuple[Topology, EdgeCluster]]:
    topo = Topology()
    folder = Path(tempfile.mkdtemp(prefix="ianvs-edge-netns-"))
    try:
        topo.up()
        certs = folder / "certs"
        write_certs(certs, [topo.addr(0, 2)], [f"edge1={topo.addr(1, 2)}",
                                               f"edge2={topo.addr(2, 2)}"])
        workers = [WorkerSpec(f"edge{i}", host=topo.addr(i, 2), prefix=topo.exec(f"edge{i}"),
                              scheduler=f"tls://{topo.addr(i, 1)}:{RELAY_PORT}") for i in (1, 2)]
        cluster = EdgeCluster(workers, certs, host=topo.addr(0, 2), port=SCHED_PORT,
                              scheduler_prefix=topo.exec("cloud"), log_dir=folder / "logs")
        with cluster:
            cluster.start_scheduler()
            cluster.wait_for_workers(0, timeout=60)  # the scheduler answers
            for i in (1, 2):
                cluster._spawn(f"relay{i}", topo.exec("cloud") + [
                    sys.executable, "-m", "core.edge.relay", "--listen",
                    f"{topo.addr(i, 1)}:{RELAY_PORT}", "--target",
                    f"{topo.addr(0, 2)}:{SCHED_PORT}", "--delay-ms", str(DELAY_MS[i])])
            for spec in workers:
                cluster.start_worker(spec)
            cluster.wait_for_workers(2, timeout=120)
            yield topo, cluster
    finally:
        topo.down()
        shutil.rmtree(folder, ignore_errors=True)


def _listeners(prefix: list[str]) -> set[str]:
    """IPv4/IPv6 listening addresses (``ip:port``) inside a namespace, from /proc/net/tcp*."""
    out = set()
    for table in ("tcp", "tcp6"):
        text = subprocess.run(prefix + ["cat", f"/proc/net/{table}"], capture_output=True,
                              text=True, check=True).stdout
        for line in text.splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A":
                continue
            host_hex, port_hex = fields[1].split(":")
            raw = bytes.fromhex(host_hex)
            if table == "tcp":
                host = ".".join(str(b) for b in raw[::-1])
            else:
                host = ":".join(raw[i:i + 4][::-1].hex() for i in range(0, 16, 4))
            out.add(f"{host}:{int(port_hex, 16)}")
    return out


def test_gold_generators_through_delayed_edge_links(topo, tmp_path: Path) -> None:
    from core.cmd.job import load_job
    from core.cmd.runner import run_job
    from core.cmd.edge_demo import write_demo_job
    from core.testenvmanager.sandbox.pool import close_executors

    _topo, cluster = topo
    path = write_demo_job(tmp_path, cluster.address, cluster.certs)
    data = json.loads((tmp_path / "testenv.yaml").read_text())
    data["testenv"]["sandbox"]["batch_size"] = 2
    (tmp_path / "testenv.yaml").write_text(json.dumps(data))
    try:
        summary = run_job(load_job(path), show_progress=False, report=False)
    finally:
        close_executors()
    assert not summary.failed, [o.error for o in summary.failed]
    scores = {o.case.combination["basemodel"][1]["generator"]: o.metrics["pass@1"]
              for o in summary.outcomes}
    assert scores == {"canonical": 1.0, "broken": 0.0}
    nodes = {json.loads(line)["result"]["node"] for o in summary.outcomes
             for line in (Path(o.case.url) / "executions.jsonl").read_text().splitlines()}
    assert nodes == {"edge1", "edge2"}


def test_the_edge_model_answers_from_its_namespace_across_the_delayed_link(topo) -> None:
    """The cloud-edge edge model placed on one edge (``edge_node`` generator, this process on
    the cloud side): every answer is made in that edge's namespace, and the slower link shows in
    ``link_s`` -- the task goes to the worker and its completion comes back over the worker's
    delayed connection, so edge2's answers pay two crossings of its 150 ms at least."""
    from core.generation import create_generator
    from core.generation.types import GenerationRequest

    _topo, cluster = topo
    data = (Path(__file__).resolve().parents[2] / "examples" / "smart_coding"
            / "smart_coding_learning_bench" / "codegen" / "data" / "humaneval_subset.jsonl")
    records = [json.loads(line) for line in data.read_text().splitlines()[:3]]
    tls = cluster.client_tls()
    link: dict[str, float] = {}
    for node in ("edge1", "edge2"):
        with create_generator("edge_node", scheduler=cluster.address, nodes=[node],
                              tls={"ca_file": tls.ca_file, "cert_file": tls.cert_file,
                                   "key_file": tls.key_file},
                              node_generator="canonical",
                              node_params={"dataset_path": str(data)}, batch_size=1) as gen:
            out = list(gen.generate([GenerationRequest(task_id=r["task_id"], prompt=r["prompt"])
                                     for r in records]))
        assert len(out) == 3 and all(g.ok for g in out), [g.error for g in out]
        assert {g.transport["node"] for g in out} == {node}
        link[node] = sorted(g.transport["link_s"] for g in out)[1]  # the median
    # two crossings of edge2's delay at least (absolute: the overhead of either varies with load)
    assert link["edge2"] >= 2 * DELAY_MS[2] / 1000 * 0.95 and link["edge2"] > link["edge1"], link


def test_processes_listen_only_on_the_addresses_given(topo) -> None:
    t, _cluster = topo
    for i in (1, 2):
        hosts = {a.rsplit(":", 1)[0] for a in _listeners(t.exec(f"edge{i}"))}
        assert hosts and hosts <= {t.addr(i, 2), "127.0.0.1"}, hosts
    cloud = {a.rsplit(":", 1)[0] for a in _listeners(t.exec("cloud"))}
    assert cloud <= {t.addr(0, 2), t.addr(1, 1), t.addr(2, 1), "127.0.0.1"}, cloud


def test_edges_reach_the_scheduler_only_through_their_link(topo) -> None:
    """An edge has no route to the scheduler's own address (only its link's relay port)."""
    t, _cluster = topo
    probe = ("import socket, sys\ntry:\n    socket.create_connection((sys.argv[1], int(sys.argv[2])),"
             " timeout=2)\nexcept OSError:\n    sys.exit(7)\n")
    direct = subprocess.run(t.exec("edge1") + [sys.executable, "-c", probe, t.addr(0, 2),
                                                str(SCHED_PORT)], capture_output=True)
    assert direct.returncode == 7
    relayed = subprocess.run(t.exec("edge1") + [sys.executable, "-c", probe, t.addr(1, 1),
                                                 str(RELAY_PORT)], capture_output=True)
    assert relayed.returncode == 0
