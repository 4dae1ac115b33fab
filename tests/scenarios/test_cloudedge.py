"""The cloud-edge scenario's example job, its routers and metrics, through the real CLI and sandbox.

The fast tests swap the job's two language models for answers whose correctness is known, so
every router's decision can be checked exactly: the edge model replays recorded answers (the
canonical solution for half of the tasks, a wrong body for the others), the cloud model is the
``canonical`` generator. Everything else is real: the paradigm, the routers' sandbox checks, the
boundary-tier grading, the job-wide answer cache. The slow test runs the job as shipped, with the
two real models (Qwen2.5-Coder 0.5B and 1.5B), on three tasks.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from core.scenarios.codegen.examples import examples_test, prompt_examples
from tests.runner.conftest import run_cli
from tests.scenarios.conftest import rank_rows_by_algorithm, swap_cloudedge_models

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "examples" / "smart_coding" / "smart_coding_learning_bench"
ROUTING = "testalgorithms/routing"


def _records() -> list[dict]:
    path = BENCH / "codegen" / "data" / "humaneval_subset.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture()
def job(tmp_path: Path) -> Path:
    """The example job in a private folder, its models replaced by known answers."""
    bench = tmp_path / "bench"
    shutil.copytree(BENCH / "cloudedge", bench / "cloudedge",
                    ignore=shutil.ignore_patterns("workspace"))
    shutil.copytree(BENCH / "codegen" / "data", bench / "codegen" / "data")
    job = bench / "cloudedge"
    answers = job / "edge_answers.jsonl"
    with answers.open("w") as fh:
        for i, rec in enumerate(_records()):
            body = rec["canonical_solution"] if i % 2 == 0 else "    return None\n"
            fh.write(json.dumps({"task_id": rec["task_id"], "completion": body}) + "\n")
    swap_cloudedge_models(job / ROUTING, answers)
    return job


def _rows(job: Path) -> dict[str, list[dict[str, str]]]:
    return rank_rows_by_algorithm(job / "workspace" / "cloudedge_bench" / "rank" / "all_rank.csv")


def test_prompt_examples_hold_for_the_canonical_solutions() -> None:
    """The extracted examples are the prompt's own: every canonical solution passes them
    (checked in-process here on trusted reference code, never on model output)."""
    records = _records()
    with_examples = 0
    for rec in records:
        examples = prompt_examples(rec["prompt"], rec["entry_point"])
        if not examples:
            continue
        with_examples += 1
        ns: dict = {}
        exec(rec["prompt"] + rec["canonical_solution"], ns)  # noqa: S102 - the dataset's reference
        exec(examples_test(examples, rec["entry_point"]), ns)  # noqa: S102
        ns["check"](ns[rec["entry_point"]])
    assert with_examples >= len(records) // 2


def test_prompt_examples_skip_what_is_not_an_expression() -> None:
    prompt = ('def f(x):\n    """\n    >>> f(1)\n    2\n    >>> f(2)\n    some words\n'
              '    f(3) == 4\n    g(5) == 6\n    """\n')
    assert prompt_examples(prompt, "f") == [("f(1)", "2"), ("f(3)", "4")]


def test_routers_decide_as_their_checks_say(job: Path) -> None:
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=job, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = _rows(job)
    records = _records()
    n = len(records)
    right = [i % 2 == 0 for i in range(n)]
    edge_share = sum(right) / n

    def one(name: str) -> dict[str, str]:
        got, = rows[name]
        return got

    assert float(one("edge_only")["pass@1"]) == round(edge_share, 4)
    assert float(one("edge_only")["cloud_share"]) == 0.0
    assert float(one("cloud_only")["pass@1"]) == 1.0 and float(one("cloud_only")["cloud_share"]) == 1.0
    oracle = one("oracle")
    assert float(oracle["pass@1"]) == 1.0
    assert float(oracle["cloud_share"]) == round(1 - edge_share, 4)  # only where the edge fails
    # ExampleTests: wrong edge answers fail their examples; tasks without examples go up too
    no_examples = [not prompt_examples(r["prompt"], r["entry_point"]) for r in records]
    up = sum((not ok) or none for ok, none in zip(right, no_examples))
    ex = one("example_tests")
    assert float(ex["pass@1"]) == 1.0
    assert float(ex["cloud_share"]) == round(up / n, 4)
    assert float(ex["check_s"]) > 0  # its sandbox runs are counted
    # a replay cannot write tests: SelfTests finds no valid test and sends every task up
    st = one("self_tests")
    assert float(st["cloud_share"]) == 1.0 and float(st["pass@1"]) == 1.0
    # no log-probabilities in a replay: Confidence sends everything up, and says so
    for row in rows["confidence"]:
        assert float(row["cloud_share"]) == 1.0
    # the oracle is known in every case once both passes exist: regret = oracle - pass@1
    for name, group in rows.items():
        for row in group:
            assert float(row["oracle_pass@1"]) == 1.0, name
            assert abs(float(row["regret"]) - (1.0 - float(row["pass@1"]))) < 1e-9, name
    # RandomRouter: three thresholds, cloud share falls as the edge's share grows
    shares = {float(r["hard_example_mining-threshold"]): float(r["cloud_share"])
              for r in rows["random"]}
    assert sorted(shares) == [0.25, 0.5, 0.75]
    assert shares[0.25] >= shares[0.5] >= shares[0.75]
    # the report draws the cost/quality plane
    from core.storymanager.report import plots
    if plots.available():
        png = job / "workspace" / "cloudedge_bench" / "report" / "cloud_edge.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # one answer per task and model in the job's cache, whatever the number of routers
    cache = job / "workspace" / "cloudedge_bench" / "jointinference-cache" / "generations.jsonl"
    lines = [json.loads(line) for line in cache.read_text().splitlines()]
    keys = [g["key"] for g in lines if "#" not in g["task_id"]]  # '#selftests': SelfTests' asks
    assert len(keys) == len(set(keys)) == 2 * n



