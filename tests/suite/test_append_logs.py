"""Line logs survive a kill mid-write: every JSONL log the project appends to is opened with
:func:`core.common.jsonl.open_append`, which ends a torn last line before appending (a record
appended to a torn line joins it in one line no reader parses, and that finished result is
lost on the next resume: found on the revise kind's executions log)."""
from __future__ import annotations

import json
import re
from pathlib import Path

from core.common.jsonl import open_append

CORE = Path(__file__).resolve().parents[2] / "core"

#: files that open a file for appending by other means, with why that is safe
OWN_APPEND = {
    "core/common/jsonl.py": "open_append itself",
    "core/testcasecontroller/predictions.py": "PredictionStore truncates an incomplete last line before it appends",
    "core/scenarios/trajectories/builder.py": "rewrites its output and progress files atomically before appending",
    "core/edge/processes.py": "a daemon's text log, not a record log",
    "core/testenvmanager/sandbox/images.py": "adds users to an image's /etc/passwd and /etc/group",
}
APPEND = re.compile(r"""open\([^)]*["']a b?["']|\.open\(\s*["']ab?["']""".replace(" ", ""))


def test_a_torn_line_is_ended_before_the_next_record(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"key": "a", "n": 1}\n{"key": "b", "n"')          # killed mid-write
    with open_append(log) as fh:
        fh.write(json.dumps({"key": "c", "n": 3}) + "\n")
    lines = log.read_text().splitlines()
    assert json.loads(lines[0])["key"] == "a" and json.loads(lines[-1])["key"] == "c"
    assert lines[1] == '{"key": "b", "n"'                              # stays unreadable, alone
    with open_append(log, binary=True) as fh:                          # whole file: nothing added
        fh.write(b'{"key": "d"}\n')
    assert log.read_text().count("\n") == 4


def test_a_missing_or_empty_log_is_created_as_is(tmp_path: Path) -> None:
    with open_append(tmp_path / "new.jsonl") as fh:
        fh.write("{}\n")
    assert (tmp_path / "new.jsonl").read_text() == "{}\n"


def test_every_appending_open_in_core_goes_through_open_append() -> None:
    offenders = []
    for path in sorted(CORE.rglob("*.py")):
        rel = str(path.relative_to(CORE.parent))
        if rel in OWN_APPEND:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if APPEND.search(line) and "devnull" not in line:
                offenders.append(f"{rel}:{n}: {line.strip()}")
    assert not offenders, "use core.common.jsonl.open_append (or list the file in OWN_APPEND with why):\n" + "\n".join(offenders)
    for rel in OWN_APPEND:
        assert (CORE.parent / rel).is_file(), f"OWN_APPEND names a file that is gone: {rel}"
