"""Tests for core.storymanager.rank (spec §9.3-§9.6, §9.8; conformance §13 items 3, 5, 6, 7)."""

from __future__ import annotations

import csv
import logging
import math
import re
from pathlib import Path
from typing import Any

import pytest

from core.storymanager.rank import pictures
from core.storymanager.rank.csvio import (
    canonical_text,
    format_cell,
    infer_cell,
    read_table,
)
from core.storymanager.rank.rank import save_rank
from core.storymanager.rank.types import (
    CaseResult,
    RankConfig,
    RankConfigError,
    format_completion_time,
)

TIME = "2026-11-22 04:28:15"
WS = "./toy_ws/sortjob/noisy"
METRICS = ["acc2", "npred"]


def case(acc: Any, npred: Any, wrong: Any = 0, pad: Any = 0, *, uid: str = "u",
         alg: str = "noisy", paradigm: str = "singletasklearning",
         time: str = TIME) -> CaseResult:
    return CaseResult(algorithm=alg, paradigm=paradigm, metrics={"acc2": acc, "npred": npred},
                      modules={"basemodel": "noisy"},
                      hyperparameters={"basemodel": {"wrong": wrong, "pad": pad}},
                      time=time, url=f"{WS}/{uid}")


def sort_cfg(**kwargs: Any) -> RankConfig:
    return RankConfig(sort_by=(("acc2", "descend"), ("npred", "ascend")), **kwargs)


