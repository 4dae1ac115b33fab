"""``ianvs dataset trajectories`` on a real git history built here (real git, no mocks)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from core.common.errors import IanvsError
from core.scenarios.trajectories.builder import (TrajectoryOptions, build_trajectories, manifest_path,
                                                 progress_path)
from core.scenarios.trajectories.filters import DECISIONS, FilterOptions
from tests.runner.conftest import run_cli
from tests.trajectories.conftest import commit, git

FILTERS = FilterOptions(max_lines=100)


def _build(root: Path, out: Path, **kw: object) -> tuple[dict, list[dict]]:
    opts = TrajectoryOptions(repo=str(root), output=out, show_progress=False,
                             filters=kw.pop("filters", FILTERS), **kw)  # type: ignore[arg-type]
    report = build_trajectories(opts).as_dict()
    return report, [json.loads(line) for line in out.read_text().splitlines()]


def test_every_filter_decides_and_counts_add_up(history, tmp_path: Path) -> None:
    root, ids = history
    report, steps = _build(root, tmp_path / "steps.jsonl")
    counts = report["counts"]
    assert list(counts) == list(DECISIONS)
    assert sum(counts.values()) == report["walked"] == 14
    assert counts == {"outside_window": 0, "bot": 1, "merge_only": 1, "empty": 1, "huge": 1,
                      "vendored": 1, "whitespace_only": 1, "kept": 8}
    kept = {s["commit"] for s in steps}
    assert kept == {ids[k] for k in ("init", "feature", "topic1", "topic2", "clash", "main_side",
                                     "resolved_merge", "unmerged")}
    by = {s["commit"]: s for s in steps}
    assert all(by[ids[k]]["on_mainline"] for k in ("init", "feature", "resolved_merge"))
    assert by[ids["unmerged"]]["on_mainline"] is False
    merge = by[ids["resolved_merge"]]
    assert merge["is_merge"] and merge["diff_format"] == "combined" and "mul_impl" in merge["diff"]
    assert len(merge["parents"]) == 2


def test_step_record_fields(history, tmp_path: Path) -> None:
    root, ids = history
    _report, steps = _build(root, tmp_path / "steps.jsonl")
    by = {s["commit"]: s for s in steps}
    feat = by[ids["feature"]]
    assert feat["schema"] == "ianvs-trajectory-step/1" and feat["id"] == f"proj@{ids['feature'][:12]}"
    assert feat["parents"] == [ids["init"]] and feat["author"] == "Dev One"
    assert feat["committed_at"] == "2020-02-01T12:00:00+00:00" and feat["message"] == "Add sub with a test"
    assert feat["tests_touched"] == ["tests/test_calc.py"]
    assert {f["path"]: f["status"] for f in feat["files"]} == {"calc.py": "M", "tests/test_calc.py": "A"}
    assert {f["path"]: f["additions"] for f in feat["files"]} == {"calc.py": 4, "tests/test_calc.py": 5}
    assert feat["repo"] == {"name": "proj", "licence": "MIT", "licence_file": "LICENSE"}
    assert "+def sub(a, b):" in feat["diff"] and not feat["diff_truncated"]
    assert "dev@example.org" not in json.dumps(steps)  # e-mail addresses are never recorded
    root_step = by[ids["init"]]
    assert root_step["parents"] == [] and "+def add(a, b):" in root_step["diff"]


def test_pull_requests_from_refs_and_merge_messages(history, tmp_path: Path) -> None:
    root, ids = history
    report, steps = _build(root, tmp_path / "steps.jsonl")
    by = {s["commit"]: s for s in steps}
    pr7 = [by[ids["topic1"]]["pull_request"], by[ids["topic2"]]["pull_request"]]
    assert [p["position"] for p in pr7] == [1, 2] and all(p["length"] == 2 for p in pr7)
    assert pr7[0]["ref"] == "refs/pull/7/head" and pr7[0]["title"] == "Add mul"
    assert pr7[0]["merge_commit"] == ids["merge_only"]
    pr9 = by[ids["unmerged"]]["pull_request"]
    assert pr9 == {"number": 9, "ref": "refs/pull/9/head", "merge_commit": None, "title": "",
                   "position": 1, "length": 1}
    assert by[ids["feature"]]["pull_request"] is None
    assert report["pull_requests"] == 2 and report["steps_in_pull_requests"] == 3


def test_bounded_diff(history, tmp_path: Path) -> None:
    root, ids = history
    _r, steps = _build(root, tmp_path / "steps.jsonl", max_diff_bytes=120)
    feat = next(s for s in steps if s["commit"] == ids["feature"])
    assert feat["diff_truncated"] and len(feat["diff"].encode()) <= 120 and feat["diff"].endswith("\n")
    assert feat["diff_bytes"] > 120


def test_date_window(history, tmp_path: Path) -> None:
    root, ids = history
    report, steps = _build(root, tmp_path / "steps.jsonl",
                           filters=FilterOptions(max_lines=100, since="2020-08-01", until="2021-01-01"))
    assert report["counts"]["outside_window"] == 14 - 5
    assert {s["commit"] for s in steps} == {ids["topic1"], ids["topic2"], ids["clash"], ids["main_side"]}


def test_resume_after_kill_gives_the_same_file(history, tmp_path: Path) -> None:
    """A build cut mid-record (as SIGKILL leaves it) resumes to the byte-identical file."""
    root, _ids = history
    whole = tmp_path / "whole.jsonl"
    _build(root, whole)
    out = tmp_path / "cut.jsonl"
    _build(root, out)
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:3]) + lines[3][:40])       # a record cut mid-line
    man = json.loads(manifest_path(out).read_text())
    man["status"] = "running"
    manifest_path(out).write_text(json.dumps(man))
    decided = [json.loads(x) for x in (tmp_path / "whole.jsonl").read_text().splitlines()][:4]
    progress_path(out).write_text("".join(json.dumps({"commit": d["commit"], "decision": "kept"}) + "\n"
                                          for d in decided))
    report, _steps = _build(root, out)
    assert report["resumed"] == 3                              # the cut record is done again
    assert out.read_bytes() == whole.read_bytes()
    assert not progress_path(out).exists()
    assert json.loads(manifest_path(out).read_text())["status"] == "complete"


def test_other_options_on_an_unfinished_build_is_an_error(history, tmp_path: Path) -> None:
    root, _ids = history
    out = tmp_path / "s.jsonl"
    _build(root, out)
    with pytest.raises(IanvsError, match="another range or other options"):
        _build(root, out, filters=FilterOptions(max_lines=5))
    report, _ = _build(root, out, filters=FilterOptions(max_lines=5), fresh=True)
    assert report["counts"]["huge"] > 1


def test_from_manifest_repeats_the_recorded_range(history, tmp_path: Path) -> None:
    """The branch moves on and the mirror gains pull requests; the recorded range (tip and
    pull-request heads) still gives the same steps. A new ref may even reach recorded commits:
    ``refs/pull/5/head`` at a commit of pull request #7 would claim it (a lower number is read
    first), so the pull requests are read from the recorded heads, not the mirror's refs."""
    root, ids = history
    first = tmp_path / "first.jsonl"
    _build(root, first, filters=FilterOptions(max_lines=100, since="2020-02-01"))
    commit(root, {"calc.py": "def add(a, b):\n    return 0\n"}, "Break the adder later on",
           "2021-06-01T12:00:00+00:00")
    git(root, "update-ref", "refs/pull/11/head", "HEAD")
    git(root, "update-ref", "refs/pull/5/head", ids["topic1"])
    again = tmp_path / "again.jsonl"
    build_trajectories(TrajectoryOptions(repo=str(root), output=again, from_manifest=manifest_path(first),
                                         show_progress=False))
    assert again.read_bytes() == first.read_bytes()
    moved = tmp_path / "moved.jsonl"
    _build(root, moved, filters=FilterOptions(max_lines=100, since="2020-02-01"))
    assert len(moved.read_text().splitlines()) == len(first.read_text().splitlines()) + 1


