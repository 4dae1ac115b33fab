"""A repo sample reads its own view and nothing else that holds the original function.

Hostile samples of the mini repository's ``add`` task (conftest), run through the real
``run_samples`` path next to samples of another task (``twin``, whose views hold the original
``add``) and honest ones. Each hostile sample tries to read (a) the other samples' views of the
same run, (b) the original checkout in the source cache, (c) the views directory's listing, and
(d, ``local``) the base interpreter's site-packages, where the package under test may be
installed (this project's interpreter has e.g. ``toolz``, a shipped repository). It returns the
right sum only when every attempt came back ``PermissionError``, ``FileNotFoundError`` or an
empty directory *and* its own view was readable, so ``passed`` means "denied" and anything
else fails the test -- as the same samples did before requests carried their own read paths
(the views directory was then readable by all). An environment that provides the package
under test, or a checkout beneath a directory every sample reads, is refused before anything
runs. ``local`` and ``docker`` (the project's engine; started, and the image built, on first
use like the other docker tests).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import textwrap
from pathlib import Path
from typing import Iterator

import pytest

from core.common.errors import IanvsError
from core.scenarios.repo.builder import BuildOptions, build
from core.scenarios.repo.env import RepoEnv, default_cache_dir
from core.scenarios.repo.execute import Sample, SampleResult, check_environment, run_samples, task_modules
from tests.scenarios.repo.conftest import MINI_LIB, MINI_TESTS

#: the base interpreter's site-packages (the repo venvs are made from this interpreter)
BASE_SITE = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})["purelib"]

_BODY = '''\
def add(a, b):
    import os
    view = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run = os.path.dirname(view)
    own = "def add" in open(__file__).read() and "test_core.py" in os.listdir(os.path.join(view, "tests"))
    seen = []
    for path in {targets}:
        try:
            got = os.listdir(path) if os.path.isdir(path) else open(path).read()
            seen.append("READ" if got else "EMPTY")
        except (PermissionError, FileNotFoundError) as exc:
            seen.append(type(exc).__name__)
    return a + b if own and "READ" not in seen and {require} else a - b
'''


def probes(root: str, local: bool) -> dict[str, str]:
    """Hostile ``add`` bodies by name: each passes only when its reads were all denied."""
    siblings = "[os.path.join(run, f'v{i}', 'minilib', 'core.py') for i in range(12) if f'v{i}' != os.path.basename(view)]"
    bodies = {
        # at least one sibling still existed (views go only when their result is in) and was denied
        "sibling_views": (siblings, "'PermissionError' in seen"),
        "views_listing": ("[run, os.path.dirname(run)]", "seen == ['PermissionError', 'PermissionError']"),
        "original_checkout": (f"[{root + '/minilib/core.py'!r}, {root!r}, {str(Path(root).parent)!r}]", "True"),
    }
    if local:
        bodies["base_site_packages"] = (f"[{BASE_SITE + '/pytest/__init__.py'!r}, {BASE_SITE!r}]", "True")
    return {name: _BODY.format(targets=t, require=r) for name, (t, r) in bodies.items()}


@pytest.fixture()
def cached_repo() -> Iterator[Path]:
    """The mini repository where ``repo_tests`` keeps sources (the cache's ``repo-src``), so
    the checkout a sample hunts for is the real kind of place."""
    base = default_cache_dir().parent / "repo-src"
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="test-", dir=base))
    root = work / "minirepo"
    (root / "minilib").mkdir(parents=True)
    (root / "minilib" / "__init__.py").write_text("")
    (root / "minilib" / "core.py").write_text(MINI_LIB)
    (root / "tests").mkdir()
    (root / "tests" / "test_core.py").write_text(textwrap.dedent(MINI_TESTS))
    try:
        yield root
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture()
def mini_tasks(cached_repo: Path, repo_env: RepoEnv, tmp_path: Path) -> dict[str, dict]:
    out = tmp_path / "tasks.jsonl"
    build(BuildOptions(repo=str(cached_repo), output=out, env=repo_env.root))
    return {t["qualname"]: t for t in map(json.loads, out.read_text().splitlines())}


def _samples(tasks: dict[str, dict], root: Path, local: bool) -> list[Sample]:
    add, twin = tasks["add"], tasks["twin"]
    hostile = [Sample(name, add, body) for name, body in probes(str(root), local).items()]
    others = [Sample(f"twin{i}", twin, "def twin(x):\n    return x * 2\n") for i in range(4)]
    honest = [Sample(f"honest{i}", add, "def add(a, b):\n    return a + b\n") for i in range(2)]
    return hostile + others + honest  # hostile first: their siblings' views still exist


def _check(results: dict[str, SampleResult], root: Path, local: bool) -> None:
    names = [*probes(str(root), local), "twin0", "twin1", "twin2", "twin3", "honest0", "honest1"]
    not_passed = {n: (results[n].outcome, results[n].detail, results[n].duration_s) for n in names if results[n].outcome != "passed"}
    assert not not_passed, not_passed
    assert {r.isolation for r in results.values()} <= {"kernel", "full"}


def test_a_sample_reads_its_own_view_only_local(mini_tasks: dict[str, dict], cached_repo: Path,
                                                repo_env: RepoEnv, views_dir: Path) -> None:
    assert Path(BASE_SITE, "pytest", "__init__.py").is_file()  # there to be found, outside the sandbox
    samples = _samples(mini_tasks, cached_repo, local=True)
    results = {r.sample_id: r for r in run_samples(samples, cached_repo, repo_env, views_dir, workers=2, timeout=60)}
    _check(results, cached_repo, local=True)
    assert list(views_dir.iterdir()) == []


def test_a_sample_reads_its_own_view_only_docker(mini_tasks: dict[str, dict], cached_repo: Path,
                                                 views_dir: Path) -> None:
    from core.scenarios.repo.image_env import ensure_image_env
    from tests.sandbox.docker_env import require_docker

    require_docker()
    env = ensure_image_env([])
    samples = _samples(mini_tasks, cached_repo, local=False)
    results = {r.sample_id: r for r in run_samples(samples, cached_repo, env, views_dir, workers=2, timeout=60)}
    _check(results, cached_repo, local=False)
    assert {r.executed_by for r in results.values()} == {"docker"}


def _bare_venv(where: Path) -> RepoEnv:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, capture_output=True)
    return RepoEnv(where, [])


def test_an_environment_providing_the_package_under_test_is_refused(mini_tasks: dict[str, dict],
                                                                    cached_repo: Path, repo_env: RepoEnv,
                                                                    views_dir: Path, tmp_path: Path) -> None:
    tasks = list(mini_tasks.values())
    assert task_modules(tasks, cached_repo) == ["minilib"]
    check_environment(tasks, cached_repo, repo_env)  # the real environment: nothing to refuse
    env = _bare_venv(tmp_path / "venv")
    site = Path(env.site_packages())
    sample = [Sample("s", mini_tasks["add"], "def add(a, b):\n    return a + b\n")]
    shutil.copytree(cached_repo / "minilib", site / "minilib")  # installed into site-packages
    with pytest.raises(IanvsError, match=r"provides minilib .*could read the original"):
        list(run_samples(sample, cached_repo, env, views_dir))
    shutil.rmtree(site / "minilib")
    (site / "__editable__.minilib.pth").write_text(str(cached_repo) + "\n")  # an editable install
    with pytest.raises(IanvsError, match=f"provides minilib \\({cached_repo}/minilib\\)"):
        list(run_samples(sample, cached_repo, env, views_dir))
    (site / "__editable__.minilib.pth").unlink()
    check_environment(tasks, cached_repo, env)
    assert list(views_dir.iterdir()) == []  # refused before any view was made


def test_a_checkout_every_sample_may_read_is_refused(mini_tasks: dict[str, dict], cached_repo: Path,
                                                     tmp_path: Path) -> None:
    env = _bare_venv(tmp_path / "venv")
    inside = Path(env.site_packages()) / "minirepo"  # beneath the site-packages samples read
    shutil.copytree(cached_repo, inside)
    with pytest.raises(IanvsError, match="lies beneath .*every sandboxed sample may read"):
        check_environment(list(mini_tasks.values()), inside, env)