def read(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def header(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n", 1)[0].split(",")


# ---------------------------------------------------------------- RankConfig parsing


def test_config_defaults() -> None:
    config = RankConfig.from_mapping({}, "job.yaml")
    assert config == RankConfig()
    assert config.selected_hyperparameters == ("all",)
    assert config.save_mode == "selected_and_all"
    assert (config.visualization_mode, config.visualization_method) == ("selected_only",
                                                                        "print_table")


def test_config_full_mapping() -> None:
    config = RankConfig.from_mapping({
        "sort_by": [{"acc": "descend"}, {"latency": "ascend"}],
        "visualization": {"mode": "selected_only", "method": "print_table"},
        "selected_dataitem": {"paradigms": ["all"], "modules": ["basemodel"],
                              "metrics": ["acc"]},
        "save_mode": "selected_only",
    }, "job.yaml")
    assert config.sort_by == (("acc", "descend"), ("latency", "ascend"))
    assert config.selected_modules == ("basemodel",)
    assert config.selected_hyperparameters == ("all",)  # fix #10: defaulted, not a crash
    assert config.save_mode == "selected_only"


def test_config_none_gives_defaults(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert RankConfig.from_mapping(None, "job.yaml") == RankConfig()
    assert "no 'rank' section" in caplog.text


@pytest.mark.parametrize("data, pattern", [
    ({"sort": []}, r"job\.yaml: rank\.sort: unknown key.*Did you mean 'sort_by'"),
    ({"sort_by": None}, r"rank\.sort_by: must not be null"),
    ({"sort_by": "acc"}, r"rank\.sort_by: must be a list"),
    ({"sort_by": ["acc"]}, r"rank\.sort_by\[0\]: must be a mapping with exactly one key"),
    ({"sort_by": [{"a": "ascend", "b": "ascend"}]}, r"sort_by\[0\].*separate list items"),
    ({"sort_by": [{"a": None}]}, r"sort_by\[0\]: direction must be a string"),
    ({"visualization": None}, r"rank\.visualization: must be a mapping"),
    ({"visualization": {"mode": "all"}}, r"visualization\.mode: unsupported value 'all'"),
    ({"visualization": {"method": "plot"}}, r"visualization\.method: unsupported.*print_table"),
    ({"visualization": {"style": "x"}}, r"rank\.visualization\.style: unknown key"),
    ({"selected_dataitem": {"metrics": []}}, r"selected_dataitem\.metrics: must not be empty"),
    ({"selected_dataitem": {"modules": "all"}}, r"selected_dataitem\.modules: must be a list"),
    ({"selected_dataitem": {"metrics": ["all", "acc"]}}, r'"all" cannot be combined'),
    ({"selected_dataitem": {"metrics": ["acc", "acc"]}}, r"duplicate names \['acc'\]"),
    ({"selected_dataitem": {"metric": ["acc"]}}, r"selected_dataitem\.metric: unknown key"),
    ({"selected_dataitem": None}, r"rank\.selected_dataitem: must be a mapping"),
    ({"save_mode": "everything"}, r"rank\.save_mode: unsupported value 'everything'"),
])
def test_config_errors_name_file_and_key(data: dict[str, Any], pattern: str) -> None:
    with pytest.raises(RankConfigError, match=pattern) as info:
        RankConfig.from_mapping(data, "job.yaml")
    assert str(info.value).startswith("job.yaml: rank")


def test_config_not_a_mapping() -> None:
    with pytest.raises(RankConfigError, match="job.yaml: rank: must be a mapping"):
        RankConfig.from_mapping(["x"], "job.yaml")  # type: ignore[arg-type]


def test_config_empty_hyperparameters_allowed() -> None:
    config = RankConfig.from_mapping({"selected_dataitem": {"hyperparameters": []}}, "j.yaml")
    assert config.selected_hyperparameters == ()


def test_config_non_ascend_direction_means_descend(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        config = RankConfig.from_mapping({"sort_by": [{"acc": "desc"}]}, "job.yaml")
    assert config.sort_by == (("acc", "descend"),)
    assert "'desc' is not 'ascend'" in caplog.text


def test_config_direct_construction_validates() -> None:
    with pytest.raises(RankConfigError, match="save_mode"):
        RankConfig(save_mode="nope")


def test_format_completion_time() -> None:
    import datetime as dt
    assert format_completion_time(dt.datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02 03:04:05"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}", format_completion_time())


# ---------------------------------------------------------------- cells


@pytest.mark.parametrize("value, text", [
    (None, ""), (float("nan"), ""), (0.6667, "0.6667"), (1.0, "1.0"), (1e-05, "1e-05"),
    (3, "3"), (True, "True"), ("x", "x"), ([1, 2], "[1, 2]"), ({"a": 1}, "{'a': 1}"),
    (float("inf"), "inf"),
])
def test_format_cell(value: Any, text: str) -> None:
    assert format_cell(value) == text


def test_format_cell_numpy_scalars() -> None:
    np = pytest.importorskip("numpy")
    assert format_cell(np.float64(0.5)) == "0.5"
    assert format_cell(np.int64(7)) == "7"
    assert format_cell(np.float64("nan")) == ""


def test_infer_and_canonical() -> None:
    assert infer_cell("3") == 3 and isinstance(infer_cell("3"), int)
    assert infer_cell("0.5") == 0.5 and infer_cell("1e-05") == 1e-05
    assert infer_cell("") is None and infer_cell("nan") is None
    assert infer_cell("abc") == "abc" and infer_cell("True") is True
    assert canonical_text("0.10") == canonical_text("0.1") == "0.1"
    assert canonical_text("[1, 2]") == "[1, 2]"


# ---------------------------------------------------------------- conformance 3: columns


def test_columns_time_and_url(tmp_path: Path) -> None:
    """§13.3: all/selected columns per §9.3/§9.4; time format; url kept verbatim."""
    files = save_rank([case(0.5, 3, uid="8c213342-e62b-11f1-a693-02fc00000001")],
                      RankConfig(), tmp_path / "rank", METRICS)
    expected = ["rank", "algorithm", "acc2", "npred", "paradigm", "basemodel",
                "basemodel-wrong", "basemodel-pad", "time", "url"]
    assert files.all_rank is not None
    assert header(files.all_rank) == expected
    assert header(files.selected_rank) == expected
    (row,) = read(files.all_rank)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}", row["time"])
    assert row["url"] == f"{WS}/8c213342-e62b-11f1-a693-02fc00000001"
    assert row["rank"] == "1" and row["paradigm"] == "singletasklearning"


def test_metric_order_is_testenv_order(tmp_path: Path) -> None:
    """Fix #8: metric columns follow metric_names, not set/hash order."""
    files = save_rank([case(0.5, 3)], RankConfig(), tmp_path, ["npred", "acc2"])
    assert header(files.all_rank)[2:4] == ["npred", "acc2"]  # type: ignore[arg-type]


def test_two_modules_and_other_hyperparameters_layout(tmp_path: Path) -> None:
    """Layout of spec Appendix B: modules, then <type>-<hp> columns in first-appearance order."""
    results = [
        CaseResult("toy_llm", "singletasklearning", {"acc": 1.0},
                   {"basemodel": "toy", "hard_example_mining": "IBT"},
                   {"basemodel": {"bs": 4, "epochs": 3, "lr": 0.1, "opt": opt},
                    "hard_example_mining": {"threshold_img": th}},
                   TIME, f"./toy_ws/multijob/toy_llm/{opt}{th}")
        for opt in ("sgd", "adam") for th in (0.9, 0.5)
    ]
    files = save_rank(results, RankConfig(), tmp_path, ["acc"])
    assert header(files.selected_rank) == [
        "rank", "algorithm", "acc", "paradigm", "basemodel", "hard_example_mining",
        "basemodel-bs", "basemodel-epochs", "basemodel-lr", "basemodel-opt",
        "hard_example_mining-threshold_img", "time", "url"]
    first = files.selected_rank.read_text(encoding="utf-8").splitlines()[1]
    assert first == ("1,toy_llm,1.0,singletasklearning,toy,IBT,4,3,0.1,sgd,0.9,"
                     f"{TIME},./toy_ws/multijob/toy_llm/sgd0.9")


# ---------------------------------------------------------------- conformance 5: sort


def test_multi_key_sort(tmp_path: Path) -> None:
    """§13.5: acc2 descending, then npred ascending (spec Appendix A order)."""
    results = [case(0.6667, 3, 1, 0, uid="a"), case(1.0, 4, 0, 1, uid="b"),
               case(1.0, 3, 0, 0, uid="c"), case(0.6667, 4, 1, 1, uid="d")]
    files = save_rank(results, sort_cfg(), tmp_path, METRICS)
    rows = read(files.all_rank)  # type: ignore[arg-type]
    assert [(r["acc2"], r["npred"]) for r in rows] == [
        ("1.0", "3"), ("1.0", "4"), ("0.6667", "3"), ("0.6667", "4")]
    assert [r["rank"] for r in rows] == ["1", "2", "3", "4"]
    assert files.all_rank.read_text(encoding="utf-8").splitlines()[1] == (  # type: ignore[union-attr]
        f"1,noisy,1.0,3,singletasklearning,noisy,0,0,{TIME},{WS}/c")


def test_unknown_sort_metric_is_skipped_with_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = RankConfig(sort_by=(("latency", "ascend"), ("npred", "ascend")))
    with caplog.at_level(logging.WARNING):
        files = save_rank([case(1, 5, uid="a"), case(1, 2, uid="b")], config, tmp_path, METRICS)
    assert [r["npred"] for r in read(files.selected_rank)] == ["2", "5"]
    assert "'latency' is not a metric of this run" in caplog.text


def test_descend_for_any_non_ascend_value(tmp_path: Path) -> None:
    config = RankConfig.from_mapping({"sort_by": [{"npred": "Descending"}]}, "j.yaml")
    files = save_rank([case(1, 2, uid="a"), case(1, 5, uid="b")], config, tmp_path, METRICS)
    assert [r["npred"] for r in read(files.selected_rank)] == ["5", "2"]


def test_no_sort_keeps_insertion_order_and_sort_is_stable(tmp_path: Path) -> None:
    results = [case(0.5, 1, uid="a", wrong=1), case(0.9, 1, uid="b", wrong=2),
               case(0.5, 1, uid="c", wrong=3)]
    files = save_rank(results, RankConfig(), tmp_path / "r1", METRICS)
    assert [r["url"][-1] for r in read(files.all_rank)] == ["a", "b", "c"]  # type: ignore[arg-type]
    config = RankConfig(sort_by=(("npred", "descend"),))  # all ties
    files = save_rank(results, config, tmp_path / "r2", METRICS)
    assert [r["url"][-1] for r in read(files.all_rank)] == ["a", "b", "c"]  # type: ignore[arg-type]


@pytest.mark.parametrize("direction", ["ascend", "descend"])
def test_nan_and_empty_sort_last(tmp_path: Path, direction: str) -> None:
    results = [case(float("nan"), 1, uid="n", wrong=1), case(0.2, 1, uid="x", wrong=2),
               case(None, 1, uid="e", wrong=3), case(0.9, 1, uid="y", wrong=4)]
    files = save_rank(results, RankConfig(sort_by=(("acc2", direction),)), tmp_path, METRICS)
    order = [r["url"][-1] for r in read(files.all_rank)]  # type: ignore[arg-type]
    assert order[2:] == ["n", "e"]
    assert order[:2] == (["x", "y"] if direction == "ascend" else ["y", "x"])
    assert [r["acc2"] for r in read(files.all_rank)][2:] == ["", ""]  # type: ignore[arg-type]


def test_non_numeric_sort_values_do_not_crash(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    results = [case("oops", 1, uid="s", wrong=1), case(None, 1, uid="e", wrong=2),
               case(0.1, 1, uid="x", wrong=3)]
    with caplog.at_level(logging.WARNING):
        files = save_rank(results, RankConfig(sort_by=(("acc2", "descend"),)), tmp_path,
                          METRICS)
    assert [r["url"][-1] for r in read(files.all_rank)] == ["x", "s", "e"]  # type: ignore[arg-type]
    assert "non-numeric" in caplog.text


# ---------------------------------------------------------------- conformance 6: re-runs


def test_rerun_accumulates_all_rank(tmp_path: Path) -> None:
    """§13.6: a re-run adds its rows to all_rank.csv, re-sorted and renumbered."""
    rank_dir = tmp_path / "rank"
    save_rank([case(0.5, 3, uid="old1"), case(0.7, 3, uid="old2")], sort_cfg(), rank_dir,
              METRICS)
    files = save_rank([case(0.6, 3, uid="new1")], sort_cfg(), rank_dir, METRICS)
    rows = read(files.all_rank)  # type: ignore[arg-type]
    assert [r["url"].rsplit("/", 1)[1] for r in rows] == ["old2", "new1", "old1"]
    assert [r["rank"] for r in rows] == ["1", "2", "3"]


def test_selected_only_keeps_all_rank_but_uses_its_rows(tmp_path: Path) -> None:
    """§13.6: selected_only does not rewrite all_rank.csv, yet selects from its rows."""
    rank_dir = tmp_path / "rank"
    save_rank([case(0.5, 3, uid="old")], sort_cfg(), rank_dir, METRICS)
    before = (rank_dir / "all_rank.csv").read_bytes()
    files = save_rank([case(0.9, 3, uid="new", wrong=1)],
                      sort_cfg(save_mode="selected_only"), rank_dir, METRICS)
    assert files.all_rank is None
    assert (rank_dir / "all_rank.csv").read_bytes() == before
    assert [r["url"][-3:] for r in read(files.selected_rank)] == ["new", "old"]


def test_selected_only_first_run_writes_only_selected(tmp_path: Path) -> None:
    files = save_rank([case(0.5, 3)], RankConfig(save_mode="selected_only"), tmp_path / "r",
                      METRICS)
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["selected_rank.csv"]
    assert files.all_rank is None


def test_rerun_unions_columns_and_keeps_old_cells(tmp_path: Path) -> None:
    """Old columns are kept (old-only metrics after this run's), old cell text preserved."""
    rank_dir = tmp_path / "rank"
    rank_dir.mkdir()
    (rank_dir / "all_rank.csv").write_text(
        "rank,algorithm,npred,f1,paradigm,basemodel,basemodel-lr,time,url\n"
        "1,old,7,0.30,singletasklearning,m,0.10,2020-01-01 00:00:00,./ws/j/old/1\n",
        encoding="utf-8")
    files = save_rank([case(0.5, 3, uid="n")], RankConfig(), rank_dir, METRICS)
    assert header(files.all_rank) == [  # type: ignore[arg-type]
        "rank", "algorithm", "acc2", "npred", "f1", "paradigm", "basemodel", "basemodel-lr",
        "basemodel-wrong", "basemodel-pad", "time", "url"]
    old, new = read(files.all_rank)  # type: ignore[arg-type]
    assert (old["f1"], old["basemodel-lr"], old["acc2"]) == ("0.30", "0.10", "")
    assert (new["f1"], new["basemodel-lr"], new["basemodel-wrong"]) == ("", "", "0")


def test_unreadable_history_is_moved_aside(tmp_path: Path,
                                           caplog: pytest.LogCaptureFixture) -> None:
    rank_dir = tmp_path / "rank"
    rank_dir.mkdir()
    (rank_dir / "all_rank.csv").write_text("a,a\n1,2\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        files = save_rank([case(0.5, 3)], RankConfig(), rank_dir, METRICS)
    assert len(read(files.all_rank)) == 1  # type: ignore[arg-type]
    backups = list(rank_dir.glob("all_rank.csv.unreadable-*"))
    assert len(backups) == 1 and backups[0].read_text(encoding="utf-8") == "a,a\n1,2\n"
    assert "moved it to" in caplog.text


# ---------------------------------------------------------------- conformance 7: selection


def test_unknown_selected_names_give_empty_columns(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = RankConfig(selected_metrics=("npred", "bleu"), selected_modules=("basemodel",),
                        selected_hyperparameters=("basemodel-pad", "basemodel-nothing"))
    with caplog.at_level(logging.WARNING):
        files = save_rank([case(0.5, 3, pad=1)], config, tmp_path, METRICS)
    assert header(files.selected_rank) == [
        "rank", "algorithm", "npred", "bleu", "paradigm", "basemodel", "basemodel-pad",
        "basemodel-nothing", "time", "url"]
    (row,) = read(files.selected_rank)
    assert (row["bleu"], row["basemodel-nothing"], row["basemodel-pad"]) == ("", "", "1")
    assert "'bleu' is not a known metric" in caplog.text
    assert "'basemodel-nothing' matches no column" in caplog.text


def test_bare_hyperparameter_name_resolves_to_column(tmp_path: Path) -> None:
    """Fix #28 option: `pad` selects `basemodel-pad`."""
    config = RankConfig(selected_hyperparameters=("pad",))
    files = save_rank([case(0.5, 3, pad=7)], config, tmp_path, METRICS)
    assert "basemodel-pad" in header(files.selected_rank)
    assert read(files.selected_rank)[0]["basemodel-pad"] == "7"


def test_dedup_on_selected_columns_minus_time_and_url(tmp_path: Path) -> None:
    """§13.7: 4 cases differing only in an unselected hp collapse to the best one."""
    results = [case(0.1 * i, 3, wrong=i, uid=f"c{i}", time=f"2026-11-22 04:28:1{i}")
               for i in range(1, 5)]
    config = RankConfig(sort_by=(("npred", "ascend"),),
                        selected_metrics=("npred",), selected_hyperparameters=("basemodel-pad",))
    files = save_rank(results, config, tmp_path, METRICS)
    rows = read(files.selected_rank)
    assert len(rows) == 1 and rows[0]["url"].endswith("c1")
    assert len(read(files.all_rank)) == 4  # type: ignore[arg-type]


def test_rerun_with_numeric_hyperparameters_dedups(tmp_path: Path) -> None:
    """Fix #9: identical re-runs collapse whether values came from the run or the CSV."""
    rank_dir = tmp_path / "rank"
    results = [case(0.5, 3, wrong=0.1, pad=[1, 2], uid="a"), case(0.7, 3, wrong=2, uid="b")]
    save_rank(results, sort_cfg(), rank_dir, METRICS)
    again = [case(0.5, 3, wrong=0.1, pad=[1, 2], uid="a2"), case(0.7, 3, wrong=2, uid="b2")]
    files = save_rank(again, sort_cfg(), rank_dir, METRICS)
    assert len(read(files.all_rank)) == 4  # type: ignore[arg-type]
    rows = read(files.selected_rank)
    assert [r["url"][-1] for r in rows] == ["b", "a"]  # first (older) occurrence kept


def test_paradigm_filter(tmp_path: Path) -> None:
    results = [case(0.5, 3, uid="s"), case(0.9, 3, uid="i", paradigm="incrementallearning")]
    config = RankConfig(selected_paradigms=("singletasklearning",))
    files = save_rank(results, config, tmp_path, METRICS)
    assert [r["paradigm"] for r in read(files.selected_rank)] == ["singletasklearning"]
    assert read(files.selected_rank)[0]["rank"] == "1"
    assert len(read(files.all_rank)) == 2  # type: ignore[arg-type]


# ---------------------------------------------------------------- CSV conventions, atomicity


def test_csv_quoting_line_endings_and_values(tmp_path: Path) -> None:
    result = CaseResult("alg,1", "singletasklearning",
                        {"acc": 0.6667, "n": 4, "note": 'say "hi"\nbye', "none": None},
                        {"basemodel": "m"}, {"basemodel": {"grid": [1, 2], "flag": True}},
                        TIME, "./ws/job/alg,1/u")
    files = save_rank([result], RankConfig(), tmp_path, ["acc", "n", "note", "none"])
    raw = files.all_rank.read_bytes()  # type: ignore[union-attr]
    assert b"\r" not in raw.replace(b"\r\n", b"") and not raw.startswith(b"\xef\xbb\xbf")
    text = raw.decode("utf-8")
    assert text == (
        "rank,algorithm,acc,n,note,none,paradigm,basemodel,basemodel-grid,basemodel-flag,"
        "time,url\n"
        '1,"alg,1",0.6667,4,"say ""hi""\nbye",,singletasklearning,m,"[1, 2]",True,'
        f'{TIME},"./ws/job/alg,1/u"\n')
    _, rows = read_table(files.all_rank)  # type: ignore[arg-type]
    assert rows[0]["note"] == 'say "hi"\nbye'


def test_no_temporary_files_left(tmp_path: Path) -> None:
    save_rank([case(0.5, 3)], RankConfig(), tmp_path, METRICS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all_rank.csv", "selected_rank.csv"]


def test_failed_write_leaves_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save_rank([case(0.5, 3)], RankConfig(), tmp_path, METRICS)
    before = (tmp_path / "all_rank.csv").read_bytes()

    def boom(*_: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("core.storymanager.rank.csvio.os.replace", boom)
    with pytest.raises(OSError):
        save_rank([case(0.9, 3)], RankConfig(), tmp_path, METRICS)
    assert (tmp_path / "all_rank.csv").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all_rank.csv", "selected_rank.csv"]


def test_empty_run_writes_headers(tmp_path: Path) -> None:
    files = save_rank([], RankConfig(), tmp_path, METRICS)
    assert files.selected_rank.read_text(encoding="utf-8") == (
        "rank,algorithm,acc2,npred,paradigm,time,url\n")


# ---------------------------------------------------------------- pictures (fix #11)


def matrix_case(url: str) -> CaseResult:
    matrix = {"all": [[{"accuracy": 0.5}, {"accuracy": 0.6}], [{"accuracy": 0.7}, 0.8]]}
    return CaseResult("ll", "lifelonglearning", {"MATRIX": matrix, "BWT": 0.1}, {}, {},
                      TIME, url)


def test_picture_mode_without_matplotlib_warns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(pictures, "matplotlib_available", lambda: False)
    config = RankConfig(save_mode="selected_and_all_and_picture")
    with caplog.at_level(logging.WARNING):
        files = save_rank([matrix_case(str(tmp_path / "case"))], config, tmp_path / "rank",
                          ["MATRIX", "BWT"])
    assert files.pictures == () and files.all_rank is not None
    assert "pip install matplotlib" in caplog.text
    row = read(files.all_rank)[0]
    assert row["MATRIX"].startswith("{'all': [[{'accuracy': 0.5}")


def test_picture_mode_draws_heatmap(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    config = RankConfig(save_mode="selected_and_all_and_picture")
    files = save_rank([matrix_case(str(tmp_path / "case"))], config, tmp_path / "rank",
                      ["MATRIX", "BWT"])
    assert files.pictures == (tmp_path / "case" / "output" / "all-heatmap.png",)
    assert files.pictures[0].read_bytes().startswith(b"\x89PNG")


def test_matrix_parsing() -> None:
    parsed = pictures._as_matrix([[1, {"accuracy": 2}], [3]])
    assert parsed is not None and parsed[0] == [1.0, 2.0] and math.isnan(parsed[1][1])
    assert pictures._as_matrix("[[1]]") is None
    assert pictures._as_matrix([1, 2]) is None


def test_log_output_is_not_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save_rank([case(0.5, 3)], RankConfig(), tmp_path, METRICS)
    assert capsys.readouterr().out == ""

