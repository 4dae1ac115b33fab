"""What a seccomp kill tells the caller: without the audit policy (the kernel walls alone) the
sample's process names the process it was starting just before the kernel killed it with
``SIGSYS`` (which carries no detail to the parent), and the executor adds it to the
``sandbox_violation`` message (``runner.install_policy``'s witness, ``runner.witnessed``)."""

from __future__ import annotations

import pytest

from core.testenvmanager.sandbox import ExecMode, Outcome
from core.testenvmanager.sandbox.local import LocalExecutor
from core.testenvmanager.sandbox.runner import WITNESS_MARK, witnessed

from .conftest import run_one

SPAWNS = {
    "subprocess": ("import subprocess\ndef start():\n    subprocess.run(['true'])\nstart()\n",
                   "starting a process (subprocess.Popen ['true']) from <program>:3 (start)"),
    "fork": ("import os\nos.fork()\n", "starting a process (os.fork) from <program>:2 (<module>)"),
}


@pytest.fixture(scope="module")
def kernel_only():
    with LocalExecutor(workers=1, audit_hook=False) as ex:
        if not ex.facts.get("seccomp"):
            pytest.skip("needs the seccomp filter")
        yield ex


@pytest.mark.parametrize("how", sorted(SPAWNS))
def test_a_seccomp_kill_names_the_process_the_sample_started(kernel_only: LocalExecutor, how: str) -> None:
    program, said = SPAWNS[how]
    res = run_one(kernel_only, mode=ExecMode.SCRIPT, program=program, test="")
    assert res.outcome is Outcome.SANDBOX_VIOLATION and res.exit_status == -31, (res.outcome, res.detail)
    assert res.detail.startswith("the sample's process was killed by the kernel's seccomp filter"), res.detail
    assert res.detail.endswith(f"; the process reported, just before: {said}"), res.detail


def test_a_sample_that_starts_nothing_reports_nothing(kernel_only: LocalExecutor) -> None:
    res = run_one(kernel_only, mode=ExecMode.SCRIPT, program="import os\nprint(os.getpid() > 0)\n", test="")
    assert res.outcome is Outcome.PASSED and WITNESS_MARK not in res.stderr, (res.outcome, res.detail, res.stderr)


def test_witnessed_takes_the_last_line_and_leaves_other_details_alone() -> None:
    err = f"noise\n{WITNESS_MARK}starting a process (os.fork)\n{WITNESS_MARK}starting a process (os.system 'x')\n"
    assert witnessed("killed", err) == "killed; the process reported, just before: starting a process (os.system 'x')"
    assert witnessed("killed", "nothing said\n") == "killed"
    assert witnessed("killed", WITNESS_MARK + "\n") == "killed"
