"""The one registry of task kinds: lazy built-ins, an alias that must be the kind's name, and the
hooks the core reaches kinds through (docs/architecture.md)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from core.common.class_factory import ClassFactory
from core.common.errors import RegistryError
from core.scenarios import (BUILTIN_DATASET_COMMANDS, BUILTIN_KINDS, DEFAULT_KIND, TASK_KIND,
                            all_kinds, dataset_commands, get_kind, job_kind)
from core.scenarios.base import DatasetCommand
from tests.scenarios.conftest import stub_kind

REPO = Path(__file__).resolve().parents[2]


#: a kind copied from ``issue/`` whose alias was not changed
_Copied = stub_kind("docstring")


def test_importing_the_registry_imports_no_kind() -> None:
    code = ("import sys, core.scenarios; "
            "print(sorted(m for m in sys.modules if m.startswith('core.scenarios.')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "['core.scenarios.base']"


def test_every_builtin_kind_and_command_resolves() -> None:
    assert [k.name for k in all_kinds()] == sorted(BUILTIN_KINDS)
    commands = dataset_commands()
    assert list(commands) == list(BUILTIN_DATASET_COMMANDS)
    assert all(isinstance(c, DatasetCommand) for c in commands.values())
    assert job_kind(None) is get_kind(DEFAULT_KIND)


def test_an_alias_that_is_not_the_kinds_name_is_refused() -> None:
    ClassFactory.register_cls(_Copied, TASK_KIND, "issue2")
    try:
        with pytest.raises(RegistryError, match="whose name is 'docstring'") as err:
            get_kind("issue2")
        assert "alias" in (err.value.hint or "")
    finally:
        ClassFactory.unregister(TASK_KIND, "issue2")


def test_every_kind_has_a_leak_view_and_text_kinds_a_rubric() -> None:
    for kind in all_kinds():
        assert kind.leak_view() is not None, kind.name
        if "llm_judge" in kind.metrics():
            assert kind.rubric_path().is_file(), kind.name
            assert kind.rubric_path().parent != REPO / "core" / "scenarios"


def test_a_plugin_kind_may_be_a_package_folder(tmp_path: Path) -> None:
    """``task_kind: {name, url}`` may name a package (a kind split over modules)."""
    from core.testenvmanager.testenv.testenv import load_testenv

    pkg = tmp_path / "pkgkind"
    pkg.mkdir()
    (pkg / "schema.py").write_text("FIELDS = {'question', 'answer', 'id', 'metadata'}\n")
    (pkg / "__init__.py").write_text(
        "from typing import Any\n"
        "from core.common.class_factory import ClassFactory\n"
        "from core.scenarios.base import TASK_KIND, TaskKind, reject_unknown\n"
        "from .schema import FIELDS\n\n"
        "@ClassFactory.register(TASK_KIND, alias='pkgkind')\n"
        "class PkgKind(TaskKind):\n"
        "    name = 'pkgkind'\n"
        "    def validate(self, record: Any, source: Any = None, line: Any = None) -> Any:\n"
        "        reject_unknown(record, FIELDS, source, line)\n"
        "        return {**record, 'id': record.get('id', 'x')}\n"
        "    def messages(self, record: Any) -> Any:\n"
        "        return [{'role': 'user', 'content': record['question']}]\n"
        "    def reference(self, record: Any) -> str:\n"
        "        return str(record['answer'])\n"
        "    def judge_view(self, record: Any) -> Any:\n"
        "        return {}\n")
    (tmp_path / "data.jsonl").write_text('{"question": "q", "answer": "a"}\n')
    env = tmp_path / "testenv.yaml"
    env.write_text('testenv:\n  dataset:\n    test_index: "./data.jsonl"\n'
                   '  metrics:\n    - name: "acc"\n'
                   '  task_kind: {name: "pkgkind", url: "./pkgkind"}\n')
    try:
        assert load_testenv(env).task_kind == "pkgkind"
        assert get_kind("pkgkind").reference({"answer": "a"}) == "a"
        with pytest.raises(Exception, match="unknown field 'extra'"):
            get_kind("pkgkind").validate({"question": "q", "answer": "a", "extra": 1})
    finally:
        ClassFactory.unregister(TASK_KIND, "pkgkind")
