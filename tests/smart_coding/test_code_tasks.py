"""Records' eval-framework execution fields (:mod:`core.testcasecontroller.metrics.code_tasks`):
hooks resolved through the registry by dotted path, checks with one clear error, verdicts
from ``output_parse_fn`` only for runs that finished."""
from __future__ import annotations

import pytest

from core.common.class_factory import ClassFactory
from core.common.errors import ConfigError
from core.testcasecontroller.metrics.code_tasks import (CODE_HOOK, append_test_code, code_task,
                                                        parse_verdict, resolve_hook)

LAST_OK = "core.testcasecontroller.metrics.code_tasks:last_line_is_ok"


def test_hooks_are_resolved_through_the_registry_by_dotted_path() -> None:
    fn = resolve_hook("json:dumps", "record 't'", "snippet_merge_fn")
    import json

    assert fn is json.dumps
    assert ClassFactory.get_cls(CODE_HOOK, "json:dumps") is json.dumps
    assert resolve_hook(LAST_OK, "r", "output_parse_fn")("x\nOK\n") is True


@pytest.mark.parametrize("path, message", [
    ("json.dumps", "must be 'package.module:function'"),
    ("no_such_module_xyz:f", "cannot be loaded: ModuleNotFoundError"),
    ("json:no_such_attr", "cannot be loaded: AttributeError"),
    ("json:__doc__", "is not a function"),
])
def test_bad_hooks_are_one_clear_error(path: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        code_task({"task_id": "T/1", "test_code": "pass", "output_parse_fn": path})
    assert not ClassFactory.is_exists(CODE_HOOK, path)  # a bad path is not left registered


@pytest.mark.parametrize("record, message", [
    ({"package_downloads": ["numpy"]}, "must map import names"),
    ({"package_downloads": {"1bad": None}}, "is not an import name"),
    ({"package_downloads": {"np": "num py"}}, "is not a PyPI package name"),
    ({"run_env": ""}, "run_env must be an image name"),
    ({"benchmark_timeout": -1}, "benchmark_timeout must be a positive number"),
    ({"snippet_merge_fn": "json:dumps"}, "needs test_code"),
])
def test_bad_fields_name_the_record(record: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        code_task({"task_id": "T/9", **record})
    assert "T/9" in str(err.value)


def test_fields_with_their_meanings() -> None:
    task = code_task({"task_id": "T", "run_env": "img:1", "package_downloads": {"np": "numpy", "scipy": None},
                      "test_code": "assert f() == 1\n", "benchmark_timeout": 7})
    assert task.packages == {"np": "numpy", "scipy": "scipy"} and task.timeout == 7.0
    assert task.program("def f():\n    return 1\n") == append_test_code("def f():\n    return 1\n",
                                                                     "assert f() == 1\n")
    assert code_task({"task_id": "plain", "prompt": "x"}).needs_container is False


def test_output_parse_judges_only_finished_runs() -> None:
    task = code_task({"task_id": "T", "test_code": "pass", "output_parse_fn": LAST_OK})
    assert parse_verdict(task, "error", "", "Ran 1 test\n\nOK\n")[0] == "passed"
    assert parse_verdict(task, "passed", "OK\nnot the end\n", "")[0] == "failed"
    for kept in ("timeout", "memory_exceeded", "sandbox_violation", "syntax_error", "infra_error"):
        assert parse_verdict(task, kept, "OK\n", "") == (kept, "")
    plain = code_task({"task_id": "T", "test_code": "pass"})
    assert parse_verdict(plain, "passed", "", "") == ("passed", "")
