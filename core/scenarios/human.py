"""Human judgment of a finished run, as the Smart Coding proposal asks ("manual judgment ...
acc is calculated in the end"), agreement between raters, and agreement with the LLM judge.

* :func:`export_sheet` writes every generated answer of the job's test cases as a **blind**
  rating sheet: ``ratings.csv`` (columns ``item, task, reference, answer, rating, note,
  rater``) and ``index.html``, one offline page (no network, no server) that shows the same
  items and downloads the filled-in ``ratings.csv``. Items are shuffled (``seed``) and carry
  opaque ids; which test case produced an item is kept apart in ``items.json``. The page keeps
  what the rater entered in the browser's ``localStorage`` under the sheet's id (a hash of its
  items), so a reload or a closed tab loses nothing.
* :func:`import_ratings` reads a filled-in CSV (``rating`` is ``1`` acceptable, ``0`` not,
  empty = not rated) and adds it to ``human_ratings.jsonl`` in each test case folder, **per
  rater**: a second rater's import adds to the first one's; a rater's own re-import replaces
  that rater's earlier ratings of the same items. It also writes ``human_agreement.json`` in
  the job folder (:func:`agreement_summary`).
* :func:`human_judgment` is the metric that puts the ratings on the leaderboard once they exist
  (NaN before): ``human_acc`` (share of rated answers judged acceptable; an item rated by
  several raters counts once, as the mean of their ratings), ``human_rated`` (items),
  ``human_raters``, ``judge_kappa`` (Cohen's kappa between the LLM judge's accept verdicts,
  see :mod:`core.scenarios.judge`, and every human rating of this test case) and the job-wide,
  pooled figures of :func:`agreement_summary`.

Agreement figures pool *items*: one (judge verdict, human rating) pair per rater and item for
the judge, the raters' labels per item for inter-rater agreement; their 95% intervals resample
items (:func:`core.scenarios.agreement.bootstrap_interval`).
"""
from __future__ import annotations

import csv
import hashlib
import json
import logging
import math
import random
import re
from pathlib import Path
from typing import Any

from core.common.errors import DatasetError, IanvsError
from core.common.jsonl import iter_jsonl
from core.scenarios import get_kind
from core.scenarios.agreement import (bootstrap_interval, cohen_kappa, krippendorff_alpha,
                                      pooled_kappa, rounded)
from core.scenarios.judge import JUDGE_ITEMS
from core.scenarios.rating_page import rating_page

__all__ = ["AGREEMENT_FILE", "HUMAN_FILE", "KEY_FILE", "SHEET_COLUMNS", "agreement_summary",
           "cohen_kappa", "export_sheet", "human_judgment", "import_ratings"]

LOGGER = logging.getLogger(__name__)
HUMAN_FILE = "human_ratings.jsonl"
AGREEMENT_FILE = "human_agreement.json"
SHEET_COLUMNS = ("item", "task", "reference", "answer", "rating", "note", "rater")
KEY_FILE = "items.json"
UNNAMED = "unnamed"
_RATER = re.compile(r"[^\s,][^,\n]{0,63}")
Ratings = dict[tuple[str, str, int], int]
"""(rater, task_id, sample_index) -> 1 / 0."""


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
                             "rating": "", "note": "", "rater": ""})
    key = {i["item"]: {"case": i["case"], "task_id": i["task_id"],
                       "sample_index": i["sample_index"]} for i in items}
    (out_dir / KEY_FILE).write_text(json.dumps(key, indent=1), encoding="utf-8")
    (out_dir / "index.html").write_text(rating_page(items, kind.name), encoding="utf-8")
    return len(items)


def _sheet_rater(rows: list[dict[str, str]], ratings: Path, rater: str | None) -> str:
    """The rater of a sheet: ``rater`` if given, else the sheet's ``rater`` column (one name
    for every rated row), else :data:`UNNAMED` (with a warning)."""
    names = {(r.get("rater") or "").strip() for r in rows if (r.get("rating") or "").strip()}
    names.discard("")
    if rater is None:
        if len(names) > 1:
            raise DatasetError(f"field 'rater': one rater per sheet, found {sorted(names)}",
                               source=ratings, hint="import each rater's sheet on its own")
        if not names:
            LOGGER.warning("%s names no rater: its ratings are stored as rater %r (a later "
                           "unnamed sheet replaces them); fill in the page's rater field",
                           ratings, UNNAMED)
        rater = names.pop() if names else UNNAMED
    rater = rater.strip()
    if not _RATER.fullmatch(rater):
        raise DatasetError(f"rater {rater!r} must be 1-64 characters without commas or line "
                           "breaks", source=ratings)
    return rater


