"""Write ``report/`` after a job: ``leaderboard.md``, ``index.html``, ``manifest.json`` and the
figures (PNG files beside the Markdown; embedded as ``data:`` URIs in the HTML, so
``index.html`` is one self-contained file that needs no network).

Contents: the leaderboard (the selected rank rows, credential-like columns redacted) with the
main metric's (the first ``sort_by`` metric) 95% interval and the rows each row differs from on
it; an interval table for every column that is a mean and has per-task values (what the metrics
recorded in ``per_task_values.jsonl``, and ``pass@k`` from ``per_task.jsonl``; percentile
bootstrap over tasks, weighted by samples for a mean over samples); paired comparisons of test
cases that ran the same tasks, for each such column (paired bootstrap interval of the mean
difference; the exact McNemar test for pass/fail columns, the sign-flip permutation test for
others; Holm-adjusted over the pairs of a column); the smallest difference each column's tasks
can detect; and the figures of :mod:`plots`. A metric that raised in a test case
(``metric_errors`` in its ``case.json``) shows ``error`` in its cells, with the exception listed
under the table. Columns without per-task values (upstream-style metrics, counts) show their
value without an interval and take no part in comparisons: the report says so.
"""
from __future__ import annotations

import base64
import csv
import html
import json
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.storymanager.report import plots
from core.storymanager.report.manifest import build_manifest, case_folder, redact
from core.storymanager.report.stats import (bootstrap_ci, holm, mcnemar_exact,
                                            min_discordant_for, paired_bootstrap,
                                            sign_flip_test, smallest_detectable_difference)
from core.testcasecontroller.metrics.passk import estimate_pass_at_k
from core.testcasecontroller.metrics.per_task import PER_TASK_VALUES_FILE, read_per_task_values

logger = logging.getLogger(__name__)

REPORT_DIR = "report"
ERROR_CELL = "error"
"""Shown instead of the (NaN) value of a metric that raised."""
INVALID_CELL = "invalid"
"""Shown instead of the (NaN) value of a metric that failed its own check (``MetricInvalid``)."""
HEATMAP_MAX_TASKS = 200
ALPHA = 0.05


#: curves against the try number that a self-align test case writes (core.scenarios.selfalign)
PER_TRY_FILE = "selfalign_per_try.json"

@dataclass
class CaseView:
    """One leaderboard row with what the report derives from its test case folder."""

    row: dict[str, str]
    label: str
    value: float
    tasks: dict[str, tuple[int, int]] = field(default_factory=dict)
    ci: tuple[float, float] | None = None
    errors: dict[str, str] = field(default_factory=dict)
    """metric -> exception text of the metrics that raised (their cells show ``error``)."""
    invalid: dict[str, str] = field(default_factory=dict)
    """metric -> why it is invalid (failed its own check; its cells show ``invalid``)."""
    per_try: dict[str, Any] = field(default_factory=dict)
    """Curves against the try number of a self-align test case (``selfalign_per_try.json``)."""
    values: dict[str, dict[str, tuple[float, int]]] = field(default_factory=dict)
    """column -> task -> (value, samples): per-task values of the columns that are means
    (``per_task_values.jsonl``, and ``pass@k`` from ``per_task.jsonl``)."""
    weighting: dict[str, str] = field(default_factory=dict)
    """column -> ``samples`` (its value is a mean over samples) or ``tasks``."""
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)
    """column -> 95% bootstrap interval over tasks."""
    differs_from: list[str] = field(default_factory=list)
    """keys of the rows this one differs from on the main metric (paired test, Holm)."""
    key: str = ""
    """the test case folder: names the row across the selected and the all rank."""

    def rates(self) -> dict[str, float]:
        return {t: c / n for t, (n, c) in self.tasks.items() if n}


