"""docs/uncertainty.md's table of what each shipped set can detect is recomputed from the shipped
files (their task counts) and the report's own functions, so the figures cannot drift from the
data or the code (issue 44, point 4: each scenario's smallest detectable difference)."""
from __future__ import annotations

from pathlib import Path

from core.storymanager.report.stats import min_discordant_for, smallest_detectable_difference

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "examples/smart_coding/smart_coding_learning_bench"
DOC = REPO / "docs/uncertainty.md"


def _rows() -> list[list[str]]:
    lines = DOC.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| scenario | set | tasks"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _fmt(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".") if value < 1 else "1.0"


def test_every_row_matches_the_shipped_set_and_the_functions() -> None:
    rows = _rows()
    assert len(rows) >= 15
    floor_tasks = min_discordant_for(0.05)
    assert floor_tasks == 6
    for scenario, path, tasks, floor, binary, text in rows:
        shipped = BENCH / path.strip("`")
        n = sum(1 for line in shipped.read_text().splitlines() if line.strip())
        assert int(tasks) == n, (scenario, n)
        if n < floor_tasks:
            assert (floor, binary, text) == ("none", "", ""), scenario
            continue
        assert float(floor) == round(floor_tasks / n, 3), scenario
        assert float(binary) == round(smallest_detectable_difference(0.5, n), 3), scenario
        assert float(text) == round(smallest_detectable_difference(1.0, n), 3), scenario


def test_every_scenario_doc_states_its_default_sets_limit() -> None:
    """Each scenario's doc says how small a difference its default set can detect and links
    here for the method."""
    docs = REPO / "docs/proposals/scenarios/smart_coding"
    for name in ("codegen", "cloud-edge", "repo", "trajectories", "selfalign", "comment", "issue"):
        text = (docs / f"{name}.md").read_text()
        assert "uncertainty.md" in text and "smallest difference" in text, name
