"""Task kinds (scenarios) of the smart-coding benchmark: one package per kind.

========= ========================================== =========================================
kind      package                                    what the model does
========= ========================================== =========================================
codegen   :mod:`core.scenarios.codegen`              completes a function; unit tests decide
comment   :mod:`core.scenarios.comment`              comments a function without changing it
issue     :mod:`core.scenarios.issue`                answers a developer's issue
repo      :mod:`core.scenarios.repo`                 writes a function inside a real repository
commit_   :mod:`core.scenarios.commit_message`       writes a commit's message from its diff
message
implement :mod:`core.scenarios.implement_change`     makes a commit's change from its message;
_change                                              the tests the commit changed decide
revise    :mod:`core.scenarios.revise`               revises a pull request's code after feedback
========= ========================================== =========================================

Kinds live in the one registry (:class:`~core.common.class_factory.ClassFactory`, group
:data:`~core.scenarios.base.TASK_KIND`); the built-ins are registered lazily, so importing this
package imports no kind. A new kind registers itself with
``ClassFactory.register(TASK_KIND, alias="mykind")`` on its :class:`TaskKind` subclass (see
docs/adding-a-scenario.md).
"""
from __future__ import annotations

from typing import Any

from core.common.class_factory import ClassFactory
from core.common.errors import DatasetError, RegistryError, suggest
from core.scenarios.base import TASK_KIND, TaskKind

BUILTIN_KINDS: dict[str, str] = {
    "codegen": "core.scenarios.codegen:CodegenKind",
    "comment": "core.scenarios.comment:CommentKind",
    "issue": "core.scenarios.issue:IssueKind",
    "repo": "core.scenarios.repo.kind:RepoKind",
    "commit_message": "core.scenarios.commit_message:CommitMessageKind",
    "implement_change": "core.scenarios.implement_change:ImplementChangeKind",
    "revise": "core.scenarios.revise:ReviseKind",
}

for _alias, _target in BUILTIN_KINDS.items():
    ClassFactory.register_lazy(TASK_KIND, _alias, _target)

_INSTANCES: dict[str, TaskKind] = {}


def get_kind(name: str) -> TaskKind:
    """The task kind registered as ``name`` (one instance per process).

    Raises:
        RegistryError: unknown kind, with suggestions.
    """
    if not ClassFactory.is_exists(TASK_KIND, name):
        known = ClassFactory.aliases(TASK_KIND)
        raise RegistryError(f"unknown task kind {name!r}",
                            hint=suggest(name, known) or f"one of {', '.join(known)}")
    cls = ClassFactory.get_cls(TASK_KIND, name)
    inst = _INSTANCES.get(name)
    if inst is None or type(inst) is not cls:
        inst = cls()
        _INSTANCES[name] = inst
    return inst


def check_records(kind_name: str, dataset: Any) -> int:
    """Validate every test record of a testenv ``dataset`` against kind ``kind_name``
    (JSONL files and upstream ``metadata.json`` + ``data.jsonl`` alike); returns the count.

    Raises:
        RegistryError: unknown kind. DatasetError: the first bad record, naming file, line
            and field, or a duplicate id.
    """
    kind = get_kind(kind_name)
    test = dataset.parse("test", "inference")
    seen: set[str] = set()
    count = 0
    for line, record in test.numbered_records():
        rec = kind.validate(record, source=str(test.path), line=line)
        if rec["id"] in seen:
            raise DatasetError(f"duplicate id {rec['id']!r}", source=test.path, line=line,
                               hint="every record needs its own 'id'")
        seen.add(rec["id"])
        count += 1
    return count


__all__ = ["BUILTIN_KINDS", "TASK_KIND", "TaskKind", "check_records", "get_kind"]
