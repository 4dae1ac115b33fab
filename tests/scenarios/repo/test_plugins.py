"""Which pytest plugins the builder keeps (:mod:`core.scenarios.repo.plugins`), and that the choice
holds in every run: the builder's direct runs and the sandboxed ones.

The plugins here are real ``pytest11`` entry points: distributions made of a ``.dist-info`` folder
and a module inside the repository's ``testing/`` folder, which is an import root, so pytest
finds them in the builder's runs and in the sandbox alike (and the builder never makes tasks of
their code: ``testing/`` is not a candidate folder)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from core.common.errors import DatasetError, IanvsError
from core.scenarios.repo.builder import BuildError, BuildOptions, build
from core.scenarios.repo.env import RepoEnv
from core.scenarios.repo.kind import _check_nested
from core.scenarios.repo.plugins import choose_plugins, decide, pytest_plugin_args
from core.scenarios.repo.testrun import run_pytest

#: the fake plugins: entry-point name -> module source
PLUGINS = {
    # a fixture the tests use
    "usedplug": '''
        import pytest

        @pytest.fixture
        def used_fixture():
            return 2
        ''',
    # a marker the tests carry
    "markplug": '''
        def pytest_configure(config):
            config.addinivalue_line("markers", "slowish: a marker of markplug")
        ''',
    # an ini option the repository's pytest.ini sets
    "iniplug": '''
        def pytest_addoption(parser):
            parser.addini("iniplug_level", "a level")
        ''',
    # runs coroutine test functions
    "asyncplug": '''
        import asyncio, inspect
        import pytest

        @pytest.hookimpl(tryfirst=True)
        def pytest_pyfunc_call(pyfuncitem):
            if inspect.iscoroutinefunction(pyfuncitem.obj):
                args = {n: pyfuncitem.funcargs[n] for n in pyfuncitem._fixtureinfo.argnames}
                asyncio.run(pyfuncitem.obj(**args))
                return True
        ''',
    # used by no test, and does as it loads what pytest-benchmark does: start a process
    "idleplug": '''
        import subprocess
        import pytest

        @pytest.fixture
        def idle_fixture():
            return 1

        def pytest_configure(config):
            subprocess.run(["true"], check=False)
        ''',
}

TESTS = '''
    import sys
    import pytest
    from minipkg.core import double, triple

    def test_double(used_fixture):
        assert double(used_fixture) == 4

    @pytest.mark.slowish
    def test_triple():
        assert triple(1) == 3

    async def test_async():
        assert double(3) == 6

    def test_idle_plugin_is_off():
        assert "idleplug_mod" not in sys.modules
    '''


def _repo(root: Path) -> Path:
    files = {
        "minipkg/__init__.py": "",
        "minipkg/core.py": '''
            def double(x):
                y = x * 2
                return y


            def triple(x):
                y = x * 3
                return y
            ''',
        "tests/test_core.py": TESTS,
        "pytest.ini": "[pytest]\niniplug_level = 3\n",
    }
    for name, source in PLUGINS.items():
        files[f"testing/{name}_mod.py"] = source
        files[f"testing/{name}-1.0.dist-info/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
        files[f"testing/{name}-1.0.dist-info/entry_points.txt"] = f"[pytest11]\n{name} = {name}_mod\n"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def _probe(**needs: dict[str, int]) -> dict:
    plugins = {"pytest_cov": {"module": "pytest_cov.plugin", "dist": "pytest-cov", "version": "6.0.0"},
               "benchmark": {"module": "pytest_benchmark.plugin", "dist": "pytest-benchmark", "version": "5.3.1"},
               "pytest_mock": {"module": "pytest_mock", "dist": "pytest-mock", "version": "3.14.0"},
               "mine": {"module": "mypkg.pytest_plugin", "dist": "My_Pkg", "version": "1.0"},
               "asyncio": {"module": "pytest_asyncio.plugin", "dist": "pytest-asyncio", "version": "0.24.0"}}
    return {"plugins": plugins, "needs": needs}


def test_decide_disables_plugins_no_test_needs() -> None:
    choice = decide(_probe(pytest_mock={"fixture mocker": 12}, asyncio={"ini option asyncio_mode": 1}),
                    project="my-pkg")
    assert choice.disabled == {"benchmark": "pytest-benchmark 5.3.1"}
    assert choice.enabled == {"pytest_cov": ["harness tool"], "pytest_mock": ["fixture mocker (12 tests)"],
                              "mine": ["package under test"], "asyncio": ["ini option asyncio_mode"]}
    assert choice.args() == ["-p", "no:benchmark"]
    assert choice.record() == {"disabled": ["benchmark"], "enabled": ["asyncio", "mine", "pytest_cov", "pytest_mock"]}


def test_decide_keeps_what_the_user_names_and_a_plugin_with_a_need() -> None:
    choice = decide(_probe(benchmark={"fixture benchmark": 1}), keep=frozenset({"pytest_mock"}))
    assert set(choice.enabled) == {"pytest_cov", "benchmark", "pytest_mock"}
    assert choice.enabled["benchmark"] == ["fixture benchmark (1 test)"]
    assert choice.enabled["pytest_mock"] == ["--pytest-plugin"]
    assert sorted(choice.disabled) == ["asyncio", "mine"]  # no project given: its plugin is like any other


def test_plugin_args_of_old_and_new_records() -> None:
    assert pytest_plugin_args({"task_id": "t", "env": {"requirements": []}}) == []  # built before the choice
    assert pytest_plugin_args({"task_id": "t"}) == []
    task = {"task_id": "t", "env": {"pytest_plugins": {"disabled": ["benchmark", "mypy"], "enabled": ["pytest_cov"]}}}
    assert pytest_plugin_args(task) == ["-p", "no:benchmark", "-p", "no:mypy"]
    for bad in ({"disabled": ["--collect-only"]}, {"disabled": "benchmark"}, ["benchmark"], {"disabled": [""]},
                {"enabled": ["a b"]}):
        with pytest.raises(IanvsError, match="env.pytest_plugins"):
            pytest_plugin_args({"task_id": "t", "env": {"pytest_plugins": bad}})


def test_the_schema_refuses_a_malformed_choice() -> None:
    record = {"repo": {"name": "r", "content_hash": "h"}, "position": {"def_line": 1},
              "tests": {"fail_to_pass": ["t.py::t"]}, "env": {"requirements": []}}
    _check_nested(record, "tasks.jsonl", 1)
    _check_nested({**record, "env": {"requirements": [], "pytest_plugins": {"disabled": ["benchmark"]}}}, None, 1)
    with pytest.raises(DatasetError, match="env.pytest_plugins"):
        _check_nested({**record, "env": {"requirements": [], "pytest_plugins": {"disabled": ["-x"]}}}, None, 1)


def test_the_collection_run_attributes_fixtures_markers_ini_options_and_async_tests(
        tmp_path: Path, repo_env: RepoEnv) -> None:
    root = _repo(tmp_path / "plugged")
    choice = choose_plugins(repo_env.python, root, [], 120, import_roots=["testing"], scratch=tmp_path)
    assert choice is not None
    assert choice.enabled == {"usedplug": ["fixture used_fixture (1 test)"], "markplug": ["marker slowish (1 test)"],
                              "iniplug": ["ini option iniplug_level"], "asyncplug": ["async tests (1 test)"],
                              "pytest_cov": ["harness tool"]}
    assert choice.disabled == {"idleplug": "idleplug 1.0"}
    # the choice holds in a run: with it the idle plugin is not loaded and every test passes
    # (without it, that plugin is there); the others are what the tests need
    run = run_pytest(repo_env.python, root, [], 120, choice.args(), import_roots=["testing"], scratch=tmp_path)
    assert set(run.outcomes.values()) == {"passed"} and len(run.outcomes) == 4, run.output
    run = run_pytest(repo_env.python, root, [], 120, import_roots=["testing"], scratch=tmp_path)
    assert run.outcomes["tests/test_core.py::test_idle_plugin_is_off"] == "failed"
    # a deselected test's needs do not count
    choice = choose_plugins(repo_env.python, root, [], 120, ["--deselect=tests/test_core.py::test_double"],
                            import_roots=["testing"], scratch=tmp_path)
    assert choice is not None and "usedplug" in choice.disabled


@pytest.mark.slow
def test_the_build_disables_an_unused_plugin_that_starts_a_process(tmp_path: Path, repo_env: RepoEnv) -> None:
    """The idle plugin starts a process as it loads, which kills every sandboxed run: the build
    disables it (baseline, blanked runs, sandbox check and, through the records, the job), and
    keeps the tasks; the plugins the tests need stay on."""
    out = tmp_path / "t.jsonl"
    report = build(BuildOptions(repo=str(_repo(tmp_path / "plugged")), output=out, env=repo_env.root,
                                import_roots=["testing"]))
    tasks = {t["qualname"]: t for t in map(json.loads, out.read_text().splitlines())}
    assert set(tasks) == {"double", "triple"} and report.dropped_sandbox == 0
    assert report.plugins_disabled == ["idleplug"]
    assert tasks["double"]["env"]["pytest_plugins"] == {
        "disabled": ["idleplug"], "enabled": ["asyncplug", "iniplug", "markplug", "pytest_cov", "usedplug"]}
    assert tasks["double"]["tests"]["fail_to_pass"] == ["tests/test_core.py::test_async",
                                                        "tests/test_core.py::test_double"]


@pytest.mark.slow
def test_the_build_error_names_the_process_the_sandbox_refused(tmp_path: Path, repo_env: RepoEnv) -> None:
    """Kept on purpose (``--pytest-plugin``), the idle plugin kills every sandboxed run: no task is
    kept and the error quotes what the sandbox refused and which code asked for it."""
    with pytest.raises(BuildError) as caught:
        build(BuildOptions(repo=str(_repo(tmp_path / "plugged")), output=tmp_path / "t.jsonl", env=repo_env.root,
                           import_roots=["testing"], keep_plugins=["idleplug"]))
    text = str(caught.value)
    assert "2 whose reference fails in the sandbox" in text, text
    assert "killed by the kernel's seccomp filter" in text, text
    assert "subprocess.Popen ['true']" in text and "testing/idleplug_mod.py:9 (pytest_configure)" in text, text
