"""Tests for core.storymanager.visualization (spec §9.7)."""
# ruff: noqa: E501  (the expected table is the spec's verbatim wide output)

from __future__ import annotations

import io
from pathlib import Path

import pytest

from core.storymanager.rank.types import RankConfig, RankFiles
from core.storymanager.visualization.visualization import (
    MAX_CELL,
    METHODS,
    VisualizationError,
    display_width,
    format_compact,
    format_table,
    print_table,
    render_markdown,
    visualize,
)

# The observed upstream output of spec §9.7 (first three rows), verbatim.
SPEC_CSV = """\
rank,algorithm,acc2,npred,paradigm,basemodel,basemodel-wrong,basemodel-pad,time,url
1,noisy,1.0,3,singletasklearning,noisy,0,0,2026-11-22 04:28:15,./toy_ws/sortjob/noisy/22fa4eb0-e62d-11f1-a5ca-02fc00000001
2,noisy,1.0,4,singletasklearning,noisy,0,1,2026-11-22 04:28:15,./toy_ws/sortjob/noisy/22fa4e4c-e62d-11f1-a5ca-02fc00000001
3,noisy,0.6667,3,singletasklearning,noisy,1,0,2026-11-22 04:28:15,./toy_ws/sortjob/noisy/22fa4f64-e62d-11f1-a5ca-02fc00000001
"""

SPEC_TABLE = """\
+------+-----------+--------+-------+--------------------+-----------+-----------------+---------------+---------------------+-------------------------------------------------------------+
| rank | algorithm |  acc2  | npred |      paradigm      | basemodel | basemodel-wrong | basemodel-pad |         time        |                             url                             |
+------+-----------+--------+-------+--------------------+-----------+-----------------+---------------+---------------------+-------------------------------------------------------------+
|  1   |   noisy   |  1.0   |   3   | singletasklearning |   noisy   |        0        |       0       | 2026-11-22 04:28:15 | ./toy_ws/sortjob/noisy/22fa4eb0-e62d-11f1-a5ca-02fc00000001 |
|  2   |   noisy   |  1.0   |   4   | singletasklearning |   noisy   |        0        |       1       | 2026-11-22 04:28:15 | ./toy_ws/sortjob/noisy/22fa4e4c-e62d-11f1-a5ca-02fc00000001 |
|  3   |   noisy   | 0.6667 |   3   | singletasklearning |   noisy   |        1        |       0       | 2026-11-22 04:28:15 | ./toy_ws/sortjob/noisy/22fa4f64-e62d-11f1-a5ca-02fc00000001 |
+------+-----------+--------+-------+--------------------+-----------+-----------------+---------------+---------------------+-------------------------------------------------------------+
"""


@pytest.fixture
def spec_csv(tmp_path: Path) -> Path:
    path = tmp_path / "selected_rank.csv"
    path.write_text(SPEC_CSV, encoding="utf-8")
    return path


def test_print_table_matches_spec_example(spec_csv: Path) -> None:
    out = io.StringIO()
    print_table(spec_csv, stream=out)
    assert out.getvalue() == SPEC_TABLE