#: edge answers that try to pass without being right: exit early (clean status, at import or in the
#: call), an object equal to everything, a forged verdict on stdout, the judge's exception swapped,
#: the parent killed. Each one is wrong for every task.
HOSTILE = [
    "    import os\n    os._exit(0)\n",
    "    return None\nimport os\nos._exit(0)\n",
    "    raise SystemExit(0)\n",
    "    class Any:\n        def __eq__(self, other):\n            return True\n"
    "        def __ne__(self, other):\n            return False\n    return Any()\n",
    "    import os, sys\n    sys.stdout.write('passed\\n')\n    sys.stdout.flush()\n"
    "    os.write(1, b'{\"passed\": true, \"outcome\": \"passed\"}\\n')\n    os._exit(0)\n",
    "    import builtins\n    builtins.AssertionError = type('Nope', (BaseException,), {})\n    return None\n",
    "    import os, signal\n    os.kill(os.getppid(), signal.SIGKILL)\n    return None\n",
]


def test_hostile_edge_answers_never_pass_a_router_check(job: Path) -> None:
    """A router's check runs the edge's program like grading does (boundary tier): answers built
    to fake a pass must fail the prompt's examples, so ExampleTests sends every task with examples
    up, and the final pass@1 is the cloud's."""
    answers = job / "edge_answers.jsonl"
    with answers.open("w") as fh:
        for i, rec in enumerate(_records()):
            fh.write(json.dumps({"task_id": rec["task_id"], "completion": HOSTILE[i % len(HOSTILE)]}) + "\n")
    jobfile = job / "benchmarkingjob.yaml"
    text = jobfile.read_text()
    head, rest = text.split("    algorithms:\n", 1)
    tail = rest[rest.index("  rank:"):]
    jobfile.write_text(head + "    algorithms:\n"
                       '      - name: "edge_only"\n        url: "./testalgorithms/routing/edge_only.yaml"\n'
                       '      - name: "example_tests"\n        url: "./testalgorithms/routing/example_tests.yaml"\n'
                       + tail)
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", "--no-report", cwd=job, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = _rows(job)
    edge, = rows["edge_only"]
    assert float(edge["pass@1"]) == 0.0
    ex, = rows["example_tests"]
    assert float(ex["cloud_share"]) == 1.0 and float(ex["pass@1"]) == 1.0


@pytest.mark.slow
@pytest.mark.timeout(900)  # two real models on the CPU: 181 s beside the full suite, over 300 s on a busier machine (2026-11-27)
def test_the_shipped_job_runs_with_the_two_real_models(tmp_path: Path) -> None:
    """Three tasks, the edge and cloud models as shipped (0.5B and 1.5B GGUF, CPU)."""
    bench = tmp_path / "bench"
    shutil.copytree(BENCH / "cloudedge", bench / "cloudedge", ignore=shutil.ignore_patterns("workspace"))
    (bench / "codegen" / "data").mkdir(parents=True)
    subset = (BENCH / "codegen" / "data" / "humaneval_subset.jsonl").read_text().splitlines()[:3]
    (bench / "codegen" / "data" / "humaneval_subset.jsonl").write_text("\n".join(subset) + "\n")
    job = bench / "cloudedge"
    jobfile = job / "benchmarkingjob.yaml"
    text = jobfile.read_text()
    keep = ("oracle", "edge_only", "cloud_only", "confidence", "self_tests")
    lines = text.splitlines()
    out, skip = [], False
    for line in lines:
        if line.strip().startswith("- name:"):
            skip = line.split('"')[1] not in keep
        if skip and (line.strip().startswith("- name:") or line.strip().startswith("url:")):
            continue
        out.append(line)
    jobfile.write_text("\n".join(out) + "\n")
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=job, timeout=1500)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = _rows(job)
    assert set(rows) == set(keep)
    assert float(rows["edge_only"][0]["cloud_share"]) == 0.0
    assert float(rows["cloud_only"][0]["cloud_share"]) == 1.0
    assert float(rows["cloud_only"][0]["cloud_completion_tokens"]) > 0
    # the edge model returned log-probabilities: a higher threshold never sends fewer tasks up
    shares = [float(r["cloud_share"]) for r in
              sorted(rows["confidence"], key=lambda r: float(r["hard_example_mining-threshold"]))]
    assert shares == sorted(shares)
    for group in rows.values():
        for row in group:
            assert row["oracle_pass@1"] not in ("", "nan")
    # the edge model wrote tests and they ran in the sandbox: a cost, and a stored run per test
    assert float(rows["self_tests"][0]["check_s"]) > 0
    units = job / "workspace" / "cloudedge_bench" / "jointinference-cache" / "selftests_units.jsonl"
    assert units.read_text().strip()


def test_pareto_front_keeps_only_undominated_points() -> None:
    from core.storymanager.report.plots import pareto_front

    points = [(0.0, 0.4), (1.0, 0.6), (0.5, 0.6), (0.3, 0.5), (0.6, 0.55), (0.0, 0.3)]
    # (1.0, 0.6) is beaten by (0.5, 0.6); (0.6, 0.55) by (0.5, 0.6); (0.0, 0.3) by (0.0, 0.4)
    assert [points[i] for i in pareto_front(points)] == [(0.0, 0.4), (0.3, 0.5), (0.5, 0.6)]
