"""Hostile job and data files (issue 42), by class, through the real ``ianvs`` command.

* **Names that become folders** (job and algorithm ``name``): anything but a plain name is
  refused before anything is written, and a folder that would resolve outside the workspace
  (a link) is refused too; nothing appears outside the workspace.
* **YAML alias bombs** ("billion laughs") in any of the YAML files a job loads: one error naming
  file and line, fast, with a short output and no workspace written. Ordinary aliases still load.
* **Hostile records** in a code-executing job's dataset: a duplicate ``task_id``, ``NaN`` or
  ``Infinity``, a missing ``test``, a wrong type, a byte that is not UTF-8 (reported on its own
  line even after kilobytes of text). Each is one error naming file and line from
  ``ianvs validate`` and from ``ianvs -f`` before any test case runs.

Every CLI case asserts exit status 1, the message, no traceback and an untouched disk outside the
workspace (no workspace at all for refused jobs). Controls: the unmodified toy job and codegen
example validate.
"""
from __future__ import annotations

import gzip
import json
import math
import os
import time
from pathlib import Path

import pytest

from core.common.errors import ConfigError, DatasetError, IanvsError
from core.common.jsonl import iter_jsonl
from core.common.names import inside_workspace, plain_name_problem
from core.common.yaml_loader import MAX_ALIAS_EXPANSION, load_yaml, parse_yaml
from core.scenarios.codegen.execution import check_records
from core.scenarios.codegen.records import check_executable
from core.testenvmanager.dataset.parsers import CsvDataset, JsonDataset
from tests.runner.conftest import run_cli
from tests.smart_coding.conftest import codegen_job, read_jsonl  # noqa: F401 - fixture

SUBSET = (Path(__file__).resolve().parents[2] / "examples" / "smart_coding"
          / "smart_coding_learning_bench" / "codegen" / "data" / "humaneval_subset.jsonl")
