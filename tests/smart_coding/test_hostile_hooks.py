"""Hostile datasets: a record's ``snippet_merge_fn``/``output_parse_fn`` can only name the
project's hooks or a function the job trusts (testenv ``code_hooks:``). A record naming
``os:system``, ``builtins:eval``, ``subprocess:run``, ``subprocess:check_output`` or a module
whose import has side effects is refused with one clear error, and nothing is imported or run:
the marker the import would create is absent, the shell command the sample prints is never
executed, the module is not in ``sys.modules``. Through the library, the real CLI
(``ianvs -f`` and ``ianvs validate``), and a trusted hook end to end.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from core.common.class_factory import ClassFactory
from core.common.errors import ConfigError
from core.scenarios.codegen.execution import check_records, iter_results
from core.scenarios.codegen.records import CODE_HOOK, code_task
from core.testenvmanager.sandbox.pool import close_executors
from tests.smart_coding.conftest import write_jsonl

REPO = Path(__file__).resolve().parents[2]
EVIL_MODULE = "ianvs_hostile_hook_mod"
HOSTILE = ["os:system", "builtins:eval", "subprocess:run", "subprocess:check_output",
           f"{EVIL_MODULE}:parse"]
FIELDS = ["output_parse_fn", "snippet_merge_fn"]


@pytest.fixture
def plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on ``sys.path`` holding a module that, on import, creates ``imported.marker``
    beside itself (so anything that imports it would leave the marker)."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / f"{EVIL_MODULE}.py").write_text(
        "from pathlib import Path\n"
        "Path(__file__).with_name('imported.marker').write_text('imported')\n\n\n"
        "def parse(output):\n    return True\n")
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop(EVIL_MODULE, None)
    yield folder
    sys.modules.pop(EVIL_MODULE, None)


def _record(task_id: str, field: str, hook: str, shell_marker: Path) -> dict:
    """A codegen record whose sample prints a shell command creating ``shell_marker``: what
    ``os:system`` (or ``eval``...) would run if it were called over the output."""
    return {"task_id": task_id, "prompt": "def f():\n",
            "canonical_solution": f"    print('touch {shell_marker}')\n",
            "entry_point": "f", "test_code": "f()\n", field: hook}


def _assert_nothing_ran(plugins: Path, shell_marker: Path) -> None:
    assert not (plugins / "imported.marker").exists(), "the named module was imported"
    assert EVIL_MODULE not in sys.modules
    assert not shell_marker.exists(), "the sample's shell command was executed"


def _assert_clear_refusal(text: str, task_id: str, field: str, hook: str) -> None:
    assert task_id in text and field in text and repr(hook) in text, text
    assert "is not an allowed hook" in text, text
    assert "append_test_code" in text and "last_line_is_ok" in text, text  # what is allowed
    assert "'code_hooks:' in testenv.yaml" in text, text  # how to trust a function


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("hook", HOSTILE)
def test_hostile_hook_is_refused_before_any_import(hook: str, field: str, plugins: Path,
                                                   tmp_path: Path) -> None:
    shell_marker = tmp_path / "shell.marker"
    record = _record("Evil/1", field, hook, shell_marker)
    with pytest.raises(ConfigError) as err:
        code_task(record)
    _assert_clear_refusal(str(err.value), "Evil/1", field, hook)
    with pytest.raises(ConfigError) as err:  # the job-level check names file and line too
        check_records([(7, record)], tmp_path / "data.jsonl", {})
    assert f"{tmp_path / 'data.jsonl'}:7: record 'Evil/1'" in str(err.value)
    assert not ClassFactory.is_exists(CODE_HOOK, hook)
    _assert_nothing_ran(plugins, shell_marker)


def test_hostile_hook_is_refused_by_the_metric_before_anything_runs(plugins: Path,
                                                                    tmp_path: Path) -> None:
    """The metric path (a job whose test set was not pre-checked) refuses too: the batch
    fails before any sample or hook runs."""
    shell_marker = tmp_path / "shell.marker"
    records = [_record(f"Evil/{i}", "output_parse_fn", hook, shell_marker)
               for i, hook in enumerate(HOSTILE)]
    preds = [{"samples": [{"code": r["prompt"] + r["canonical_solution"]}]} for r in records]
    try:
        with pytest.raises(ConfigError, match="record 'Evil/0': output_parse_fn 'os:system' "
                                              "is not an allowed hook"):
            list(iter_results(records, preds, {"backend": "local", "min_isolation": "none"},
                              tmp_path, show_progress=False))
    finally:
        close_executors()
    _assert_nothing_ran(plugins, shell_marker)
    assert not (tmp_path / "executions.jsonl").read_text()


def test_the_same_module_trusted_by_the_job_is_imported(plugins: Path, tmp_path: Path) -> None:
    """Control: the fixture's module does leave its marker when it is imported, so its absence
    above means it was not; trusted by the job, it is allowed."""
    task = code_task(_record("Ok/1", "output_parse_fn", f"{EVIL_MODULE}:parse",
                             tmp_path / "unused"), trusted=[f"{EVIL_MODULE}:parse"])
    assert task.parse is not None and task.parse("anything") is True
    assert (plugins / "imported.marker").exists() and EVIL_MODULE in sys.modules
    ClassFactory.unregister(CODE_HOOK, f"{EVIL_MODULE}:parse")


# --- the real CLI -----------------------------------------------------------------------------

def _cli(*args: str, cwd: Path, pythonpath: list[Path],
         timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in [REPO, *pythonpath]))
    return subprocess.run([sys.executable, "-m", "core.cmd.benchmarking", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture
def hook_job(codegen_job: Callable[..., Path], tmp_path: Path) -> Callable[..., Path]:
    """The codegen example (canonical and broken generators) over ``records``; ``trust`` is
    written as the testenv's ``code_hooks:``."""

    def make(records: list[dict], trust: list[str] | None = None) -> Path:
        data = write_jsonl(tmp_path / "tasks.jsonl", records)
        job = codegen_job('        - generator:\n            values: ["canonical", "broken"]\n',
                          test_index=data)
        if trust is not None:
            env = job.parent / "testenv" / "testenv.yaml"
            env.write_text(env.read_text() + f"  code_hooks: {json.dumps(trust)}\n")
        return job

    return make


