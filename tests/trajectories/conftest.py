"""A small real git repository whose history has one commit of every filter's kind."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

MIT = ("MIT License\n\nPermission is hereby granted, free of charge, to any person obtaining a copy\n"
       "of this software...\n")


def git(root: Path, *args: str, date: str = "2020-01-01T12:00:00+00:00",
        author: tuple[str, str] = ("Dev One", "dev@example.org"), check: bool = True) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME=author[0], GIT_AUTHOR_EMAIL=author[1],
               GIT_COMMITTER_NAME=author[0], GIT_COMMITTER_EMAIL=author[1],
               GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date, GIT_CONFIG_GLOBAL=os.devnull,
               GIT_CONFIG_NOSYSTEM="1")
    proc = subprocess.run(["git", *args], cwd=root, env=env, check=False, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {args}: {proc.stderr}")
    return proc.stdout.strip()


def commit(root: Path, files: dict[str, str | None], message: str, date: str,
           author: tuple[str, str] = ("Dev One", "dev@example.org"), allow_empty: bool = False) -> str:
    for path, text in files.items():
        target = root / path
        if text is None:
            git(root, "rm", "-q", path)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        git(root, "add", path)
    git(root, "commit", "-q", "-m", message, *(["--allow-empty"] if allow_empty else []),
        date=date, author=author)
    return git(root, "rev-parse", "HEAD")


def make_history(root: Path) -> dict[str, str]:
    """The history (dates increasing by month in 2020-2021); returns name -> commit id.

    main: init (licence, code), feature (code + test), bot, whitespace, vendored, huge, empty;
    branch ``topic`` (2 commits: code, then its test) merged with ``--no-ff`` (merge-only);
    branch ``clash`` and main both edit ``calc.py``'s same line, merged with a resolution of its
    own (a kept merge); ``refs/pull/7/head`` points at topic's head; ``refs/pull/9/head`` at an
    unmerged branch of one commit.
    """
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    ids: dict[str, str] = {}
    ids["init"] = commit(root, {"LICENSE": MIT, "calc.py": "def add(a, b):\n    return a + b\n"},
                         "Initial commit with the adder", "2020-01-01T12:00:00+00:00")
    ids["feature"] = commit(root, {"calc.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n"
                                              "    return a - b\n",
                                   "tests/test_calc.py": "from calc import add, sub\n\n\ndef test_sub():\n"
                                                         "    assert sub(3, 1) == 2\n"},
                            "Add sub with a test", "2020-02-01T12:00:00+00:00")
    ids["bot"] = commit(root, {"requirements.txt": "numpy==2.0\n"}, "Bump numpy from 1.0 to 2.0",
                        "2020-03-01T12:00:00+00:00", author=("dependabot[bot]", "bot@users.noreply.github.com"))
    ids["whitespace"] = commit(root, {"calc.py": "def add(a, b):\n    return a  +  b\n\n\ndef sub(a, b):\n"
                                                 "    return a - b\n"},
                               "Reformat", "2020-04-01T12:00:00+00:00")
    ids["vendored"] = commit(root, {"vendor/lib.js": "var x = 1;\n"}, "Vendor lib.js in it",
                             "2020-05-01T12:00:00+00:00")
    ids["huge"] = commit(root, {"data.txt": "".join(f"row {i}\n" for i in range(300))},
                         "Add a big data file", "2020-06-01T12:00:00+00:00")
    ids["empty"] = commit(root, {}, "Nothing at all here", "2020-07-01T12:00:00+00:00", allow_empty=True)
    git(root, "checkout", "-q", "-b", "topic")
    ids["topic1"] = commit(root, {"calc.py": "def add(a, b):\n    return a  +  b\n\n\ndef sub(a, b):\n"
                                             "    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"},
                           "Add mul (fixes #3)", "2020-08-01T12:00:00+00:00")
    ids["topic2"] = commit(root, {"tests/test_mul.py": "from calc import mul\n\n\ndef test_mul():\n"
                                                       "    assert mul(2, 3) == 6\n"},
                           "Test mul as asked in review", "2020-09-01T12:00:00+00:00")
    git(root, "checkout", "-q", "main")
    git(root, "merge", "-q", "--no-ff", "topic", "-m", "Merge pull request #7 from someone/topic\n\nAdd mul",
        date="2020-10-01T12:00:00+00:00")
    ids["merge_only"] = git(root, "rev-parse", "HEAD")
    git(root, "update-ref", "refs/pull/7/head", ids["topic2"])
    git(root, "checkout", "-q", "-b", "clash")
    ids["clash"] = commit(root, {"calc.py": (root / "calc.py").read_text().replace("a * b", "b * a")},
                          "Swap the product's operands", "2020-11-01T12:00:00+00:00")
    git(root, "checkout", "-q", "main")
    ids["main_side"] = commit(root, {"calc.py": (root / "calc.py").read_text().replace("a * b", "a * b * 1")},
                              "Multiply by one for clarity", "2020-12-01T12:00:00+00:00")
    git(root, "merge", "-q", "clash", check=False, date="2021-01-01T12:00:00+00:00")
    assert "<<<<<<<" in (root / "calc.py").read_text()  # a real conflict
    (root / "calc.py").write_text((root / "calc.py").read_text().split("<<<<<<<")[0]
                                  + "    return mul_impl(a, b)\n")
    git(root, "add", "calc.py")
    git(root, "commit", "-q", "--no-edit", "-m", "Merge branch 'clash'", date="2021-01-01T12:00:00+00:00")
    ids["resolved_merge"] = git(root, "rev-parse", "HEAD")
    git(root, "checkout", "-q", "-b", "unmerged", ids["feature"])
    ids["unmerged"] = commit(root, {"calc.py": "def add(a, b):\n    return b + a\n\n\ndef sub(a, b):\n"
                                              "    return a - b\n"},
                             "Commute the adder", "2021-02-01T12:00:00+00:00")
    git(root, "update-ref", "refs/pull/9/head", ids["unmerged"])
    git(root, "checkout", "-q", "main")
    return ids


@pytest.fixture
def history(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    root = tmp_path / "proj"
    return root, make_history(root)
