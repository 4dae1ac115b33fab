"""Run a parsed job: test cases in order, failures recorded, ranks written and printed."""
from __future__ import annotations

import logging
from dataclasses import dataclass

from core.cmd.job import JobConfig
from core.common.names import inside_workspace
from core.scenarios import check_records, job_kind
from core.scenarios.base import JobView
from core.scenarios.budget import AnswerSize, answer_sizes, budget_warning, fixes_answer_size
from core.storymanager.rank.rank import save_rank
from core.storymanager.rank.types import RankFiles
from core.storymanager.visualization.visualization import visualize
from core.testcasecontroller.metrics.calling import check_metrics
from core.testcasecontroller.testcase import CaseOutcome, build_testcases, run_testcase
from core.testenvmanager.sandbox.pool import connect_early

logger = logging.getLogger(__name__)


@dataclass
class RunSummary:
    """What a run produced."""

    outcomes: list[CaseOutcome]
    rank_files: RankFiles | None

    @property
    def failed(self) -> list[CaseOutcome]:
        """Test cases that failed (not ranked)."""
        return [o for o in self.outcomes if not o.ok]

    @property
    def metric_errors(self) -> dict[str, list[tuple[CaseOutcome, str]]]:
        """metric name -> (ranked test case, error) for every metric that raised (its
        columns are NaN in those rows)."""
        out: dict[str, list[tuple[CaseOutcome, str]]] = {}
        for outcome in self.outcomes:
            for name, error in outcome.metric_errors.items():
                out.setdefault(name, []).append((outcome, error))
        return out


def run_job(job: JobConfig, *, fresh: bool = False, show_progress: bool = True,
            debug: bool = False, full_table: bool = False, report: bool = True,
            command: list[str] | None = None) -> RunSummary:
    """Run every test case (one failing does not stop the others), then rank the rest.

    The selected rank is printed fitted to 120 columns, or with every column in one table as
    upstream prints it when ``full_table``. Unless ``report`` is False, ``report/`` (Markdown,
    HTML, manifest, figures) is written beside the rank files; ``command`` is recorded in the
    manifest. A report that cannot be written is a warning, never a failed job.

    The test split is read and the metrics are resolved once up front: a malformed dataset
    or an unusable metric raises :class:`IanvsError` before any test case starts (and before
    any model is loaded).
    """
    samples = job.testenv.dataset.check_test_split()
    if job.testenv.task_kind:
        check_records(job.testenv.task_kind, job.testenv.dataset)
    check_metrics(job.testenv.metrics)
    connect_early(job.testenv.sandbox, job.testenv.source)
    check_kind(job)
    logger.info("test set: %d sample(s) in %s", samples, job.testenv.dataset.test.path)
    cases = build_testcases(list(job.algorithms), job.workspace, job.name, fresh=fresh)
    sizes = answer_sizes_of(job)
    kind_name = job_kind(job.testenv.task_kind).name
    outcomes = []
    for number, case in enumerate(cases, start=1):
        logger.info("testcase %d/%d (%s) in %s", number, len(cases), case.describe(),
                    case.url)
        for _, hyperparameters in case.combination.values():
            warning = budget_warning(kind_name, sizes, hyperparameters)
            if warning:
                logger.warning("testcase %d/%d: %s", number, len(cases), warning)
        outcomes.append(run_testcase(case, job.testenv, show_progress, debug))
    finished = [o for o in outcomes if o.ok]
    rank_files = None
    if finished:
        metric_names: list[str] = []
        for outcome in finished:
            metric_names += [m for m in outcome.metrics if m not in metric_names]
        for folder in ("rank", "report"):
            inside_workspace(job.workspace, job.job_dir / folder, f"the {folder} folder",
                             job.source)
        rank_files = save_rank([o.to_rank() for o in finished], job.rank,
                               job.job_dir / "rank", metric_names)
        visualize(job.rank, rank_files, full=full_table)
        if report:
            _report(job, rank_files, metric_names, command or [], debug)
    return RunSummary(outcomes, rank_files)


def answer_sizes_of(job: JobConfig) -> list[AnswerSize]:
    """The test split's whole-answer sizes, for the budget check
    (:func:`core.scenarios.budget.answer_sizes`; empty for a kind that fixes none)."""
    kind = job_kind(job.testenv.task_kind)
    if not fixes_answer_size(kind):
        return []  # nothing to read (a JSON or CSV test set would be parsed whole)
    test = job.testenv.dataset.parse("test", "inference")
    return answer_sizes(kind, (kind.validate(r, source=str(test.path)) for r in test.records()))


def job_view(job: JobConfig) -> JobView:
    """What the job's kind may read of ``job`` for :meth:`TaskKind.check_job` (metrics that
    cannot be resolved are left out: their own error is reported where they are resolved)."""
    from core.common.errors import IanvsError
    from core.testcasecontroller.metrics.calling import resolve_metric

    metrics = []
    for spec in job.testenv.metrics:
        try:
            metrics.append(resolve_metric(spec))
        except IanvsError:
            continue
    return JobView(job.testenv.dataset, job.testenv.sandbox, job.testenv.code_hooks,
                   tuple(metrics), job.testenv.source)


def check_kind(job: JobConfig, prepare: bool = True) -> None:
    """The job's task kind checks (and, when ``prepare``, readies) what it needs of the job
    before any test case (:meth:`~core.scenarios.base.TaskKind.check_job`)."""
    job_kind(job.testenv.task_kind).check_job(job_view(job), prepare=prepare)


def _report(job: JobConfig, rank_files: RankFiles, metric_names: list[str],
            command: list[str], debug: bool) -> None:
    from core.storymanager.report import write_report

    metric = job.rank.sort_by[0][0] if job.rank.sort_by else (metric_names or [""])[0]
    modules = sorted({spec.type for _, alg in job.algorithms for spec in alg.modules})
    try:
        folder = write_report(job.job_dir, rank_files.selected_rank, metric, modules,
                              job.source, job.testenv.dataset.test.path, job.testenv.sandbox,
                              command, all_csv=rank_files.all_rank,
                              run_facts=job_kind(job.testenv.task_kind).run_facts)
    except Exception as exc:  # noqa: BLE001 - a report problem must not fail a finished job
        logger.warning("the report could not be written: %s: %s", type(exc).__name__, exc)
        if debug:
            raise
        return
    logger.info("report: %s (index.html, leaderboard.md, manifest.json)", folder)
