"""The embedded model's default thread count follows the cores that are free when it loads."""
from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from core.generation.embedded import _available_cores, free_cores


def _spin() -> None:  # pragma: no cover - runs in a child process
    while True:
        pass


def test_a_busy_core_is_not_counted_as_free() -> None:
    cores = _available_cores()
    if cores < 2:
        pytest.skip("needs 2 cores to leave one free")
    hogs = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(cores)]
    for hog in hogs:
        hog.start()
    try:
        time.sleep(0.2)
        assert free_cores() == 1  # every core busy: still one thread, never zero
        for hog in hogs[1:]:
            hog.kill()
            hog.join(5)
        time.sleep(0.2)
        assert free_cores() <= cores - 1  # one core is certainly taken
    finally:
        for hog in hogs:
            hog.kill()
            hog.join(5)
    assert 1 <= free_cores() <= cores <= (os.cpu_count() or cores)
