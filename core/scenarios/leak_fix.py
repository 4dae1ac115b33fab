"""Apply the leak check to task files already built: ``python -m core.scenarios.leak_fix``.

The builders screen every task as they write it (:mod:`core.scenarios.leak_views`). A set whose
sources are not at hand to rebuild (a repository mirror that is not shipped, a machine's Python
installation) is screened in place with the same function, so the result is the one the builder
would write::

    python -m core.scenarios.leak_fix --kind commit_message toolz_commit_messages.jsonl
    python -m core.scenarios.leak_fix --kind revise --check eli5_revise.jsonl revise_subset.jsonl

Per file: a leaking record is masked (the builder's masking) or dropped; clean records keep their
line byte for byte, a masked one is re-serialised in the file's own JSON style (key order,
``ensure_ascii``). When ``<file>.build.json`` exists its ``tasks`` is set to the new count, the
dropped records move from ``counts.kept`` to ``counts.leak_dropped`` and the ``leaks`` block
adds this run's counts -- so a second run changes nothing. ``--check`` writes nothing and exits
1 when any file leaks. Archives of dropped test-graded tasks (``*-sources/``) are not deleted:
the run logs their names.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from core.scenarios import all_kinds
from core.scenarios.leak_views import screen, tally

__all__ = ["fix_file", "main"]

LOG = logging.getLogger(__name__)


def _dump_like(record: dict[str, Any], original: str) -> str:
    """``record`` as one JSON line in the style that reproduces ``original`` (its parsed form)."""
    parsed = json.loads(original)
    for sort_keys in (False, True):
        for ensure_ascii in (False, True):
            if json.dumps(parsed, sort_keys=sort_keys, ensure_ascii=ensure_ascii) == original:
                return json.dumps(record, sort_keys=sort_keys, ensure_ascii=ensure_ascii)
    return json.dumps(record, ensure_ascii=False)


def _refresh_derived(report: dict[str, Any], records: list[dict[str, Any]]) -> None:
    """Recount the report fields derived from the records (the revise builder's ``grading`` and
    ``with_feedback``), as the builder counts them after its own leak check."""
    if isinstance(report.get("grading"), dict):
        reasons = Counter(str((r.get("metadata") or {}).get("grading_reason")) for r in records)
        grading = report["grading"]
        grading["tests"] = sum(r.get("grading") == "tests" for r in records)
        grading["similarity"] = sum(r.get("grading") == "similarity" for r in records)
        if isinstance(grading.get("reasons"), dict):
            grading["reasons"] = {k: reasons.get(k, 0) for k in grading["reasons"]}
    if "with_feedback" in report:
        report["with_feedback"] = sum(1 for r in records if r.get("feedback"))


def _update_report(path: Path, records: list[dict[str, Any]], counts: Counter[str]) -> None:
    report = json.loads(path.read_text(encoding="utf-8"))
    new = tally(counts)
    dropped = new["dropped"]
    report["tasks"] = len(records)
    _refresh_derived(report, records)
    step_counts = report.get("counts")
    if isinstance(step_counts, dict) and "kept" in step_counts:
        step_counts["kept"] -= dropped
        keys = list(step_counts)
        step_counts["leak_dropped"] = step_counts.get("leak_dropped", 0) + dropped
        if "leak_dropped" not in keys:  # just before "kept", as the builders order it
            order = keys[:keys.index("kept")] + ["leak_dropped"] + keys[keys.index("kept"):]
            report["counts"] = {k: step_counts[k] for k in order}
    old = report.get("leaks") or {"masked": 0, "dropped": 0, "by_reason": {}}
    merged = Counter(old.get("by_reason", {}))
    merged.update(new["by_reason"])
    report["leaks"] = {"masked": old.get("masked", 0) + new["masked"],
                       "dropped": old.get("dropped", 0) + dropped,
                       "by_reason": {k: merged[k] for k in sorted(merged)}}
    path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


def fix_file(kind: str, path: Path, check: bool = False) -> Counter[str]:
    """Screen one JSONL task file (module docstring); return the counts per
    :attr:`~core.scenarios.leak_views.Screened.key`. With ``check`` nothing is written."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[str] = []
    kept: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        record = json.loads(line)
        result = screen(kind, record)
        counts[result.key] += 1
        if result.finding is not None:
            rid = record.get("id") or record.get("task_id")
            LOG.info("%s:%d %s %s: %s", path.name, number, result.action, rid, result.finding.describe())
            source = (record.get("repo") or {}).get("source") if isinstance(record.get("repo"), dict) else None
            if result.record is None and source:
                LOG.warning("%s: dropped test-graded task %s leaves its archive %s", path.name, rid, source)
        if result.record is None:
            continue
        kept.append(result.record)
        out.append(line if result.action == "clean" else _dump_like(result.record, line))
    summary = tally(counts)
    if check or not (summary["masked"] or summary["dropped"]):
        return counts
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(f"{line}\n" for line in out), encoding="utf-8")
    os.replace(tmp, path)
    report = path.with_name(path.name + ".build.json")
    if report.is_file():
        _update_report(report, kept, counts)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.scenarios.leak_fix",
                                     description=(__doc__ or "").split("\n")[0])
    kinds = sorted(k.name for k in all_kinds() if k.leak_view() is not None)
    parser.add_argument("--kind", required=True, choices=kinds, help="task kind of the files")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file leaks")
    parser.add_argument("files", nargs="+", type=Path, help="JSONL task files")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    leaked = False
    for path in args.files:
        summary = tally(fix_file(args.kind, path, check=args.check))
        leaked = leaked or bool(summary["masked"] or summary["dropped"])
        verb = "checked" if args.check else "fixed"
        LOG.info("%s: %s %s", path, verb, json.dumps(summary))
    return 1 if args.check and leaked else 0


if __name__ == "__main__":
    sys.exit(main())
