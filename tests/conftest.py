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


#: tests that are a pytest-xdist work unit of their own rather than part of their file's: the
#: once-per-content gold controls (:mod:`tests.verified`), minutes each on a machine that has not
#: recorded them. Under ``--dist loadfile`` they would run one after another on one worker.
#: A prefix of node ids; also the first tests of the collection (see :class:`FileUnits`).
OWN_UNITS = (
    "tests/scenarios/repo/test_gold_controls.py::test_gold_controls",  # [set] and _on_docker[set]
    "tests/trajectories/test_implement_gold.py::test_real_change_scores_1_and_parent_unchanged_0",
    "tests/trajectories/test_revise.py::test_shipped_test_graded_tasks_gold_in_the_sandbox",
)


def _own_unit(nodeid: str) -> bool:
    return nodeid.startswith(OWN_UNITS)


def work_unit(nodeid: str) -> str:
    """The pytest-xdist work unit of a test: its node id for :data:`OWN_UNITS`, else its file."""
    return nodeid if _own_unit(nodeid) else nodeid.split("::", 1)[0]


def pytest_xdist_make_scheduler(config: pytest.Config, log):  # noqa: ANN201 (xdist's types)
    """``--dist loadfile`` (pytest.ini) with :data:`OWN_UNITS` split off: see :class:`FileUnits`."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class FileUnits(LoadFileScheduling):
        """Each test file is one work unit (its module fixtures -- clusters, engines, servers --
        start once), except the tests of :data:`OWN_UNITS`, one unit each. Units go out in
        collection order, which :func:`pytest_collection_modifyitems` makes longest-first (the
        xdist default, most tests first, put the gold controls, a few long tests, last: one
        worker ran them alone at the end)."""

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False
    return FileUnits(config, log)


def _long_first(items: list[pytest.Item]) -> None:
    """Order the collection for the scheduler: :data:`OWN_UNITS` first, then the files that hold
    a ``slow`` test, then the rest (stable: a file's tests keep their order)."""
    slow_files = {item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: (0 if _own_unit(item.nodeid)
                                 else 1 if item.nodeid.split("::", 1)[0] in slow_files else 2))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _refuse_crossed_executors(items)
    _long_first(items)


def _refuse_crossed_executors(items: list[pytest.Item]) -> None:
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
