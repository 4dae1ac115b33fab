"""Task kinds (scenarios) of the smart-coding benchmark: one package per kind.

================ ======================================= ==========================================
kind             package (``core.scenarios.``)           what the model does
================ ======================================= ==========================================
codegen          ``codegen``                             completes a function; unit tests decide
comment          ``comment``                             comments a function without changing it
issue            ``issue``                               answers a developer's issue
repo             ``repo``                                writes a function inside a real repository
commit_message   ``trajectories.commit_message``         writes a commit's message from its diff
implement_change ``trajectories.implement_change``       makes a commit's change from its message;
                                                         the tests the commit changed decide
revise           ``trajectories.revise``                 revises a pull request's code after
                                                         feedback
================ ======================================= ==========================================

The trajectory kinds share the history miner in :mod:`core.scenarios.trajectories`. Besides the
kinds, ``selfalign`` and ``cloudedge`` are scenarios built on them (a paradigm and its metrics,
no record schema of their own).

This module is **the one registry**: the only place outside a kind's folder that names it.
Kinds live in :class:`~core.common.class_factory.ClassFactory`, group
:data:`~core.scenarios.base.TASK_KIND`, and the ``ianvs dataset`` subcommands in group
:data:`DATASET_COMMAND`; the built-ins are registered lazily, so importing this package imports
no kind. A new kind registers itself with ``ClassFactory.register(TASK_KIND, alias="mykind")``
on its :class:`TaskKind` subclass (see docs/adding-a-scenario.md).
"""
from __future__ import annotations

from typing import Any

from core.common.class_factory import ClassFactory
from core.common.errors import DatasetError, RegistryError, suggest
from core.scenarios.base import TASK_KIND, DatasetCommand, TaskKind

BUILTIN_KINDS: dict[str, str] = {
    "codegen": "core.scenarios.codegen:CodegenKind",
    "comment": "core.scenarios.comment:CommentKind",
    "issue": "core.scenarios.issue:IssueKind",
    "repo": "core.scenarios.repo.kind:RepoKind",
    "commit_message": "core.scenarios.trajectories.commit_message:CommitMessageKind",
    "implement_change": "core.scenarios.trajectories.implement_change:ImplementChangeKind",
    "revise": "core.scenarios.trajectories.revise:ReviseKind",
}

#: the kind of a job whose testenv names none (upstream-style HumanEval jobs)
DEFAULT_KIND = "codegen"

#: registry group of ``ianvs dataset`` subcommands (:class:`DatasetCommand` objects)
DATASET_COMMAND = "dataset_command"

BUILTIN_DATASET_COMMANDS: dict[str, str] = {
    "humaneval": "core.scenarios.codegen.humaneval:COMMAND",
    "repo": "core.scenarios.repo.cli:COMMAND",
    "comments": "core.scenarios.comment.builder:COMMAND",
    "issues": "core.scenarios.issue.builder:COMMAND",
    "trajectories": "core.scenarios.trajectories.cli:COMMAND",
    "commit-messages": "core.scenarios.trajectories.commit_message.builder:COMMAND",
    "implement-change": "core.scenarios.trajectories.implement_change.builder:COMMAND",
    "revise": "core.scenarios.trajectories.revise.builder:COMMAND",
    "pack-roots": "core.scenarios.trajectories.roots:COMMAND",
    "merge-sets": "core.scenarios.merge_sets:COMMAND",
}

for _alias, _target in BUILTIN_KINDS.items():
    ClassFactory.register_lazy(TASK_KIND, _alias, _target)
for _alias, _target in BUILTIN_DATASET_COMMANDS.items():
    ClassFactory.register_lazy(DATASET_COMMAND, _alias, _target)

_INSTANCES: dict[str, TaskKind] = {}


def get_kind(name: str) -> TaskKind:
    """The task kind registered as ``name`` (one instance per process).

    Raises:
        RegistryError: unknown kind, with suggestions; or a class registered under an alias
            that is not its ``name``.
    """
    if not ClassFactory.is_exists(TASK_KIND, name):
        known = ClassFactory.aliases(TASK_KIND)
        raise RegistryError(f"unknown task kind {name!r}",
                            hint=suggest(name, known) or f"one of {', '.join(known)}")
    cls = ClassFactory.get_cls(TASK_KIND, name)
    inst = _INSTANCES.get(name)
    if inst is None or type(inst) is not cls:
        inst = cls()
        if inst.name != name:
            raise RegistryError(
                f"task kind {name!r} is the class {cls.__module__}.{cls.__qualname__}, whose "
                f"name is {inst.name!r}",
                hint="a kind's registered alias and its 'name' must be the same: fix "
                     "@ClassFactory.register(TASK_KIND, alias=...) or 'name' (a folder copied "
                     "from another kind keeps that kind's alias)")
        _INSTANCES[name] = inst
    return inst


def job_kind(name: str | None) -> TaskKind:
    """The kind of a job: the one its testenv names, else :data:`DEFAULT_KIND`."""
    return get_kind(name or DEFAULT_KIND)


def all_kinds() -> list[TaskKind]:
    """Every registered kind (importing each), in registration order."""
    return [get_kind(name) for name in ClassFactory.aliases(TASK_KIND)]


def dataset_commands() -> dict[str, DatasetCommand]:
    """The ``ianvs dataset`` subcommands, by name (importing each kind's command module)."""
    names = [n for n in BUILTIN_DATASET_COMMANDS if ClassFactory.is_exists(DATASET_COMMAND, n)]
    names += [n for n in ClassFactory.aliases(DATASET_COMMAND) if n not in names]
    return {name: ClassFactory.get_cls(DATASET_COMMAND, name) for name in names}


def register_kind_leftovers() -> None:
    """Hand every kind's leftover kinds (:meth:`TaskKind.leftovers`) to the sandbox's registry,
    so ``ianvs sandbox doctor`` and ``clean`` list and remove them too."""
    from core.testenvmanager.sandbox.leftovers import register_leftovers

    for kind in all_kinds():
        for name, (lister, remover) in kind.leftovers().items():
            register_leftovers(name, lister, remover)


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


__all__ = ["BUILTIN_DATASET_COMMANDS", "BUILTIN_KINDS", "DATASET_COMMAND", "DEFAULT_KIND",
           "TASK_KIND", "DatasetCommand", "TaskKind", "all_kinds", "check_records",
           "dataset_commands", "get_kind", "job_kind", "register_kind_leftovers"]
