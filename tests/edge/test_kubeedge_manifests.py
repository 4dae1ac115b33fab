"""deploy/kubeedge/ checked against the Kubernetes API models of the ``kubernetes`` client.

No API server can run here: these tests check every field name and type against the client's
OpenAPI models (an unknown or misspelt key fails), the edge placement, the Secret, limits,
capabilities and network policy, and that each container command parses with ``ianvs edge``'s
own argument parser.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

kubernetes = pytest.importorskip("kubernetes", reason="the edge extra (kubernetes) is not installed")

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubeedge"
MODELS = {("v1", "Namespace"): "V1Namespace", ("apps/v1", "Deployment"): "V1Deployment",
          ("v1", "Service"): "V1Service", ("apps/v1", "DaemonSet"): "V1DaemonSet",
          ("networking.k8s.io/v1", "NetworkPolicy"): "V1NetworkPolicy"}
#: capabilities the worker adds, each explained in workers.yaml and docs/edge.md
WORKER_CAPS = {"SYS_ADMIN", "SETUID", "SETGID", "KILL", "DAC_OVERRIDE"}
_LIST = re.compile(r"^(?:list|List)\[(.+)\]$")
_DICT = re.compile(r"^(?:dict\(([^,]+), (.+)\)|Dict\[([^,]+), (.+)\])$")
_PRIMITIVE = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object,
              "datetime": str, "date": str}


def _check(data: Any, type_name: str, where: str) -> None:
    """Every key of ``data`` is a field of the model ``type_name``, recursively, with the type
    the model declares (raises AssertionError naming the path)."""
    if (m := _LIST.match(type_name)) is not None:
        assert isinstance(data, list), f"{where}: expected a list"
        for i, item in enumerate(data):
            _check(item, m.group(1), f"{where}[{i}]")
        return
    if (m := _DICT.match(type_name)) is not None:
        assert isinstance(data, dict), f"{where}: expected a mapping"
        for key, value in data.items():
            _check(value, m.group(2) or m.group(4), f"{where}.{key}")
        return
    if type_name in _PRIMITIVE:
        assert isinstance(data, _PRIMITIVE[type_name]), f"{where}: expected {type_name}, got {data!r}"
        return
    model = getattr(kubernetes.client.models, type_name)
    assert isinstance(data, dict), f"{where}: expected a {type_name} mapping"
    fields = {json_key: attr for attr, json_key in model.attribute_map.items()}
    for key, value in data.items():
        assert key in fields, f"{where}: {key!r} is not a field of {type_name}"
        _check(value, model.openapi_types[fields[key]], f"{where}.{key}")


def _documents() -> list[tuple[str, Any]]:
    docs = []
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.append((path.name, doc))
    return docs


def _objects() -> dict[tuple[str, str], Any]:
    api = kubernetes.client.ApiClient()
    out = {}
    for name, doc in _documents():
        model = MODELS[(doc["apiVersion"], doc["kind"])]
        _check(doc, model, f"{name}:{doc['kind']}")
        out[(doc["kind"], doc["metadata"]["name"])] = api._ApiClient__deserialize(doc, model)
    return out


def test_every_manifest_is_valid_against_the_api_models() -> None:
    objects = _objects()
    assert set(objects) == {("Namespace", "ianvs-edge"), ("Deployment", "ianvs-edge-scheduler"),
                            ("Service", "ianvs-edge-scheduler"),
                            ("DaemonSet", "ianvs-edge-worker"),
                            ("NetworkPolicy", "ianvs-edge-worker"),
                            ("NetworkPolicy", "ianvs-edge-scheduler")}
    listed = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == sorted({name for name, _ in _documents()})


def test_a_misspelt_field_is_caught() -> None:
    doc = dict(_documents()[0][1])
    doc["metdata"] = doc.pop("metadata")
    with pytest.raises(AssertionError, match="metdata"):
        _check(doc, "V1Namespace", "x")


def test_workers_are_a_daemonset_on_edge_nodes_with_secret_limits_and_minimal_caps() -> None:
    ds = _objects()[("DaemonSet", "ianvs-edge-worker")]
    pod = ds.spec.template.spec
    assert pod.node_selector == {"node-role.kubernetes.io/edge": ""}
    assert any(t.key == "node-role.kubernetes.io/edge" and t.effect == "NoSchedule"
               for t in pod.tolerations)
    assert pod.automount_service_account_token is False
    (container,) = pod.containers
    assert container.resources.limits["memory"] and container.resources.limits["cpu"]
    caps = container.security_context.capabilities
    assert caps.drop == ["ALL"] and set(caps.add) == WORKER_CAPS
    assert container.security_context.privileged in (None, False)
    assert container.security_context.read_only_root_filesystem is True
    secrets = [v.secret.secret_name for v in pod.volumes if v.secret is not None]
    assert secrets == ["ianvs-edge-certs"]
    doc = (Path(__file__).resolve().parents[2] / "docs" / "edge.md").read_text()
    for cap in WORKER_CAPS:  # every capability is explained
        assert cap in doc and cap in (DEPLOY / "workers.yaml").read_text()


def test_scheduler_runs_on_a_cloud_node_behind_a_service() -> None:
    objects = _objects()
    dep = objects[("Deployment", "ianvs-edge-scheduler")]
    pod = dep.spec.template.spec
    term = pod.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    exprs = term.node_selector_terms[0].match_expressions
    assert exprs[0].key == "node-role.kubernetes.io/edge" and exprs[0].operator == "DoesNotExist"
    (container,) = pod.containers
    assert container.security_context.capabilities.drop == ["ALL"]
    assert container.security_context.allow_privilege_escalation is False
    assert container.resources.limits["memory"]
    svc = objects[("Service", "ianvs-edge-scheduler")]
    assert svc.spec.selector == dep.spec.template.metadata.labels
    assert [p.port for p in svc.spec.ports] == [8786]


def test_edge_pods_may_reach_only_the_scheduler_port() -> None:
    objects = _objects()
    pol = objects[("NetworkPolicy", "ianvs-edge-worker")]
    ds = objects[("DaemonSet", "ianvs-edge-worker")]
    sched = objects[("Deployment", "ianvs-edge-scheduler")]
    assert pol.spec.pod_selector.match_labels == ds.spec.template.metadata.labels
    assert set(pol.spec.policy_types) == {"Ingress", "Egress"}
    (egress,) = pol.spec.egress
    assert [(p.protocol, p.port) for p in egress.ports] == [("TCP", 8786)]
    (peer,) = egress.to
    assert peer.pod_selector.match_labels == sched.spec.template.metadata.labels
    assert peer.ip_block is None and peer.namespace_selector is None


def _expand(args: list[str]) -> list[str]:
    values = {"POD_IP": "10.244.1.7", "NODE_NAME": "edge-node-1",
              "IANVS_EDGE_SCHEDULER_SERVICE_HOST": "10.96.0.86"}
    return [re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], a) for a in args]


def test_container_commands_are_the_cli() -> None:
    """Each command is `ianvs edge ...` and parses with the CLI's own parser; the ports agree
    with the Service and the network policy; env variables it uses are defined."""
    from core.cmd.edge import edge_parser

    objects = _objects()
    for key, action in ((("Deployment", "ianvs-edge-scheduler"), "scheduler"),
                        (("DaemonSet", "ianvs-edge-worker"), "worker")):
        (container,) = objects[key].spec.template.spec.containers
        argv = _expand(container.command)
        assert argv[:3] == ["ianvs", "edge", action]
        args = edge_parser().parse_args(argv[2:])
        assert args.certs == Path("/etc/ianvs-edge/certs") and not args.insecure
        defined = {e.name for e in container.env or []}
        used = set(re.findall(r"\$\((\w+)\)", " ".join(container.command)))
        assert used - defined <= {"IANVS_EDGE_SCHEDULER_SERVICE_HOST"}  # injected by the Service
        mounted = {v.mount_path for v in container.volume_mounts}
        assert "/etc/ianvs-edge/certs" in mounted
        if action == "scheduler":
            assert args.port == 8786 and args.cert_name == "scheduler"
        else:
            assert args.scheduler.endswith(":8786") and args.cert_name == "edge-worker"
            ports = {p.container_port for p in container.ports}
            assert {args.worker_port, args.nanny_port} == ports
            pol = objects[("NetworkPolicy", "ianvs-edge-worker")]
            assert {p.port for p in pol.spec.ingress[0].ports} == ports


#: fields of the pod API that exist only from a Kubernetes version newer than the documented
#: minimum (docs/edge.md): older API servers reject them (kubectl validates strictly)
NEWER_THAN_MINIMUM = {"appArmorProfile": "1.30"}


def _keys(data: Any) -> set[str]:
    if isinstance(data, dict):
        return set(data) | {k for v in data.values() for k in _keys(v)}
    if isinstance(data, list):
        return {k for v in data for k in _keys(v)}
    return set()


def test_manifests_need_no_field_newer_than_the_documented_minimum() -> None:
    """AppArmor is unconfined through the pod annotation (every version) instead of the 1.30+
    securityContext field, and docs/edge.md states the minimum Kubernetes version and why."""
    for name, doc in _documents():
        used = _keys(doc) & set(NEWER_THAN_MINIMUM)
        assert not used, f"{name} uses {used}, which needs Kubernetes {NEWER_THAN_MINIMUM}"
    ds = _objects()[("DaemonSet", "ianvs-edge-worker")]
    annotations = ds.spec.template.metadata.annotations
    for container in ds.spec.template.spec.containers:
        assert container.security_context.seccomp_profile.type == "Unconfined"
        assert annotations[f"container.apparmor.security.beta.kubernetes.io/{container.name}"] \
            == "unconfined"
    doc = (Path(__file__).resolve().parents[2] / "docs" / "edge.md").read_text()
    assert "Kubernetes 1.25" in doc and "appArmorProfile" in doc
