"""Write ``all_rank.csv`` and ``selected_rank.csv`` for one benchmarking job (spec §9).

Public entry point: :func:`save_rank`.  File formats, ordering and the deviations from
upstream Ianvs are documented in ``docs/rank.md``.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from core.storymanager.rank import table
from core.storymanager.rank.csvio import RankFileError, Row, read_table, write_table
from core.storymanager.rank.pictures import draw_matrix_pictures
from core.storymanager.rank.types import CaseResult, RankConfig, RankFiles

logger = logging.getLogger(__name__)

ALL_RANK_FILE = "all_rank.csv"
SELECTED_RANK_FILE = "selected_rank.csv"
_WRITES_ALL = ("selected_and_all", "selected_and_all_and_picture")


def _read_history(path: Path, layout: table.Layout) -> tuple[table.Layout, list[Row]]:
    """Read an existing ``all_rank.csv``; an unreadable one is moved aside, not lost."""
    try:
        header, rows = read_table(path)
    except RankFileError as exc:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        backup = path.with_name(f"{path.name}.unreadable-{stamp}")
        os.replace(path, backup)
        logger.warning("cannot read the previous rank file (%s); moved it to %s and "
                       "starting a new history", exc, backup)
        return table.Layout(), []
    if header:
        logger.info("read %d previous result row(s) from %s", len(rows), path)
    return table.layout_from_header(header, layout.modules, layout.hyperparameters), rows


def _drop_superseded(old_rows: list[Row], results: Sequence[CaseResult]) -> list[Row]:
    """Drop history rows of test cases this run re-scored (same ``url``).

    A resumed or re-scored test case keeps its folder, so its new row replaces its old one
    instead of duplicating it; runs with ``--fresh`` get new folders and accumulate rows.
    """
    urls = {r.url for r in results}
    kept = [row for row in old_rows if row.get("url") not in urls]
    if len(kept) < len(old_rows):
        logger.info("replacing %d previous row(s) of re-scored test cases",
                    len(old_rows) - len(kept))
    return kept


def save_rank(results: Sequence[CaseResult], config: RankConfig, rank_dir: Path,
              metric_names: Sequence[str]) -> RankFiles:
    """Merge this run's results with the job's history and write the rank files.

    Args:
        results: this run's finished test cases, in run order.
        config: the validated ``rank`` section.
        rank_dir: ``<workspace>/<job name>/rank``; created (with parents) here.
        metric_names: the testenv's metric names in testenv order; they fix the order of
            the metric columns and are the only names ``sort_by`` may use.

    Behaviour (spec §9.3-§9.6, §9.8):
        1. Rows of this run are built (:func:`table.rows_from_results`).
        2. An existing ``all_rank.csv`` is read back (cells keep their text) and its
           rows are put before this run's (rows with the ``url`` of a test case of this
           run are replaced by the new result); columns are united (metrics in testenv order
           first).  An unreadable file is renamed ``all_rank.csv.unreadable-<stamp>``.
        3. The combined rows are stably sorted by ``config.sort_by``.
        4. ``all_rank.csv`` is rewritten (``rank`` renumbered 1..N) unless
           ``save_mode == "selected_only"``; history rows are used in every mode.
        5. ``selected_rank.csv`` is derived from the sorted table: selected columns,
           duplicates dropped (all selected columns except time/url), paradigm filter,
           renumbered.
        6. ``selected_and_all_and_picture`` also draws ``MATRIX`` heatmaps when
           matplotlib is installed (else a warning).

    Every file is written atomically (temporary file + rename).

    Returns:
        The paths written.
    """
    new_layout, new_rows = table.rows_from_results(results, metric_names)
    all_path = rank_dir / ALL_RANK_FILE
    old_layout, old_rows = _read_history(all_path, new_layout)
    old_rows = _drop_superseded(old_rows, results)
    layout = table.merge_layouts(new_layout, old_layout)
    run_metrics = new_layout.metrics
    rows = table.sort_rows([*old_rows, *new_rows], config.sort_by, run_metrics)

    written_all: Path | None = None
    if config.save_mode in _WRITES_ALL:
        write_table(all_path, *table.numbered(layout.columns(), rows))
        written_all = all_path
        logger.info("wrote %s (%d rows)", all_path, len(rows))
    elif old_rows:
        logger.info("save_mode selected_only: %s left unchanged; its %d row(s) are still "
                    "included in %s", all_path, len(old_rows), SELECTED_RANK_FILE)

    header = table.selected_header(layout, config)
    selected = table.select_rows(rows, header, config.selected_paradigms)
    selected_path = rank_dir / SELECTED_RANK_FILE
    write_table(selected_path, *table.numbered(header, selected))
    logger.info("wrote %s (%d rows)", selected_path, len(selected))

    pictures: tuple[Path, ...] = ()
    if config.save_mode == "selected_and_all_and_picture":
        pictures = draw_matrix_pictures(results)
    return RankFiles(rank_dir=rank_dir, selected_rank=selected_path, all_rank=written_all,
                     pictures=pictures)
