"""Human judgment of a finished run, as the Smart Coding proposal asks ("manual judgment ...
acc is calculated in the end"), and its agreement with the LLM judge.

* :func:`export_sheet` writes every generated answer of the job's test cases as a **blind**
  rating sheet: ``ratings.csv`` (columns ``item, task, reference, answer, rating, note``) and
  ``index.html``, one offline page (no network, no server) that shows the same items and
  downloads the filled-in ``ratings.csv``. Items are shuffled (``seed``) and carry opaque ids;
  which test case produced an item is kept apart in ``items.json``.
* :func:`import_ratings` reads a filled-in CSV (``rating`` is ``1`` acceptable, ``0`` not,
  empty = not rated) and writes ``human_ratings.jsonl`` into each test case folder.
* :func:`human_judgment` is the metric that puts ``human_acc`` (share of rated answers judged
  acceptable), ``human_rated`` and ``judge_kappa`` (Cohen's kappa between the humans and the
  LLM judge's accept verdicts, see :mod:`core.scenarios.judge`) on the leaderboard once ratings
  exist; NaN before.
"""
from __future__ import annotations

import csv
import hashlib
import html
import json
import math
import random
from pathlib import Path
from typing import Any

from core.common.errors import DatasetError, IanvsError
from core.common.jsonl import iter_jsonl
from core.scenarios import get_kind
from core.scenarios.judge import JUDGE_ITEMS

HUMAN_FILE = "human_ratings.jsonl"
SHEET_COLUMNS = ("item", "task", "reference", "answer", "rating", "note")
KEY_FILE = "items.json"


def cohen_kappa(a: list[int], b: list[int]) -> float:
    """Cohen's kappa of two raters' labels on the same items; NaN when undefined (fewer than
    two items, or both raters constant on the same label)."""
    if len(a) != len(b) or len(a) < 2:
        return math.nan
    labels = sorted(set(a) | set(b))
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b)) / n
    expected = sum((a.count(label) / n) * (b.count(label) / n) for label in labels)
    if expected >= 1.0:
        return math.nan
    return (observed - expected) / (1.0 - expected)


def _task_kind_of(job: Any) -> str:
    kind = getattr(job.testenv, "task_kind", None) or job.testenv.extra.get("task_kind")
    if not kind:
        raise IanvsError("the job's testenv names no task_kind", source=job.testenv.source,
                         hint="add 'task_kind: comment' or 'task_kind: issue' to testenv.yaml")
    return str(kind)


def _case_dirs(job: Any) -> list[Path]:
    return sorted(p.parent for p in job.job_dir.glob("*/*/predictions.jsonl"))


def _predictions(case_dir: Path) -> dict[str, dict[str, Any]]:
    """task_id -> prediction (a later line wins, as the prediction store reads it)."""
    preds: dict[str, dict[str, Any]] = {}
    # the run's own log: a plugin's NaN value in it must not lose the finished predictions
    for _line, entry in iter_jsonl(case_dir / "predictions.jsonl", "prediction log",
                                   finite=False):
        pred = entry.get("prediction")
        if isinstance(pred, dict) and "task_id" in pred:
            preds[str(pred["task_id"])] = pred
    return preds


