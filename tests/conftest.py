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


#: parametrised executor fixtures of which a test takes at most one: a test that takes two gets
#: the cross product of their parameters (3 x 3 backends), most of them the same run repeated
ONE_EXECUTOR_PER_TEST = frozenset({"backend", "bare_backend"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    crossed = sorted({item.nodeid.split("[")[0] for item in items
                      if len(ONE_EXECUTOR_PER_TEST & set(getattr(item, "fixturenames", ()))) > 1})
    if crossed:
        raise pytest.UsageError(
            f"{crossed[0]} takes more than one of {sorted(ONE_EXECUTOR_PER_TEST)}: the suite would run "
            "every pair of their backends; take one fixture per test (a helper shared by two tests)")


@pytest.fixture(autouse=True)
def _root_logger_restored():
    """Each test leaves the root logger as it found it: a test that runs the CLI in-process
    (``setup_logging``) would otherwise leave a handler and level for every later test of the
    same process, which then depends on which tests ran before it on that worker."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
