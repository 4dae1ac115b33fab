"""Config parsing: strict types, unknown keys reported, errors name file and line."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from core.cmd.job import load_job
from core.common.errors import ConfigError
from core.testcasecontroller.algorithm.config import load_algorithm


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_unknown_key_is_reported_with_line_and_suggestion(toy: Path, caplog) -> None:
    text = (toy / "benchmarkingjob.yaml").read_text().replace(
        '  workspace: "./workspace"\n', '  workspace: "./workspace"\n  worksapce: "x"\n')
    write(toy / "benchmarkingjob.yaml", text)
    with caplog.at_level(logging.WARNING):
        job = load_job(toy / "benchmarkingjob.yaml")
    assert any("benchmarkingjob.yaml:4: unknown key 'benchmarkingjob.worksapce'" in w
               and "did you mean 'workspace'" in w for w in job.warnings), job.warnings
    assert not hasattr(job, "worksapce")


def test_wrong_type_names_key_and_line(toy: Path) -> None:
    text = (toy / "benchmarkingjob.yaml").read_text().replace('name: "toyjob"', "name: [1]")
    write(toy / "benchmarkingjob.yaml", text)
    with pytest.raises(ConfigError) as err:
        load_job(toy / "benchmarkingjob.yaml")
    assert "benchmarkingjob.yaml:2: 'benchmarkingjob.name' must be str, got list" in str(err.value)


def test_missing_testenv_file(toy: Path) -> None:
    text = (toy / "benchmarkingjob.yaml").read_text().replace("./testenv.yaml", "./nope.yaml")
    write(toy / "benchmarkingjob.yaml", text)
    with pytest.raises(ConfigError, match=r"benchmarkingjob\.yaml:4: .*nope\.yaml.*was not found"):
        load_job(toy / "benchmarkingjob.yaml")


def test_relative_paths_prefer_cwd_then_yaml_folder(toy: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "cwd"
    (other / "data").mkdir(parents=True)
    (other / "data" / "test.jsonl").write_text('{"question": "9+9", "answer": "18"}\n')
    monkeypatch.chdir(other)
    job = load_job(toy / "benchmarkingjob.yaml")
    assert job.testenv.dataset.test.path == other / "data" / "test.jsonl"  # CWD wins
    assert job.testenv.dataset.train.path == toy / "data" / "train.jsonl"  # YAML fallback


def test_bool_is_not_an_int(toy: Path) -> None:
    text = (toy / "testenv.yaml").read_text() + "  incremental_rounds: true\n"
    write(toy / "testenv.yaml", text)
    with pytest.raises(ConfigError, match="incremental_rounds' must be int, got bool"):
        load_job(toy / "benchmarkingjob.yaml")


@pytest.mark.parametrize("snippet,message", [
    ("        - lr:\n            values: \"ab\"\n", "must be a list, got str"),
    ("        - lr:\n            vals: [1]\n", "needs a 'values' list"),
    ("        - lr: {values: [1]}\n          bs: {values: [2]}\n", "exactly one key"),
])
def test_hyperparameter_mistakes_are_errors(tmp_path: Path, snippet: str, message: str) -> None:
    (tmp_path / "m.py").write_text("")
    path = write(tmp_path / "alg.yaml", "algorithm:\n  paradigm_type: singletasklearning\n"
                 "  modules:\n    - type: basemodel\n      name: m\n      url: ./m.py\n"
                 "      hyperparameters:\n" + snippet)
    with pytest.raises(ConfigError, match=message) as err:
        load_algorithm(path)
    assert "alg.yaml:8" in str(err.value)


def test_grid_order_and_other_hyperparameters(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("")
    write(tmp_path / "other.yaml", "bs: 4\nepochs: 3\nlr: 0.5\n")
    path = write(tmp_path / "alg.yaml", """algorithm:
  paradigm_type: singletasklearning
  modules:
    - type: basemodel
      name: m
      url: ./m.py
      hyperparameters:
        - other_hyperparameters: {values: [./other.yaml]}
        - lr: {values: [0.1, 0.01]}
        - opt: {values: [sgd, adam]}
