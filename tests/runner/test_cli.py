"""CLI conformance (ianvs-compat §2 and §13.1) and end-to-end runs of the toy job."""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from tests.runner.conftest import run_cli


def test_no_args_prints_help_to_stderr_and_exits_1(tmp_path: Path) -> None:
    res = run_cli(cwd=tmp_path)
    assert res.returncode == 1
    assert "AI Benchmarking Tool" in res.stderr and res.stdout == ""


def test_version(tmp_path: Path) -> None:
    res = run_cli("-v", cwd=tmp_path)
    assert (res.returncode, res.stdout) == (0, "0.1.0\n")


def test_help_exits_0(tmp_path: Path) -> None:
    res = run_cli("-h", cwd=tmp_path)
    assert res.returncode == 0 and "-f" in res.stdout


def test_missing_config_file(tmp_path: Path) -> None:
    res = run_cli("-f", "missing.yaml", cwd=tmp_path)
    assert res.returncode == 1
    assert "not found benchmarking config(missing.yaml) file in local" in res.stderr
    assert "Traceback" not in res.stderr


def test_unknown_option_exits_2(tmp_path: Path) -> None:
    res = run_cli("-x", cwd=tmp_path)
    assert res.returncode == 2 and "unrecognized arguments: -x" in res.stderr


def test_flag_without_value(tmp_path: Path) -> None:
    res = run_cli("-f", cwd=tmp_path)
    assert res.returncode == 1 and "Traceback" not in res.stderr


def test_version_wins_over_run(toy: Path) -> None:
    res = run_cli("-f", "benchmarkingjob.yaml", "-v", cwd=toy)
    assert res.returncode == 0 and res.stdout == "0.1.0\n"
    assert not (toy / "workspace").exists()


def test_bad_yaml_one_line_error_with_line_number(toy: Path) -> None:
    (toy / "testenv.yaml").write_text("testenv:\n  dataset: [\n  metrics: x\n")
    res = run_cli("-f", "benchmarkingjob.yaml", cwd=toy)
    assert res.returncode == 1
    assert "Traceback" not in res.stderr
    assert re.search(r"testenv\.yaml:\d+: malformed YAML", res.stderr), res.stderr
    debug = run_cli("-f", "benchmarkingjob.yaml", "--debug", cwd=toy)
    assert "Traceback" in debug.stderr


def test_toy_job_end_to_end_from_another_directory(toy: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = run_cli("-f", str(toy / "benchmarkingjob.yaml"), "--no-progress", cwd=elsewhere)
    assert res.returncode == 0, res.stderr
    rank_dir = elsewhere / "workspace" / "toyjob" / "rank"
    rows = list(csv.DictReader((rank_dir / "all_rank.csv").open()))
    assert len(rows) == 4
    header = (rank_dir / "all_rank.csv").read_text().splitlines()[0]
    assert header == ("rank,algorithm,acc,npred,paradigm,basemodel,basemodel-offset,"
                      "basemodel-scale,time,url")
    assert rows[0]["acc"] == "1.0" and rows[0]["basemodel-offset"] == "0"
    for row in rows:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}", row["time"])
        assert re.fullmatch(r"\./workspace/toyjob/toy_alg/[0-9a-f-]{36}", row["url"])
        assert row["url"].split("/")[-1][14] == "1"  # uuid version 1
    assert "| rank | algorithm |" in res.stdout  # print_table on stdout


def test_rerun_resumes_without_calling_model(toy: Path) -> None:
    first = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=toy)
    assert first.returncode == 0, first.stderr
    second = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=toy)
    assert second.returncode == 0, second.stderr
    assert second.stderr.count("the model is not called") == 4
    cases = sorted((toy / "workspace" / "toyjob" / "toy_alg").iterdir())
    assert len(cases) == 4  # folders reused, not duplicated
    fresh = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", "--fresh", cwd=toy)
    assert fresh.returncode == 0
    assert len(list((toy / "workspace" / "toyjob" / "toy_alg").iterdir())) == 8


