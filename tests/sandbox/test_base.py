"""Backend lookup and the abstract interface."""

from __future__ import annotations

from typing import Iterable, Iterator

import pytest

from core.common.class_factory import ClassFactory, ClassType

from core.testenvmanager.sandbox import (
    BUILTIN_BACKENDS, ExecRequest, ExecResult, Executor, IsolationLevel, Outcome, UnknownBackendError,
    get_executor, known_backends, register_backend,
)


class EchoExecutor(Executor):
    """A trivial in-memory backend used to check that the interface is implementable."""

    name = "echo"

    def __init__(self, reverse: bool = False) -> None:
        self.reverse, self.closed = reverse, False

    @property
    def isolation(self) -> IsolationLevel:
        return IsolationLevel.NONE

    def run(self, requests: Iterable[ExecRequest]) -> Iterator[ExecResult]:
        reqs = list(requests)
        for req in reversed(reqs) if self.reverse else reqs:
            yield ExecResult(id=req.id, outcome=Outcome.PASSED, exit_status=0, duration_s=0.0,
                             backend=self.name)

    def close(self) -> None:
        self.closed = True


def test_unknown_backend_names_known_ones() -> None:
    with pytest.raises(UnknownBackendError) as info:
        get_executor("kubeedge-nope")
    assert "kubeedge-nope" in str(info.value) and "local" in str(info.value)
    assert isinstance(info.value, LookupError)


def test_register_and_lookup_custom_backend() -> None:
    register_backend("echo", EchoExecutor)
    try:
        assert "echo" in known_backends()
        with get_executor("echo", reverse=True) as ex:
            reqs = [ExecRequest(id=str(i), program="pass", entry_point="f") for i in range(3)]
            assert [r.id for r in ex.run(reqs)] == ["2", "1", "0"]
            assert [r.id for r in ex.run_all(reqs)] == ["0", "1", "2"]  # input order
        assert ex.closed
    finally:
        ClassFactory.unregister(ClassType.SANDBOX, "echo")
    assert "echo" not in known_backends()


def test_register_rejects_empty_name() -> None:
    with pytest.raises(ValueError):
        register_backend("", EchoExecutor)


def test_local_is_registered_lazily_by_import_path() -> None:
    assert BUILTIN_BACKENDS["local"] == "core.testenvmanager.sandbox.local:LocalExecutor"
    assert "local" in known_backends()
    assert ClassFactory.is_exists(ClassType.SANDBOX, "local")


def test_unknown_backend_suggests_near_match() -> None:
    with pytest.raises(UnknownBackendError, match="did you mean 'local'"):
        get_executor("locl")


def test_backend_registered_through_class_factory_decorator() -> None:
    """Plugins can add a backend with the usual decorator; get_executor then builds it."""

    @ClassFactory.register(ClassType.SANDBOX, alias="echo-deco")
    class DecoEcho(EchoExecutor):
        pass

    try:
        with get_executor("echo-deco") as ex:
            assert isinstance(ex, DecoEcho)
    finally:
        ClassFactory.unregister(ClassType.SANDBOX, "echo-deco")
