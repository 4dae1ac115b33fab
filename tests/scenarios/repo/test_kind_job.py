"""The repo kind through ``ianvs -f``: the shipped example with its gold controls (reference 1.0,
broken 0.0), resume from ``repo_executions.jsonl``, and readable errors for bad records, a
missing source and a source that is not the one the tasks were built from."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from core.common.errors import ConfigError, DatasetError
from core.scenarios import get_kind
from core.scenarios.repo.kind import answer_code
from core.scenarios.repo.prompts import header_of
from core.scenarios.repo.scoring import EXECUTIONS_FILE, source_root
from tests.runner.conftest import run_cli
from tests.scenarios.conftest import cut_test_index
from tests.scenarios.repo.conftest import SHIPPED

#: tasks of the shipped default subset (10) the suite's run of the embedded model reads
CUT_TASKS = 3
TASK = json.loads((SHIPPED / "data" / "default_subset.jsonl").read_text().splitlines()[0])


def _copy(tmp_path: Path, generators: list[str] | None = None) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(SHIPPED, root, ignore=shutil.ignore_patterns("workspace"))
    if generators is not None:
        algo = root / "testalgorithms" / "gen" / "gen_algorithm.yaml"
        text = algo.read_text().replace('values: ["embedded", "reference", "broken"]',
                                        f"values: {json.dumps(generators)}")
        assert text != algo.read_text()
        algo.write_text(text)
    return root


def _rows(root: Path) -> dict[str, dict[str, str]]:
    rows = csv.DictReader(open(next(root.glob("workspace/*/rank/all_rank.csv"))))
    return {r["basemodel-generator"]: r for r in rows}


def _run(root: Path) -> None:
    res = run_cli("-f", str(root / "benchmarkingjob.yaml"), "--no-progress", cwd=root, timeout=1800)
    assert res.returncode == 0, res.stderr[-4000:]


@pytest.mark.slow
def test_shipped_default_job_gold_controls_and_resume(tmp_path: Path) -> None:
    """The shipped job (the embedded model and both gold controls) on its first :data:`CUT_TASKS`
    tasks, then resumed after a loss: one run of the model serves the model's row, the controls
    and the resume."""
    root = _copy(tmp_path)
    n = len(cut_test_index(root, lambda records: records[:CUT_TASKS]))
    _run(root)
    rows = _rows(root)
    assert rows["reference"]["pass@1"] == "1.0" and rows["reference"]["passed"] == str(n)
    assert rows["broken"]["pass@1"] == "0.0" and rows["broken"]["passed"] == "0"
    assert rows["reference"]["grading"] == "in_process_confined" and rows["reference"]["isolation"]
    assert 0.0 <= float(rows["embedded"]["pass@1"]) <= 1.0
    assert rows["embedded"]["generation_error"] == "0"
    logs = sorted(root.glob(f"workspace/*/*/*/{EXECUTIONS_FILE}"))
    ref_log = next(p for p in logs if p.read_text().count('"outcome": "passed"') == n)
    lines = ref_log.read_text().splitlines()
    assert len(lines) == n
    # a run killed after its first sample: the rerun executes only the missing ones
    ref_log.write_text(lines[0] + "\n" + lines[1][:20])
    _run(root)
    again = ref_log.read_text().splitlines()
    assert again[0] == lines[0] and len([ln for ln in again if ln.endswith("}")]) == n
    assert _rows(root)["reference"]["pass@1"] == "1.0"


def test_a_bad_record_names_file_line_and_field(tmp_path: Path) -> None:
    kind = get_kind("repo")
    bad = dict(TASK)
    bad["tests"] = {"fail_to_pass": [], "pass_to_pass": []}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(TASK) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(DatasetError, match="fail_to_pass") as info:
        kind.check_file(path)
    assert info.value.line == 2 and str(path) in str(info.value)
    with pytest.raises(DatasetError, match="unknown field 'qualnme'"):
        kind.validate({**TASK, "qualnme": "x"})


def test_missing_or_wrong_source_is_a_config_error(tmp_path: Path) -> None:
    root = _copy(tmp_path, ["reference"])
    env = root / "testenv" / "testenv.yaml"
    env.write_text(env.read_text().replace('toolz-1.0.0: "../data/toolz-1.0.0.tar.gz"',
                                           'other: "../data/toolz-1.0.0.tar.gz"'))
    res = run_cli("-f", str(root / "benchmarkingjob.yaml"), "--no-progress", cwd=root, timeout=600)
    assert res.returncode != 0 and "no source for repository 'toolz-1.0.0'" in res.stderr
    assert "Traceback" not in res.stderr
    folder = tmp_path / "notthesource"
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "m.py").write_text("x = 1\n")
    with pytest.raises(ConfigError, match="content hash"):
        source_root(folder, TASK["repo"]["content_hash"], tmp_path / "cache")
    assert not list((tmp_path / "cache").iterdir())  # nothing half-made is left


def test_answers_become_a_full_def() -> None:
    continuation = "    return 42\n"
    assert answer_code(continuation, TASK).endswith(continuation)
    assert answer_code(continuation, TASK).lstrip().startswith(("def ", "async def ", "@"))
    fenced = f"Here:\n```python\ndef {TASK['name']}(*a, **k):\n    return 1\n```\n"
    assert answer_code(fenced, TASK) == fenced
    msgs = get_kind("repo").messages(TASK)
    assert msgs[0]["role"] == "system" and TASK["signature"].strip() in msgs[1]["content"]


def test_a_continuation_ends_where_the_function_ends() -> None:
    """Completion models go on after the body (seen on the embedded model: the next function's
    decorator, a truncated second function). That tail must not make a correct body a syntax
    error, and a column-0 line inside a multi-line string of the body is not the end."""
    body = "    return 42\n"
    for tail in ("\n\n@curry\n\n", "\n\ndef other(x):\n    if x:\n", "\nx = (\n", "\n@"):
        code = answer_code(body + tail, TASK)
        assert code.startswith(header_of(TASK) + body) and not code[len(header_of(TASK) + body):].strip(), \
            repr(tail)
        assert "return 42" in inject_body(code)
    in_string = '    text = """\nline at column 0\n"""\n    return text\n'
    code = answer_code(in_string + "\n@curry\n", TASK)
    assert code == header_of(TASK) + in_string + "\n"  # up to the line the decorator starts
    assert "line at column 0" in inject_body(code)
    # a method's body at the class's indentation, then the class's next method (seen on the
    # embedded model): re-indented under the header, cut before the next method
    method = "        self.x = 1\n        return self.x\n\n    def fit(self):\n        return self\n"
    code = answer_code(method, TASK)
    assert "return self.x" in inject_body(code) and "fit" not in code
    assert "    self.x = 1\n    return self.x\n" in code
    # a column-0 comment does not end the function; nothing parses: the reply is used whole
    assert answer_code("# note\n    return 1\n", TASK) == header_of(TASK) + "# note\n    return 1\n"
    assert answer_code("    return (\n", TASK) == header_of(TASK) + "    return (\n"


def inject_body(code: str) -> str:
    """The file the shipped task's source becomes with ``code`` injected (its function only)."""
    import ast

    tree = ast.parse(code)
    node = next(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                and n.name == TASK["name"])
    return ast.get_source_segment(code, node) or ""


@pytest.mark.slow  # over 5 s: the fast tier stays under 5 minutes
def test_an_environment_that_cannot_be_made_is_one_readable_error(tmp_path: Path) -> None:
    from core.common.errors import IanvsError
    from core.scenarios.repo.env import ensure_env

    with pytest.raises(IanvsError, match="could not create the repository environment") as info:
        ensure_env(["no-such-package-ianvs-zzz==9.9.9"], tmp_path)
    assert "no-such-package-ianvs-zzz" in str(info.value) and "package index" in str(info.value)


def test_services_are_checked() -> None:
    kind = get_kind("repo")
    assert kind.validate({**TASK, "services": ["postgres"]})["services"] == ["postgres"]
    with pytest.raises(DatasetError, match=r"services.*mysql.*known services: postgres"):
        kind.validate({**TASK, "services": ["mysql"]})
