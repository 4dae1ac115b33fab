"""``ianvs validate`` reports every problem of a job in one pass, each on one line naming file
and line, through the real command: independent mistakes in the three files, rank names no
metric produces, a task kind or basemodel copied from another kind, values of the wrong type,
and plugins whose own checks crash (a problem line, never a traceback)."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from core.common.errors import ConfigError
from core.generation.types import DecodingSettings
from tests.runner.conftest import REPO, run_cli
from tests.smart_coding.conftest import codegen_job  # noqa: F401 - fixture

ISSUE_EXAMPLE = REPO / "examples" / "smart_coding" / "smart_coding_learning_bench" / "issue"


def line_of(path: Path, needle: str) -> int:
    """1-based line of the first line of ``path`` containing ``needle``."""
    for number, text in enumerate(path.read_text().splitlines(), start=1):
        if needle in text:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new, 1))


def validate(folder: Path, *extra: str) -> tuple[int, str, list[str]]:
    """Run ``ianvs validate`` in ``folder``: exit status, all output, the problem lines."""
    res = run_cli("validate", "-f", "benchmarkingjob.yaml", *extra, cwd=folder)
    out = res.stdout + res.stderr
    problems = [line[len("ianvs: error: "):] for line in res.stderr.splitlines()
                if line.startswith("ianvs: error: ") and "problem(s) found" not in line]
    return res.returncode, out, problems


def test_three_independent_mistakes_are_all_reported_in_one_run(toy: Path) -> None:
    env, alg, job = toy / "testenv.yaml", toy / "algorithm.yaml", toy / "benchmarkingjob.yaml"
    env.write_text(env.read_text() + '    - name: "f1_scor"\n')           # unknown metric
    edit(alg, "values: [1, 2]", 'values: "12"')                            # bad hyperparameter
    edit(job, '{"npred": "ascend"}', '{"npreds": "ascend"}')               # unknown sort_by
    status, out, problems = validate(toy)
    assert status == 1, out
    assert "Traceback" not in out
    assert len(problems) == 3 and "3 problem(s) found" in out, out
    expected = [
        (alg, line_of(alg, "- scale:"), "'values' of hyperparameter 'scale' must be a list"),
        (env, line_of(env, "f1_scor"), "unknown metric 'f1_scor'"),
        (Path("benchmarkingjob.yaml"), line_of(job, "sort_by"),
         "rank.sort_by metric 'npreds' is not produced by any testenv metric "
         "(did you mean 'npred'?)"),
    ]
    for file, line, message in expected:
        assert any(p.startswith(f"{file}:{line}: ") and message in p for p in problems), \
            (file, line, message, problems)
    assert not (toy / "workspace").exists()


def test_a_broken_section_does_not_hide_the_other_files_problems(toy: Path) -> None:
    """A dataset naming a missing file leaves the records unchecked, but a bad module url, a
    bad metric parameter and a bad rank item elsewhere are still reported."""
    env, alg, job = toy / "testenv.yaml", toy / "algorithm.yaml", toy / "benchmarkingjob.yaml"
    edit(env, '"./data/test.jsonl"', '"./data/nope.jsonl"')
    edit(env, 'url: "./count.py"', 'url: "./count.py"\n      bogus: 1')
    edit(alg, 'url: "./basemodel.py"', 'url: "./basemodle.py"')
    edit(job, 'save_mode: "selected_and_all"', 'save_mode: "everything"')
    status, out, problems = validate(toy)
    assert status == 1 and "Traceback" not in out, out
    assert len(problems) == 4, problems
    assert any(p.startswith(f"{env}:{line_of(env, 'nope.jsonl')}: ") for p in problems), problems
    assert any("metric 'npred' does not accept parameter 'bogus'" in p for p in problems)
    assert any(p.startswith(f"{alg}:{line_of(alg, 'basemodle')}: ") and "was not found" in p
               for p in problems), problems
    assert any(p.startswith(f"benchmarkingjob.yaml:{line_of(job, 'save_mode')}: rank.save_mode")
               for p in problems), problems


def test_unknown_selected_metric_is_refused_with_a_suggestion(toy: Path) -> None:
    job = toy / "benchmarkingjob.yaml"
    edit(job, 'metrics: ["all"]', 'metrics: ["acc", "npredz"]')
    status, out, problems = validate(toy)
    assert status == 1, out
    assert problems == [
        f"benchmarkingjob.yaml:{line_of(job, 'npredz')}: rank.selected_dataitem.metrics name "
        "'npredz' is not produced by any testenv metric, so its column would stay empty "
        "(did you mean 'npred'?)"], out
    edit(job, '"npredz"', '"npred"')
    status, out, _ = validate(toy)
    assert status == 0 and "OK" in out, out


@pytest.fixture
def docstring_job(tmp_path: Path) -> Path:
    """The issue example copied into a new kind's folder, as a contributor starting a
    'docstring' kind would: its kind file and basemodel still say 'issue'."""
    root = tmp_path / "docstring"
    shutil.copytree(ISSUE_EXAMPLE, root, ignore=shutil.ignore_patterns("workspace"))
    (root / "testenv" / "kind.py").write_text(
        '"""The docstring kind, started as a copy of the issue kind."""\n'
        "from sedna.common.class_factory import ClassFactory\n\n"
        "from core.scenarios import get_kind\n"
        "from core.scenarios.base import TASK_KIND\n\n"
        "IssueKind = type(get_kind('issue'))\n\n\n"
        '@ClassFactory.register(TASK_KIND, alias="docstring")\n'
        "class DocstringKind(IssueKind):\n"
        '    name = "issue"\n')
    edit(root / "testenv" / "testenv.yaml", 'task_kind: "issue"',
         'task_kind: {name: "docstring", url: "./kind.py"}')
    return root


def test_a_kind_and_a_basemodel_copied_from_another_kind_are_refused(docstring_job: Path
                                                                      ) -> None:
    kind = docstring_job / "testenv" / "kind.py"
    env = docstring_job / "testenv" / "testenv.yaml"
    model = docstring_job / "testalgorithms" / "gen" / "basemodel.py"
    status, out, problems = validate(docstring_job)
    assert status == 1 and "Traceback" not in out, out
    assert len(problems) == 2, problems
    kind_line = line_of(env, "task_kind:")
    assert any(p.startswith(f"{env}:{kind_line}: ") and "task kind 'docstring'" in p
               and "whose name is 'issue'" in p for p in problems), problems
    assert any(p.startswith(f"{model}:{line_of(model, 'kind = ')}: BaseModel ")
               and "answers task kind 'issue'" in p and f"{env}:{kind_line} sets task_kind "
               "'docstring'" in p and "set kind = 'docstring' in BaseModel" in p
               for p in problems), problems
    edit(kind, 'name = "issue"', 'name = "docstring"')
    status, out, problems = validate(docstring_job)
    assert status == 1 and len(problems) == 1 and "answers task kind 'issue'" in problems[0]
    edit(model, 'kind = "issue"', 'kind = "docstring"')
    status, out, _ = validate(docstring_job)
    assert status == 0 and "OK" in out, out


def test_a_kind_registered_under_an_alias_that_is_not_its_name_is_refused(docstring_job: Path
                                                                         ) -> None:
    kind = docstring_job / "testenv" / "kind.py"
    edit(kind, 'name = "issue"', 'name = "docstring"')
    edit(docstring_job / "testalgorithms" / "gen" / "basemodel.py", 'kind = "issue"',
         'kind = "docstring"')
    kind.write_text(kind.read_text() + '\n\nClassFactory.register_cls(DocstringKind, TASK_KIND, '
                                       'alias="doc")\n')
    status, out, problems = validate(docstring_job)
    assert status == 1 and "Traceback" not in out, out
    assert problems == [
        f"{kind}:{line_of(kind, 'name = ')}: task kind class DocstringKind is registered as "
        "'doc' but its name is 'docstring'; a kind's name and alias must be the same (set "
        "name = 'doc' in DocstringKind, or register it with alias='docstring')"], problems


def _algorithm_line(job: Path, needle: str) -> tuple[Path, int]:
    alg = job.parent / "testalgorithms" / "gen" / "gen_algorithm.yaml"
    return alg, line_of(alg, needle)


def test_non_numeric_max_tokens_is_a_config_error_line(codegen_job, tmp_path: Path  # noqa: F811
                                                       ) -> None:
    job = codegen_job('        - generator:\n            values: ["canonical", "broken"]\n'
                      '        - max_tokens:\n            values: ["many"]\n')
    res = run_cli("validate", "-f", str(job), cwd=tmp_path)
    out = res.stdout + res.stderr
    assert res.returncode == 1 and "Traceback" not in out, out
    alg, line = _algorithm_line(job, "- max_tokens:")
    assert (f"error: {alg}:{line}: module basemodel 'gen': decoding hyperparameter max_tokens "
            "must be a whole number, got str 'many' (write e.g. 'max_tokens: 512')") in out, out
    assert "1 problem(s) found" in out  # one line for both generators' combinations


@pytest.mark.parametrize("item, message", [
    ('        - temperature:\n            values: ["hot"]\n',
     "decoding hyperparameter temperature must be a number, got str 'hot'"),
    ('        - stop:\n            values: [5]\n',
     "decoding hyperparameter stop must be a string or a list of strings, got 5"),
    ('        - instances:\n            values: ["two"]\n',
     "hyperparameter 'instances' of generator 'embedded' must be a whole number or null, "
     "got str 'two'"),
])
def test_wrong_types_of_decoding_and_generator_options_name_key_and_line(
        codegen_job, tmp_path: Path, item: str, message: str) -> None:  # noqa: F811
    job = codegen_job('        - generator:\n            values: ["embedded"]\n' + item)
    res = run_cli("validate", "-f", str(job), cwd=tmp_path)
    out = res.stdout + res.stderr
    alg, line = _algorithm_line(job, item.split(":")[0].strip())
    assert res.returncode == 1 and "Traceback" not in out, out
    assert f"error: {alg}:{line}: module basemodel 'gen': {message}" in out, out


def test_decoding_settings_refuse_wrong_types_as_config_errors() -> None:
    with pytest.raises(ConfigError, match="max_tokens must be a whole number, got str 'many'"
                       ) as info:
        DecodingSettings(max_tokens="many")  # type: ignore[arg-type]
    assert info.value.key == "max_tokens" and isinstance(info.value, ValueError)
    with pytest.raises(ConfigError, match="max_tokens must be >= 1, got 0"):
        DecodingSettings.from_mapping({"max_tokens": 0})
    assert DecodingSettings.from_mapping({"stop": "\n", "seed": None}).stop == ("\n",)


def test_a_plugin_check_that_crashes_is_a_problem_line_not_a_traceback(toy: Path) -> None:
    model = toy / "basemodel.py"
    model.write_text(model.read_text() + "\n    @classmethod\n"
                     "    def check_hyperparameters(cls, hyperparameters):\n"
                     "        return {}['missing']\n")
    toy_metric = toy / "count.py"
    toy_metric.write_text(toy_metric.read_text() + "\n\nnpred.columns = lambda: 1 / 0\n")
    status, out, problems = validate(toy)
    assert status == 1 and "Traceback" not in out, out
    assert len(problems) == 2, problems
    assert any(p.startswith(f"{model}:{line_of(model, 'missing')}: module basemodel 'toy': "
                            "check_hyperparameters raised KeyError: 'missing' (a bug in the "
                            "plugin basemodel.py") for p in problems), problems
    assert any(p.startswith(f"{toy_metric}:{line_of(toy_metric, '1 / 0')}: metric 'npred' "
                            "raised ZeroDivisionError") for p in problems), problems
    status, out, _ = validate(toy, "--debug")
    assert status == 1 and "Traceback" in out and "KeyError: 'missing'" in out


def test_problem_lines_have_the_run_errors_shape(toy: Path) -> None:
    """``<file>:<line>: <what> (<how to fix>)``, the shape of the error ``ianvs -f`` prints."""
    edit(toy / "benchmarkingjob.yaml", '{"npred": "ascend"}', '{"npreds": "ascend"}')
    edit(toy / "benchmarkingjob.yaml", 'method: "print_table"', 'method: "plot"')
    edit(toy / "algorithm.yaml", "values: [0, 1]", "vals: [0, 1]")
    _, _, problems = validate(toy)
    assert len(problems) == 3, problems
    assert all(re.match(r"\S+:\d+: .+ \(.+\)$", p) for p in problems), problems
