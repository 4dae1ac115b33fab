"""Samples that could not be generated are reported apart and retried by the next run.

A real OpenAI-compatible HTTP server on loopback (a scripted stand-in for a model server:
the point is the client and the framework, not the model's answers) fails one task's
requests on the first run and answers everything on the second.
"""
from __future__ import annotations

import csv
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.runner.conftest import run_cli
from tests.smart_coding.conftest import read_jsonl

FAILING_ENTRY = "def has_close_elements"  # HumanEval/0's prompt


class Scripted:
    def __init__(self) -> None:
        self.fail_task_0 = True
        self.prompts: list[str] = []
        self.lock = threading.Lock()


@pytest.fixture()
def model_server() -> Iterator[tuple[str, Scripted]]:
    state = Scripted()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = body.get("prompt", "")
            with state.lock:
                state.prompts.append(prompt)
                fail = state.fail_task_0 and FAILING_ENTRY in prompt
            if fail:
                status, payload = 503, {"error": {"message": "overloaded"}}
            else:
                status, payload = 200, {"choices": [{"text": "    return None\n",
                                                     "finish_reason": "stop"}],
                                        "usage": {"prompt_tokens": 5, "completion_tokens": 3}}
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    httpd.shutdown()
    httpd.server_close()


def _row(tmp_path: Path) -> dict[str, str]:
    (row,) = csv.DictReader((tmp_path / "workspace/smart_coding_codegen/rank/all_rank.csv").open())
    return row


def test_generation_errors_are_counted_apart_and_retried(codegen_job, model_server,
                                                         tmp_path: Path) -> None:
    url, state = model_server
    job = codegen_job(
        '        - generator:\n            values: ["openai"]\n'
        f'        - base_url:\n            values: ["{url}"]\n'
        '        - model:\n            values: ["scripted"]\n'
        '        - max_retries:\n            values: [0]\n')

    first = run_cli("-f", str(job), "--no-progress", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    row = _row(tmp_path)
    assert row["generation_error"] == "1" and row["unscored_tasks"] == "1"
    assert int(row["failed"]) + int(row["error"]) == 20  # "return None" fails the others
    assert "retried by the next run" in first.stderr
    case = next((tmp_path / "workspace/smart_coding_codegen/codegen").iterdir())
    stored = {p["prediction"]["task_id"] for p in read_jsonl(case / "predictions.jsonl")}
    assert len(stored) == 20 and "HumanEval/0" not in stored
    requests_first_run = len(state.prompts)
    assert requests_first_run == 21

    state.fail_task_0 = False
    second = run_cli("-f", str(job), "--no-progress", cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert state.prompts[requests_first_run:] == [p for p in state.prompts[requests_first_run:]
                                                  if FAILING_ENTRY in p]
    assert len(state.prompts) == requests_first_run + 1  # only the failed task was re-asked
    row = _row(tmp_path)
    assert row["generation_error"] == "0" and row["unscored_tasks"] == "0"
    assert int(row["failed"]) + int(row["error"]) == 21


def test_all_samples_failing_fails_the_test_case(codegen_job, tmp_path: Path) -> None:
    """Nothing listens on port 9: one clear failure, exit 1, and nothing stored."""
    job = codegen_job(
        '        - generator:\n            values: ["openai"]\n'
        '        - base_url:\n            values: ["http://127.0.0.1:9/v1"]\n'
        '        - model:\n            values: ["x"]\n'
        '        - max_retries:\n            values: [0]\n')
    res = run_cli("-f", str(job), "--no-progress", cwd=tmp_path)
    assert res.returncode == 1
    assert "generator 'openai' produced no sample: all 21 failed" in res.stderr
    assert "ConnectionError" in res.stderr
    case = next((tmp_path / "workspace/smart_coding_codegen/codegen").iterdir())
    preds = case / "predictions.jsonl"
    assert not preds.exists() or preds.read_text() == ""
