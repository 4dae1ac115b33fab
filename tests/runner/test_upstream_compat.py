"""An upstream-style LLM job runs unchanged (ianvs-compat §12.5 and §13.4, §13.10).

The fixture is laid out like upstream's examples: started from the repository root, with
./examples/... paths relative to the current directory, a metadata.json test set, an absolute
non-existent train set, a basemodel without preprocess that calls logging.disable, and a
two-argument metric that prints.
"""
from __future__ import annotations

import csv
import shutil
from pathlib import Path

from tests.runner.conftest import FIXTURES, run_cli


def test_upstream_llm_example_runs_unchanged(tmp_path: Path) -> None:
    root = tmp_path / "ianvs"
    shutil.copytree(FIXTURES / "upstream_llm", root / "examples" / "upstream_llm")
    res = run_cli("-f", "./examples/upstream_llm/benchmarkingjob.yaml", "--no-progress",
                  cwd=root)
    assert res.returncode == 0, res.stderr
    assert "y_pred: ['2', '5', '6']" in res.stdout
    rows = list(csv.DictReader((root / "workspace/benchmarkingjob/rank/selected_rank.csv").open()))
    assert list(rows[0]) == ["rank", "algorithm", "acc", "paradigm", "basemodel", "time", "url"]
    assert rows[0]["acc"] == "0.6667" and rows[0]["basemodel"] == "gen"
    assert rows[0]["url"].startswith("./workspace/benchmarkingjob/comment_singletask_learning/")


def test_upstream_llm_example_validates(tmp_path: Path) -> None:
    """metadata.json test sets carry their own fields: x_field is not required of them."""
    root = tmp_path / "ianvs"
    shutil.copytree(FIXTURES / "upstream_llm", root / "examples" / "upstream_llm")
    res = run_cli("validate", "-f", "./examples/upstream_llm/benchmarkingjob.yaml", cwd=root)
    assert res.returncode == 0, res.stdout + res.stderr