""")
    alg = load_algorithm(path)
    combos = [hp for c in alg.combinations() for _, hp in c.values()]
    assert combos == [
        {"bs": 4, "epochs": 3, "lr": 0.1, "opt": "sgd"},
        {"bs": 4, "epochs": 3, "lr": 0.1, "opt": "adam"},
        {"bs": 4, "epochs": 3, "lr": 0.01, "opt": "sgd"},
        {"bs": 4, "epochs": 3, "lr": 0.01, "opt": "adam"},
    ]
    assert [list(c) for c in combos][0] == ["bs", "epochs", "lr", "opt"]


def test_unknown_paradigm_and_module_type_suggest(tmp_path: Path) -> None:
    path = write(tmp_path / "alg.yaml", "algorithm:\n  paradigm_type: singletasklearnin\n"
                 "  modules: []\n")
    with pytest.raises(ConfigError, match="did you mean 'singletasklearning'"):
        load_algorithm(path)
    write(path, "algorithm:\n  paradigm_type: singletasklearning\n  modules:\n"
          "    - {type: basemodle, name: x}\n")
    with pytest.raises(ConfigError, match="alg.yaml:4.*did you mean 'basemodel'"):
        load_algorithm(path)


def test_duplicate_module_types_rejected(tmp_path: Path) -> None:
    path = write(tmp_path / "alg.yaml", "algorithm:\n  paradigm_type: singletasklearning\n"
                 "  modules:\n    - {type: basemodel, name: a}\n    - {type: basemodel, name: b}\n")
    with pytest.raises(ConfigError, match="appears twice"):
        load_algorithm(path)


def test_duplicate_yaml_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "alg.yaml", "algorithm:\n  paradigm_type: a\n  paradigm_type: b\n")
    with pytest.raises(ConfigError, match=r"alg\.yaml:3: malformed YAML.*duplicate key"):
        load_algorithm(path)


def test_rank_errors_become_config_errors(toy: Path) -> None:
    text = (toy / "benchmarkingjob.yaml").read_text().replace(
        'save_mode: "selected_and_all"', 'save_mode: "everything"')
    write(toy / "benchmarkingjob.yaml", text)
    with pytest.raises(ConfigError, match="save_mode"):
        load_job(toy / "benchmarkingjob.yaml")


@pytest.mark.parametrize("snippet, message", [
    ('  sandbox:\n    backend: "locl"\n', "unknown executor backend 'locl'; known backends: dask, docker, local (did you mean 'local'?)"),
    ('  sandbox:\n    landlok: true\n', "backend 'local' has no option 'landlok' (did you mean 'landlock'?)"),
    ('  sandbox:\n    min_isolation: "kernal"\n', "unknown isolation level 'kernal'"),
    ('  sandbox:\n    timeout: -1\n', "must be 'auto' or a positive number"),
    ('  sandbox:\n    memory_mb: 4\n', "must be a whole number of MB >= 16"),
    ('  sandbox:\n    timeout_floor: "x"\n', "must be a positive number"),
])
def test_sandbox_settings_are_checked_before_anything_runs(toy: Path, snippet: str, message: str) -> None:
    """A typo in ``sandbox:`` is one error naming file, line and fix at load time (validate and
    ``ianvs -f`` alike), not a failure of every test case after the model has generated."""
    env = toy / "testenv.yaml"
    write(env, env.read_text() + snippet)
    with pytest.raises(ConfigError) as err:
        load_job(toy / "benchmarkingjob.yaml")
    text = str(err.value)
    assert message in text and "testenv.yaml:" in text, text


def test_sandbox_options_of_the_backend_are_accepted(toy: Path) -> None:
    env = toy / "testenv.yaml"
    write(env, env.read_text() + '  sandbox:\n    backend: "local"\n    min_isolation: "kernel"\n'
                                 '    workers: 1\n    landlock: true\n    timeout: 2\n')
    job = load_job(toy / "benchmarkingjob.yaml")
    assert job.testenv.sandbox == {"backend": "local", "min_isolation": "kernel", "workers": 1,
                                   "landlock": True, "timeout": 2}
