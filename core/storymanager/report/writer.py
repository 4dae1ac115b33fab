"""Write ``report/`` after a job: ``leaderboard.md``, ``index.html``, ``manifest.json`` and the
figures (PNG files beside the Markdown; embedded as ``data:`` URIs in the HTML, so
``index.html`` is one self-contained file that needs no network).

Contents: the leaderboard (the selected rank rows, credential-like columns redacted), the main
metric (the first ``sort_by`` metric) with a 95% bootstrap confidence interval over tasks where
per-task results exist (``per_task.jsonl``, written by the code metrics), paired comparisons of
test cases that ran the same tasks (paired bootstrap of the per-task pass rate and an exact
McNemar test; a task counts as passed when at least half of its scored samples pass), and the
figures of :mod:`plots`. A metric that raised in a test case (``metric_errors`` in its
``case.json``) shows ``error`` in its cells, with the exception listed under the table. Test
cases without per-task results (upstream-style metrics) show their
value without an interval and take no part in comparisons: the report says so.
"""
from __future__ import annotations

import base64
import csv
import html
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.storymanager.report import plots
from core.storymanager.report.manifest import build_manifest, case_folder, redact
from core.storymanager.report.stats import bootstrap_ci, mcnemar_exact, paired_bootstrap

logger = logging.getLogger(__name__)

REPORT_DIR = "report"
ERROR_CELL = "error"
"""Shown instead of the (NaN) value of a metric that raised."""
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
    per_try: dict[str, Any] = field(default_factory=dict)
    """Curves against the try number of a self-align test case (``selfalign_per_try.json``)."""

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
    """One sentence per (test case, metric) that raised."""
    return [f"{v.label}: metric {name!r} raised {error}; its value is NaN (sorted last when ranking by it)"
            for v in views for name, error in v.errors.items()]


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
                        _per_task(case_dir))
        curves = case_dir / PER_TRY_FILE
        if curves.is_file():
            try:
                view.per_try = dict(json.loads(curves.read_text(encoding="utf-8")))
            except (OSError, ValueError, TypeError):
                view.per_try = {}
        for name, entry in _metric_errors(case_dir).items():
            view.errors[name] = str(entry.get("error", ""))
            for column in entry.get("columns") or [name]:
                if not view.row.get(str(column)):
                    view.row[str(column)] = ERROR_CELL
        if view.tasks and metric.startswith("pass@1"):
            _mean, low, high = bootstrap_ci(list(view.rates().values()))
            view.ci = (low, high)
        views.append(view)
    return views


def comparisons(views: list[CaseView]) -> list[dict[str, Any]]:
    """Every pair of test cases with per-task results over the same tasks."""
    out = []
    for i, a in enumerate(views):
        for b in views[i + 1:]:
            if not a.tasks or set(a.tasks) != set(b.tasks):
                continue
            tasks = sorted(a.tasks)
            ra, rb = a.rates(), b.rates()
            xs = [ra.get(t, 0.0) for t in tasks]
            ys = [rb.get(t, 0.0) for t in tasks]
            diff, low, high, p_boot = paired_bootstrap(xs, ys)
            only_a = sum(1 for x, y in zip(xs, ys) if x >= 0.5 > y)
            only_b = sum(1 for x, y in zip(xs, ys) if y >= 0.5 > x)
            p_mcnemar = mcnemar_exact(only_a, only_b)
            out.append({"a": a.label, "b": b.label, "tasks": len(tasks), "diff": diff,
                        "ci": (low, high), "p_bootstrap": p_boot, "only_a": only_a,
                        "only_b": only_b, "p_mcnemar": p_mcnemar,
                        "significant": bool(p_mcnemar < ALPHA and p_boot < ALPHA)})
    return out


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
             "| " + " | ".join(cell(c) for c in columns) + f" | {metric} 95% CI |",
             "|" + "---|" * (len(columns) + 1)]
    for v in views:
        lines.append("| " + " | ".join(cell(v.row.get(c, "")) for c in columns)
                     + f" | {_ci_text(v)} |")
    notes = _error_notes(views)
    if notes:
        lines += ["", "Metric errors (cells marked `error`):", ""]
        lines += [f"- {cell(n)}" for n in notes]
    lines += ["", f"Intervals: percentile bootstrap over tasks (2000 resamples) of the per-task "
              f"pass rate; n/a where the metric has no per-task results.", ""]
    lines += ["## Paired comparisons", ""]
    if comps:
        lines += ["| A | B | tasks | A - B | 95% CI | p (bootstrap) | only A / only B | "
                  "p (McNemar) | difference |", "|---|---|---|---|---|---|---|---|---|"]
        for c in comps:
            lines.append(f"| {cell(c['a'])} | {cell(c['b'])} | {c['tasks']} | "
                         f"{c['diff']:+.3f} | [{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}] | "
                         f"{_p(c['p_bootstrap'])} | {c['only_a']} / {c['only_b']} | "
                         f"{c['p_mcnemar']:.3g} | "
                         f"{'significant' if c['significant'] else 'not significant (noise)'} |")
    else:
        lines.append("No two test cases have per-task results over the same tasks.")
    if images:
        lines += ["", "## Figures", ""]
        lines += [f"![{name}]({path})" for name, path in images.items()]
    return "\n".join(lines) + "\n"


