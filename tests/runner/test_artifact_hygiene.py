"""Issue 30 (2, 3): no secret or private path in any artifact; a failing metric is a NaN.

Canaries: a credential-like hyperparameter on a failing codegen run (``api_key``, refused
with "did you mean api_key_env"), credential-like hyperparameters on a successful toy run
(the toy model takes ``**kwargs``), and an environment variable. Every file of the
workspace, stdout and stderr are searched for them; the published folders (``rank/``,
``report/``) also for the temporary folder's absolute path.
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

from core.common.redact import (REDACTED, is_secret_name, public_path, public_paths, redact,
                                scrub, secret_values)
from tests.runner.conftest import REPO, run_cli
from tests.smart_coding.conftest import codegen_job  # noqa: F401 - fixture

CANARY_API = "sk-CANARY-api-5f1e"
CANARY_TOKEN = "sk-CANARY-token-77ab"
CANARY_PASSWORD = "CANARY-password-0c9d"
CANARY_ENV = "sk-CANARY-env-e41b"
CANARIES = (CANARY_API, CANARY_TOKEN, CANARY_PASSWORD, CANARY_ENV)

BAD_METRIC = '''from sedna.common.class_factory import ClassFactory, ClassType


@ClassFactory.register(ClassType.GENERAL, alias="ratio")
def ratio(y_true, y_pred):
    return sum(1 for _ in y_pred) / 0
'''


def _cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), SMART_CODING_CANARY_KEY=CANARY_ENV)
    return subprocess.run([sys.executable, "-m", "core.cmd.benchmarking", *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=600)


def _absolute_workspace(job: Path, workspace: Path) -> None:
    text = job.read_text()
    start = text.index("workspace:")
    end = text.index("\n", start)
    job.write_text(text[:start] + f'workspace: "{workspace}"' + text[end:])


def _assert_clean(workspace: Path, streams: list[str], private: str) -> None:
    files = [p for p in workspace.rglob("*") if p.is_file()]
    assert files
    for text in streams:
        for canary in CANARIES:
            assert canary not in text
    for path in files:
        data = path.read_bytes()
        for canary in CANARIES:
            assert canary.encode() not in data, (path, canary)
        published = {"rank", "report"} & set(path.relative_to(workspace).parts)
        if published:
            assert private.encode() not in data, path


def test_canaries_reach_no_artifact_log_or_stream(toy: Path, codegen_job,
                                                  tmp_path: Path) -> None:
    # a failing run: the codegen model refuses ``api_key`` (did you mean api_key_env), before
    # any connection is attempted
    job = codegen_job('        - generator:\n            values: ["openai"]\n'
                      f'        - api_key:\n            values: ["{CANARY_API}"]\n')
    workspace = tmp_path / "ws"
    _absolute_workspace(job, workspace)
    failed = _cli(["-f", str(job), "--no-progress"], cwd=tmp_path)
    assert failed.returncode == 1
    assert "api_key_env" in failed.stderr and REDACTED in failed.stderr
    case = next(workspace.rglob("case.json"))
    meta = json.loads(case.read_text())
    assert meta["status"] == "failed" and "api_key_env" in meta["error"]
    assert meta["modules"]["basemodel"]["hyperparameters"]["api_key"] == REDACTED

    # a successful run: a plugin taking **kwargs accepts credential-like names
    alg = toy / "algorithm.yaml"
    alg.write_text(alg.read_text().replace(
        "        - offset:",
        f'        - token:\n            values: ["{CANARY_TOKEN}"]\n'
        f'        - dbPassword:\n            values: ["{CANARY_PASSWORD}"]\n'
        '        - api_key_env:\n            values: ["SMART_CODING_CANARY_KEY"]\n'
        "        - offset:"))
    _absolute_workspace(toy / "benchmarkingjob.yaml", workspace)
    ok = _cli(["-f", str(toy / "benchmarkingjob.yaml"), "--no-progress"], cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr[-3000:]

    _assert_clean(workspace, [failed.stdout, failed.stderr, ok.stdout, ok.stderr],
                  str(tmp_path))
    rows = list(csv.DictReader((workspace / "toyjob/rank/all_rank.csv").open()))
    assert len(rows) == 4
    assert {r["basemodel-token"] for r in rows} == {REDACTED}
    assert {r["basemodel-dbPassword"] for r in rows} == {REDACTED}
    assert {r["basemodel-api_key_env"] for r in rows} == {"SMART_CODING_CANARY_KEY"}
    assert all(r["url"].startswith("toyjob/toy_alg/") for r in rows)  # workspace-relative
    manifest = json.loads((workspace / "toyjob/report/manifest.json").read_text())
    assert manifest["dataset"]["file"] == "data/test.jsonl"
    assert manifest["test_cases"][0]["modules"]["basemodel"]["url"] == "basemodel.py"
    assert all(c["status"] == "completed" for c in manifest["test_cases"])


def test_failing_metric_is_a_visible_nan(toy: Path) -> None:
    (toy / "ratio.py").write_text(BAD_METRIC)
    env = toy / "testenv.yaml"
    env.write_text(env.read_text() + '    - name: "ratio"\n      url: "./ratio.py"\n')
    job = toy / "benchmarkingjob.yaml"
    job.write_text(job.read_text().replace('{"npred": "ascend"}', '{"ratio": "descend"}'))
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=toy)
    assert res.returncode == 0, res.stderr[-3000:]  # ranked: exit 0, with a warning
    assert "ianvs: warning: metric 'ratio' failed in 4 of 4 test cases" in res.stderr
    logged = [line for line in res.stderr.splitlines()
              if "[WARNING]" in line and "'ratio'" in line]
    assert len(logged) == 4  # one per test case
    assert all("ZeroDivisionError" in line for line in logged)

    rows = list(csv.DictReader((toy / "workspace/toyjob/rank/all_rank.csv").open()))
    assert len(rows) == 4
    assert [r["acc"] for r in rows] == ["1.0", "0.0", "0.0", "0.0"]  # sorted by acc
    assert {r["ratio"] for r in rows} == {""} and {r["npred"] for r in rows} == {"4"}
    for case in (toy / "workspace/toyjob/toy_alg").glob("*/case.json"):
        meta = json.loads(case.read_text())
        assert meta["status"] == "completed"
        # strict JSON: the missing value is null, and metric_errors says why
        assert meta["metrics"]["ratio"] is None and meta["metrics"]["npred"] == 4
        assert meta["metric_errors"]["ratio"]["error"].startswith("ZeroDivisionError")

    report = toy / "workspace/toyjob/report"
    md = (report / "leaderboard.md").read_text()
    table = [line for line in md.splitlines() if line.startswith("| 1 ")][0]
    assert "| error |" in table
    assert "metric 'ratio' raised ZeroDivisionError" in md
    page = (report / "index.html").read_text()
    assert "<td>error</td>" in page and "id='metric-errors'" in page


def test_rank_sort_puts_nan_metric_last(toy: Path) -> None:
    """Sorting by a metric that raised for some cases puts those rows last."""
    (toy / "ratio.py").write_text(BAD_METRIC.replace(
        "return sum(1 for _ in y_pred) / 0",
        "return 1 / (int(y_pred[0]) - int(y_pred[0]) % 2 - int(y_pred[0]) + 1)"))
    env = toy / "testenv.yaml"
    env.write_text(env.read_text() + '    - name: "ratio"\n      url: "./ratio.py"\n')
    job = toy / "benchmarkingjob.yaml"
    job.write_text(job.read_text().replace('[{"acc": "descend"}, {"npred": "ascend"}]',
                                           '[{"ratio": "descend"}]'))
    res = run_cli("-f", "benchmarkingjob.yaml", "--no-progress", cwd=toy)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = list(csv.DictReader((toy / "workspace/toyjob/rank/all_rank.csv").open()))
    values = [r["ratio"] for r in rows]
    assert "" in values and values[0] != ""
    assert values == sorted(values, key=lambda v: v == "")  # NaN (empty) cells last


def test_redaction_rule() -> None:
    for name in ("api_key", "apiKey", "OPENAI_API_KEY", "token", "authToken", "secret",
                 "client_secret", "password", "db-password", "Authorization", "credentials",
                 "basemodel-api_key", "private_key", "auth"):
        assert is_secret_name(name), name
    for name in ("api_key_env", "max_tokens", "tokens_per_s", "author", "generator",
                 "keyboard", "monkey", "secretary", "n"):
        assert not is_secret_name(name), name
    data = {"a": {"token": "t0ps3cret", "n": 1}, "api_key_env": "VAR", "list": [{"pwd": 5}]}
    assert redact(data) == {"a": {"token": REDACTED, "n": 1}, "api_key_env": "VAR",
                            "list": [{"pwd": REDACTED}]}
    assert sorted(secret_values(data)) == ["5", "t0ps3cret"]
    assert scrub("error: bad t0ps3cret here", ["t0ps3cret"]) == f"error: bad {REDACTED} here"


def test_public_paths(tmp_path: Path) -> None:
    base = tmp_path / "job"
    assert public_path(base / "data" / "x.jsonl", [base]) == "data/x.jsonl"
    assert public_path("/elsewhere/models/m.gguf", [base]) == "m.gguf"
    assert public_path("./rel/x", [base]) == "./rel/x"
    out = public_paths({"cmd": ["-f", str(base / "j.yaml"), f"--x={base}/y"],
                        "msg": f"read {base}/data/a.jsonl"}, [base])
    assert out == {"cmd": ["-f", "j.yaml", "--x=y"], "msg": "read data/a.jsonl"}
