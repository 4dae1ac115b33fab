"""Model-written problems and tests on the tiny real repository, with the ``replay`` generator so
the model's replies are fixed: every validation run is real (pytest in the sandbox, on the
original and on the blanked function). One module per drop reason, plus the CLI end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.cmd.benchmarking import main as ianvs
from core.scenarios.repo.authoring import AuthoringOptions
from core.scenarios.repo.builder import BuildOptions, build
from core.scenarios.repo.env import RepoEnv
from core.scenarios.repo.execute import Sample, run_samples
from core.scenarios.repo.source import content_hash
from core.scenarios.repo.written_tests import allowed_imports, parse_candidate, prune, unsafe_reason

ID = "minirepo/minilib/core.py::"

ADD_TESTS = '''Here are the tests:

```python
import pytest
from minilib.core import add


@pytest.mark.parametrize("a, b, total", [(1, 2, 3), (-1, 1, 0)])
def test_add_cases(a, b, total):
    assert add(a, b) == total


def test_add_small():
    assert add(10, -4) == 6


def test_add_wrong():
    assert add(1, 1) == 3


def test_add_trivial():
    assert callable(add)
```
'''

REPLIES = [
    {"task_id": f"problem:{ID}twin", "solution": "Return twice the value `x` (works for numbers and sequences)."},
    {"task_id": f"tests:{ID}add", "solution": ADD_TESTS},
    {"task_id": f"tests:{ID}twin", "solution": "from minilib.core import twin\n\ndef test_twin_ok():\n    assert twin(3) == 6\n"},
    {"task_id": f"tests:{ID}twin", "solution": "x = 1\n"},
    {"task_id": f"tests:{ID}twin_too", "solution": "def test_broken(:\n    pass\n"},
    {"task_id": f"tests:{ID}Box.get", "solution": "import os\nfrom minilib.core import Box\n\n"
     "def test_a():\n    os.system('touch /work/pwned')\n\ndef test_b():\n    assert Box(1).get() == 1\n"},
    {"task_id": f"tests:{ID}Box.__init__", "solution": "def test_loop():\n    while True:\n        pass\n"},
]


@pytest.fixture()
def replies(tmp_path: Path) -> Path:
    path = tmp_path / "replies.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in REPLIES))
    return path


@pytest.mark.slow
def test_written_tests_validated(mini_repo: Path, repo_env: RepoEnv, replies: Path, tmp_path: Path,
                                 views_dir: Path) -> None:
    out = tmp_path / "tasks.jsonl"
    before = content_hash(mini_repo)
    opts = AuthoringOptions(problems=True, tests=True, generator="replay",
                            generator_options={"samples_path": str(replies)}, timeout=5, views_dir=views_dir)
    report = build(BuildOptions(repo=str(mini_repo), output=out, env=repo_env.root, authoring=opts))
    llm = report.as_dict()["llm"]
    assert isinstance(llm, dict)
    assert llm["tests_written"] == 10 and llm["tests_kept"] == 3 and llm["tasks_with_kept_tests"] == 2
    assert llm["tests_dropped"] == {"syntax_error": 1, "no_tests": 1, "unsafe": 2, "timeout": 1,
                                    "fails_on_original": 1, "passes_on_blank": 1, "unstable": 0}
    assert llm["problems_asked"] == 3 and llm["problems_written"] == 1
    assert llm["problems_dropped"] == {"generation_error": 2} and llm["generation_errors"] == 2
    assert llm["model"]["generator"] == "replay"
    assert content_hash(mini_repo) == before and not Path("/work/pwned").exists()

    tasks = {t["qualname"]: t for t in map(json.loads, out.read_text().splitlines())}
    assert tasks["twin"]["problem"].startswith("Return twice") and tasks["twin"]["docstring"] is None
    assert tasks["twin"]["problem_author"]["written_by"] == "model"
    assert tasks["add"]["problem"] is None and "problem_author" not in tasks["add"]
    [written] = tasks["add"]["model_written_tests"]
    assert written["file"].startswith("test_ianvs_written_")
    assert written["tests"] == [f"{written['file']}::test_add_cases", f"{written['file']}::test_add_small"]
    assert "test_add_small" in written["code"] and "test_add_wrong" not in written["code"]
    assert "test_add_trivial" not in written["code"] and written["model"]["generator"] == "replay"
    assert [w["tests"][0].split("::")[1] for w in tasks["twin"]["model_written_tests"]] == ["test_twin_ok"]
    for name in ("twin_too", "Box.get", "Box.__init__"):
        assert tasks[name]["model_written_tests"] == []

    # the job runs the written test with the task's own: a body that passes test_add alone fails it
    add = tasks["add"]
    samples = [Sample("right", add, "def add(a, b):\n    return a + b\n"),
               Sample("overfit", add, "def add(a, b):\n    return 5\n"), Sample("blank", add, None)]
    got = {r.sample_id: r for r in run_samples(samples, mini_repo, repo_env, views_dir, timeout=30)}
    node = written["tests"][1]
    assert got["right"].outcome == "passed" and got["right"].tests[node] == "passed"
    assert got["overfit"].outcome == "failed" and got["overfit"].tests["tests/test_core.py::test_add"] == "passed"
    assert got["overfit"].tests[node] == "failed" and got["blank"].tests[node] == "failed"
    assert list(views_dir.iterdir()) == []


def test_cli_reports_counts(mini_repo: Path, repo_env: RepoEnv, replies: Path, tmp_path: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "tasks.jsonl"
    rc = ianvs(["dataset", "repo", "--repo", str(mini_repo), "-o", str(out), "--env", str(repo_env.root),
                "--llm-problems", "--llm-generator", "replay", "--llm-option", f"samples_path={replies}"])
    printed = capsys.readouterr().out
    assert rc == 0
    llm = json.loads(printed.splitlines()[0])["llm"]
    assert llm["problems_written"] == 1 and llm["tests_written"] == 0


def test_cli_bad_llm_option_is_one_readable_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = ianvs(["dataset", "repo", "--repo", str(tmp_path), "-o", str(tmp_path / "t.jsonl"), "--llm-tests",
                "--llm-generator", "replay", "--llm-option", "sample_path=x.jsonl"])
    err = capsys.readouterr().err
    assert rc == 1 and "has no such option" in err and "samples_path" in err and "Traceback" not in err
    rc = ianvs(["dataset", "repo", "--repo", str(tmp_path), "-o", str(tmp_path / "t.jsonl"), "--llm-tests",
                "--llm-generator", "replay"])
    err = capsys.readouterr().err
    assert rc == 1 and "missing --llm-option samples_path" in err


def test_static_checks(mini_repo: Path) -> None:
    allowed = allowed_imports(mini_repo, None)
    assert {"minilib", "math", "pytest"} <= allowed and "os" not in allowed
    assert unsafe_reason("from minilib.core import add\nimport math\ninput = [1]\nadd(*input)\n", allowed) is None
    for code, why in [("import subprocess", "imports subprocess"), ("from os import path", "imports from os"),
                      ("eval('1')", "uses eval"), ("open('/etc/passwd')", "uses open"),
                      ("().__class__", "accesses attribute __class__"),
                      ("getattr(f, '__globals__')", "getattr with a dunder name"),
                      ("from . import x", "relative import"), ("__import__('os')", "uses __import__"),
                      ("input()", "calls input")]:
        assert unsafe_reason(code, allowed) == why, code
    assert parse_candidate("def test_x(:") == "syntax_error"
    assert parse_candidate("def helper():\n    pass\n") == "no_tests"


def test_prune_keeps_only_named_tests() -> None:
    code = ("import math\n\n\n@pytest.mark.slow\ndef test_a():\n    assert 1\n\n\ndef test_b():\n    assert 2\n\n\n"
            "class TestC:\n    def test_c(self):\n        assert 3\n\n    def test_d(self):\n        assert 4\n\n\n"
            "class TestE:\n    def test_e(self):\n        assert 5\n")
    cand = parse_candidate(code)
    assert not isinstance(cand, str)
    assert set(cand.tests) == {"test_a", "test_b", "TestC::test_c", "TestC::test_d", "TestE::test_e"}
    pruned = prune(cand, {"test_b", "TestC::test_d"})
    again = parse_candidate(pruned)
    assert not isinstance(again, str) and set(again.tests) == {"test_b", "TestC::test_d"}
    assert "import math" in pruned and "slow" not in pruned and "TestE" not in pruned
