"""``ianvs leaderboard``: one leaderboard across runs (different models, machines, days).

Each input is a workspace, a job folder or a rank folder; every ``<job>/rank/all_rank.csv``
found below it contributes its rows, with facts from the job's ``report/manifest.json``
(dataset file and SHA-256, machine, Python, project version, and per test case its isolation
and grading tiers and finish time) as extra columns. Rows are ranked by one metric.

Rows are only ranked together when they measured the same data: if two runs used a dataset
file of the same name with different contents (SHA-256), the command refuses with a message
naming both, instead of ranking incomparable scores side by side. A run without a manifest
(``--no-report``, or an older version) cannot be checked and is refused too.
"""
from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from pathlib import Path

from core.common.errors import ConfigError
from core.storymanager.report.writer import read_rows

FACT_COLUMNS = ("dataset", "dataset_sha256", "records", "cpu", "python", "version",
                "isolation", "grading", "finished")


@dataclass(frozen=True)
class BoardRow:
    source: Path
    values: dict[str, str]


def _rank_files(path: Path) -> list[Path]:
    if path.is_file() and path.name.endswith(".csv"):
        return [path]
    if (path / "all_rank.csv").is_file():
        return [path / "all_rank.csv"]
    found = sorted(path.glob("rank/all_rank.csv")) + sorted(path.glob("*/rank/all_rank.csv"))
    return found


def collect(paths: list[Path]) -> list[BoardRow]:
    """Every row of every rank file below ``paths``, with its run's manifest facts.

    Raises:
        ConfigError: a path holds no rank file, a run has no manifest, or one dataset name has
            two different contents.
    """
    rows: list[BoardRow] = []
    hashes: dict[str, tuple[str, Path]] = {}
    for path in paths:
        files = _rank_files(path)
        if not files:
            raise ConfigError(f"no rank file (rank/all_rank.csv) found in {path}",
                              hint="give a workspace, a job folder or a rank folder")
        for rank_csv in files:
            job_dir = rank_csv.parent.parent
            manifest_path = job_dir / "report" / "manifest.json"
            try:
                manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ConfigError(f"{rank_csv}: its run has no readable report/manifest.json "
                                  f"({exc}); without the dataset's hash its scores cannot be "
                                  "compared", hint="re-run that job without --no-report") from exc
            dataset = manifest.get("dataset", {})
            name = Path(str(dataset.get("file", "?"))).name
            digest = str(dataset.get("sha256"))
            seen = hashes.get(name)
            if seen is not None and seen[0] != digest:
                raise ConfigError(
                    f"dataset {name!r} has different contents in {seen[1]} (sha256 "
                    f"{seen[0][:12]}…) and {job_dir} (sha256 {digest[:12]}…): their scores "
                    "are not comparable, so they are not ranked together",
                    hint="rename one of the dataset files, or build separate leaderboards")
            hashes[name] = (digest, job_dir)
            machine = manifest.get("machine", {})
            cases = {str(c.get("url")): c for c in manifest.get("test_cases", [])}
            for row in read_rows(rank_csv):
                case = cases.get(row.get("url", ""), {})
                sandbox = case.get("sandbox", {})
                facts = {"dataset": name, "dataset_sha256": digest[:12],
                         "records": str(dataset.get("records", "")),
                         "cpu": str(machine.get("cpu", "")),
                         "python": str(machine.get("python", "")),
                         "version": str(machine.get("version", "")),
                         "isolation": str(sandbox.get("isolation") or row.get("isolation", "")),
                         "grading": str(sandbox.get("grading") or row.get("grading", "")),
                         "finished": str(case.get("finished") or row.get("time", ""))}
                values = {k: v for k, v in row.items() if k not in ("rank", "url")}
                values.update(facts)
                values["run"] = str(job_dir)
                rows.append(BoardRow(rank_csv, values))
    return rows


def _number(text: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def rank(rows: list[BoardRow], metric: str) -> tuple[list[str], list[list[str]]]:
    """``(header, rows)`` sorted by ``metric`` descending (missing values last)."""
    if rows and not any(metric in r.values for r in rows):
        known = sorted({k for r in rows for k in r.values})
        raise ConfigError(f"metric {metric!r} is in none of the rank files",
                          hint=f"columns: {', '.join(known)}")
    metrics: list[str] = [metric]
    for r in rows:
        for key in r.values:
            if key not in metrics and key not in FACT_COLUMNS and key != "run":
                metrics.append(key)
    header = ["rank", *metrics, *FACT_COLUMNS, "run"]
    ordered = sorted(rows, key=lambda r: (math.isnan(v := _number(r.values.get(metric, ""))),
                                          -v if not math.isnan(v) else 0.0))
    body = [[str(i), *(r.values.get(c, "") for c in header[1:])]
            for i, r in enumerate(ordered, start=1)]
    return header, body


def to_markdown(header: list[str], body: list[list[str]], title: str) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [f"# {title}", "", "| " + " | ".join(map(cell, header)) + " |",
             "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in body]
    return "\n".join(lines) + "\n"


def to_html(header: list[str], body: list[list[str]], title: str) -> str:
    e = html.escape
    rows = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in body)
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{e(title)}"
            "</title><style>table{border-collapse:collapse;font:13px sans-serif}td,th{border:"
            "1px solid #ccc;padding:3px 6px}th{background:#eee}</style></head><body>"
            f"<h1>{e(title)}</h1><table id='board'><tr>"
            + "".join(f"<th>{e(h)}</th>" for h in header) + f"</tr>{rows}</table></body></html>\n")


def build_board(paths: list[Path], metric: str | None, output: Path | None, as_html: bool,
                title: str = "Leaderboard across runs") -> str:
    """Collect, rank and render; writes ``output`` when given and returns the text.
    ``metric`` None: the first metric column of the first rank file."""
    rows = collect(paths)
    if metric is None:
        first = next((r.values for r in rows), {})
        metric = next((k for k in first if k != "algorithm"), "")
    header, body = rank(rows, metric)
    text = to_html(header, body, title) if as_html else to_markdown(header, body, title)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    return text