def test_print_table_defaults_to_stdout(spec_csv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    print_table(spec_csv)
    assert capsys.readouterr().out == SPEC_TABLE


def test_empty_cells_blank_and_raw_text_kept(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text('rank,acc,note\n1,,"a,b"\n2,0.10,\n', encoding="utf-8")
    out = io.StringIO()
    print_table(path, stream=out)
    assert out.getvalue() == (
        "+------+------+------+\n"
        "| rank | acc  | note |\n"
        "+------+------+------+\n"
        "|  1   |      | a,b  |\n"
        "|  2   | 0.10 |      |\n"
        "+------+------+------+\n"
    )


def test_odd_padding_side_depends_on_text_width() -> None:
    # odd free space: odd-width text leans left (extra space right), even-width leans right
    assert format_table(["abcd"], [["x"]]).splitlines()[3] == "|  x   |"
    assert format_table(["abcde"], [["xy"]]).splitlines()[3] == "|   xy  |"


def test_header_only_table() -> None:
    assert format_table(["a", "bb"], []) == (
        "+---+----+\n| a | bb |\n+---+----+\n+---+----+")


def test_multiline_and_wide_cells() -> None:
    table = format_table(["h"], [["a\nbcd"], ["漢"]])
    assert table.splitlines() == [
        "+-----+", "|  h  |", "+-----+", "|  a  |", "| bcd |", "|  漢 |", "+-----+"]
    assert display_width("漢a") == 3
    assert display_width("e\u0301") == 1


def test_missing_or_empty_file(tmp_path: Path) -> None:
    with pytest.raises(VisualizationError, match="cannot read"):
        print_table(tmp_path / "nope.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(VisualizationError, match="empty"):
        print_table(empty)


def test_row_wider_than_header(tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("a,b\n1,2,3\n", encoding="utf-8")
    with pytest.raises(VisualizationError, match="record 2"):
        print_table(path, stream=io.StringIO())


def test_render_markdown(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_text('rank,algorithm,acc,note\n1,a|b,0.5,"x\ny"\n2,c,,\n', encoding="utf-8")
    assert render_markdown(path) == (
        "| rank | algorithm | acc | note |\n"
        "| --- | --- | --- | --- |\n"
        "| 1 | a\\|b | 0.5 | x<br>y |\n"
        "| 2 | c |  |  |\n"
    )


def _files(path: Path) -> RankFiles:
    return RankFiles(rank_dir=path.parent, selected_rank=path)


def test_visualize_prints_in_selected_only_mode(spec_csv: Path) -> None:
    out = io.StringIO()
    visualize(RankConfig(), _files(spec_csv), stream=out)
    assert out.getvalue() == SPEC_TABLE


def test_visualize_other_mode_prints_nothing(spec_csv: Path) -> None:
    out = io.StringIO()
    visualize(RankConfig(visualization_mode="none"), _files(spec_csv), stream=out)
    assert out.getvalue() == ""


def test_visualize_unknown_method_lists_known(spec_csv: Path) -> None:
    config = RankConfig()
    object.__setattr__(config, "visualization_method", "draw_magic")  # bypass validation
    with pytest.raises(VisualizationError, match="draw_magic.*known methods: print_table"):
        visualize(config, _files(spec_csv))
    assert list(METHODS) == ["print_table"]


def test_visualize_wraps_method_failure(tmp_path: Path) -> None:
    with pytest.raises(VisualizationError,
                       match=r"process visualization\(method=print_table\) of rank file"):
        visualize(RankConfig(), _files(tmp_path / "missing.csv"))


def test_compact_table_fits_120_columns_and_lists_urls_below(spec_csv: Path) -> None:
    wide = "rank,algorithm," + ",".join(f"metric_number_{i}" for i in range(12)) + ",note,url\n"
    wide += "1,alg," + ",".join(str(i / 7)[:6] for i in range(12)) + "," + "n" * 90 \
        + ",./workspace/job/alg/" + "u" * 60 + "\n"
    header, rows = wide.splitlines()[0].split(","), [wide.splitlines()[1].split(",")]
    text = format_compact(header, rows, width=120)
    lines = text.splitlines()
    assert max(display_width(line) for line in lines) <= 120
    assert sum(line.startswith("| rank | algorithm |") for line in lines) >= 2  # stacked
    for i in range(12):
        assert f"metric_number_{i}" in text  # nothing dropped
    assert "n" * (MAX_CELL - 1) + "…" in text and "n" * MAX_CELL not in text
    assert lines[-2:] == ["url:", "  rank 1: ./workspace/job/alg/" + "u" * 60]


def test_compact_table_of_a_narrow_file_is_the_plain_table_plus_urls(spec_csv: Path) -> None:
    out = io.StringIO()
    visualize(RankConfig(), _files(spec_csv), stream=out, full=False)
    text = out.getvalue()
    assert max(display_width(line) for line in text.splitlines()) <= 120
    assert "| rank | algorithm |  acc2  | npred |" in text and "| url" not in text
    assert "  rank 3: ./toy_ws/sortjob/noisy/22fa4f64-e62d-11f1-a5ca-02fc00000001" in text


def test_compact_table_shortens_a_column_too_wide_for_any_terminal() -> None:
    text = format_compact(["rank", "algorithm", "x"], [["1", "a", "y" * 300]], width=60)
    assert max(display_width(line) for line in text.splitlines()) <= 60
