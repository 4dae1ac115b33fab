"""Per-request read paths (``ExecRequest.read_paths`` under an executor's ``request_read_roots``).

Real fork server (``local``): a directory under a request read root is readable only by the
request that names it -- another request's directory, the root's listing and a request naming
nothing get ``PermissionError`` from Landlock. A path outside every root is refused twice: by
the caller when the request is sent (``ValueError``) and by the fork server itself
(``infra_error``, also for a symlink under a root that leads outside it). Roots that would
hide nothing are refused at construction (``local`` and ``docker`` option checks), and the
``dask`` node path hands ``read_paths`` to the node's executor unchanged.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Iterator

import pytest

from core.testenvmanager.sandbox import ExecRequest, IsolationLevel, Outcome, get_executor
from core.testenvmanager.sandbox.base import check_read_paths, under_any
from core.testenvmanager.sandbox.local import LocalExecutor


@pytest.fixture(scope="module")
def roots() -> Iterator[Path]:
    """``<base>/root/{a,b}`` each holding a file, and ``<base>/outside``; outside ``/tmp``
    (private in the sandbox) and outside every directory the sandbox reads by default."""
    base = Path.home() / ".cache" / "ianvs-sandbox-tests"
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="read-paths-", dir=base))
    path.chmod(0o755)
    for sub in ("root/a", "root/b", "outside"):
        (path / sub).mkdir(parents=True)
        (path / sub / "data.txt").write_text(f"content of {sub}\n")
    (path / "root").chmod(0o755)
    (path / "root" / "escape").symlink_to(path / "outside")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def executor(roots: Path) -> Iterator[LocalExecutor]:
    with LocalExecutor(workers=2, min_isolation="kernel", request_read_roots=[str(roots / "root")]) as ex:
        yield ex


def _reader(rid: str, target: str, read_paths: tuple[str, ...] = ()) -> ExecRequest:
    """A request that prints what reading (file) or listing (directory) ``target`` gave."""
    program = ("import os\ntry:\n"
               f"    got = sorted(os.listdir({target!r})) if os.path.isdir({target!r}) else open({target!r}).read()\n"
               "    print('READ', got)\nexcept OSError as exc:\n    print('DENIED', type(exc).__name__)\n")
    return ExecRequest(id=rid, mode="script", program=program, read_paths=read_paths, timeout=20)


def test_a_request_reads_only_the_paths_it_names(executor: LocalExecutor, roots: Path) -> None:
    a, b, root = str(roots / "root" / "a"), str(roots / "root" / "b"), str(roots / "root")
    reqs = [_reader("own", f"{a}/data.txt", (a,)), _reader("own_dir", a, (a,)),
            _reader("sibling", f"{b}/data.txt", (a,)), _reader("listing", root, (a,)),
            _reader("nothing_named", f"{a}/data.txt"), _reader("b_reads_b", f"{b}/data.txt", (b,))]
    got = {r.id: r for r in executor.run(reqs)}
    assert all(r.outcome is Outcome.PASSED for r in got.values()), {k: r.detail for k, r in got.items()}
    assert "READ content of root/a" in got["own"].stdout
    assert "READ ['data.txt']" in got["own_dir"].stdout
    assert "READ content of root/b" in got["b_reads_b"].stdout
    for rid in ("sibling", "listing", "nothing_named"):
        assert got[rid].stdout.strip() == "DENIED PermissionError", (rid, got[rid].stdout)
    assert executor.isolation >= IsolationLevel.KERNEL


def test_the_caller_refuses_a_path_outside_the_roots(executor: LocalExecutor, roots: Path) -> None:
    outside = str(roots / "outside")
    for path in (outside, f"{roots}/root/../outside", str(roots)):
        with pytest.raises(ValueError, match="not under a request read root"):
            list(executor.run([_reader("x", f"{outside}/data.txt", (path,))]))
    assert executor.alive()


def test_the_fork_server_refuses_a_path_outside_the_roots(executor: LocalExecutor, roots: Path) -> None:
    """Past the caller's (lexical) check: a symlink under the root that leads outside it, and a
    path the caller was tricked into letting through. Both are ``infra_error`` before anything
    of the sample runs, and the directory stays unread."""
    outside = str(roots / "outside")
    via_link = executor.run_all([_reader("link", f"{roots}/root/escape/data.txt", (f"{roots}/root/escape",))])[0]
    assert via_link.outcome is Outcome.INFRA_ERROR, (via_link.outcome, via_link.detail)
    assert "not under the executor's request read roots" in via_link.detail and "READ" not in via_link.stdout
    saved = executor.request_read_roots
    executor.request_read_roots = [*saved, outside]  # the caller-side check no longer catches it
    try:
        forced = executor.run_all([_reader("forced", f"{outside}/data.txt", (outside,))])[0]
    finally:
        executor.request_read_roots = saved
    assert forced.outcome is Outcome.INFRA_ERROR and "request read roots" in forced.detail, forced.detail
    assert "READ" not in forced.stdout
    assert executor.alive()


def test_without_roots_every_read_path_is_refused(roots: Path) -> None:
    with get_executor("local", workers=1) as ex:
        with pytest.raises(ValueError, match="has no request_read_roots"):
            list(ex.run([_reader("x", f"{roots}/root/a/data.txt", (f"{roots}/root/a",))]))


@pytest.mark.parametrize("option", [{"request_read_roots": ["/usr/share"]},
                                    {"request_read_roots": ["{root}"], "read_paths": ["{root}/a"]},
                                    {"request_read_roots": ["{root}/a"], "read_paths": ["{root}"]}])
def test_roots_that_would_hide_nothing_are_refused(roots: Path, option: dict) -> None:
    filled = {k: [v.format(root=roots / "root") for v in vs] for k, vs in option.items()}
    with pytest.raises(ValueError, match="request_read_roots"):
        LocalExecutor(workers=1, **filled).close()


def test_docker_request_roots_are_checked_against_the_mounts(roots: Path) -> None:
    """Checked before any container starts (no engine needed)."""
    from core.testenvmanager.sandbox.container import _check_request_roots

    mounts = {str(roots / "root"): "/opt/ianvs/views", str(roots / "outside"): "/opt/data"}
    assert _check_request_roots(mounts, ["/opt/ianvs/views/"]) == ["/opt/ianvs/views"]
    nested = {str(roots / "root"): "/opt/ianvs/views", str(roots / "outside"): "/opt/ianvs/views/x"}
    assert _check_request_roots(nested, ["/opt/ianvs/views"]) == ["/opt/ianvs/views"]  # both hidden
    with pytest.raises(ValueError, match="not at or beneath a read_mounts path"):
        _check_request_roots(mounts, ["/opt/elsewhere"])
    for root in ("/opt/ianvs/views/sub", "/opt/ianvs/views/x/y"):  # under a mount every sample reads
        with pytest.raises(ValueError, match="would hide nothing"):
            _check_request_roots(mounts if root.endswith("sub") else nested, [root])


def test_check_read_paths_is_lexical_and_names_the_request() -> None:
    req = ExecRequest(id="r1", mode="script", program="pass", read_paths=("/v/run/v1", "/v/run//v2/"))
    check_read_paths(req, ["/v/run"], "local")
    with pytest.raises(ValueError, match=r"request 'r1': read path '/v/run/\.\./x'"):
        check_read_paths(dataclasses.replace(req, read_paths=("/v/run/../x",)), ["/v/run"], "local")
    assert under_any("/v/runner", ["/v/run"]) is None and under_any("/v/run", ["/v/run/"]) == "/v/run/"


def test_read_paths_reach_the_executor_of_a_dask_node(roots: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``dask`` path: requests cross to the node pickled (Dask's own serializer) and the
    node's executor (its node options) enforces them; a node without a root for the path
    refuses the batch, which the client reports as ``infra_error`` for its requests."""
    distributed = pytest.importorskip("distributed")
    from distributed.protocol import pickle as dask_pickle

    from core.edge import node

    a = str(roots / "root" / "a")
    sent = dask_pickle.loads(dask_pickle.dumps([_reader("edge", f"{a}/data.txt", (a,))]))
    assert sent[0].read_paths == (a,)
    plugins = {"with_roots": node.NodeSandbox({"workers": 1, "request_read_roots": [str(roots / "root")]}),
               "without": node.NodeSandbox({"workers": 1})}
    try:
        for name, plugin in plugins.items():
            worker = SimpleNamespace(name=name, plugins={node.PLUGIN_NAME: plugin})
            monkeypatch.setattr(distributed, "get_worker", lambda worker=worker: worker)
            if name == "with_roots":
                res = node.grade_batch("local", {}, sent, {})[0]
                assert res.outcome is Outcome.PASSED and "READ content of root/a" in res.stdout, res.detail
                assert res.node == "with_roots" and res.backend == "dask:local"
            else:
                with pytest.raises(ValueError, match="has no request_read_roots"):
                    node.grade_batch("local", {}, sent, {})
    finally:
        for plugin in plugins.values():
            plugin.teardown(None)
