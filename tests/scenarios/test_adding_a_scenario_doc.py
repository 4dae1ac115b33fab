"""docs/adding-a-scenario.md works as written: its example kind and job, run from the doc.

Every fenced block of the page preceded by a line ``<!-- file: <path> -->`` is written to
``<path>`` under a temporary folder (nothing goes into the repository; the kind is a plugin file
named by the testenv's ``task_kind: {name, url}``). Then, as the page's "Checking it" says:
``ianvs validate`` passes, the job ranks ``reference`` on top (1.0), its ``replay`` row where
its recording puts it (two of three right) and ``broken`` at the bottom (0.0); a record with an
unknown field is refused naming file and line; the rubric block is read by ``validate`` when a
testenv lists ``llm_judge``; the builder block writes records and drops a leaking one through
the kind's leak view. Everything runs in child processes (the kind never enters this process's
registry) with the controls and a recording only: no model.
"""
from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "adding-a-scenario.md"
MARK = re.compile(r"^<!--\s*file:\s*(\S+)\s*-->\s*$")
FENCE = re.compile(r"^(`{3,}|~{3,})")
JOB = "job/benchmarkingjob.yaml"
#: the files the page must give, so that dropping a block fails here, not in a reader's hands
EXPECTED = {"docstring/__init__.py", "docstring/rubric.yaml", "docstring/builder.py",
            "job/data/docstrings.jsonl", "job/testenv/testenv.yaml", "job/testenv/metrics.py",
            "job/testalgorithms/gen/basemodel.py", "job/testalgorithms/gen/gen_algorithm.yaml",
            "job/testalgorithms/gen/samples.jsonl", JOB}


def doc_files(text: str) -> dict[str, str]:
    """``path -> content`` of every marked block of the page (the marker, then its fence)."""
    lines = text.splitlines(keepends=True)
    files: dict[str, str] = {}
    i = 0
    while i < len(lines):
        mark = MARK.match(lines[i])
        i += 1
        if not mark:
            continue
        path = mark.group(1)
        assert i < len(lines) and FENCE.match(lines[i]), \
            f"{DOC.name}:{i}: the marker for {path} must be followed by a fenced block"
        fence = FENCE.match(lines[i]).group(1)  # type: ignore[union-attr]
        start = i + 1
        end = next((j for j in range(start, len(lines))
                    if lines[j].rstrip("\n").strip() == fence), None)
        assert end is not None, f"{DOC.name}:{i + 1}: the block of {path} is not closed"
        assert path not in files, f"{DOC.name}:{i}: {path} is given twice"
        assert not Path(path).is_absolute() and ".." not in Path(path).parts, path
        files[path] = "".join(lines[start:end])
        i = end + 1
    return files


def write_doc_files(root: Path) -> dict[str, str]:
    files = doc_files(DOC.read_text(encoding="utf-8"))
    for path, content in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(content, encoding="utf-8")
    return files


def run(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def ianvs(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run(["-m", "core.cmd.benchmarking", *args], cwd)


def test_the_page_gives_every_file() -> None:
    files = doc_files(DOC.read_text(encoding="utf-8"))
    assert set(files) == EXPECTED
    assert "task_kind: {name:" in files["job/testenv/testenv.yaml"]  # a plugin, not built in


def test_the_example_job_validates_and_ranks_its_controls(tmp_path: Path) -> None:
    write_doc_files(tmp_path)
    res = ianvs("validate", "-f", JOB, cwd=tmp_path)
    assert res.returncode == 0 and "OK" in res.stdout, res.stdout + res.stderr
    res = ianvs("-f", JOB, "--no-progress", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    ranks = list(tmp_path.glob("workspace/*/rank/all_rank.csv"))
    assert len(ranks) == 1, ranks
    with ranks[0].open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    by_gen = {r["basemodel-generator"]: r for r in rows}
    assert set(by_gen) == {"reference", "broken", "replay"}
    assert float(by_gen["reference"]["docstring_exact"]) == 1.0
    assert float(by_gen["broken"]["docstring_exact"]) == 0.0
    # the recording answers 2 of 3 right (one reply inside triple quotes, which answer() strips)
    assert float(by_gen["replay"]["docstring_exact"]) == pytest.approx(2 / 3, abs=1e-4)
    assert [r["basemodel-generator"] for r in sorted(rows, key=lambda r: int(r["rank"]))] \
        == ["reference", "replay", "broken"]
    for row in rows:
        assert row["scored_samples"] == "3" and row["generation_error"] == "0", row


def test_a_record_with_an_unknown_field_is_refused(tmp_path: Path) -> None:
    write_doc_files(tmp_path)
    data = tmp_path / "job" / "data" / "docstrings.jsonl"
    count = len(data.read_text(encoding="utf-8").splitlines())
    with data.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": "noop", "function": "def noop():\n    pass\n",
                                 "docstring": "Do nothing.", "author": "someone"}) + "\n")
    res = ianvs("validate", "-f", JOB, cwd=tmp_path)
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert f"docstrings.jsonl:{count + 1}: unknown field 'author'" in out, out