def test_bundle_with_pull_refs(history, tmp_path: Path) -> None:
    root, ids = history
    bundle = tmp_path / "proj.bundle"
    git(root, "bundle", "create", str(bundle), "--all")
    _r, steps = _build(bundle, tmp_path / "b.jsonl")
    _r, direct = _build(root, tmp_path / "d.jsonl")
    assert [s["commit"] for s in steps] == [s["commit"] for s in direct]
    assert next(s for s in steps if s["commit"] == ids["unmerged"])["pull_request"]["number"] == 9


def test_codehost_export_attaches_review_and_issues(history, tmp_path: Path) -> None:
    root, ids = history
    export = Path(__file__).with_name("codehost_fixture.json")
    data = json.loads(export.read_text())
    data["pull_requests"][0]["review_comments"][0]["commit"] = ids["topic1"][:10]
    fixture = tmp_path / "export.json"
    fixture.write_text(json.dumps(data))
    _r, steps = _build(root, tmp_path / "s.jsonl", codehost=fixture)
    by = {s["commit"]: s for s in steps}
    first = by[ids["topic1"]]
    assert first["pull_request"]["body"] == "Adds multiplication."
    assert [c["body"] for c in first["review_comments"]] == ["Please add a test for mul."]
    assert [i["number"] for i in first["issues"]] == [3]             # linked by the PR and by "#3"
    assert by[ids["topic2"]]["review_comments"] == []
    assert by[ids["feature"]]["issues"] == [] and by[ids["feature"]]["review_comments"] == []


