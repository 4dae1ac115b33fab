"""No shipped task shows its answer (issue 44, point 2), and the leak check itself.

* every JSONL task file under the bench's ``*/data/`` (subsets included) has zero leaks by the
  shared check (:mod:`core.scenarios.leak_views`); a new file whose kind is not known fails;
* the measures (:mod:`core.scenarios.leaks`) on leaking and clean controls: exact copy, near
  copy, containment, and legitimate overlap that must not count;
* masking and dropping (:func:`screen`), the commit-message builder's report, and the in-place
  fixer (:mod:`core.scenarios.leak_fix`), which must be idempotent.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.scenarios.trajectories.commit_message.builder import CommitTaskOptions, build_commit_tasks
from core.scenarios.leak_fix import fix_file
from core.scenarios.leak_views import find_leak, screen
from core.scenarios.leaks import (CODE_COVERAGE, MIN_CODE_CHARS, NEAR_COPY_RATIO, code_leak,
                                  code_lines, coverage, normalise, ratio, text_leak)
from tests.scenarios.conftest import BENCH, read_jsonl, write_jsonl

def _kind_of(path: Path) -> str:
    """The task kind of a shipped data file, read off its example's testenv files (the kind
    named by the testenv whose test index is the file, also in a commented-out alternative,
    else the one kind all of the folder's testenvs name; a testenv without ``task_kind`` is
    codegen). Nothing here lists kinds."""
    import re

    from core.common.yaml_loader import load_yaml
    from core.scenarios import DEFAULT_KIND

    kinds: dict[str, str] = {}
    for env in sorted((path.parent.parent / "testenv").glob("*.yaml")):
        data = load_yaml(env)["testenv"]
        kind = data.get("task_kind") or DEFAULT_KIND
        kind = str(kind["name"] if isinstance(kind, dict) else kind)
        indexes = re.findall(r"test_index:\s*[\"']?([^\"'\s]+)", env.read_text(encoding="utf-8"))
        if path.name in {Path(index).name for index in indexes}:
            return kind
        kinds[env.name] = kind
    if len(set(kinds.values())) == 1:
        return next(iter(kinds.values()))
    raise AssertionError(f"{path}: its task kind is unknown (testenv kinds {kinds}); make it the "
                         "test_index of one of the folder's testenv files")


SHIPPED = sorted(BENCH.glob("*/data/*.jsonl"))


def test_every_kind_with_a_builder_is_covered() -> None:
    folders = {p.parent.parent.name for p in SHIPPED}
    assert {"commit_message", "comment", "issue", "implement_change", "revise", "repo"} <= folders
    assert any(p.name.endswith("_subset.jsonl") for p in SHIPPED)


@pytest.mark.parametrize("path", SHIPPED, ids=[f"{p.parent.parent.name}/{p.name}" for p in SHIPPED])
def test_shipped_set_has_no_leak(path: Path) -> None:
    kind = _kind_of(path)
    leaks = [(r.get("id") or r.get("task_id"), finding.describe()) for r in read_jsonl(path)
             if (finding := find_leak(kind, r)) is not None]
    assert leaks == [], f"{path.name}: {len(leaks)} task(s) show their answer: {leaks[:5]}"


# --- the prose measure ---------------------------------------------------------------------------

def test_normalise_ignores_case_punctuation_and_spacing() -> None:
    assert normalise("Fix #12:  foo()  bar_baz.") == "fix 12 foo bar baz"
    assert normalise("  \n") == ""


@pytest.mark.parametrize("reference, shown, reason", [
    ("Add asdict method", "add asdict method.", "exact"),                       # exact copy
    ("Add asdict method that returns JSON encodable object",
     "Add asdict method that return json encodable object", "near_copy"),     # typo
    ("add dicttoolz", "dicttoolz", "near_copy"),                              # a word dropped
    ("Reimplement assoc with merge", "Fix issues #133 and #140 in dicttoolz, then reimplement assoc "
                                     "with merge", "contained"),                # copied into more
])
def test_text_leak_catches_copies(reference: str, shown: str, reason: str) -> None:
    finding = text_leak(reference, {"title": shown})
    assert finding is not None and finding.reason == reason and finding.field == "title"


@pytest.mark.parametrize("reference, shown", [
    ("Add assoc and update_in", "Implement assoc and update-in"),   # a related summary (0.73)
    ("Remove python 2 support", "Hardcode Python 3 support"),
    ("Fix typo", "diff --git a/x.py b/x.py\n-# fix typo here\n+# fixed"),   # too short to be contained
    ("Explain weights for linear regression", "More tests for changes in sklearn_utils"),
    ("Anything at all", ""),
])
def test_text_leak_leaves_legitimate_overlap(reference: str, shown: str) -> None:
    assert text_leak(reference, {"title": shown}) is None


def test_near_copy_threshold_is_the_documented_one() -> None:
    a, b = normalise("remove python 2 support"), normalise("remove python 3 4 support")
    assert ratio(a, b) >= NEAR_COPY_RATIO             # documented as a near copy (0.92)
    a, b = normalise("sample weight sliced to work with cross validation issue 358"), \
        normalise("slice sample weight to work with cross validation")
    assert ratio(a, b) < NEAR_COPY_RATIO              # 0.79: left alone
    assert ratio("abc", "") == 0.0 and ratio("a", "a" * 50) == 0.0   # length bound, no alignment


def test_coverage_counts_word_4grams() -> None:
    assert coverage("one two three four five", "zero one two three four five six") == 1.0
    assert coverage("one two three four five", "one two three four") == 0.5
    assert coverage("one two", "x one two y") == 1.0   # shorter than n: the whole sequence
    assert coverage("", "x") == 0.0
    parts = ["scaled for the display", "rounded before the report"]
    shown = "x = 'scaled for the display'; y = 'rounded before the report'"
    assert coverage(parts, shown) == 1.0                    # grams per piece
    assert coverage(" ".join(parts), shown) < 1.0            # joined: grams across the seam


# --- the code measure ----------------------------------------------------------------------------

def test_code_lines_normalise_and_strip_diff_prefixes() -> None:
    assert code_lines("    x  =  1\n\n    # note\n") == ["x = 1"]
    diff = "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-old_value = compute(1)\n+new = 2\n ctx()\n"
    assert code_lines(diff, diff=True) == ["old_value = compute(1)", "new = 2", "ctx()"]


def test_code_leak_needs_enough_code_and_coverage() -> None:
    body = code_lines("    total = sum(values) / len(values)\n    return round(total, ndigits)\n")
    assert sum(len(line.replace(" ", "")) for line in body) >= MIN_CODE_CHARS
    shown = code_lines("def other(values, ndigits):\n    total = sum(values) / len(values)\n"
                       "    return round(total, ndigits)\n")
    found = code_leak(body, {"context": shown})
    assert found is not None and found.reason == "contained" and found.score >= CODE_COVERAGE
    half = code_lines("    total = sum(values) / len(values)\n")
    assert code_leak(body, {"context": half}) is None                     # half of it: no
    assert code_leak(["return self._x"], {"context": ["return self._x"]}) is None   # a one-liner


# --- per kind: masking and dropping --------------------------------------------------------------

def _commit(message: str, title: str, diff: str = "diff --git a/a.py b/a.py\n+x = 1\n") -> dict[str, Any]:
    return {"id": "r@1", "diff": diff, "files": ["a.py"], "context": "", "message": message,
            "commit": "0" * 40, "committed_at": "2020-01-01T00:00:00+00:00",
            "repo": {"name": "r", "licence": "MIT"}, "pull_request_title": title, "metadata": {}}


def test_commit_title_equal_to_subject_is_masked_not_dropped() -> None:
    record = _commit("Add side_effects function\n\nLong body.", "Add new side_effects function")
    result = screen("commit_message", record)
    assert result.action == "masked" and result.record is not None
    assert result.record["pull_request_title"] == "" and record["pull_request_title"] != ""
    assert result.key == "leak_masked:near_copy:pull_request_title"
    assert {k: v for k, v in result.record.items() if k != "pull_request_title"} == \
        {k: v for k, v in record.items() if k != "pull_request_title"}


def test_commit_message_quoted_by_its_diff_is_dropped() -> None:
    diff = "diff --git a/a.py b/a.py\n+    Not to be confused with ``itertools.count``\n"
    result = screen("commit_message", _commit("not to be confused with itertools.count", "", diff))
    assert result.action == "dropped" and result.record is None and result.finding is not None
    assert result.finding.field == "diff"


def test_clean_commit_keeps_its_title() -> None:
    result = screen("commit_message", _commit("Move span builder code to function", "Explain keras"))
    assert result.action == "clean" and result.record is not None
    assert result.record["pull_request_title"] == "Explain keras"


def test_issue_answer_restating_the_body_leaks() -> None:
    record = {"question": "How do I pin versions?", "body": "Use pip install foo==1.2 in requirements.txt",
              "answer_1": {"body": "use pip install foo==1.2 in requirements.txt"}}
    assert find_leak("issue", record) is not None
    record["answer_1"] = {"body": "Pin them in a constraints file and pass -c to pip."}
    assert find_leak("issue", record) is None


def _revise(files: dict[str, str], reference: dict[str, str], prev_diff: str) -> dict[str, Any]:
    return {"id": "r@2", "pull_request": {"title": "Speed up"}, "message": "restore the check",
            "feedback": "", "previous": {"message": "simplify", "diff": prev_diff},
            "files": files, "reference_files": reference}


def test_revise_before_files_are_not_a_leak_but_restored_lines_are() -> None:
    before = "def f(x):\n    return x\n"
    new_code = "def f(x):\n    if isinstance(x, str) and not x.strip():\n        raise ValueError('empty')\n    return x\n"
    clean = _revise({"a.py": before}, {"a.py": new_code}, "diff --git a/a.py b/a.py\n+    return x\n")
    assert find_leak("revise", clean) is None      # the shown file overlaps the answer: legitimate
    restored = _revise({"a.py": before}, {"a.py": new_code},
                       "--- a/a.py\n+++ b/a.py\n@@ -1,4 +1,2 @@\n def f(x):\n"
                       "-    if isinstance(x, str) and not x.strip():\n-        raise ValueError('empty')\n"
                       "     return x\n")
    found = find_leak("revise", restored)
    assert found is not None and found.field == "previous.diff"
    unchanged = _revise({"a.py": before}, {"a.py": before}, "")
    assert find_leak("revise", unchanged) is not None and screen("revise", unchanged).action == "dropped"


def test_repo_body_copied_in_context_is_dropped() -> None:
    body = "    rows = [normalise(r) for r in table.rows]\n    return {r.key: r for r in rows if r.valid}\n"
    record = {"context": "def index_a(table):\n" + body + "\n\n", "signature": "def index_b(table):",
              "docstring": None, "problem": None, "reference": body}
    assert screen("repo", record).action == "dropped"
    record["context"] = "import os\n"
    assert screen("repo", record).action == "clean"


def test_repo_model_written_problem_that_shows_the_body_is_masked() -> None:
    body = "    rows = [normalise(r) for r in table.rows]\n    return {r.key: r for r in rows if r.valid}\n"
    record = {"context": "import os\n", "signature": "def index_b(table):", "docstring": None,
              "problem": "Do exactly:\n" + body, "problem_author": {"written_by": "model"},
              "reference": body}
    result = screen("repo", record)
    assert result.action == "masked" and result.record is not None
    assert result.record["problem"] is None and "problem_author" not in result.record


def test_unknown_kind_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown task kind 'nope'"):
        find_leak("nope", {})


def test_a_kind_without_a_leak_view_cannot_be_screened() -> None:
    """A kind's leak view is its own (:meth:`TaskKind.leak_view`); a kind that has none is
    refused with the fix, never screened as if nothing leaked."""
    from core.common.class_factory import ClassFactory
    from core.scenarios import TASK_KIND
    from tests.scenarios.conftest import stub_kind

    NoView = stub_kind("noview")
    ClassFactory.register_cls(NoView, TASK_KIND, "noview")
    try:
        with pytest.raises(ValueError, match="has no leak view: give its TaskKind a leak_view"):
            screen("noview", {"id": "x"})
    finally:
        ClassFactory.unregister(TASK_KIND, "noview")


# --- builder report and the in-place fixer -------------------------------------------------------

def _step(n: int, message: str, title: str, diff: str) -> dict[str, Any]:
    return {"id": f"r@{n:012d}", "repo": {"name": "r", "licence": "MIT"}, "commit": f"{n:040d}",
            "parents": [f"{n - 1:040d}"], "author": "a", "committed_at": f"2020-01-0{n}T00:00:00+00:00",
            "message": message, "is_merge": False,
            "files": [{"path": "a.py", "old_path": None, "status": "M", "additions": 1, "deletions": 0,
                       "binary": False, "is_test": False}],
            "tests_touched": [], "diff": diff, "diff_truncated": False,
            "pull_request": {"number": n, "title": title} if title else None}


def test_commit_builder_masks_drops_and_reports(tmp_path: Path) -> None:
    plain = "diff --git a/a.py b/a.py\n+x = compute()\n"
    steps = write_jsonl(tmp_path / "steps.jsonl", [
        _step(1, "Use compute for x", "Use compute for x", plain),                        # masked
        _step(2, "not to be confused with itertools count",  "",
              "diff --git a/a.py b/a.py\n+# Not to be confused with ``itertools.count``\n"),  # dropped
        _step(3, "Make x lazy for callers", "Laziness", plain)])                             # clean
    out = tmp_path / "tasks.jsonl"
    report = build_commit_tasks(CommitTaskOptions(steps=steps, output=out))
    tasks = read_jsonl(out)
    assert [t["id"] for t in tasks] == ["r@000000000001", "r@000000000003"]
    assert [t["pull_request_title"] for t in tasks] == ["", "Laziness"]
    assert report["tasks"] == 2 and report["counts"]["kept"] == 2 and report["counts"]["leak_dropped"] == 1
    assert report["leaks"] == {"masked": 1, "dropped": 1, "by_reason": {
        "leak_dropped:contained:diff": 1, "leak_masked:exact:pull_request_title": 1}}
    assert json.loads((tmp_path / "tasks.jsonl.build.json").read_text())["leaks"] == report["leaks"]


def test_fix_file_rewrites_once_and_updates_the_report(tmp_path: Path) -> None:
    rows = [_commit("Add mul", "Add mul"), _commit("Make x lazy for callers", "Laziness"),
            _commit("not to be confused with itertools count", "",
                    "diff --git a/a.py b/a.py\n+# Not to be confused with itertools.count\n")]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    clean_line = path.read_text().splitlines()[1]
    report = tmp_path / "t.jsonl.build.json"
    report.write_text(json.dumps({"tasks": 3, "counts": {"merge": 0, "kept": 3, "over_limit": 0}}))
    counts = fix_file("commit_message", path, check=True)
    assert counts["clean"] == 1 and len(read_jsonl(path)) == 3          # --check writes nothing
    fix_file("commit_message", path)
    fixed = read_jsonl(path)
    assert [r["pull_request_title"] for r in fixed] == ["", "Laziness"]
    assert path.read_text().splitlines()[1] == clean_line              # clean lines byte for byte
    written = json.loads(report.read_text())
    assert written["tasks"] == 2 and list(written["counts"]) == ["merge", "leak_dropped", "kept", "over_limit"]
    assert written["counts"]["kept"] == 2 and written["leaks"]["masked"] == 1 and written["leaks"]["dropped"] == 1
    before = (path.read_text(), report.read_text())
    again = fix_file("commit_message", path)
    assert again["clean"] == 2 and (path.read_text(), report.read_text()) == before


def _write_faq_with_a_restated_answer(root: Path) -> None:
    """FAQ documents under ``root``: one answer restates its question (a leak), one does not."""
    faq = root / "docs" / "faq"
    faq.mkdir(parents=True)
    (faq / "general.txt").write_text(
        "How do I pin the versions of every dependency?\n"
        "==============================================\n\n"
        "How do I pin the versions of every dependency? (asked often)\n\n"
        "Why is the import slow on the first call?\n"
        "=========================================\n\n"
        "The first import compiles the modules to bytecode and caches them for later runs.\n")


def test_issue_builder_drops_an_answer_that_restates_its_question(tmp_path: Path) -> None:
    from core.scenarios.issue.builder import build_issue_records

    _write_faq_with_a_restated_answer(tmp_path)
    records = build_issue_records(tmp_path, "MIT", "proj")
    assert [r["question"] for r in records] == ["Why is the import slow on the first call?"]


def test_comment_builder_drops_a_function_whose_comments_are_in_its_code(tmp_path: Path) -> None:
    from core.scenarios.comment.builder import CommentBuildOptions, build_comment_records

    (tmp_path / "mod.py").write_text(
        "def leaky(x):\n"
        '    """Return the value of x scaled for display."""\n'
        "    # scale by the display factor before rounding\n"
        "    msg = 'Return the value of x scaled for display.'\n"
        "    note = 'scale by the display factor before rounding'\n"
        "    y = x * 2\n"
        "    return round(y), msg, note\n\n\n"
        "def clean(x):\n"
        '    """Double x and round the result for the report table."""\n'
        "    # the report shows whole numbers only\n"
        "    y = x * 2\n"
        "    z = y + 0\n"
        "    w = z - 0\n"
        "    return round(w)\n")
    records = build_comment_records(tmp_path, CommentBuildOptions(source_name="m", min_lines=3))
    assert [r["id"].rsplit(":", 1)[1] for r in records] == ["clean"]


def test_the_issue_command_writes_its_leak_counts_in_a_build_report(tmp_path: Path) -> None:
    """``ianvs dataset issues`` counts the dropped records in ``<out>.build.json``, like the
    other builders' reports (the real command, in a child process)."""
    import subprocess
    import sys

    _write_faq_with_a_restated_answer(tmp_path)
    out = tmp_path / "issues.jsonl"
    res = subprocess.run([sys.executable, "-m", "core.cmd.benchmarking", "dataset", "issues",
                          "--from", str(tmp_path), "-o", str(out), "--license", "MIT"],
                         capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[2])
    assert res.returncode == 0, res.stderr[-2000:]
    report = json.loads((tmp_path / "issues.jsonl.build.json").read_text())
    assert report["records"] == 1 and report["leaks"]["dropped"] == 1
    assert "1 dropped" in res.stdout
