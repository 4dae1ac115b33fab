"""The self-align example job through the real ``ianvs`` entry point: gold controls, the
embedded model, and resuming after ``kill -9``."""
from __future__ import annotations

import csv
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.runner.conftest import kill_when, run_cli, start_cli
from tests.scenarios.conftest import BENCH, cut_test_index

#: tasks of the default job's 4 the suite's run of the embedded model reads
CUT_TASKS = 2


def _job(tmp_path: Path, generators: list[str] | None = None, plain: bool = False) -> Path:
    """A copy of the example job; ``generators`` replaces the loop's rows, and then the
    ``plain`` row is left out unless ``plain``."""
    root = tmp_path / "selfalign"
    shutil.copytree(BENCH / "selfalign", root, ignore=shutil.ignore_patterns("workspace"))
    if generators is not None:
        alg = root / "testalgorithms" / "gen" / "gen_algorithm.yaml"
        text = alg.read_text()
        start = text.index("        - generator:")
        end = text.index("        - max_tries:")
        alg.write_text(text[:start] + "        - generator:\n            values: "
                       + json.dumps(generators) + "\n" + text[end:])
        job = root / "benchmarkingjob.yaml"   # without the plain embedded row
        text = job.read_text()
        if plain:
            return root
        start = text.index("      # plain code generation")
        end = text.index("  rank:")
        job.write_text(text[:start] + text[end:])
    return root


def _rows(root: Path) -> dict[str, dict[str, str]]:
    """Rows by generator; the plain codegen row as ``plain:<generator>``."""
    rows = csv.DictReader(open(next(root.glob("workspace/*/rank/all_rank.csv"))))
    return {(r["basemodel-generator"] if r["algorithm"] == "selfalign"
             else f"{r['algorithm']}:{r['basemodel-generator']}"): r for r in rows}


def _check_gold(rows: dict[str, dict[str, str]], tasks: int) -> None:
    ref, broken = rows["reference"], rows["broken"]
    # reference: its own tests are the hidden tests; aligns at try 1 and scores 1.0
    assert ref["align@1"] == ref["align_rate"] == ref["hidden_pass@1"] == "1.0"
    assert ref["hidden_pass@1_first"] == ref["test_validity"] == ref["pass@1"] == "1.0"
    assert ref["false_alignment"] == "0.0" and ref["tries_per_task"] == "1.0"
    assert ref["hidden_pass@1_plus"] == "1.0" and ref["plus_tasks"] == str(tasks)
    assert ref["invalid_tests"] == "0.0" and ref["parse_failures"] == "0"
    assert ref["tasks"] == str(tasks) and ref["grading"] == "boundary"
    # its tests are the hidden tests: every mutant they do not pass is killed by definition
    assert ref["mutation_score"] == "1.0" and int(ref["mutants"]) > 0
    # broken: never aligns, every try used, its (hidden) tests are valid on the reference
    assert broken["align_rate"] == broken["hidden_pass@1"] == broken["pass@1"] == "0.0"
    assert broken["hidden_pass@1_plus"] == "0.0"
    assert broken["false_alignment"] in ("", "nan")   # no aligned task: undefined, not 0
    assert broken["tries_per_task"] == "5.0" and broken["test_validity"] == "1.0"


@pytest.mark.slow
def test_gold_controls_through_ianvs(tmp_path: Path) -> None:
    root = _job(tmp_path, ["reference", "broken"])
    res = run_cli("-f", str(root / "benchmarkingjob.yaml"), "--no-progress", cwd=root,
                  timeout=600)
    assert res.returncode == 0, res.stderr[-4000:]
    _check_gold(_rows(root), 4)
    report = next(root.glob("workspace/*/report"))      # the curves against the try number
    assert (report / "per_try.png").stat().st_size > 1000
    assert "alt='per_try'" in (report / "index.html").read_text()
    curves = [json.loads(p.read_text())
              for p in root.glob("workspace/*/selfalign/*/selfalign_per_try.json")]
    assert sorted(c["tries"] for c in curves) == [[1], [1, 2, 3, 4, 5]]
    broken = next(c for c in curves if len(c["tries"]) == 5)
    assert broken["align"] == [0.0] * 5 and broken["hidden_pass@1"] == [0.0] * 5
    assert broken["false_alignment"] == [None] * 5     # nothing aligned: undefined


