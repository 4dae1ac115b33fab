"""Variants of the toy job shared by the report tests."""
from __future__ import annotations

from pathlib import Path


def break_most_cases(toy: Path) -> None:
    """Three of the toy job's four test cases raise; the metric ``npred`` becomes NaN: the
    report must still render (one ranked case, no interval, no comparison)."""
    (toy / "basemodel.py").write_text((toy / "basemodel.py").read_text().replace(
        "self.scale = int(kwargs.get(\"scale\", 1))",
        "self.scale = int(kwargs.get(\"scale\", 1))\n"
        "        if self.scale == 2 or int(kwargs.get('offset', 0)) == 1:\n"
        "            raise RuntimeError('broken')"))
    (toy / "count.py").write_text((toy / "count.py").read_text().replace(
        "return", "return float('nan') if True else", 1))
