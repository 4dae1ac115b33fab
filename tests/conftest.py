"""Suite-wide options.

* ``--recheck-verified``: run the once-per-content checks (:mod:`tests.verified`) even when an
  earlier pass with the same key is recorded.

Per-test time limits come from pytest-timeout (``timeout`` in pytest.ini; a test that needs longer
says so with ``@pytest.mark.timeout(seconds)``). When a limit fires, the plugin prints the stack of
every thread and fails that test; the run goes on with the next one.
"""
from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--recheck-verified", action="store_true", default=False,
                     help="run once-per-content checks (gold controls) even when recorded as passed")