#: five levels of ten: 10**5 repetitions of "lol" from about 500 bytes of YAML
BOMB = (
    "      - &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    "      - &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "      - &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
    "      - &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "      - &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n")


def _tree(root: Path) -> set[str]:
    """Every path under ``root`` (relative), to compare the disk before and after a run."""
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _refused(res, needle: str) -> str:
    """Assert a clean refusal (exit 1, ``needle`` in the output, no traceback)."""
    out = res.stdout + res.stderr
    assert res.returncode == 1, out
    assert needle in out, out
    assert "Traceback" not in out, out
    return out


def _validate_and_run(folder: Path, job: str, needle: str) -> list[str]:
    """``ianvs validate`` and ``ianvs -f`` in ``folder`` both refuse with ``needle``, and
    leave the disk around ``folder`` (its parent included) as it was."""
    before = _tree(folder.parent)
    outputs = []
    for args in (("validate", "-f", job), ("-f", job, "--no-progress")):
        outputs.append(_refused(run_cli(*args, cwd=folder), needle))
    assert _tree(folder.parent) == before, "a refused job wrote files"
    return outputs


# --- names that become folders ---------------------------------------------------------------

@pytest.mark.parametrize("name, problem", [
    ("../../escape", "contains '/'"),
    ("/tmp/ianvs-escape", "contains '/'"),
    ("..", "refers to a folder instead of naming one"),
    ("..\\\\escape", "contains '\\\\'"),
    (".hidden", "starts with '.'"),
    ("x" * 101, "is 101 characters long"),
])
def test_job_name_that_is_not_a_plain_name_is_refused(toy: Path, name: str,
                                                      problem: str) -> None:
    job = toy / "benchmarkingjob.yaml"
    job.write_text(job.read_text().replace('name: "toyjob"', f'name: "{name}"'))
    for out in _validate_and_run(toy, "benchmarkingjob.yaml", "benchmarkingjob.yaml:2: "
                                 "'benchmarkingjob.name' is "):
        assert problem in out and "must be a plain name" in out
        assert "letters, digits" in out  # the fix
    assert not (toy.parent / "escape").exists() and not Path("/tmp/ianvs-escape").exists()


def test_algorithm_name_that_climbs_out_is_refused(toy: Path) -> None:
    job = toy / "benchmarkingjob.yaml"
    job.write_text(job.read_text().replace('- name: "toy_alg"', '- name: "../../../alg"'))
    for out in _validate_and_run(toy, "benchmarkingjob.yaml", "benchmarkingjob.yaml:8: "
                                 "'benchmarkingjob.test_object.algorithms[0].name' is "
                                 "'../../../alg'"):
        assert "the algorithm's folder" in out


def test_upstream_names_with_spaces_and_an_empty_job_name_still_run(toy: Path) -> None:
    """Upstream examples name algorithms "rfnet_lifelong_learning for travel mode"; an empty job
    name puts the job's files straight into the workspace, as upstream."""
    job = toy / "benchmarkingjob.yaml"
    job.write_text(job.read_text().replace('name: "toyjob"', 'name: ""')
                   .replace('- name: "toy_alg"', '- name: "toy alg for travel mode"'))
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", "--no-report", cwd=toy)
    assert res.returncode == 0, res.stderr
    assert (toy / "workspace" / "rank" / "all_rank.csv").is_file()
    assert len(list((toy / "workspace" / "toy alg for travel mode").iterdir())) == 4


def test_a_job_folder_linking_outside_the_workspace_is_refused(toy: Path,
                                                               tmp_path: Path) -> None:
    """The last wall: whatever a name says, no folder of a run may resolve outside the
    workspace (here the job folder is a link to a folder elsewhere)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (toy / "workspace").mkdir()
    (toy / "workspace" / "toyjob").symlink_to(outside, target_is_directory=True)
    _validate_and_run(toy, "benchmarkingjob.yaml", "outside the workspace")
    assert list(outside.iterdir()) == []


# --- YAML alias bombs --------------------------------------------------------------------------

def _plant(path: Path, header: str, indent: str) -> str:
    """Append ``header`` and the bomb to ``path``; return ``"<file>:<line>: "`` of its last
    level (where the repetitions pass the bound)."""
    text = path.read_text()
    path.write_text(text + header + BOMB.replace("      - ", indent + "- "))
    return f"{path.name}:{len(text.splitlines()) + len(header.splitlines()) + 5}: "


def _bomb_algorithm(toy: Path) -> str:
    return _plant(toy / "algorithm.yaml", "        - junk:\n            values:\n", " " * 14)


def _bomb_testenv(toy: Path) -> str:
    return _plant(toy / "testenv.yaml", "  junk:\n", "    ")


def _bomb_job(toy: Path) -> str:
    return _plant(toy / "benchmarkingjob.yaml", "  junk:\n", "    ")


@pytest.mark.parametrize("plant", [_bomb_algorithm, _bomb_testenv, _bomb_job])
def test_alias_bomb_is_one_error_naming_file_and_line(toy: Path, plant) -> None:
    where = plant(toy)
    started = time.monotonic()
    for out in _validate_and_run(toy, "benchmarkingjob.yaml", where):
        assert "YAML aliases expand this file too much" in out
        assert len(out) < 2000, "the expansion reached the output"
    assert time.monotonic() - started < 60
    assert not (toy / "workspace").exists()


def test_ordinary_aliases_still_load(toy: Path) -> None:
    alg = toy / "algorithm.yaml"
    alg.write_text(alg.read_text().replace("values: [0, 1]", "values: &small [0, 1]")
                   .replace("values: [1, 2]", "values: *small"))
    res = run_cli("validate", "-f", "benchmarkingjob.yaml", cwd=toy)
    assert res.returncode == 0 and "OK" in res.stdout, res.stdout + res.stderr


def test_alias_bound_counts_nested_and_long_repetitions() -> None:
    """Each alias adds what it repeats (nodes plus characters, nested aliases expanded): a
    long string repeated is bounded like a deep tree is; a recursive alias is refused."""
    text = "a: &s '" + "x" * 999 + "'\n" + "".join(f"k{i}: *s\n" for i in range(99))
    assert len(parse_yaml(text, "ok.yaml")) == 100  # 99 * 1000 < the bound
    with pytest.raises(ConfigError, match="expand this file too much") as info:
        parse_yaml(text + "k99: *s\nk100: *s\n", "big.yaml")
    assert info.value.line == 102 and MAX_ALIAS_EXPANSION == 100_000
    with pytest.raises(ConfigError, match="recursive YAML alias") as info:
        parse_yaml("a: &a [1, *a]\nb: *a\n", "loop.yaml")
    assert info.value.line == 2
    with pytest.raises(ConfigError, match="nested too deeply"):
        parse_yaml("[" * 100_000, "deep.yaml")


def test_yaml_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    bad = tmp_path / "job.yaml"
    bad.write_bytes(b"a: 1\nb: 2\nc: '\xff'\n")
    with pytest.raises(ConfigError, match=r"job.yaml:3: not valid UTF-8: byte 5 of the line "
                                          r"is 0xff"):
        load_yaml(bad)


# --- hostile records -----------------------------------------------------------------------------

def _lines(rows: list[dict]) -> list[str]:
    return [json.dumps(r) for r in rows]


def _duplicate(rows: list[dict]) -> tuple[bytes, str]:
    return ("\n".join(_lines(rows + [rows[0]])) + "\n").encode(), \
        f"tasks.jsonl:4: duplicate task_id {rows[0]['task_id']!r} (first on line 1)"


def _nan_entry_point(rows: list[dict]) -> tuple[bytes, str]:
    lines = _lines(rows)
    lines[1] = lines[1].replace(json.dumps(rows[1]["entry_point"]), "NaN")
    return ("\n".join(lines) + "\n").encode(), \
        "tasks.jsonl:2: field 'entry_point' is NaN, which is not valid JSON"


def _infinity_in_metadata(rows: list[dict]) -> tuple[bytes, str]:
    lines = _lines(rows)
    lines[2] = lines[2][:-1] + ', "metadata": {"scores": [1, -Infinity]}}'
    return ("\n".join(lines) + "\n").encode(), \
        "tasks.jsonl:3: field 'metadata.scores[1]' is -Infinity, which is not valid JSON"


def _missing_test(rows: list[dict]) -> tuple[bytes, str]:
    rows = [dict(r) for r in rows]
    del rows[2]["test"]
    return ("\n".join(_lines(rows)) + "\n").encode(), \
        f"tasks.jsonl:3: record {rows[2]['task_id']!r}: field 'test' is missing"


def _wrong_type(rows: list[dict]) -> tuple[bytes, str]:
    rows = [dict(r) for r in rows]
    rows[1]["entry_point"] = 5
    return ("\n".join(_lines(rows)) + "\n").encode(), \
        f"tasks.jsonl:2: record {rows[1]['task_id']!r}: field 'entry_point' must be text, got int 5"


def _bad_utf8(rows: list[dict]) -> tuple[bytes, str]:
    data = ("\n".join(_lines(rows)) + "\n").encode()
    lines = data.split(b"\n")
    lines[2] = lines[2].replace(b"def ", b"def \xff", 1)
    column = lines[2].index(b"\xff") + 1
    return b"\n".join(lines), f"tasks.jsonl:3: not valid UTF-8: byte {column} of the line is 0xff"


@pytest.mark.parametrize("make", [_duplicate, _nan_entry_point, _infinity_in_metadata,
                                  _missing_test, _wrong_type, _bad_utf8])
def test_hostile_record_is_refused_before_any_test_case(codegen_job, tmp_path: Path,  # noqa: F811
                                                        make) -> None:
    rows = read_jsonl(SUBSET)[:3]
    data, needle = make(rows)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_bytes(data)
    job = codegen_job('        - generator:\n            values: ["canonical"]\n',
                      test_index=str(tasks))
    validate, run = _validate_and_run(job.parent, "benchmarkingjob.yaml", needle)
    assert f"error: {tasks}" in validate and f"ianvs: error: {tasks}" in run
    assert not (job.parent / "workspace").exists()


def test_the_shipped_codegen_example_still_validates(codegen_job, tmp_path: Path  # noqa: F811
                                                     ) -> None:
    job = codegen_job('        - generator:\n            values: ["canonical", "broken"]\n',
                      test_index=str(SUBSET))
    res = run_cli("validate", "-f", str(job), cwd=tmp_path)
    assert res.returncode == 0 and "OK" in res.stdout, res.stdout + res.stderr


def test_bad_utf8_is_reported_on_its_line_after_kilobytes(tmp_path: Path) -> None:
    """A reader that decodes a buffer at a time counted the lines of the buffer it was in; the
    byte is on line 40, 20 KB into the file, and also inside a gzip stream."""
    good = json.dumps({"question": "q" * 500, "answer": "a"}) + "\n"
    data = (good * 39).encode() + b'{"question": "\xc3\x28"}\n' + good.encode()
    for name, write in (("d.jsonl", Path.write_bytes),
                        ("d.jsonl.gz", lambda p, b: p.write_bytes(gzip.compress(b)))):
        path = tmp_path / name
        write(path, data)
        with pytest.raises(DatasetError, match="not valid UTF-8: byte 15 of the line is "
                                               "0xc3") as info:
            list(iter_jsonl(path))
        assert info.value.line == 40


def test_non_finite_numbers_are_refused_by_every_reader(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    for constant in ("NaN", "Infinity", "-Infinity"):
        path.write_text('{"a": 1}\n{"a": {"b": [' + constant + ']}}\n')
        with pytest.raises(DatasetError, match=rf"d.jsonl:2: field 'a.b\[0\]' is {constant}"):
            list(iter_jsonl(path))
    # the run's own prediction log may hold a plugin's NaN: it is read (results stay)
    log = tmp_path / "predictions.jsonl"
    log.write_text('{"prediction": NaN}\n')
    assert math.isnan(next(iter_jsonl(log, "prediction log", finite=False))[1]["prediction"])
    array = tmp_path / "d.json"
    array.write_text('[{"question": "q", "answer": 1}, {"question": "q", "answer": NaN}]')
    with pytest.raises(DatasetError, match="array element 2: field 'answer' is NaN"):
        list(JsonDataset(array, "test").numbered_records())


def test_a_csv_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_bytes(b"question,answer\n1+1,2\n2+2,\xff4\n")
    with pytest.raises(DatasetError, match=r"d.csv:3: not valid UTF-8"):
        CsvDataset(path, "test", "answer").num_examples()


@pytest.mark.parametrize("change, needle", [
    ({"task_id": ""}, "field 'task_id' is empty"),
    ({"task_id": None}, "field 'task_id' must be text, got NoneType None"),
    ({"prompt": ["x"]}, "field 'prompt' must be text"),
    ({"entry_point": "not an identifier"}, "must be a Python identifier"),
    ({"timeout": -1}, "field 'timeout' must be a positive number"),
    ({"grading": "trust_me"}, "field 'grading' must be one of"),
])
def test_executable_record_fields(change: dict, needle: str) -> None:
    record = {**read_jsonl(SUBSET)[0], **change}
    with pytest.raises(ConfigError, match=needle):
        check_executable(record)


def test_script_records_need_test_code_instead_of_test() -> None:
    check_executable({"task_id": "t", "prompt": "", "test_code": "assert True\n"})
    with pytest.raises(ConfigError, match="field 'test' is missing"):
        check_executable({"task_id": "t", "prompt": ""})


def test_duplicate_task_ids_are_refused_even_without_a_code_metric(tmp_path: Path) -> None:
    """Results, counts and reports are keyed by ``task_id``; a set that repeats one is refused
    whatever its metrics (a set without ``task_id`` is not concerned)."""
    rows = [(1, {"task_id": "a"}), (2, {"task_id": "b"}), (5, {"task_id": "a"})]
    with pytest.raises(ConfigError, match=r"d.jsonl:5: duplicate task_id 'a' \(first on line "
                                          r"1\)"):
        check_records(rows, tmp_path / "d.jsonl", {})
    assert check_records([(1, {"question": "q"}), (2, {"question": "q"})],
                         tmp_path / "d.jsonl", {}) == 0


@pytest.mark.parametrize("name", ["toyjob", "v1.2-final", "rfnet_lifelong_learning for full test",
                                  "模型_A", "_x"])
def test_plain_names(name: str) -> None:
    assert plain_name_problem(name) is None


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a\\b", "-rf", ".x", "x ", "a\x00b",
                                  "a\nb", "C:x", "x" * 101])
def test_not_plain_names(name: str) -> None:
    assert plain_name_problem(name) is not None


def test_inside_workspace_follows_links(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "job").mkdir(parents=True)
    assert inside_workspace(ws, ws / "job" / "a", "x") == ws / "job" / "a"
    assert inside_workspace(ws, ws, "x") == ws
    os.symlink(tmp_path, ws / "job" / "link")
    for path in (ws / "job" / "link" / "a", ws / ".." / "elsewhere"):
        with pytest.raises(IanvsError, match="outside the workspace"):
            inside_workspace(ws, path, "the test case folder")
