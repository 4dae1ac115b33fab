"""Records' eval-framework execution fields (:mod:`core.scenarios.codegen.records`):
only the project's hooks (alias or dotted name) or ones the job trusts are resolved, through
the registry; checks with one clear error; verdicts from ``output_parse_fn`` only for runs that
finished."""
from __future__ import annotations

import pytest

from core.common.class_factory import ClassFactory
from core.common.errors import ConfigError
from core.scenarios.codegen.records import (CODE_HOOK, append_test_code, code_task,
                                            last_line_is_ok, parse_verdict, resolve_hook)

LAST_OK = "core.scenarios.codegen.records:last_line_is_ok"


def test_project_hooks_by_alias_or_dotted_name_through_the_registry() -> None:
    for name in ("last_line_is_ok", LAST_OK):
        fn = resolve_hook(name, "r", "output_parse_fn")
        assert fn is last_line_is_ok and ClassFactory.get_cls(CODE_HOOK, name) is last_line_is_ok
        assert fn("x\nOK\n") is True
    for name in ("append_test_code", "core.scenarios.codegen.records:append_test_code"):
        assert resolve_hook(name, "r", "snippet_merge_fn") is append_test_code


def test_a_trusted_hook_is_allowed_and_resolved() -> None:
    import json

    assert resolve_hook("json:dumps", "record 't'", "snippet_merge_fn", trusted=["json:dumps"]) \
        is json.dumps
    task = code_task({"task_id": "T", "test_code": "b", "snippet_merge_fn": "json:dumps"},
                     trusted=("json:dumps",))
    assert task.merge_fn == "json:dumps" and task.merge is json.dumps
    # registered now (process-wide), but only the job's own trust list allows it
    with pytest.raises(ConfigError, match="'json:dumps' is not an allowed hook"):
        code_task({"task_id": "T", "test_code": "b", "snippet_merge_fn": "json:dumps"})


@pytest.mark.parametrize("path", ["json:loads", "json.dumps", "no_such_module_xyz:f",
                                  "json:no_such_attr", "json:__doc__", 3, ["os:system"]])
def test_an_untrusted_hook_is_refused_and_not_registered(path: object) -> None:
    with pytest.raises(ConfigError, match="is not an allowed hook") as err:
        code_task({"task_id": "T/1", "test_code": "pass", "output_parse_fn": path})
    text = str(err.value)
    assert "T/1" in text and "output_parse_fn" in text and repr(path) in text
    assert "last_line_is_ok" in text and "code_hooks:" in text and "testenv.yaml" in text
    if isinstance(path, str):
        assert not ClassFactory.is_exists(CODE_HOOK, path)


@pytest.mark.parametrize("path, message", [
    ("no_such_module_xyz:f", "cannot be loaded: ModuleNotFoundError"),
    ("json:no_such_attr", "cannot be loaded: AttributeError"),
    ("json:__doc__", "is not a function"),
])
def test_a_trusted_hook_that_cannot_load_is_one_clear_error(path: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        code_task({"task_id": "T/1", "test_code": "pass", "output_parse_fn": path},
                  trusted=[path])
    assert not ClassFactory.is_exists(CODE_HOOK, path)  # a bad path is not left registered


@pytest.mark.parametrize("record, message", [
    ({"package_downloads": ["numpy"]}, "must map import names"),
    ({"package_downloads": {"1bad": None}}, "is not an import name"),
    ({"package_downloads": {"np": "num py"}}, "is not a PyPI package name"),
    ({"run_env": ""}, "run_env must be an image name"),
    ({"benchmark_timeout": -1}, "benchmark_timeout must be a positive number"),
    ({"snippet_merge_fn": "append_test_code"}, "needs test_code"),
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
