"""Shared fixtures: the repository environment (a real venv, created once and cached) and a tiny
real repository with a pytest suite, built in a temp dir."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

from core.scenarios.repo.env import RepoEnv, ensure_env
from core.scenarios.repo.execute import default_views_dir

SHIPPED = Path(__file__).resolve().parents[3] / "examples/smart_coding/smart_coding_learning_bench/repo"


def shipped_sets() -> list[tuple[str, Path, Path]]:
    """Every shipped set as (repository name, tasks file, source): each ``data/*-tasks.jsonl``
    and the source the example's testenv.yaml names for its repository."""
    import json

    import yaml

    env = yaml.safe_load((SHIPPED / "testenv" / "testenv.yaml").read_text())["testenv"]
    sources = next(m for m in env["metrics"] if m["name"] == "repo_tests")["sources"]
    out = []
    for tasks in sorted((SHIPPED / "data").glob("*-tasks.jsonl")):
        name = json.loads(tasks.read_text().split("\n", 1)[0])["repo"]["name"]
        out.append((name, tasks, (SHIPPED / "testenv" / sources[name]).resolve()))
    return out

MINI_LIB = '''\
"""A tiny library used by the builder tests."""
import math


def add(a, b):
    """Return a + b."""
    return a + b


def twin(x):
    return x * 2


def twin_too(x):
    return x * 2


def uncovered(x):
    """Nobody tests me."""
    return x - 1


def silent(x):
    """Its test does not check the value."""
    return math.floor(x)


class Box:
    def __init__(self, v):
        self.v = v

    def get(self):
        """The stored value."""
        return self.v
'''

MINI_TESTS = '''\
from minilib.core import add, twin, twin_too, silent, Box


def test_add():
    assert add(2, 3) == 5


def test_twin():
    assert twin(4) == 8 and twin_too(1) == 2


def test_silent():
    try:
        silent(1.5)
    except Exception:
        pass


def test_box():
    assert Box(3).get() == 3


def test_broken_upstream():
    assert add(1, 1) == 3
'''


@pytest.fixture(scope="session")
def repo_env() -> RepoEnv:
    return ensure_env([])


@pytest.fixture()
def views_dir() -> Iterator[Path]:
    """A views directory outside /tmp (the sandbox gives every process a private /tmp)."""
    base = default_views_dir()
    base.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="test-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture()
def mini_repo(tmp_path: Path) -> Path:
    root = tmp_path / "minirepo"
    (root / "minilib").mkdir(parents=True)
    (root / "minilib" / "__init__.py").write_text("")
    (root / "minilib" / "core.py").write_text(MINI_LIB)
    (root / "tests").mkdir()
    (root / "tests" / "test_core.py").write_text(textwrap.dedent(MINI_TESTS))
    return root


@pytest.fixture()
def pg_base() -> Iterator[Path]:
    """A private base directory for PostgreSQL run dirs, so a test's checks (processes, sockets,
    folders left behind) see only its own runs; removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="pgtest-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        subprocess.run(["rm", "-rf", str(path)], check=False)