def test_a_job_folder_moved_with_its_workspace_resumes(toy: Path, tmp_path: Path,
                                                      monkeypatch) -> None:
    """The case key does not depend on where the job folder is: run with an absolute -f,
    rerun with a relative one, then from a copy of the folder (workspace included) elsewhere:
    every case is found, the model is not called. A case folder written with the key of the
    releases before (the absolute url in it) is found too."""
    import shutil

    first = run_cli("-f", str(toy / "benchmarkingjob.yaml"), "--no-progress", cwd=toy)
    assert first.returncode == 0, first.stderr
    again = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=toy)
    assert again.returncode == 0 and again.stderr.count("the model is not called") == 4
    moved = tmp_path / "moved"
    shutil.copytree(toy, moved)
    there = run_cli("-f", str(moved / "benchmarkingjob.yaml"), "--no-progress", cwd=moved)
    assert there.returncode == 0 and there.stderr.count("the model is not called") == 4
    cases = sorted((moved / "workspace" / "toyjob" / "toy_alg").iterdir())
    assert len(cases) == 4
    # the older key: sha256 over the absolute url, as releases before wrote it
    from core.cmd.job import load_job
    from core.testcasecontroller.testcase import CASE_FILE, _case_key

    monkeypatch.chdir(moved)   # keys are computed as ianvs run from there computes them
    job = load_job(moved / "benchmarkingjob.yaml")
    (name, algorithm), = job.algorithms
    legacy = {_case_key(name, algorithm, c, portable=False) for c in algorithm.combinations()}
    portable = {_case_key(name, algorithm, c) for c in algorithm.combinations()}
    assert legacy.isdisjoint(portable)   # the url is absolute here: the keys differ
    keyed = {_case_key(name, algorithm, c): _case_key(name, algorithm, c, portable=False)
             for c in algorithm.combinations()}
    for case in cases:
        meta = json.loads((case / CASE_FILE).read_text())
        meta["key"] = keyed[meta["key"]]
        (case / CASE_FILE).write_text(json.dumps(meta))
    old_run = run_cli("-f", str(moved / "benchmarkingjob.yaml"), "--no-progress", cwd=moved)
    assert old_run.returncode == 0 and old_run.stderr.count("the model is not called") == 4
    assert len(list((moved / "workspace" / "toyjob" / "toy_alg").iterdir())) == 4


def test_one_failing_case_does_not_stop_the_others(toy: Path) -> None:
    (toy / "basemodel.py").write_text((toy / "basemodel.py").read_text().replace(
        "self.scale = int(kwargs.get(\"scale\", 1))",
        "self.scale = int(kwargs.get(\"scale\", 1))\n"
        "        if self.scale == 2:\n            raise RuntimeError('scale 2 is broken')"))
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=toy)
    assert res.returncode == 1
    assert "2 of 4 test cases failed" in res.stderr
    rows = list(csv.DictReader((toy / "workspace/toyjob/rank/all_rank.csv").open()))
    assert sorted(r["basemodel-scale"] for r in rows) == ["1", "1"]
    failed = [json.loads(p.read_text()) for p in toy.glob("workspace/toyjob/toy_alg/*/case.json")]
    assert sorted(c["status"] for c in failed) == ["completed"] * 2 + ["failed"] * 2
    assert any("scale 2 is broken" in c.get("error", "") for c in failed)


def test_validate_ok_and_reports_problems(toy: Path) -> None:
    ok = run_cli("validate", "-f", "benchmarkingjob.yaml", cwd=toy)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "OK" in ok.stdout
    job = (toy / "benchmarkingjob.yaml").read_text().replace('{"npred": "ascend"}',
                                                             '{"npreds": "ascend"}')
    (toy / "benchmarkingjob.yaml").write_text(job)
    (toy / "algorithm.yaml").write_text((toy / "algorithm.yaml").read_text().replace(
        'name: "toy"', 'name: "toi"'))
    bad = run_cli("validate", "-f", "benchmarkingjob.yaml", cwd=toy)
    assert bad.returncode == 1
    assert "'npreds' is not produced" in bad.stderr and "did you mean 'npred'" in bad.stderr
    assert "does not register 'toi'" in bad.stderr and "'toy'" in bad.stderr
    assert not (toy / "workspace").exists()