def import_ratings(job: Any, ratings: Path, rater: str | None = None) -> int:
    """Add a filled-in ``ratings.csv`` (its ``items.json`` beside it) to the test cases as one
    rater's ratings; returns the number of ratings imported.

    The rater is ``rater`` if given, else the sheet's ``rater`` column, else ``unnamed``.
    Ratings of other raters are kept; this rater's earlier ratings of the same items are
    replaced (re-importing a corrected sheet is safe); empty ratings change nothing. Writes
    ``human_agreement.json`` in the job folder afterwards.

    Raises:
        DatasetError: an unknown item, a rating that is not 0/1/empty, missing columns, or
            several rater names in one sheet, naming the CSV file (and line).
    """
    key_file = ratings.parent / KEY_FILE
    if not key_file.is_file():
        raise DatasetError(f"{KEY_FILE} not found beside the ratings", source=ratings,
                           hint="keep the ratings CSV in the folder 'ianvs judge export' wrote")
    key = json.loads(key_file.read_text(encoding="utf-8"))
    try:
        handle = open(ratings, newline="", encoding="utf-8")
    except OSError as exc:
        raise DatasetError(f"cannot read the ratings: {exc.strerror}", source=ratings) from exc
    rows: list[tuple[int, dict[str, str]]] = []
    with handle:
        reader = csv.DictReader(handle)
        missing = [c for c in ("item", "rating") if c not in (reader.fieldnames or [])]
        if missing:
            raise DatasetError(f"column {missing[0]!r} is missing", source=ratings, line=1,
                               hint=f"the header must be {','.join(SHEET_COLUMNS)}")
        end = reader.line_num  # physical lines read so far (a field may span several)
        for row in reader:
            line, end = end + 1, reader.line_num  # the line where this record starts
            rows.append((line, row))
    who = _sheet_rater([r for _l, r in rows], ratings, rater)
    per_case: dict[str, dict[tuple[str, int], int]] = {}
    count = 0
    for line, row in rows:
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
        per_case.setdefault(entry["case"], {})[(entry["task_id"], int(entry["sample_index"]))] \
            = int(value)
        count += 1
    for case, rated in per_case.items():
        path = job.job_dir / case / HUMAN_FILE
        merged = read_ratings(path)
        merged.update({(who, t, i): r for (t, i), r in rated.items()})
        path.write_text("".join(json.dumps({"rater": w, "task_id": t, "sample_index": i,
                                            "rating": r}) + "\n"
                                for (w, t, i), r in sorted(merged.items())), encoding="utf-8")
    summary = agreement_summary(_case_dirs(job))
    (job.job_dir / AGREEMENT_FILE).write_text(json.dumps(summary, indent=1), encoding="utf-8")
    LOGGER.info("rater %r: %d ratings imported; %s", who, count, _describe(summary))
    return count


def read_ratings(path: Path) -> Ratings:
    """The ratings of one test case (``human_ratings.jsonl``; lines without a rater, written
    before raters were kept, belong to :data:`UNNAMED`); empty when the file is missing."""
    if not path.is_file():
        return {}
    return {(str(e.get("rater") or UNNAMED), str(e["task_id"]), int(e["sample_index"])):
            int(e["rating"]) for _line, e in iter_jsonl(path, "human ratings")}


def _judge_verdicts(case_dir: Path) -> dict[tuple[str, int], int]:
    """(task_id, sample_index) -> the judge's accept verdict (1/0) of one test case."""
    judged: dict[tuple[str, int], int] = {}
    if (case_dir / JUDGE_ITEMS).is_file():
        for _line, item in iter_jsonl(case_dir / JUDGE_ITEMS, "judge items"):
            if item.get("accept") is not None:
                judged[(str(item["task_id"]), int(item["sample_index"]))] = int(item["accept"])
    return judged


def _items(case_dirs: list[Path]) -> list[tuple[dict[str, int], int | None]]:
    """One entry per rated item of the cases: ({rater: rating}, the judge's verdict or None)."""
    out = []
    for case_dir in case_dirs:
        per_item: dict[tuple[str, int], dict[str, int]] = {}
        for (rater, task, index), rating in read_ratings(case_dir / HUMAN_FILE).items():
            per_item.setdefault((task, index), {})[rater] = rating
        judged = _judge_verdicts(case_dir)
        out += [(per_item[k], judged.get(k)) for k in sorted(per_item)]
    return out


def _judge_pairs(items: list[tuple[dict[str, int], int | None]]) -> list[list[tuple[int, int]]]:
    return [[(judge, rating) for rating in raters.values()]
            for raters, judge in items if judge is not None]


