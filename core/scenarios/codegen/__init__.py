"""The ``codegen`` task kind: complete a function; its unit tests decide (in the sandbox).

It is also the kind of a job whose testenv names none (upstream-style HumanEval jobs), and the
self-align and cloud-edge scenarios run their code through its execution.

* record schema: :class:`.task.CodegenTask` (docs/proposals/scenarios/smart_coding/codegen.md);
  a record's execution fields and hooks: :mod:`.records`;
* prompts: the record's ``prompt`` (completion) and :func:`core.generation.types.
  default_chat_messages` (chat);
* builder: ``ianvs dataset humaneval`` (:mod:`.humaneval`);
* basemodel: :class:`core.generation.codegen_model.CodegenModel`; controls ``canonical`` and
  ``broken`` (:mod:`core.generation.reference`);
* execution in the sandbox, with its cache and calibrated timeouts: :mod:`.execution`;
* metrics: :mod:`.metrics` (pass@k, acc) and the shared
  :func:`~core.testcasecontroller.metrics.edge_cost.edge_cost`.
"""
from __future__ import annotations

import json
import logging
import platform
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.common.class_factory import ClassFactory
from core.scenarios.codegen.task import CodegenTask
from core.generation.types import default_chat_messages
from core.common.errors import ConfigError
from core.scenarios.base import TASK_KIND, JobView, MetricFn, TaskKind

logger = logging.getLogger(__name__)


@ClassFactory.register(TASK_KIND, alias="codegen")
class CodegenKind(TaskKind):
    """HumanEval-style function completion (see module docstring)."""

    name = "codegen"
    input_field = "prompt"
    default_mode = "complete"

    def leak_view(self) -> Any:
        from core.scenarios.codegen.leaks import VIEW

        return VIEW

    def validate(self, record: Mapping[str, Any], source: str | None = None,
                 line: int | None = None) -> dict[str, Any]:
        task = CodegenTask.from_record(record, source=source, line=line)
        return {**task.to_record(), "id": task.task_id}

    def messages(self, record: Mapping[str, Any]) -> list[dict[str, str]]:
        return default_chat_messages(record["prompt"])

    def prompt(self, record: Mapping[str, Any]) -> str:
        return str(record["prompt"])

    def reference(self, record: Mapping[str, Any]) -> str:
        return str(record["prompt"]) + str(record["canonical_solution"])

    def judge_view(self, record: Mapping[str, Any]) -> dict[str, str]:
        return {"task": str(record["prompt"]), "reference": self.reference(record)}

    def metrics(self) -> dict[str, MetricFn]:
        from core.scenarios.codegen.metrics import exec_accuracy, pass_at_k
        from core.testcasecontroller.metrics.edge_cost import edge_cost

        return {"pass_at_k": pass_at_k, "acc": exec_accuracy, "edge_cost": edge_cost}

    def check_job(self, job: JobView, prepare: bool = True) -> None:
        """Records' execution fields (``run_env``, ``package_downloads``, hooks...) checked,
        and the container images they need built when ``prepare`` (JSONL test sets). A hook a
        record names must be the project's or trusted by the job's testenv ``code_hooks:``; a
        string ``task_id`` must be unique; when a metric of the job runs the records' code
        (:func:`~.records.executes_code`), every record must be executable. Anything else is a
        :class:`ConfigError` naming file, line and record."""
        from core.scenarios.codegen.execution import check_records
        from core.scenarios.codegen.records import runs_code
        from core.testenvmanager.dataset.parsers import JsonDataset, JsonlDataset

        dataset = job.dataset
        test = dataset.parse("test", "inference")
        if (not isinstance(test, JsonlDataset) or dataset.test.fmt not in ("jsonl", "json")
                or (isinstance(test, JsonDataset) and test.is_coco) or test.path is None):
            return  # no per-sample records
        try:
            envs = check_records(test.numbered_records(), test.path, job.sandbox,
                                 job.code_hooks, prepare=prepare,
                                 executable=any(runs_code(fn) for fn in job.metrics))
        except ConfigError as exc:
            if not isinstance(test, JsonDataset) or exc.line is None:
                raise
            prefix, at = test.locate(exc.line)  # a JSON array numbers elements, not lines
            raise ConfigError(prefix + exc.message, source=exc.source, line=at,
                              hint=exc.hint) from None
        if envs and prepare:
            logger.info("container environments of the test set are ready")

    def run_facts(self, case_dir: Path) -> dict[str, Any]:
        """The reference solutions' calibrated times (``calibration.jsonl``), the timeouts the
        sandbox used and which nodes graded the samples (the execution cache)."""
        from core.scenarios.codegen.execution import CALIBRATION_FILE, EXEC_CACHE, load_calibration

        timeouts = list(load_calibration(case_dir / CALIBRATION_FILE).values())
        limits: list[float] = []
        graded_by: dict[str, int] = {}
        host = platform.node()
        try:
            with (case_dir / EXEC_CACHE).open("rb") as fh:
                for raw in fh:
                    try:
                        result = json.loads(raw)["result"]
                        limits.append(float(result["timeout_s"]))
                    except (ValueError, KeyError, TypeError):
                        continue
                    if not isinstance(result, dict):
                        continue
                    node = str(result.get("node") or host)
                    graded_by[node] = graded_by.get(node, 0) + 1
        except OSError:
            pass
        return {"reference_times_s": {"count": len(timeouts),
                                      "max": max(timeouts) if timeouts else None},
                "timeouts_s": {"min": min(limits) if limits else None,
                               "max": max(limits) if limits else None},
                "graded_by": graded_by}

    def container_envs(self, path: Path) -> list[tuple[str | None, dict[str, str]]]:
        """The container environments (``run_env`` and ``package_downloads``) the records of
        the JSONL file ``path`` need, each once (hook fields are neither read nor imported)."""
        from core.common.jsonl import iter_jsonl
        from core.scenarios.codegen.records import HOOK_FIELDS, code_task

        envs: dict[tuple[str | None, tuple[tuple[str, str], ...]], None] = {}
        for _line, record in iter_jsonl(path, "dataset file"):
            task = code_task({k: v for k, v in record.items() if k not in HOOK_FIELDS})
            if task.needs_container:
                envs[(task.run_env, tuple(sorted(task.packages.items())))] = None
        return [(run_env, dict(packages)) for run_env, packages in envs]
