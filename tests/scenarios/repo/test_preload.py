"""Which modules a repository's fork server preloads (static scan, nothing imported), and that a
sample still runs its own view's copy of the repository's code when dependencies are preloaded."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from core.scenarios.repo.builder import BuildOptions, build

from core.scenarios.repo.env import RepoEnv
from core.scenarios.repo.execute import Sample, run_samples
from core.scenarios.repo.preload import dependency_modules


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_dependencies_are_installed_third_party_modules_only(tmp_path: Path) -> None:
    root, site = tmp_path / "repo", tmp_path / "site"
    _write(root / "mylib/__init__.py", """
        import os
        import depa
        from depb.sub import thing
        from depb import other, sub2
        from . import local
        try:
            import optional_missing
        except ImportError:
            pass
        if True:
            import depc as c
        def later():
            import depd  # inside a function: not at import time
        import mylib.core
        import coverage
    """)
    _write(root / "tests/test_x.py", "import pytest\nfrom mylib import core\nimport broken(\n")
    _write(root / "tests/test_y.py", "import depa.extra\n")
    for rel in ("depa/__init__.py", "depa/extra.py", "depb/__init__.py", "depb/sub.py", "depb/sub2.py",
                "depc.py", "depd.py", "coverage/__init__.py", "mylib/__init__.py", "mylib/core.py"):
        _write(site / rel, "")
    (site / "depb" / "other.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")
    got = dependency_modules(root, site)
    assert got == ["pytest", "depa", "depa.extra", "depb", "depb.other", "depb.sub", "depb.sub2", "depc"]


def test_a_sample_imports_its_own_view_with_preloaded_dependencies(mini_repo: Path, repo_env: RepoEnv, tmp_path: Path,
                                                                   views_dir: Path) -> None:
    """The same wrong answer fails with and without preloading, and the right one passes: the
    preloaded server never holds the repository's own modules."""
    out = tmp_path / "tasks.jsonl"
    build(BuildOptions(repo=str(mini_repo), output=out, env=repo_env.root))
    task = next(t for t in map(json.loads, out.read_text().splitlines()) if t["qualname"] == "add")
    for preload in (True, False):
        got = {r.sample_id: r.outcome for r in run_samples(
            [Sample("right", task, "def add(a, b):\n    return b + a\n"),
             Sample("wrong", task, "def add(a, b):\n    return a - b\n")],
            mini_repo, repo_env, views_dir, preload=preload)}
        assert got == {"right": "passed", "wrong": "failed"}, (preload, got)