def test_codehost_export_errors_name_the_field(history, tmp_path: Path) -> None:
    root, _ids = history
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"pull_requests": [{"number": 7, "review_comments": [{"commit": "xyz"}]}]}))
    with pytest.raises(IanvsError, match=r"pull_requests\[0\]\.review_comments\[0\]\.commit"):
        _build(root, tmp_path / "s.jsonl", codehost=bad)
    bad.write_text(json.dumps({"pull_requests": [{"number": 7, "titel": "x"}]}))
    with pytest.raises(IanvsError, match=r"unknown field 'pull_requests\[0\]\.titel'"):
        _build(root, tmp_path / "s.jsonl", codehost=bad)


def test_cli(history, tmp_path: Path) -> None:
    root, _ids = history
    out = tmp_path / "cli.jsonl"
    res = run_cli("dataset", "trajectories", "--repo", str(root), "-o", str(out), "--max-lines", "100",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout.splitlines()[0])["counts"]["kept"] == 8
    bad = run_cli("dataset", "trajectories", "--repo", str(root), "-o", str(out), "--since", "last tuesday",
                  cwd=tmp_path)
    assert bad.returncode != 0 and "--since 'last tuesday' is not a date" in bad.stderr
    assert "Traceback" not in bad.stderr
    missing = run_cli("dataset", "trajectories", "--repo", str(tmp_path / "nope"), "-o", str(out), cwd=tmp_path)
    assert missing.returncode != 0 and "no such file or directory" in missing.stderr


def test_addresses_in_message_trailers_are_masked(tmp_path: Path) -> None:
    """A co-author's address in a message trailer is not recorded: the trailer keeps the name,
    the address becomes ``<e-mail removed>``; a decorator in the message text is left alone."""
    from core.scenarios.trajectories.builder import MASKED_ADDRESS, mask_addresses

    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / "LICENSE").write_text("MIT License\n")
    commit(root, {"LICENSE": "MIT License\n", "calc.py": "def add(a, b):\n    return a + b\n"},
           "init", "2020-01-01T12:00:00+00:00")
    message = ("Use @functools.cache in add\n\nCo-authored-by: Ada Lovelace <ada@example.org>\n"
               "Signed-off-by: Dev One <dev.one+x@mail.example.co.uk>")
    sha = commit(root, {"calc.py": "import functools\n\n@functools.cache\ndef add(a, b):\n"
                                   "    return a + b\n"}, message, "2020-02-01T12:00:00+00:00")
    _report, steps = _build(root, tmp_path / "steps.jsonl")
    step, = [s for s in steps if s["commit"] == sha]
    assert step["message"] == ("Use @functools.cache in add\n\nCo-authored-by: Ada Lovelace "
                               f"{MASKED_ADDRESS}\nSigned-off-by: Dev One {MASKED_ADDRESS}")
    assert "@example.org" not in json.dumps(steps) and "@mail.example" not in json.dumps(steps)
    assert mask_addresses("x@y is not bracketed") == "x@y is not bracketed"