def agreement_summary(case_dirs: list[Path]) -> dict[str, Any]:
    """Agreement pooled over every rated item of ``case_dirs`` (95% bootstrap intervals over
    items; NaN where undefined):

    * ``judge_kappa`` [``judge_kappa_low``, ``judge_kappa_high``]: Cohen's kappa of the LLM
      judge's accept verdict against each human rating (one pair per rater and item);
      ``judge_pairs``/``judge_items`` count what it rests on;
    * ``rater_alpha`` [low, high]: Krippendorff's alpha (nominal) of the human raters, any
      number of them, on the items at least two of them rated (``shared_items``);
    * ``rater_kappa`` [low, high]: Cohen's kappa when exactly two raters exist, on the items
      both rated; NaN otherwise.
    """
    items = _items(case_dirs)
    raters = sorted({r for raters_, _j in items for r in raters_})
    pairs = _judge_pairs(items)
    jk, jk_low, jk_high = bootstrap_interval(pairs, pooled_kappa)
    units = [list(r.values()) for r, _j in items if len(r) >= 2]
    alpha, a_low, a_high = bootstrap_interval(units, krippendorff_alpha)
    rk = rk_low = rk_high = math.nan
    if len(raters) == 2:
        both = [[(r[raters[0]], r[raters[1]])] for r, _j in items if len(r) == 2]
        rk, rk_low, rk_high = bootstrap_interval(both, pooled_kappa)
    return {"items": len(items), "raters": raters, "ratings": sum(len(r) for r, _j in items),
            "judge_items": len(pairs), "judge_pairs": sum(len(p) for p in pairs),
            "judge_kappa": rounded(jk), "judge_kappa_low": rounded(jk_low),
            "judge_kappa_high": rounded(jk_high), "shared_items": len(units),
            "rater_alpha": rounded(alpha), "rater_alpha_low": rounded(a_low),
            "rater_alpha_high": rounded(a_high), "rater_kappa": rounded(rk),
            "rater_kappa_low": rounded(rk_low), "rater_kappa_high": rounded(rk_high)}


def _describe(summary: dict[str, Any]) -> str:
    return (f"{summary['items']} items rated by {len(summary['raters'])} rater(s); judge-human "
            f"kappa {summary['judge_kappa']} [{summary['judge_kappa_low']}, "
            f"{summary['judge_kappa_high']}] over {summary['judge_pairs']} pairs; inter-rater "
            f"alpha {summary['rater_alpha']} [{summary['rater_alpha_low']}, "
            f"{summary['rater_alpha_high']}] over {summary['shared_items']} shared items")


def _job_cases(workspace: Path) -> list[Path]:
    """Every test case folder of the job ``workspace`` (a test case folder,
    ``<workspace>/<job>/<algorithm>/<uuid>``) belongs to; just ``workspace`` when it is not
    inside a job."""
    if not (workspace / "case.json").is_file():
        return [workspace]
    cases = sorted(p.parent for p in workspace.parent.parent.glob("*/*/case.json"))
    return cases if workspace in cases else [workspace]


HUMAN_COLUMNS = ["human_acc", "human_rated", "human_raters", "judge_kappa", "judge_kappa_pooled",
                 "judge_kappa_pooled_low", "judge_kappa_pooled_high", "rater_alpha",
                 "rater_alpha_low", "rater_alpha_high", "rater_kappa"]


def human_judgment(y_true: Any, y_pred: Any, context: Any = None) -> dict[str, Any]:
    """The human columns of a test case (module docstring): ``human_acc``, ``human_rated``,
    ``human_raters`` and ``judge_kappa`` of this test case; ``judge_kappa_pooled`` (with its
    interval), ``rater_alpha`` (with its interval) and ``rater_kappa`` of the whole job (every
    test case's items pooled, :func:`agreement_summary`; the same in every row).

    List it after ``llm_judge`` in testenv.yaml so the judge's verdicts of this run are used.
    """
    workspace = Path(getattr(context, "workspace", "."))
    mine = _items([workspace])
    out: dict[str, Any] = {c: math.nan for c in HUMAN_COLUMNS}
    out["human_rated"] = len(mine)
    out["human_raters"] = len({r for raters, _j in mine for r in raters})
    if not mine:
        return out
    out["human_acc"] = round(sum(sum(r.values()) / len(r) for r, _j in mine) / len(mine), 4)
    out["judge_kappa"] = rounded(pooled_kappa(_judge_pairs(mine)))
    job = agreement_summary(_job_cases(workspace))
    out.update({"judge_kappa_pooled": job["judge_kappa"],
                "judge_kappa_pooled_low": job["judge_kappa_low"],
                "judge_kappa_pooled_high": job["judge_kappa_high"],
                **{c: job[c] for c in ("rater_alpha", "rater_alpha_low", "rater_alpha_high",
                                       "rater_kappa")}})
    return out


human_judgment.columns = lambda: list(HUMAN_COLUMNS)  # type: ignore[attr-defined]