def export_sheet(job: Any, out_dir: Path, seed: int = 0) -> int:
    """Write ``ratings.csv``, ``index.html`` and ``items.json`` (module docstring); returns
    the number of items.

    Raises:
        IanvsError: the job has no task kind or no finished test case.
    """
    kind = get_kind(_task_kind_of(job))
    records: dict[str, dict[str, Any]] = {}
    test = job.testenv.dataset.parse("test", "inference")  # JSONL or metadata.json layouts
    for line, raw in test.numbered_records():
        record = kind.validate(raw, source=str(test.path), line=line)
        records[record["id"]] = record
    items: list[dict[str, Any]] = []
    for case_dir in _case_dirs(job):
        for task_id, pred in _predictions(case_dir).items():
            if task_id not in records:
                continue
            record = records[task_id]
            view = kind.judge_view(record)
            for sample in pred.get("samples", []):
                if sample.get("error"):
                    continue
                raw = str(sample.get("raw_output") or "")
                ref = f"{case_dir.relative_to(job.job_dir)}|{task_id}|{sample.get('sample_index', 0)}"
                items.append({"item": hashlib.sha256(ref.encode()).hexdigest()[:10],
                              "case": str(case_dir.relative_to(job.job_dir)),
                              "task_id": task_id,
                              "sample_index": int(sample.get("sample_index", 0)),
                              "task": view["task"], "reference": view["reference"],
                              "answer": kind.answer(raw, record)})
    if not items:
        raise IanvsError("no finished answers to rate", source=job.job_dir,
                         hint="run the job first: ianvs -f <job.yaml>")
    random.Random(seed).shuffle(items)
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "ratings.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=SHEET_COLUMNS)
        writer.writeheader()
        for item in items:
            writer.writerow({**{k: item[k] for k in ("item", "task", "reference", "answer")},
                             "rating": "", "note": ""})
    key = {i["item"]: {"case": i["case"], "task_id": i["task_id"],
                       "sample_index": i["sample_index"]} for i in items}
    (out_dir / KEY_FILE).write_text(json.dumps(key, indent=1), encoding="utf-8")
    (out_dir / "index.html").write_text(_html(items, kind.name), encoding="utf-8")
    return len(items)