def render_html(views: list[CaseView], columns: list[str], metric: str,
                comps: list[dict[str, Any]], pngs: Mapping[str, bytes],
                manifest: Mapping[str, Any]) -> str:
    e = html.escape
    mach = manifest["machine"]
    head = "".join(f"<th>{e(c)}</th>" for c in columns) + f"<th>{e(metric)} 95% CI</th>"
    body = "".join("<tr>" + "".join(f"<td>{e(str(v.row.get(c, '')))}</td>" for c in columns)
                   + f"<td>{e(_ci_text(v))}</td></tr>" for v in views)
    if comps:
        comp_rows = "".join(
            f"<tr><td>{e(c['a'])}</td><td>{e(c['b'])}</td><td>{c['tasks']}</td>"
            f"<td>{c['diff']:+.3f}</td><td>[{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}]</td>"
            f"<td>{_p(c['p_bootstrap'])}</td><td>{c['only_a']} / {c['only_b']}</td>"
            f"<td>{c['p_mcnemar']:.3g}</td><td>"
            f"{'significant' if c['significant'] else 'not significant (noise)'}</td></tr>"
            for c in comps)
        comp_html = ("<table id='comparisons'><tr><th>A</th><th>B</th><th>tasks</th>"
                     "<th>A - B</th><th>95% CI</th><th>p (bootstrap)</th>"
                     "<th>only A / only B</th><th>p (McNemar)</th><th>difference</th></tr>"
                     + comp_rows + "</table>")
    else:
        comp_html = "<p>No two test cases have per-task results over the same tasks.</p>"
    notes = _error_notes(views)
    errors_html = ("<p>Metric errors (cells marked <code>error</code>):</p><ul id='metric-errors'>"
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
<p>Intervals: percentile bootstrap over tasks (2000 resamples) of the per-task pass rate; n/a
where the metric has no per-task results.</p>
<h2>Paired comparisons</h2>{comp_html}
<h2>Figures</h2>{imgs}
</body></html>
"""


def write_report(job_dir: Path, rank_csv: Path, metric: str, modules: Sequence[str],
                 job_source: Path, dataset: Path, sandbox: Mapping[str, Any],
                 command: list[str], all_csv: Path | None = None) -> Path:
    """Write ``<job_dir>/report/`` and return the folder.

    The leaderboard table shows ``rank_csv`` (the selected rank, as configured); comparisons,
    figures and the manifest cover every test case of ``all_csv`` (the all rank, whose rows
    the selection may have merged), or of ``rank_csv`` when there is none. ``metric`` is the
    main metric (first ``sort_by``); ``modules`` the module types (to label test cases by their
    hyperparameters).
    """
    rows = read_rows(rank_csv)
    views = build_views(rows, metric, modules, job_dir)
    all_rows = read_rows(all_csv) if all_csv is not None and all_csv.exists() else rows
    every = build_views(all_rows, metric, modules, job_dir) if all_rows is not rows else views
    columns = [c for c in (rows[0] if rows else {}) if c != "url"]
    comps = comparisons(every)
    pngs = figures(every, metric)
    out = job_dir / REPORT_DIR
    out.mkdir(parents=True, exist_ok=True)
    images = {}
    for name, data in pngs.items():
        (out / f"{name}.png").write_bytes(data)
        images[name] = f"{name}.png"
    manifest = build_manifest(job_source, dataset, sandbox, all_rows, command, job_dir)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))
    (out / "leaderboard.md").write_text(render_markdown(views, columns, metric, comps, images,
                                                        manifest))
    (out / "index.html").write_text(render_html(views, columns, metric, comps, pngs, manifest))
    return out