def test_the_rubric_is_the_judges_and_a_missing_one_is_named(tmp_path: Path) -> None:
    write_doc_files(tmp_path)
    env = tmp_path / "job" / "testenv" / "testenv.yaml"
    env.write_text(env.read_text(encoding="utf-8") + textwrap.indent(textwrap.dedent('''\
        - name: "llm_judge"
          url: "./metrics.py"
          generator: "openai"
          generator_options: {base_url: "http://127.0.0.1:9/v1", model: "judge"}
        '''), "    "), encoding="utf-8")
    res = ianvs("validate", "-f", JOB, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    (tmp_path / "docstring" / "rubric.yaml").unlink()
    res = ianvs("validate", "-f", JOB, cwd=tmp_path)
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "task kind 'docstring' has no judge rubric" in out, out


BUILD = '''
import argparse, importlib.util, json, sys
from pathlib import Path

def load(path):
    spec = importlib.util.spec_from_file_location("doc_" + Path(path).parent.name + "_"
                                                  + Path(path).stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

load("docstring/__init__.py")  # registers the kind, as the testenv's url does
builder = load("docstring/builder.py")
parser = argparse.ArgumentParser()
builder.COMMAND.add_arguments(parser)
status = builder.COMMAND.run(parser.parse_args(sys.argv[1:]))
from core.scenarios import get_kind
print("CHECKED", get_kind("docstring").check_file("built.jsonl"))
sys.exit(status)
'''

SOURCE = '''\
def clamp(x, lo, hi):
    """Limit x to the range from lo to hi."""
    return max(lo, min(x, hi))


def mean(values):
    """Return the arithmetic mean of values.

    An empty list raises ZeroDivisionError.
    """
    return sum(values) / len(values)


def shout(text):
    """Return the text in capital letters."""
    log("Return the text in capital letters.")  # the answer is in what the model sees
    return text.upper()


def undocumented():
    return 1
'''


def test_the_builder_writes_records_and_drops_a_leak(tmp_path: Path) -> None:
    files = write_doc_files(tmp_path)
    (tmp_path / "functions.py").write_text(SOURCE, encoding="utf-8")
    res = run(["-c", BUILD, "--from", "functions.py", "-o", "built.jsonl", "--license", "MIT"],
              tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "CHECKED 2" in res.stdout, res.stdout
    report = json.loads(res.stdout.splitlines()[0])
    assert report["tasks"] == 2 and report["leaks"]["dropped"] == 1, report
    built = [json.loads(line) for line in (tmp_path / "built.jsonl").read_text().splitlines()]
    assert [r["id"] for r in built] == ["clamp", "mean"]
    assert built[1]["docstring"] == "Return the arithmetic mean of values."
    # the builder's records are the shape of the page's data file
    shipped = {r["id"]: r for r in map(json.loads, files["job/data/docstrings.jsonl"].splitlines())}
    assert {k: v for k, v in built[0].items() if k != "metadata"} == shipped["clamp"]
