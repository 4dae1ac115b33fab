"""Dataset builders on small real inputs: standard-library modules of the running interpreter
(PSF) for comments, a Django FAQ document (BSD, tests/fixtures/scenarios/faq) for issues.

The GitHub export is the one input this machine cannot fetch: the test writes a file in the
REST API's documented shape (issue object + comments list, fields as the API names them)."""
from __future__ import annotations

import json
import shutil
import tarfile
import textwrap
import shlex
from pathlib import Path

import pytest

from core.common.errors import DatasetError
from core.scenarios import get_kind
from core.scenarios.comment.annotate import code_fingerprint
from core.scenarios.comment.builder import CommentBuildOptions, build_comment_records
from core.scenarios.issue.builder import build_issue_records
from tests.runner.conftest import run_cli
from tests.scenarios.conftest import read_jsonl

FAQ = Path(__file__).resolve().parents[1] / "fixtures" / "scenarios" / "faq"


@pytest.fixture
def codebase(tmp_path: Path) -> Path:
    root = tmp_path / "src" / "pkg"
    (root / "tests").mkdir(parents=True)
    shutil.copy(textwrap.__file__, root / "textwrap.py")
    shutil.copy(shlex.__file__, root / "shlex.py")
    shutil.copy(textwrap.__file__, root / "textwrap_copy.py")      # duplicates
    shutil.copy(shlex.__file__, root / "tests" / "helpers.py")       # a test folder
    shutil.copy(shlex.__file__, root / "test_shlex.py")              # a test file
    return tmp_path / "src"


def test_comment_builder_on_stdlib_modules(codebase: Path, tmp_path: Path) -> None:
    out = tmp_path / "comments.jsonl"
    res = run_cli("dataset", "comments", "--from", str(codebase), "-o", str(out),
                  "--license", "PSF-2.0", "--source-name", "stdlib", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    records = list(get_kind("comment").read(out))
    assert len(records) >= 5
    sources = {r["metadata"]["source"] for r in records}
    assert sources <= {"stdlib/pkg/textwrap.py", "stdlib/pkg/shlex.py",
                       "stdlib/pkg/textwrap_copy.py"}
    assert "stdlib/pkg/textwrap_copy.py" not in sources          # all deduplicated
    assert all(r["metadata"]["license"] == "PSF-2.0" for r in records)
    fingerprints = [code_fingerprint(r["code_snippet"]) for r in records]
    assert len(set(fingerprints)) == len(records)
    dedent = next(r for r in records if r["id"] == "stdlib/pkg/textwrap.py:dedent")
    assert "#" not in dedent["code_snippet"] and '"""' not in dedent["code_snippet"]
    assert dedent["annotations"][0]["line_number"] == 1
    assert dedent["annotations"][0]["annotation"].startswith(
        "Remove any common leading whitespace from every line in `text`.")
    source = Path(textwrap.__file__).read_text()
    for ann in dedent["annotations"][1:]:        # every '#' text is the module's own
        assert ann["annotation"].split()[0] in source


def test_comment_builder_reads_an_sdist_and_limits(codebase: Path, tmp_path: Path) -> None:
    sdist = tmp_path / "pkg-1.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tf:
        tf.add(codebase / "pkg", arcname="pkg-1.0")
    records = build_comment_records(sdist, CommentBuildOptions("pkg-1.0", "PSF-2.0", limit=3))
    assert len(records) == 3
    assert all(r["id"].startswith("pkg-1.0/textwrap.py:") or
               r["id"].startswith("pkg-1.0/shlex.py:") for r in records)


def test_issue_builder_on_a_real_faq_document(tmp_path: Path) -> None:
    out = tmp_path / "issues.jsonl"
    res = run_cli("dataset", "issues", "--from", str(FAQ), "-o", str(out),
                  "--license", "BSD-3-Clause", "--source-name", "django-5.1.4", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    records = list(get_kind("issue").read(out))
    questions = [r["question"] for r in records]
    assert "How do I use image and file fields?" in questions
    assert "I can't stand your template language. Do I have to use it?" in questions
    assert all(q.endswith("?") for q in questions)
    files = next(r for r in records if r["question"] == "How do I use image and file fields?")
    assert "MEDIA_ROOT" in files["answer_1"]["body"]
    assert ":setting:" not in files["answer_1"]["body"]          # roles reduced to text
    assert files["metadata"] == {"source": "django-5.1.4/usage.txt",
                                 "section": "How do I use image and file fields?",
                                 "license": "BSD-3-Clause"}


def test_issue_builder_converts_a_github_export(tmp_path: Path) -> None:
    user = lambda login, kind="User": {"login": login, "type": kind}  # noqa: E731
    export = [
        {"issue": {"number": 7, "html_url": "https://github.com/o/r/issues/7",
                   "title": "Crash on empty input", "body": "It raises IndexError.",
                   "user": user("alice"), "created_at": "2024-01-01T00:00:00Z",
                   "updated_at": "2024-01-03T00:00:00Z"},
         "comments": [
             {"body": "Thanks! Fixed in #8: empty input now returns [].", "user": user("bob"),
              "created_at": "2024-01-02T00:00:00Z", "updated_at": "2024-01-02T00:00:00Z"},
             {"body": "Confirmed, works now.", "user": user("alice"),
              "created_at": "2024-01-03T00:00:00Z", "updated_at": "2024-01-03T00:00:00Z"},
             {"body": "This issue is stale.", "user": user("stale[bot]", "Bot"),
              "created_at": "2024-02-01T00:00:00Z", "updated_at": "2024-02-01T00:00:00Z"},
             {"body": "Also see the docs.", "user": user("carol"),
              "created_at": "2024-01-04T00:00:00Z", "updated_at": "2024-01-04T00:00:00Z"}]},
        {"issue": {"number": 9, "title": "Add X", "body": "", "user": user("dan"),
                   "pull_request": {"url": "..."}}, "comments": []},
        {"issue": {"number": 10, "title": "No answer yet", "body": "?", "user": user("eve")},
         "comments": []},
    ]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    out = tmp_path / "issues.jsonl"
    res = run_cli("dataset", "issues", "--from", str(path), "-o", str(out), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    (record,) = read_jsonl(out)
    get_kind("issue").validate(record)
    assert record["question"] == "Crash on empty input" and record["user_login"] == "alice"
    assert record["answer_1"]["user_login"] == "bob"
    assert record["answer_2"]["user_login"] == "carol"        # author and bot left out
    assert "answer_3" not in record
    assert record["metadata"]["source"] == "https://github.com/o/r/issues/7"


def test_issue_builder_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    path.write_text('{"issue": {"title": "x"}}')
    with pytest.raises(DatasetError, match="the export has no 'comments' field"):
        build_issue_records(path)
    path.write_text("{not json")
    res = run_cli("dataset", "issues", "--from", str(path), "-o", str(tmp_path / "o.jsonl"),
                  cwd=tmp_path)
    assert res.returncode == 1 and f"ianvs: error: {path}:1: not a JSON file" in res.stderr
    assert "Traceback" not in res.stderr
