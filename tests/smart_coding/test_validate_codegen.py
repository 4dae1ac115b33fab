"""``ianvs validate`` on the codegen example: hyperparameters are checked without a model."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from core.cmd.validate import _check_hyperparameters
from core.testcasecontroller.algorithm.config import ModuleSpec
from tests.runner.conftest import run_cli


def test_example_validates(codegen_job, tmp_path: Path) -> None:
    job = codegen_job('        - generator:\n            values: ["embedded", "canonical"]\n')
    res = run_cli("validate", "-f", str(job), cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "OK" in res.stdout


@pytest.mark.parametrize("hyperparameters, expected", [
    ('        - generatr:\n            values: ["canonical"]\n',
     "hyperparameter 'generatr' is not used by the codegen model nor by generator 'embedded' "
     "(did you mean 'generator'"),
    ('        - generator:\n            values: ["embeded"]\n', "did you mean 'embedded'"),
    ('        - generator:\n            values: ["replay"]\n',
     "generator 'replay' needs hyperparameter 'samples_path'"),
    ('        - max_tokens:\n            values: [0]\n', "max_tokens must be >= 1"),
    ('        - mode:\n            values: ["complete", "instruct"]\n',
     "mode must be 'complete' or 'chat', got 'instruct'"),
    ('        - generator:\n            values: ["openai"]\n        - base_ur:\n'
     '            values: ["http://127.0.0.1:1"]\n', "did you mean 'base_url'"),
])
def test_bad_hyperparameters_are_reported(codegen_job, tmp_path: Path, hyperparameters: str,
                                          expected: str) -> None:
    job = codegen_job(hyperparameters)
    res = run_cli("validate", "-f", str(job), cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert expected in res.stderr, res.stderr
    assert "gen_algorithm.yaml" in res.stderr and "Traceback" not in res.stdout + res.stderr
    assert not (tmp_path / "workspace").exists()


class _Explicit:
    def __init__(self, alpha: int = 1, beta: str = "x") -> None:
        self.alpha, self.beta = alpha, beta


class _AnyKwargs:
    def __init__(self, **kwargs: object) -> None:
        self.kwargs = kwargs


def test_signature_check_for_plugins_without_their_own_check() -> None:
    spec = ModuleSpec("basemodel", "m", None, ({"alpha": 1}, {"alpah": 2}, {"alpah": 3}))
    problems = _check_hyperparameters(_Explicit, spec, Path("alg.yaml"))
    assert len(problems) == 1  # one message per distinct problem, not per variant
    assert "'alpah' is not a parameter of _Explicit.__init__" in problems[0]
    assert "did you mean 'alpha'" in problems[0]
    assert _check_hyperparameters(_AnyKwargs, spec, Path("alg.yaml")) == []


def test_invalid_metric_parameter_is_one_clean_error(codegen_job, tmp_path: Path) -> None:
    """``k: [0]`` is rejected by the metric's own check, named with testenv file and line."""
    job = codegen_job('        - generator:\n            values: ["canonical"]\n')
    env = job.parent / "testenv" / "testenv.yaml"
    env.write_text(env.read_text().replace("k: [1]", "k: [0]"))
    for args in (("validate", "-f", str(job)), ("-f", str(job), "--no-progress")):
        res = run_cli(*args, cwd=tmp_path)
        out = res.stdout + res.stderr
        assert res.returncode == 1 and "Traceback" not in out, out
        assert re.search(r"testenv\.yaml:\d+: metric 'pass_at_k': k must be a positive", out), out
    assert not (tmp_path / "workspace").exists()
