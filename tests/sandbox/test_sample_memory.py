"""Memory is bounded per sample, whatever holds it.

``RLIMIT_AS`` counts only the address space; memfd pages written with ``write()``, files on the
slot's tmpfs, pipe buffers and socket buffers live outside it. Each sample tries to hold far
more than its ``memory_mb`` in one of these and reports success; it is graded
``memory_exceeded`` (the slot's memory group OOM-kills it; anonymous memory meets ``RLIMIT_AS``
first), never ``passed``.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from core.testenvmanager.sandbox.types import IsolationLevel, Outcome

from .conftest import assert_alive, walls_check

#: the memory attacks of ``benchmarks/walls_check.py`` (one home for the script and the tests):
#: each reports the megabytes it held, and its test asserts it held them
HOGS = {check.name: check for check in walls_check().CHECKS
        if check.expected == frozenset({Outcome.MEMORY_EXCEEDED})}


@pytest.mark.parametrize("tier", ["boundary", "in_process"])
@pytest.mark.parametrize("name", sorted(HOGS))
def test_memory_outside_the_address_space_counts(bare_backend, name: str, tier: str) -> None:
    if bare_backend.isolation < IsolationLevel.FULL:
        pytest.skip("per-sample memory groups are a wall of 'full' (root and the cgroup walls)")
    check = HOGS[name]
    assert check.need > check.memory_mb  # the attack's success would be beyond its limit
    (res,) = list(bare_backend.run([replace(check.request(tier), timeout=30)]))
    assert res.outcome is Outcome.MEMORY_EXCEEDED, (name, res.outcome, res.detail)
    assert_alive(bare_backend)
