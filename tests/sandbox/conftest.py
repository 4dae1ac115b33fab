"""Shared fixtures for the sandbox tests: one warm executor per session (strongest isolation)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from core.testenvmanager.sandbox import ExecRequest, get_executor  # noqa: E402

#: worker uids of the session executor (distinct from the default 61000 so that survivor checks
#: are not confused by other executors running on the same machine)
TEST_UID_BASE = 62000
#: a fake secret placed in the caller's environment before the executor starts
SECRET = "sk-test-DO-NOT-LEAK-0123456789"


@pytest.fixture(scope="session")
def executor():
    """Session executor, started while fake secrets sit in the caller's environment (they are
    removed again right after start-up so other test modules never see them)."""
    saved = {key: os.environ.get(key) for key in ("OPENAI_API_KEY", "GITHUB_TOKEN")}
    os.environ.update({key: SECRET for key in saved})
    # SANDBOX_TEST_OPTIONS="drop_uid=0,netns=0" runs the suite at a lower isolation level
    options: dict = {}
    for item in filter(None, os.environ.get("SANDBOX_TEST_OPTIONS", "").split(",")):
        key, _, value = item.partition("=")
        options[key.strip()] = value.strip() not in ("0", "false", "no")
    try:
        ex = get_executor("local", workers=2, uid_base=TEST_UID_BASE, **options)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    yield ex
    ex.close()


def run_one(executor, **fields) -> "object":
    """Run a single request and return its result."""
    fields.setdefault("id", "r")
    fields.setdefault("timeout", 5.0)
    (result,) = list(executor.run([ExecRequest(**fields)]))
    return result


GOOD_PROGRAM = "def add(a, b):\n    return a + b\n"
CHECK_ADD = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"


def assert_alive(executor) -> None:
    """The harness still grades a correct program as passed."""
    res = run_one(executor, id="alive", program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add")
    assert res.outcome.value == "passed", res