@pytest.mark.parametrize("hook", HOSTILE)
def test_cli_refuses_a_hostile_dataset(hook: str, hook_job: Callable[..., Path], plugins: Path,
                                       tmp_path: Path) -> None:
    shell_marker = tmp_path / "shell.marker"
    job = hook_job([_record("Fine/0", "output_parse_fn", "last_line_is_ok", shell_marker),
                    _record("Evil/1", "output_parse_fn", hook, shell_marker)])
    res = _cli("-f", str(job), "--no-progress", cwd=tmp_path, pythonpath=[plugins])
    assert res.returncode == 1, res.stderr[-3000:]
    errors = [line for line in res.stderr.splitlines() if line.startswith("ianvs: error:")]
    assert len(errors) == 1, res.stderr[-3000:]
    assert f"{tmp_path / 'tasks.jsonl'}:2: record 'Evil/1'" in errors[0]
    _assert_clear_refusal(errors[0], "Evil/1", "output_parse_fn", hook)
    assert "Traceback" not in res.stderr
    assert not list(tmp_path.rglob("generations.jsonl"))  # refused before any test case
    _assert_nothing_ran(plugins, shell_marker)


@pytest.mark.parametrize("hook", ["os:system", f"{EVIL_MODULE}:parse"])
def test_validate_reports_a_hostile_dataset(hook: str, hook_job: Callable[..., Path],
                                            plugins: Path, tmp_path: Path) -> None:
    shell_marker = tmp_path / "shell.marker"
    job = hook_job([_record("Evil/1", "snippet_merge_fn", hook, shell_marker)])
    res = _cli("validate", "-f", str(job), cwd=tmp_path, pythonpath=[plugins])
    assert res.returncode == 1, res.stdout + res.stderr
    errors = [line for line in res.stderr.splitlines()
              if line.startswith("ianvs: error:") and "problem(s) found" not in line]
    assert len(errors) == 1, res.stderr
    assert f"{tmp_path / 'tasks.jsonl'}:1: record 'Evil/1'" in errors[0]
    _assert_clear_refusal(errors[0], "Evil/1", "snippet_merge_fn", hook)
    assert "Traceback" not in res.stdout + res.stderr
    _assert_nothing_ran(plugins, shell_marker)