def _run_killed_after_two_tries(root: Path) -> list[dict]:
    """Start the job, SIGKILL its process group once two tries are stored; the finished tries."""
    tries_file = kill_when(start_cli("-f", str(root / "benchmarkingjob.yaml"), "--no-progress", "--no-report",
                                     cwd=root, group=True), root, "selfalign_tries.jsonl", 2, limit=900, poll=0.5)
    return [json.loads(line) for line in tries_file.read_text().splitlines() if line.endswith("}")]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_default_job_killed_and_resumed_on_the_embedded_model(tmp_path: Path) -> None:
    """The default job's model rows (the gold controls' rows are test_gold_controls_through_ianvs),
    from a run killed with SIGKILL after two tries and resumed: what was stored is kept as it was,
    no finished try is made again, and the resumed job's rows are whole. One run of the model
    serves both (each took 100-110 s on its own), on the first :data:`CUT_TASKS` of the job's
    4 tasks."""
    root = _job(tmp_path, ["embedded"], plain=True)
    tasks = cut_test_index(root, lambda records: records[:CUT_TASKS])
    finished = _run_killed_after_two_tries(root)
    res = run_cli("-f", str(root / "benchmarkingjob.yaml"), "--no-progress", cwd=root,
                  timeout=1700)
    assert res.returncode == 0, res.stderr[-4000:]
    (tries_file,) = root.glob("workspace/*/selfalign/*/selfalign_tries.jsonl")
    after = [json.loads(line) for line in tries_file.read_text().splitlines() if line.endswith("}")]
    assert after[:len(finished)] == finished            # what was stored is kept as it was
    seen = [(t["task_id"], t["try"]) for t in after]
    assert len(seen) == len(set(seen)), "a finished try was made again"
    assert {t["task_id"] for t in after} == {r["task_id"] for r in tasks}
    rows = _rows(root)
    assert set(rows) == {"embedded", "plain:embedded"}
    model = rows["embedded"]
    assert model["tasks"] == str(CUT_TASKS) and model["unfinished"] == "0"
    plain = rows["plain:embedded"]          # the same model without the loop, same tasks
    assert 0.0 <= float(plain["pass@1"]) <= 1.0 and plain["tasks"] == "0"
    # graded on the loop's hidden tests and on the amplified ones, as the loop's final code
    assert plain["plain_tasks"] == plain["plus_tasks"] == str(CUT_TASKS)
    assert plain["hidden_pass@1"] == plain["pass@1"]
    assert float(plain["hidden_pass@1_plus"]) <= float(plain["hidden_pass@1"])
    assert plain["align_rate"] in ("", "nan")
    for name in ("align@1", "align_rate", "hidden_pass@1", "hidden_pass@1_first",
                 "test_validity", "invalid_tests"):
        assert 0.0 <= float(model[name]) <= 1.0, name
    assert float(model["align@1"]) <= float(model["align@2"]) <= float(model["align_rate"])
    assert 1.0 <= float(model["tries_per_task"]) <= 5.0
    assert float(model["tokens_per_task"]) > 0
    assert int(model["false_aligned"]) <= int(model["aligned"])
    mine = [t for t in after if t["structured"] and t["completion_tokens"]]
    assert mine, "the embedded model's tries are recorded with their tokens"
    for t in mine:   # the constrained reply is always the schema's JSON unless cut by max_tokens
        assert t["parse_error"] is None or t["finish_reason"] == "length", t
        assert all(json.dumps(t["messages"]).count(h) == 0 for h in ("def check(candidate)",))
    assert "embedded model" in res.stdout + res.stderr   # the resumed run loaded it
    _recomputed_elsewhere_without_the_model(root, tmp_path / "elsewhere", rows)


def _recomputed_elsewhere_without_the_model(root: Path, other: Path,
                                            rows: dict[str, dict[str, str]]) -> None:
    """The finished run's records, packed as the docs ship them (``tar czf`` of the workspace)
    and unpacked into another copy of the job folder, give the same rows when the job runs
    there again, without loading the model (how a reader recomputes a documented run)."""
    archive = root.parent / "records.tar.gz"
    subprocess.run(["tar", "czf", str(archive), "-C", str(root), "workspace"], check=True)
    shutil.copytree(root, other, ignore=shutil.ignore_patterns("workspace"))
    subprocess.run(["tar", "xzf", str(archive), "-C", str(other)], check=True)
    res = run_cli("-f", str(other / "benchmarkingjob.yaml"), "--no-progress", cwd=other,
                  timeout=900)
    assert res.returncode == 0, res.stderr[-4000:]
    assert "embedded model" not in res.stdout + res.stderr, res.stderr[-2000:]   # never loaded
    again = _rows(other)
    assert set(again) == set(rows)
    for name, row in rows.items():
        assert {k: v for k, v in again[name].items() if k != "time"} == \
            {k: v for k, v in row.items() if k != "time"}, name
