"""The README's two commands, as a new user runs them (issue 45, point 6): `.ci/readme_commands.py`
reads them from the README (never retyped), clones the committed HEAD, makes a fresh virtual
environment and runs them there without `.ci/run`'s system set-up. The suite runs command 2 on
a small selection (the whole suite inside the suite would double CI's time); the full check is
`python .ci/readme_commands.py`."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _check_module():
    spec = importlib.util.spec_from_file_location("readme_commands", REPO / ".ci/readme_commands.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_commands_come_from_the_readme_and_ci_runs_the_second() -> None:
    check = _check_module()
    install_and_run, tests = check.readme_commands()
    assert install_and_run.startswith('pip install -e ".[embedded]"') and " ianvs -f " in install_and_run
    assert tests.startswith('pip install -e ".[test]"') and "python -m pytest" in tests
    # .ci/run calls exactly the README's test command
    assert tests in (REPO / ".ci/run").read_text().splitlines()
    assert check.with_pytest_args(tests, "tests/suite -q") == \
        'pip install -e ".[test]" && python -m pytest tests/suite -q'
    assert check.with_pytest_args(tests, None) == tests


@pytest.mark.slow
def test_readme_test_command_on_a_clean_clone_without_system_setup(tmp_path: Path) -> None:
    """Command 2 in a fresh environment on a clone: the install from the clone's files and a
    selection of tests that touch the documentation and the shipped jobs."""
    res = subprocess.run([sys.executable, str(REPO / ".ci/readme_commands.py"), "--only", "2",
                          "--system-site-packages", "--keep", str(tmp_path),
                          "--pytest-args", "-q -p no:cacheprovider tests/suite/test_uncertainty_doc.py "
                          "tests/runner/test_shipped_jobs_validate.py"],
                         capture_output=True, text=True, timeout=1500)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    log = (tmp_path / "command2.log").read_text()
    assert " passed" in log and "failed" not in log