def test_a_hook_trusted_in_testenv_works_end_to_end(hook_job: Callable[..., Path],
                                                    tmp_path: Path) -> None:
    """A parser the user wrote, trusted by ``code_hooks:``: the job runs, the parser judges the
    samples (``grading`` says ``output_parse``) and the leaderboard follows its verdicts."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "my_ianvs_hooks.py").write_text(
        '"""A user\'s hooks."""\n\n\n'
        "def says_done(output: str) -> bool:\n"
        "    return output.strip().endswith('DONE')\n")
    records = [{"task_id": f"Mine/{i}", "prompt": "def f(x):\n",
                "canonical_solution": f"    return x + {i}\n", "entry_point": "f",
                "test_code": f"print('DONE' if f(1) == {1 + i} else 'WRONG')\n",
                "output_parse_fn": "my_ianvs_hooks:says_done"} for i in range(2)]
    job = hook_job(records, trust=["my_ianvs_hooks:says_done"])
    ok = _cli("validate", "-f", str(job), cwd=tmp_path, pythonpath=[mine])
    assert ok.returncode == 0, ok.stdout + ok.stderr
    res = _cli("-f", str(job), "--no-progress", cwd=tmp_path, pythonpath=[mine], timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rank = tmp_path / "workspace/smart_coding_codegen/rank/all_rank.csv"
    rows = {r["basemodel-generator"]: r for r in csv.DictReader(rank.open())}
    assert float(rows["canonical"]["pass@1"]) == 1.0 and float(rows["broken"]["pass@1"]) == 0.0
    assert all("output_parse" in row["grading"] for row in rows.values())


def test_a_bad_code_hooks_entry_names_testenv(hook_job: Callable[..., Path],
                                              tmp_path: Path) -> None:
    job = hook_job([_record("Ok/1", "output_parse_fn", "last_line_is_ok", tmp_path / "x")],
                   trust=["os.system"])
    res = _cli("validate", "-f", str(job), cwd=tmp_path, pythonpath=[])
    assert res.returncode == 1
    out = res.stdout + res.stderr  # validate lists every problem it finds, one line each
    line = next(x for x in out.splitlines() if x.startswith(("ianvs: error:", "error:")))
    assert "testenv.yaml" in line and "'testenv.code_hooks' entry must be 'package.module:function'" \
        in line and "'os.system'" in line, out
    assert "Traceback" not in out


def test_image_building_ignores_hook_fields(plugins: Path, tmp_path: Path) -> None:
    """``ianvs sandbox image build --dataset`` only reads the environments: a hook name there is
    neither imported nor called (the job refuses it when it runs)."""
    from core.cmd.sandbox import _task_envs

    shell_marker = tmp_path / "shell.marker"
    record = {**_record("Evil/1", "output_parse_fn", f"{EVIL_MODULE}:parse", shell_marker),
              "run_env": "img:1", "package_downloads": {"numpy": None}}
    assert _task_envs(write_jsonl(tmp_path / "d.jsonl", [record])) == [("img:1",
                                                                       {"numpy": "numpy"})]
    _assert_nothing_ran(plugins, shell_marker)
