"""Parsing a model's change (whole files or a unified diff) into edits; failure kinds of their own."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from core.scenarios.trajectories.implement_change import whole_files_reply
from core.scenarios.trajectories.implement_change.answer import parse_change

OLD = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n"
NEW = OLD.replace("return a - b", "return a - b  # difference") + "\n\ndef mul(a, b):\n    return a * b\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "proj"
    (r / "pkg").mkdir(parents=True)
    (r / "pkg" / "calc.py").write_text(OLD)
    (r / "tests").mkdir()
    (r / "tests" / "test_calc.py").write_text("def test_x():\n    pass\n")
    return r


def _git_diff(root: Path, new: str, tmp_path: Path) -> str:
    """The diff git itself writes between the file as it is and ``new``."""
    other = tmp_path / "new.py"
    other.write_text(new)
    out = subprocess.run(["git", "diff", "--no-index", "--", str(root / "pkg" / "calc.py"), str(other)],
                         capture_output=True, text=True).stdout
    return out.replace(f"a{root}/pkg/calc.py", "a/pkg/calc.py").replace(f"b{other}", "b/pkg/calc.py")


def test_whole_files(root: Path) -> None:
    parsed = parse_change(whole_files_reply({"pkg/calc.py": NEW}), root, ["tests/test_calc.py"])
    assert parsed.failure == "" and parsed.form == "files" and parsed.edits == {"pkg/calc.py": NEW}
    info_string = f"Sure.\n```python pkg/calc.py\n{NEW}```\n"
    assert parse_change(info_string, root, []).edits == {"pkg/calc.py": NEW}
    heading = f"### `pkg/calc.py`\n```python\n{NEW}```\n"
    assert parse_change(heading, root, []).edits == {"pkg/calc.py": NEW}


def test_a_file_holding_fences_is_read_back_whole(root: Path) -> None:
    """A Markdown file (or a docstring's example) holds ``` lines: the whole-file form fences it
    with more backticks, and the parser closes a block only at its own fence (networkx's
    ``doc/backends.md`` was cut at its first inner fence before)."""
    doc = "# Backends\n\n```python\nimport networkx\n```\n\nText with ````four```` too.\n"
    reply = whole_files_reply({"pkg/calc.py": NEW, "doc/guide.md": doc, "doc/empty.txt": ""})
    assert "`````python\n# Backends" in reply
    parsed = parse_change(reply, root, ["tests/test_calc.py"])
    # an empty file stays empty (no newline added: toolz's empty tests/__init__.py)
    assert parsed.edits == {"pkg/calc.py": NEW, "doc/guide.md": doc, "doc/empty.txt": ""}
    # a model that fences such a file with ``` gets what its fence says: the block ends at the
    # first bare ``` line (an opening line with an info string does not close it)
    short = f"FILE: doc/guide.md\n```markdown\n{doc}```\n"
    assert parse_change(short, root, []).edits["doc/guide.md"] == \
        "# Backends\n\n```python\nimport networkx\n"


def test_unified_diff_gives_the_same_edits(root: Path, tmp_path: Path) -> None:
    diff = _git_diff(root, NEW, tmp_path)
    for reply in (f"```diff\n{diff}```\n", diff):
        parsed = parse_change(reply, root, [])
        assert parsed.failure == "" and parsed.form == "diff", parsed.detail
        assert parsed.edits == {"pkg/calc.py": NEW}
    assert (root / "pkg" / "calc.py").read_text() == OLD          # applied to a scratch copy only
    sloppy = diff.replace("@@ -4,3 +4,7 @@", "@@ -4,30 +4,70 @@")     # wrong counts: --recount
    assert parse_change(f"```diff\n{sloppy}```", root, []).edits == {"pkg/calc.py": NEW}


def test_failure_kinds(root: Path, tmp_path: Path) -> None:
    diff = _git_diff(root, NEW, tmp_path)
    assert parse_change("```diff\n--- a/pkg/calc.py\n+++ b/pkg/calc.py\n@@ garbage\n```", root, []).failure \
        == "malformed_diff"
    stale = diff.replace(" def sub(a, b):", " def subtract(a, b):")
    assert parse_change(f"```diff\n{stale}```", root, []).failure == "diff_does_not_apply"
    assert parse_change("I would add a mul function.", root, []).failure == "no_change"
    assert parse_change(whole_files_reply({"pkg/calc.py": OLD}), root, []).failure == "no_change"
    for path in ("../escape.py", "/etc/passwd.py", ".git/config.py", "tests/test_calc.py", "pkg/calc.py/x.py"):
        got = parse_change(whole_files_reply({path: "x = 1\n"}), root, ["tests/test_calc.py"])
        assert got.failure == "bad_path", path
    escape = diff.replace("a/pkg/calc.py", "a/../calc.py").replace("b/pkg/calc.py", "b/../calc.py")
    assert parse_change(f"```diff\n{escape}```", root, []).failure in ("bad_path", "malformed_diff")
    (root / "link.py").symlink_to("/etc/hostname")
    assert parse_change(whole_files_reply({"link.py": "x = 1\n"}), root, []).failure == "bad_path"


def test_new_file_in_new_folder(root: Path) -> None:
    parsed = parse_change(whole_files_reply({"pkg/sub/new.py": "X = 1\n"}), root, [])
    assert parsed.edits == {"pkg/sub/new.py": "X = 1\n"}


def test_single_unnamed_block_is_the_tasks_one_file(root: Path) -> None:
    reply = f"Here is the change:\n```python\n{NEW}```\n"
    assert parse_change(reply, root, []).failure == "no_change"                 # no file named
    assert parse_change(reply, root, [], default_path="pkg/calc.py").edits == {"pkg/calc.py": NEW}
    two = reply + "and a helper:\n```python\nX = 1\n```\n"
    assert parse_change(two, root, [], default_path="pkg/calc.py").failure == "no_change"


def test_diff_is_applied_outside_any_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even with the scratch space inside a git work tree, a diff edits the scratch copy only."""
    outer = tmp_path / "outer"
    (outer / "pkg").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    (outer / "pkg" / "calc.py").write_text(OLD)
    root = tmp_path / "proj"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "calc.py").write_text(OLD)
    monkeypatch.setenv("TMPDIR", str(outer))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    parsed = parse_change(f"```diff\n{_git_diff(root, NEW, tmp_path)}```", root, [])
    assert parsed.edits == {"pkg/calc.py": NEW}
    assert (outer / "pkg" / "calc.py").read_text() == OLD and (root / "pkg" / "calc.py").read_text() == OLD
