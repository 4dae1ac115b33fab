"""Reports written after every job: ``report/leaderboard.md``, ``report/index.html`` and
``report/manifest.json`` beside the rank files (see :func:`write_report`)."""

from core.storymanager.report.writer import write_report

__all__ = ["write_report"]
