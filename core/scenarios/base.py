"""The task-kind interface: what a scenario (codegen, comment, issue, ...) provides.

A task kind keeps together, in one package ``core/scenarios/<kind>/``:

* the **record schema**: :meth:`TaskKind.validate` turns one JSON object of the dataset into
  the normalised record (or raises :class:`~core.common.errors.DatasetError` naming file,
  line and field);
* the **prompts**: :meth:`TaskKind.messages` (chat mode) and :meth:`TaskKind.prompt`
  (completion mode) render a record for a model;
* the **reference answer**: :meth:`TaskKind.reference`, what a perfect model would reply
  (used by the ``reference`` gold control and by the judge's pairwise comparison);
* the **answer extraction**: :meth:`TaskKind.answer`, the text to score in a reply;
* the **metrics**: :meth:`TaskKind.metrics`, alias -> metric function, registered by the
  example's thin ``testenv/metrics.py``;
* a **builder** (``ianvs dataset <kind> --from ...``), in the kind's ``builder.py``, offered
  to the CLI as a :class:`DatasetCommand` in the registry (:mod:`core.scenarios`).

The core (runner, testcase controller, report, sandbox CLI) reaches a kind only through the
hooks below, never by importing it:

* :meth:`TaskKind.check_job` -- checks (and prepares, e.g. container images) what the kind
  needs of a job before any test case or model starts;
* :meth:`TaskKind.run_facts` -- facts of a finished test case for the report's manifest;
* :meth:`TaskKind.leak_view` -- what the model is shown and what the answer is, for the leak
  check (:mod:`core.scenarios.leak_views`);
* :meth:`TaskKind.rubric_path` -- the LLM judge's default rubric (``rubric.yaml`` beside the
  kind's module);
* :meth:`TaskKind.leftovers` -- what the kind leaves on a machine (listed and removed by
  ``ianvs sandbox doctor`` / ``clean``).

Kinds are registered in the project's one registry (:class:`ClassFactory`, group
:data:`TASK_KIND`) and looked up by name with :func:`core.scenarios.get_kind`.
"""
from __future__ import annotations

import abc
import argparse
import hashlib
import inspect
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.common.errors import DatasetError, IanvsError
from core.common.jsonl import iter_jsonl

#: registry group of task kinds in :class:`core.common.class_factory.ClassFactory`
TASK_KIND = "task_kind"


def content_id(record: Mapping[str, Any], prefix: str) -> str:
    """A stable id for a record without one: ``<prefix>-<12 hex of its JSON's SHA-256>``."""
    text = json.dumps(record, sort_keys=True, ensure_ascii=False)
    return f"{prefix}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:12]}"


def require_str(record: Mapping[str, Any], name: str, source: str | None, line: int | None,
                where: str = "", allow_empty: bool = True) -> str:
    """``record[name]`` as a string, or a DatasetError naming the field."""
    value = record.get(name)
    label = f"{where}{name}"
    if not isinstance(value, str):
        got = "missing" if name not in record else f"a {type(value).__name__}"
        raise DatasetError(f"field {label!r} must be a string, got {got}", source=source,
                           line=line)
    if not allow_empty and not value.strip():
        raise DatasetError(f"field {label!r} must not be empty", source=source, line=line)
    return value


def reject_unknown(record: Mapping[str, Any], allowed: set[str], source: str | None,
                   line: int | None, where: str = "") -> None:
    """DatasetError for the first field outside ``allowed`` (typos are not silently kept)."""
    unknown = sorted(set(record) - allowed)
    if unknown:
        raise DatasetError(f"unknown field '{where}{unknown[0]}'", source=source, line=line,
                           hint=f"allowed fields: {', '.join(sorted(allowed))}; put anything "
                                "else under 'metadata'")


def require_object(record: Any, source: str | None, line: int | None) -> Mapping[str, Any]:
    """``record`` itself if it is a JSON object, else a DatasetError."""
    if not isinstance(record, Mapping):
        raise DatasetError("record is not a JSON object", source=source, line=line)
    return record


def finish_record(rec: dict[str, Any], record: Mapping[str, Any], prefix: str,
                  source: str | None, line: int | None) -> dict[str, Any]:
    """Add the common optional fields to a checked record: ``metadata`` (an object, default
    ``{}``) and ``id`` (a non-empty string, default :func:`content_id` with ``prefix``)."""
    metadata = record.get("metadata", {})
    if not isinstance(metadata, Mapping):
        raise DatasetError("field 'metadata' must be an object", source=source, line=line)
    rec["metadata"] = dict(metadata)
    ident = record.get("id")
    if ident is not None and (not isinstance(ident, str) or not ident):
        raise DatasetError("field 'id' must be a non-empty string", source=source, line=line)
    rec["id"] = ident or content_id(rec, prefix)
    return rec


MetricFn = Callable[..., Any]
#: a leftover kind's (lister, remover): see :mod:`core.testenvmanager.sandbox.leftovers`
LeftoverHooks = tuple[Callable[[], list[Any]], Callable[[str], bool]]


@dataclass(frozen=True)
class JobView:
    """What :meth:`TaskKind.check_job` may read of a job (built by the runner and by
    ``ianvs validate``; the kind never sees the job's objects themselves).

    Attributes:
        dataset: the testenv's dataset (``parse("test", "inference")`` reads the test split).
        sandbox: the testenv ``sandbox:`` settings (possibly empty).
        code_hooks: the record hooks the job trusts (testenv ``code_hooks:``).
        metrics: the job's resolved metric functions, in testenv order (a metric that could not
            be resolved is left out: its own error is reported where it is resolved).
        source: the testenv file, for error messages.
    """

    dataset: Any
    sandbox: Mapping[str, Any] = field(default_factory=dict)
    code_hooks: tuple[str, ...] = ()
    metrics: Sequence[Callable[..., Any]] = ()
    source: Path | None = None