def _float(text: str | None) -> float:
    try:
        return float(text) if text not in (None, "") else math.nan
    except ValueError:
        return math.nan


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a rank CSV as dicts (header order kept)."""
    with path.open(encoding="utf-8-sig", newline="") as fh:
        return [dict(r) for r in csv.DictReader(fh)]


def _per_task(case_dir: Path) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    try:
        with (case_dir / "per_task.jsonl").open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    entry = json.loads(line)
                    out[str(entry["task_id"])] = (int(entry["n"]), int(entry["c"]))
                except (ValueError, KeyError, TypeError):
                    continue
    except OSError:
        pass
    return out


def _metric_errors(case_dir: Path) -> dict[str, dict[str, Any]]:
    """``metric_errors`` of the test case's ``case.json`` (empty when none or unreadable)."""
    try:
        data = json.loads((case_dir / "case.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    errors = data.get("metric_errors") if isinstance(data, dict) else None
    if not isinstance(errors, dict):
        return {}
    return {str(k): v if isinstance(v, dict) else {"error": str(v)} for k, v in errors.items()}


def _error_notes(views: Sequence[CaseView]) -> list[str]:
    """One sentence per (test case, metric) that raised or is invalid."""
    return [f"{v.label}: metric {name!r} raised {error}; its value is NaN (sorted last when ranking by it)"
            for v in views for name, error in v.errors.items()] + \
        [f"{v.label}: metric {name!r} is invalid, not a score: {why}"
         for v in views for name, why in v.invalid.items()]


def _label(row: Mapping[str, str], modules: Sequence[str]) -> str:
    values = [v for k, v in row.items() if "-" in k and k.split("-", 1)[0] in modules and v]
    text = f"#{row.get('rank', '?')} {row.get('algorithm', '')}"
    if values:
        text += " " + ",".join(values)
    return text if len(text) <= 48 else text[:47] + "…"


def build_views(rows: list[dict[str, str]], metric: str, modules: Sequence[str],
                job_dir: Path | None = None) -> list[CaseView]:
    """One view per rank row; ``job_dir`` (``<workspace>/<job>``) locates the test case
    folders (see :func:`case_folder`)."""
    views = []
    for row in rows:
        case_dir = case_folder(row.get("url", ""), job_dir)
        public = redact(row)
        view = CaseView(dict(public), _label(public, modules), _float(row.get(metric)),
                        _per_task(case_dir), key=str(case_dir))
        curves = case_dir / PER_TRY_FILE
        if curves.is_file():
            try:
                view.per_try = dict(json.loads(curves.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError):
                view.per_try = {}
        for name, entry in _metric_errors(case_dir).items():
            marked = bool(entry.get("invalid"))
            (view.invalid if marked else view.errors)[name] = str(entry.get("error", ""))
            for column in entry.get("columns") or [name]:
                if not view.row.get(str(column)):
                    view.row[str(column)] = INVALID_CELL if marked else ERROR_CELL
        view.values, view.weighting = _column_values(case_dir, view.tasks, row)
        for column, per_task in view.values.items():
            cells = list(per_task.values())
            weights = [n for _, n in cells] if view.weighting.get(column) == "samples" else None
            _mean, low, high = bootstrap_ci([v for v, _ in cells], weights=weights)
            view.intervals[column] = (low, high)
        if metric in view.intervals:
            view.ci = view.intervals[metric]
        views.append(view)
    return views


_PASS_K = re.compile(r"pass@(\d+)$")


def _column_values(case_dir: Path, tasks: Mapping[str, tuple[int, int]], row: Mapping[str, str]
                   ) -> tuple[dict[str, dict[str, tuple[float, int]]], dict[str, str]]:
    """Per-task values of a test case's mean columns: what its metrics recorded
    (``per_task_values.jsonl``), plus each ``pass@k`` column of the row that they did not
    record, from the samples and passes per task (``per_task.jsonl``; unbiased estimator,
    tasks with fewer than k scored samples left out as pass@k leaves them)."""
    values, weighting = read_per_task_values(case_dir / PER_TASK_VALUES_FILE)
    out: dict[str, dict[str, tuple[float, int]]] = dict(values)
    kinds: dict[str, str] = dict(weighting)
    for column in row:
        found = _PASS_K.match(column)
        if not found or column in out or not tasks:
            continue
        k = int(found.group(1))
        per = {t: (estimate_pass_at_k(n, c, k), 1) for t, (n, c) in tasks.items() if n >= k}
        if per:
            out[column], kinds[column] = per, "tasks"
    return out, kinds


def _is_binary(xs: Sequence[float], ys: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for v in (*xs, *ys))


def comparisons(views: list[CaseView], metric: str = "") -> list[dict[str, Any]]:
    """Paired tests between every two test cases that have per-task values of a column over
    the same tasks, for every such column (``metric``, the main one, first).

    Per pair: the mean difference with its paired-bootstrap interval and p-value; pass/fail
    columns (every per-task value 0 or 1) also get the exact McNemar test, other columns the
    sign-flip permutation test. The test's p-value is Holm-adjusted over the pairs of its
    column (``p_adjusted``); ``significant`` means ``p_adjusted < 0.05`` (and, for pass/fail
    columns, the bootstrap agreeing), so a column's family of comparisons keeps a 5% error.
    """
    columns: list[str] = []
    for v in views:
        columns += [c for c in v.values if c not in columns]
    columns.sort(key=lambda c: c != metric)
    out = []
    for column in columns:
        family = []
        for i, a in enumerate(views):
            for b in views[i + 1:]:
                va, vb = a.values.get(column), b.values.get(column)
                if not va or not vb or set(va) != set(vb) or len(va) < 2:
                    continue
                tasks = sorted(va)
                xs = [va[t][0] for t in tasks]
                ys = [vb[t][0] for t in tasks]
                diff, low, high, p_boot = paired_bootstrap(xs, ys)
                entry: dict[str, Any] = {
                    "column": column, "a": a.label, "b": b.label, "a_key": a.key,
                    "b_key": b.key, "tasks": len(tasks),
                    "diff": diff, "ci": (low, high), "p_bootstrap": p_boot,
                    "sd": float(np.std(np.subtract(xs, ys), ddof=1))}
                if _is_binary(xs, ys):
                    only_a = sum(1 for x, y in zip(xs, ys) if x > y)
                    only_b = sum(1 for x, y in zip(xs, ys) if y > x)
                    entry.update(test="McNemar", only_a=only_a, only_b=only_b,
                                 p=mcnemar_exact(only_a, only_b))
                else:
                    entry.update(test="sign-flip", p=sign_flip_test(xs, ys))
                family.append(entry)
        for entry, adjusted in zip(family, holm([e["p"] for e in family])):
            entry["p_adjusted"] = adjusted
            entry["significant"] = bool(adjusted < ALPHA and
                                        (entry["test"] != "McNemar" or entry["p_bootstrap"] < ALPHA))
        out += family
    return out


def detectable(comps: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per column: its tasks and the smallest difference a paired test over them detects
    (80% power, 5% two-sided, normal approximation, from the median standard deviation of
    the per-task differences of its pairs that differ at all; NaN when none does, e.g. two
    gold controls alone), plus, for pass/fail columns, the floor the
    exact McNemar test sets: at least 6 tasks won by one side and none by the other."""
    out: dict[str, dict[str, Any]] = {}
    for column in dict.fromkeys(c["column"] for c in comps):
        mine = [c for c in comps if c["column"] == column]
        tasks = max(c["tasks"] for c in mine)
        spread = [c["sd"] for c in mine if c["sd"] > 0]
        sd = float(np.median(spread)) if spread else math.nan
        entry: dict[str, Any] = {"tasks": tasks, "mde": smallest_detectable_difference(sd, tasks)}
        if any(c["test"] == "McNemar" for c in mine):
            entry["floor"] = min_discordant_for(ALPHA) / tasks
        out[column] = entry
    return out


def mark_distinguishable(views: list[CaseView], comps: Sequence[Mapping[str, Any]],
                         metric: str) -> None:
    """Fill each view's ``differs_from``: the rows it differs from on ``metric``."""
    for c in comps:
        if c["column"] != metric or not c["significant"]:
            continue
        for v in views:
            if v.key == c["a_key"]:
                v.differs_from.append(c["b_key"])
            elif v.key == c["b_key"]:
                v.differs_from.append(c["a_key"])


def figures(views: list[CaseView], metric: str) -> dict[str, bytes]:
    if not plots.available():
        return {}
    labels = [v.label for v in views]
    out: dict[str, bytes | None] = {
        "metric": plots.metric_with_ci(labels, [v.value for v in views],
                                       [v.ci for v in views], metric),
        "outcomes": plots.outcome_breakdown(labels, [{o: _float(v.row.get(o)) if v.row.get(o)
                                                      else 0 for o in plots.OUTCOMES}
                                                     for v in views]),
        "cost": plots.score_vs_cost(labels, [v.value for v in views],
                                    [_float(v.row.get("latency_s")) for v in views], metric,
                                    [_float(v.row.get("tokens_per_s")) for v in views]),
    }
    if any(v.row.get("cloud_share") for v in views):  # a cloud-edge job (jointinference)
        out["cloud_edge"] = plots.cost_quality_plane(
            [v.row.get("algorithm", "") for v in views],
            [_float(v.row.get("cloud_share")) for v in views], [v.value for v in views], metric,
            [v.row.get("hard_example_mining") == "OracleRouter" for v in views])
    with_curves = [v for v in views if v.per_try.get("tries")]
    if with_curves:
        out["per_try"] = plots.per_try_curves([v.label for v in with_curves],
                                              [v.per_try for v in with_curves])
    with_tasks = [v for v in views if v.tasks]
    if with_tasks:
        tasks = sorted(set().union(*(v.tasks for v in with_tasks)))
        if len(tasks) <= HEATMAP_MAX_TASKS:
            out["tasks"] = plots.task_heatmap([v.label for v in with_tasks], tasks,
                                              [[v.rates().get(t, math.nan) for t in tasks]
                                               for v in with_tasks])
        else:
            cats = sorted({_category(t) for t in tasks})
            rows = []
            for v in with_tasks:
                rates = v.rates()
                per: dict[str, list[float]] = {}
                for t, r in rates.items():
                    per.setdefault(_category(t), []).append(r)
                rows.append([sum(per.get(c, [math.nan])) / len(per.get(c, [1])) for c in cats])
            out["categories"] = plots.category_summary([v.label for v in with_tasks], cats, rows)
    return {k: v for k, v in out.items() if v is not None}


def _category(task_id: str) -> str:
    """``HumanEval/12#3`` -> ``HumanEval``: the part before the first ``/`` or ``#``."""
    for sep in ("/", "#"):
        if sep in task_id:
            return task_id.split(sep, 1)[0]
    return task_id


def _p(value: float) -> str:
    """A bootstrap p-value: 0 means below the resolution of 2000 resamples."""
    return "<0.0005" if value == 0 else f"{value:.3g}"


def _ci_text(view: CaseView) -> str:
    return f"[{view.ci[0]:.3f}, {view.ci[1]:.3f}]" if view.ci else "n/a"


def _rank_tag(label: str) -> str:
    """``#2 codegen embedded`` -> ``#2``: how the tables name another row."""
    return label.split(" ", 1)[0]


def _differs_text(view: CaseView, views: Sequence[CaseView]) -> str:
    """The rows ``view`` differs from, by their rank in ``views`` (the table shown)."""
    names = {v.key: _rank_tag(v.label) for v in views}
    return ", ".join(names.get(k, "a row of the all rank") for k in view.differs_from) or "none"


def _interval_columns(views: Sequence[CaseView], columns: Sequence[str]) -> list[str]:
    """The leaderboard's columns that have an interval in some row, in table order (then
    any other recorded column)."""
    found = [c for c in columns if any(c in v.intervals for v in views)]
    for v in views:
        found += [c for c in v.intervals if c not in found]
    return found


def _interval_cell(view: CaseView, column: str) -> str:
    if column not in view.intervals:
        return "n/a"
    low, high = view.intervals[column]
    values = view.values.get(column, {})
    return f"[{low:.4g}, {high:.4g}] ({len(values)} tasks)"


def _test_text(c: Mapping[str, Any]) -> str:
    if c["test"] == "McNemar":
        return f"McNemar ({c['only_a']} / {c['only_b']})"
    return "sign-flip"


def _verdict(c: Mapping[str, Any]) -> str:
    return "significant" if c["significant"] else "not significant (noise)"


def _detectable_rows(comps: Sequence[Mapping[str, Any]]) -> list[tuple[str, int, str, str]]:
    rows = []
    for column, entry in detectable(comps).items():
        mde = entry["mde"]
        floor = entry.get("floor")
        rows.append((column, entry["tasks"], "n/a" if math.isnan(mde) else f"{mde:.4g}",
                     "" if floor is None else f"{floor:.4g}"))
    return rows


UNCERTAINTY_NOTE = (
    "Intervals: percentile bootstrap over tasks (2000 resamples) of every column that is a "
    "mean over tasks or samples and whose metric recorded its per-task values (tasks "
    "resampled whole; a mean over samples is weighted by each task's samples); n/a where "
    "the metric has none. Paired comparisons: every two rows over the same tasks, for each "
    "such column: mean difference with its paired-bootstrap interval; the exact McNemar test "
    "for pass/fail columns, the sign-flip permutation test for the others; p-values "
    "Holm-adjusted over the pairs of a column. 'differs from' lists the rows a row is "
    "significantly different from on the main metric; rows not listed cannot be told apart "
    "on these tasks.")


def render_markdown(views: list[CaseView], columns: list[str], metric: str,
                    comps: list[dict[str, Any]], images: Mapping[str, str],
                    manifest: Mapping[str, Any]) -> str:
    def cell(text: Any) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    mach = manifest["machine"]
    lines = ["# Leaderboard", "",
             f"Job `{cell(manifest['job'])}`, dataset `{cell(manifest['dataset']['file'])}` "
             f"(sha256 `{str(manifest['dataset']['sha256'])[:16]}…`, "
             f"{manifest['dataset']['records']} records), run on {cell(mach['cpu'])} "
             f"({mach['cpu_count']} CPUs, {mach['memory_mb']} MB), Python {mach['python']}, "
             f"{mach['project']} {mach['version']}. Full details: `manifest.json`.", "",
             "| " + " | ".join(cell(c) for c in columns)
             + f" | differs from ({cell(metric)}) | {cell(metric)} 95% CI |",
             "|" + "---|" * (len(columns) + 2)]
    for v in views:
        lines.append("| " + " | ".join(cell(v.row.get(c, "")) for c in columns)
                     + f" | {_differs_text(v, views)} | {_ci_text(v)} |")
    notes = _error_notes(views)
    if notes:
        lines += ["", "Metric errors and invalid metrics (cells marked `error` or `invalid`):", ""]
        lines += [f"- {cell(n)}" for n in notes]
    lines += ["", UNCERTAINTY_NOTE, ""]
    shown = _interval_columns(views, columns)
    if shown:
        lines += ["## Intervals", "", "| row | " + " | ".join(cell(c) for c in shown) + " |",
                  "|" + "---|" * (len(shown) + 1)]
        lines += ["| " + cell(v.label) + " | " + " | ".join(_interval_cell(v, c) for c in shown)
                  + " |" for v in views]
        lines.append("")
    lines += ["## Paired comparisons", ""]
    if comps:
        lines += ["| column | A | B | tasks | A - B | 95% CI | p (bootstrap) | test | p (test) | "
                  "p (Holm) | difference |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for c in comps:
            lines.append(f"| {cell(c['column'])} | {cell(c['a'])} | {cell(c['b'])} | "
                         f"{c['tasks']} | {c['diff']:+.4g} | "
                         f"[{c['ci'][0]:+.4g}, {c['ci'][1]:+.4g}] | {_p(c['p_bootstrap'])} | "
                         f"{_test_text(c)} | {c['p']:.3g} | {c['p_adjusted']:.3g} | "
                         f"{_verdict(c)} |")
        lines += ["", "Smallest difference a paired test over these tasks detects (80% power, "
                  "5% two-sided, from the spread of the per-task differences above); for a "
                  "pass/fail column, the floor below which the exact McNemar test cannot reach "
                  "significance at all (6 tasks won by one side, none by the other):", "",
                  "| column | tasks | detectable (80% power) | floor (pass/fail) |",
                  "|---|---|---|---|"]
        lines += [f"| {cell(c)} | {n} | {mde} | {floor} |"
                  for c, n, mde, floor in _detectable_rows(comps)]
    else:
        lines.append("No two test cases have per-task values over the same tasks.")
    if images:
        lines += ["", "## Figures", ""]
        lines += [f"![{name}]({path})" for name, path in images.items()]
    return "\n".join(lines) + "\n"


def render_html(views: list[CaseView], columns: list[str], metric: str,
                comps: list[dict[str, Any]], pngs: Mapping[str, bytes],
                manifest: Mapping[str, Any]) -> str:
    e = html.escape
    mach = manifest["machine"]
    head = "".join(f"<th>{e(c)}</th>" for c in columns) + \
        f"<th>differs from ({e(metric)})</th><th>{e(metric)} 95% CI</th>"
    body = "".join("<tr>" + "".join(f"<td>{e(str(v.row.get(c, '')))}</td>" for c in columns)
                   + f"<td>{e(_differs_text(v, views))}</td><td>{e(_ci_text(v))}</td></tr>"
                   for v in views)
    shown = _interval_columns(views, columns)
    intervals_html = ""
    if shown:
        intervals_html = ("<h2>Intervals</h2><table id='intervals'><tr><th>row</th>"
                          + "".join(f"<th>{e(c)}</th>" for c in shown) + "</tr>"
                          + "".join(f"<tr><td>{e(v.label)}</td>"
                                    + "".join(f"<td>{e(_interval_cell(v, c))}</td>" for c in shown)
                                    + "</tr>" for v in views) + "</table>")
    if comps:
        comp_rows = "".join(
            f"<tr><td>{e(c['column'])}</td><td>{e(c['a'])}</td><td>{e(c['b'])}</td>"
            f"<td>{c['tasks']}</td><td>{c['diff']:+.4g}</td>"
            f"<td>[{c['ci'][0]:+.4g}, {c['ci'][1]:+.4g}]</td><td>{_p(c['p_bootstrap'])}</td>"
            f"<td>{e(_test_text(c))}</td><td>{c['p']:.3g}</td><td>{c['p_adjusted']:.3g}</td>"
            f"<td>{_verdict(c)}</td></tr>" for c in comps)
        comp_html = ("<table id='comparisons'><tr><th>column</th><th>A</th><th>B</th>"
                     "<th>tasks</th><th>A - B</th><th>95% CI</th><th>p (bootstrap)</th>"
                     "<th>test</th><th>p (test)</th><th>p (Holm)</th><th>difference</th></tr>"
                     + comp_rows + "</table>")
        comp_html += ("<p>Smallest difference a paired test over these tasks detects (80% "
                      "power, 5% two-sided); for a pass/fail column, the floor the exact "
                      "McNemar test sets:</p><table id='detectable'><tr><th>column</th>"
                      "<th>tasks</th><th>detectable (80% power)</th><th>floor (pass/fail)</th>"
                      "</tr>" + "".join(f"<tr><td>{e(c)}</td><td>{n}</td><td>{mde}</td>"
                                        f"<td>{floor}</td></tr>"
                                        for c, n, mde, floor in _detectable_rows(comps))
                      + "</table>")
    else:
        comp_html = "<p>No two test cases have per-task values over the same tasks.</p>"
    notes = _error_notes(views)
    errors_html = ("<p>Metric errors and invalid metrics (cells marked <code>error</code> or "
                   "<code>invalid</code>):</p><ul id='metric-errors'>"
                   + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>") if notes else ""
    imgs = "".join(f"<figure><img alt='{e(name)}' src='data:image/png;base64,"
                   f"{base64.b64encode(data).decode('ascii')}'><figcaption>{e(name)}"
                   "</figcaption></figure>" for name, data in pngs.items())
    if not pngs:
        imgs = ("<p>No figures: matplotlib is not installed "
                "(<code>pip install 'ianvs-smart-coding[plots]'</code>).</p>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Leaderboard</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:1400px}}table{{border-collapse:collapse;
margin:1em 0;font-size:13px}}td,th{{border:1px solid #ccc;padding:3px 6px;text-align:left}}
th{{background:#eee}}img{{max-width:100%}}figure{{margin:1em 0}}</style></head>
<body><h1>Leaderboard</h1>
<p>Job <code>{e(str(manifest['job']))}</code>; dataset <code>{e(str(manifest['dataset']['file']))}</code>
(sha256 <code>{e(str(manifest['dataset']['sha256']))}</code>, {manifest['dataset']['records']} records);
machine {e(str(mach['cpu']))}, {mach['cpu_count']} CPUs, {mach['memory_mb']} MB, Python {e(mach['python'])},
{e(mach['project'])} {e(mach['version'])}. Full details in <code>manifest.json</code>.</p>
<table id="leaderboard"><tr>{head}</tr>{body}</table>
{errors_html}
<p>{e(UNCERTAINTY_NOTE)}</p>
{intervals_html}
<h2>Paired comparisons</h2>{comp_html}
<h2>Figures</h2>{imgs}
</body></html>
"""


def write_report(job_dir: Path, rank_csv: Path, metric: str, modules: Sequence[str],
                 job_source: Path, dataset: Path, sandbox: Mapping[str, Any],
                 command: list[str], all_csv: Path | None = None,
                 run_facts: Callable[[Path], Mapping[str, Any]] | None = None) -> Path:
    """Write ``<job_dir>/report/`` and return the folder.

    The leaderboard table shows ``rank_csv`` (the selected rank, as configured); comparisons,
    figures and the manifest cover every test case of ``all_csv`` (the all rank, whose rows
    the selection may have merged), or of ``rank_csv`` when there is none. ``metric`` is the
    main metric (first ``sort_by``); ``modules`` the module types (to label test cases by their
    hyperparameters); ``run_facts`` what the job's task kind reports of a test case folder
    (the manifest's sandbox facts).
    """
    rows = read_rows(rank_csv)
    views = build_views(rows, metric, modules, job_dir)
    all_rows = read_rows(all_csv) if all_csv is not None and all_csv.exists() else rows
    every = build_views(all_rows, metric, modules, job_dir) if all_rows is not rows else views
    columns = [c for c in (rows[0] if rows else {}) if c != "url"]
    comps = comparisons(every, metric)
    mark_distinguishable(every, comps, metric)
    if every is not views:
        mark_distinguishable(views, comps, metric)
    pngs = figures(every, metric)
    out = job_dir / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    images = {}
    for name, data in pngs.items():
        (out / f"{name}.png").write_bytes(data)
        images[name] = f"{name}.png"
    manifest = build_manifest(job_source, dataset, sandbox, all_rows, command, job_dir,
                              run_facts)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))
    (out / "leaderboard.md").write_text(render_markdown(views, columns, metric, comps, images,
                                                        manifest))
    (out / "index.html").write_text(render_html(views, columns, metric, comps, pngs, manifest))
    return out