def test_killed_run_resumes_and_loses_or_repeats_nothing(toy: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    from tests.runner.conftest import REPO

    log = toy / "calls.txt"
    (toy / "algorithm.yaml").write_text(f"""algorithm:
  paradigm_type: singletasklearning
  modules:
    - type: basemodel
      name: toy
      url: ./basemodel.py
      hyperparameters:
        - delay: {{values: [0.4]}}
        - call_log: {{values: ["{log}"]}}
""")
    proc = subprocess.Popen([sys.executable, "-m", "core.cmd.benchmarking", "-f",
                             "benchmarkingjob.yaml", "--no-progress"], cwd=toy,
                            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    preds: list[Path] = []
    while time.time() < deadline:
        preds = list(toy.glob("workspace/toyjob/toy_alg/*/predictions.jsonl"))
        if preds and len(preds[0].read_text().splitlines()) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = len(preds[0].read_text().splitlines())
    assert 2 <= done_before < 4
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=toy)
    assert res.returncode == 0, res.stderr
    lines = [json.loads(x) for x in preds[0].read_text().splitlines()]
    assert sorted(e["index"] for e in lines) == [0, 1, 2, 3]
    calls = log.read_text().splitlines()
    # each question predicted once, except at most the one in flight when killed
    assert len(calls) <= 5 and sorted(set(calls)) == sorted(["1+1", "2*3", "10-4", "7+8"])
    rows = list(csv.DictReader((toy / "workspace/toyjob/rank/all_rank.csv").open()))
    assert [r["acc"] for r in rows] == ["1.0"]


def test_rerun_replaces_rows_of_resumed_cases(toy: Path) -> None:
    for _ in range(2):
        assert run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=toy).returncode == 0
    rows = list(csv.DictReader((toy / "workspace/toyjob/rank/all_rank.csv").open()))
    assert len(rows) == 4 and len({r["url"] for r in rows}) == 4
    assert run_cli("-f", "benchmarkingjob.yaml", "--no-progress", "--fresh",
                   cwd=toy).returncode == 0
    rows = list(csv.DictReader((toy / "workspace/toyjob/rank/all_rank.csv").open()))
    assert len(rows) == 8  # fresh folders accumulate, as upstream re-runs did


def test_bad_test_line_stops_the_job_before_any_test_case(toy: Path) -> None:
    """A malformed dataset is one error up front, not one failure per test case."""
    data = toy / "data" / "test.jsonl"
    lines = data.read_text().splitlines()
    lines[1] = lines[1][:-1]  # cut the closing brace of line 2
    data.write_text("\n".join(lines) + "\n")
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=toy)
    assert res.returncode == 1
    assert re.search(r"data/test\.jsonl:2: invalid JSON", res.stderr), res.stderr
    assert "Traceback" not in res.stderr
    assert not list(toy.glob("workspace/toyjob/toy_alg/*"))  # no test case was started


def test_unknown_metric_stops_the_job_before_any_test_case(toy: Path) -> None:
    env = toy / "testenv.yaml"
    env.write_text(env.read_text().replace('name: "npred"', 'name: "npredd"'))
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=toy)
    assert res.returncode == 1
    assert "does not register 'npredd'" in res.stderr and "did you mean 'npred'" in res.stderr
    assert res.stderr.count("ianvs: error") == 1 and "Traceback" not in res.stderr
    assert not list(toy.glob("workspace/toyjob/toy_alg/*"))


def test_empty_test_set_is_an_error_not_an_empty_leaderboard(toy: Path) -> None:
    (toy / "data" / "test.jsonl").write_text("\n\n")
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=toy)
    assert res.returncode == 1
    assert "test.jsonl: the test set has no samples" in res.stderr, res.stderr
    assert not (toy / "workspace/toyjob/rank").exists()


def test_leaderboard_fits_120_columns_unless_full_table_is_asked(toy: Path) -> None:
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=toy)
    assert res.returncode == 0, res.stderr
    assert max(len(line) for line in res.stdout.splitlines()) <= 120
    assert "url:" in res.stdout and "  rank 1: ./workspace/toyjob/toy_alg/" in res.stdout
    full = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", "--full-table", cwd=toy)
    assert full.returncode == 0, full.stderr
    header = next(line for line in full.stdout.splitlines() if line.startswith("| rank"))
    assert [c.strip() for c in header.split("|")][-2] == "url"  # one table, url last
    assert "url:" not in full.stdout