@dataclass(frozen=True)
class DatasetCommand:
    """One ``ianvs dataset <name>`` subcommand, registered by a kind (or a family of kinds)
    under :data:`core.scenarios.DATASET_COMMAND`.

    Attributes:
        help: one line for ``ianvs dataset -h``.
        add_arguments: adds the subcommand's options to its parser.
        run: builds the dataset; returns the exit status.
        errors: exceptions that are the user's to fix (a one-line message, exit 1, traceback
            only with ``--debug``).
        logging_options: the subcommand takes ``--debug`` and ``--log-level`` itself (they are
            also accepted before the subcommand's name).
    """

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    errors: tuple[type[BaseException], ...] = (IanvsError, OSError)
    logging_options: bool = False


class TaskKind(abc.ABC):
    """One scenario's record schema, prompts, reference and metrics (see module docstring)."""

    name: str = ""
    #: the record field holding the model input (``dataset.x_field`` in testenv.yaml)
    input_field: str = ""
    #: default decoding mode of generators for this kind
    default_mode: str = "chat"

    @abc.abstractmethod
    def validate(self, record: Mapping[str, Any], source: str | None = None,
                 line: int | None = None) -> dict[str, Any]:
        """The normalised record (with an ``id``); DatasetError naming file, line, field."""

    @abc.abstractmethod
    def messages(self, record: Mapping[str, Any]) -> list[dict[str, str]]:
        """Chat messages asking a model for this record's answer."""

    def prompt(self, record: Mapping[str, Any]) -> str:
        """Completion-mode prompt (default: the chat messages' text, in order)."""
        return "\n\n".join(m["content"] for m in self.messages(record)) + "\n\n"

    @abc.abstractmethod
    def reference(self, record: Mapping[str, Any]) -> str:
        """The reply a perfect model would give (the gold control's answer)."""

    def answer(self, raw_output: str, record: Mapping[str, Any]) -> str:
        """The part of a model reply that is scored (default: the reply, stripped)."""
        return raw_output.strip()

    def answer_chars(self, record: Mapping[str, Any]) -> int | None:
        """Characters of the whole answer this record's prompt asks for, when the task fixes
        its size (a kind asking for whole files: the reference's), so a token budget can be
        checked against it (:mod:`core.scenarios.budget`). Default ``None``: the answer's size
        is the model's to choose."""
        return None

    @abc.abstractmethod
    def judge_view(self, record: Mapping[str, Any]) -> dict[str, str]:
        """What a judge or a human rater sees of the task: ``{"task": ..., "reference": ...}``."""

    def metrics(self) -> dict[str, MetricFn]:
        """alias -> metric function for testenv.yaml (default: none)."""
        return {}

    def read(self, path: str | Path) -> Iterator[dict[str, Any]]:
        """Stream and validate a JSONL file of this kind (ids must be unique)."""
        file = Path(path)
        seen: set[str] = set()
        for lineno, record in iter_jsonl(file, "dataset file"):
            rec = self.validate(record, source=str(file), line=lineno)
            if rec["id"] in seen:
                raise DatasetError(f"duplicate id {rec['id']!r}", source=file, line=lineno,
                                   hint="every record needs its own 'id'")
            seen.add(rec["id"])
            yield rec

    def check_file(self, path: str | Path) -> int:
        """Validate every line of a dataset file; returns the number of records."""
        return sum(1 for _ in self.read(path))

    # -- hooks the core calls (defaults: the kind needs nothing of the kind) --------------------

    def check_job(self, job: JobView, prepare: bool = True) -> None:
        """Check what this kind needs of ``job`` beyond :meth:`validate` (and, when
        ``prepare``, get it ready, e.g. build container images), before any test case starts.
        Raises :class:`~core.common.errors.ConfigError` naming file and line. Default: nothing.
        """

    def run_facts(self, case_dir: Path) -> dict[str, Any]:
        """Facts of a finished test case folder for the report's manifest (e.g. the timeouts
        the sandbox used and which nodes graded), merged into the case's ``sandbox`` entry.
        Default: none."""
        return {}

    def leak_view(self) -> Any:
        """What the model is shown of a record and what its answer is, as a
        :class:`core.scenarios.leak_views.LeakView` (None: the kind has no leak check yet;
        builders then refuse to screen its records)."""
        return None

    def rubric_path(self) -> Path:
        """The LLM judge's default rubric: ``rubric.yaml`` in the kind's own folder."""
        return Path(inspect.getfile(type(self))).parent / "rubric.yaml"

    def container_envs(self, path: Path) -> list[tuple[str | None, dict[str, str]]]:
        """Container environments ``(run_env, {import name: PyPI name})`` the records of the
        dataset file ``path`` need, for ``ianvs sandbox image build --dataset``. Default:
        none."""
        return []

    def leftovers(self) -> Mapping[str, LeftoverHooks]:
        """Leftover kinds this kind leaves on a machine: name -> (lister, remover) for
        :func:`core.testenvmanager.sandbox.leftovers.register_leftovers`. Default: none."""
        return {}