def _html(items: list[dict[str, Any]], kind: str) -> str:
    rows = []
    for n, item in enumerate(items, start=1):
        rows.append(
            f'<section data-item="{html.escape(item["item"])}"><h2>{n}. item '
            f'{html.escape(item["item"])}</h2><h3>Task</h3><pre>{html.escape(item["task"])}</pre>'
            f'<h3>Reference</h3><pre>{html.escape(item["reference"])}</pre>'
            f'<h3>Answer to rate</h3><pre>{html.escape(item["answer"] or "(empty)")}</pre>'
            f'<p><label><input type="radio" name="r{n}" value="1"> acceptable</label> '
            f'<label><input type="radio" name="r{n}" value="0"> not acceptable</label> '
            f'<input type="text" class="note" placeholder="note (optional)" size="50"></p>'
            f'</section>')
    data = json.dumps([{k: i[k] for k in ("item", "task", "reference", "answer")}
                       for i in items]).replace("</", "<\\/")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Rating sheet ({html.escape(kind)})</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:auto}}pre{{white-space:pre-wrap;
background:#f4f4f4;padding:.5em}}section{{border-bottom:1px solid #ccc;padding-bottom:1em}}</style>
</head><body>
<h1>Rating sheet: {html.escape(kind)} answers</h1>
<p>For each answer, choose <b>acceptable</b> if you would accept it as an answer to the task
(compare with the reference), else <b>not acceptable</b>. Answers are shuffled and do not say
which model wrote them. When done, press <b>Download ratings.csv</b> and give the file to
<code>ianvs judge import</code>. Nothing leaves this page.</p>
<p><button id="download">Download ratings.csv</button> <span id="count"></span></p>
{''.join(rows)}
<script>
const ITEMS = {data};
function q(v) {{ return '"' + String(v).replace(/"/g, '""') + '"'; }}
function csvText() {{
  const lines = ['item,task,reference,answer,rating,note'];
  document.querySelectorAll('section').forEach((sec, i) => {{
    const it = ITEMS[i];
    const picked = sec.querySelector('input[type=radio]:checked');
    const note = sec.querySelector('.note').value;
    lines.push([it.item, it.task, it.reference, it.answer, picked ? picked.value : '', note]
               .map(q).join(','));
  }});
  return lines.join('\\r\\n') + '\\r\\n';
}}
document.getElementById('download').onclick = () => {{
  const blob = new Blob([csvText()], {{type: 'text/csv'}});
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob); a.download = 'ratings.csv'; a.click();
}};
document.addEventListener('change', () => {{
  const n = document.querySelectorAll('input[type=radio]:checked').length;
  document.getElementById('count').textContent = n + ' of ' + ITEMS.length + ' rated';
}});
</script></body></html>
"""


def import_ratings(job: Any, ratings: Path) -> int:
    """Read a filled-in ``ratings.csv`` (its ``items.json`` beside it) into the test cases;
    returns the number of ratings imported. Ratings of an item replace earlier ones.

    Raises:
        DatasetError: an unknown item, a rating that is not 0/1/empty, or missing columns,
            naming the CSV file and line.
    """
    key_file = ratings.parent / KEY_FILE
    if not key_file.is_file():
        raise DatasetError(f"{KEY_FILE} not found beside the ratings", source=ratings,
                           hint="keep the ratings CSV in the folder 'ianvs judge export' wrote")
    key = json.loads(key_file.read_text(encoding="utf-8"))
    per_case: dict[str, dict[tuple[str, int], int]] = {}
    count = 0
    try:
        handle = open(ratings, newline="", encoding="utf-8")
    except OSError as exc:
        raise DatasetError(f"cannot read the ratings: {exc.strerror}", source=ratings) from exc
    with handle:
        reader = csv.DictReader(handle)
        missing = [c for c in ("item", "rating") if c not in (reader.fieldnames or [])]
        if missing:
            raise DatasetError(f"column {missing[0]!r} is missing", source=ratings, line=1,
                               hint=f"the header must be {','.join(SHEET_COLUMNS)}")
        end = reader.line_num  # physical lines read so far (a field may span several)
        for row in reader:
            line, end = end + 1, reader.line_num  # the line where this record starts
            value = (row.get("rating") or "").strip()
            if value == "":
                continue
            if value not in ("0", "1"):
                raise DatasetError(f"field 'rating' must be 1, 0 or empty, got {value!r}",
                                   source=ratings, line=line)
            entry = key.get((row.get("item") or "").strip())
            if entry is None:
                raise DatasetError(f"field 'item': unknown item {row.get('item')!r}",
                                   source=ratings, line=line,
                                   hint="rate the sheet exported for this job")
            per_case.setdefault(entry["case"], {})[(entry["task_id"], entry["sample_index"])] \
                = int(value)
            count += 1
    for case, rated in per_case.items():
        path = job.job_dir / case / HUMAN_FILE
        merged = _read_ratings(path)
        merged.update(rated)
        path.write_text("".join(json.dumps({"task_id": t, "sample_index": i, "rating": r}) + "\n"
                                for (t, i), r in sorted(merged.items())), encoding="utf-8")
    return count


def _read_ratings(path: Path) -> dict[tuple[str, int], int]:
    if not path.is_file():
        return {}
    return {(str(e["task_id"]), int(e["sample_index"])): int(e["rating"])
            for _line, e in iter_jsonl(path, "human ratings")}


def human_judgment(y_true: Any, y_pred: Any, context: Any = None) -> dict[str, Any]:
    """``human_acc``, ``human_rated`` and ``judge_kappa`` of a test case (module docstring).

    List it after ``llm_judge`` in testenv.yaml so the judge's verdicts of this run are used.
    """
    workspace = Path(getattr(context, "workspace", "."))
    ratings = _read_ratings(workspace / HUMAN_FILE)
    out: dict[str, Any] = {"human_acc": math.nan, "human_rated": len(ratings),
                           "judge_kappa": math.nan}
    if not ratings:
        return out
    out["human_acc"] = round(sum(ratings.values()) / len(ratings), 4)
    judged = {}
    if (workspace / JUDGE_ITEMS).is_file():
        for _line, item in iter_jsonl(workspace / JUDGE_ITEMS, "judge items"):
            if item.get("accept") is not None:
                judged[(str(item["task_id"]), int(item["sample_index"]))] = int(item["accept"])
    both = sorted(set(ratings) & set(judged))
    kappa = cohen_kappa([ratings[k] for k in both], [judged[k] for k in both])
    out["judge_kappa"] = round(kappa, 4) if not math.isnan(kappa) else math.nan
    return out


human_judgment.columns = lambda: ["human_acc", "human_rated", "judge_kappa"]  # type: ignore[attr-defined]
