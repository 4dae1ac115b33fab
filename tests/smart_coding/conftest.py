"""Helpers to build variants of the codegen example job in a temporary folder."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "smart_coding" / "smart_coding_learning_bench" / "codegen"
FULL = EXAMPLE / "data" / "humaneval.jsonl"


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def codegen_job(tmp_path: Path):
    """Copy the example; ``make(hyperparameters=..., test_index=..., metrics=...)`` edits it."""
    root = tmp_path / "codegen"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns("workspace"))

    def make(hyperparameters: str, test_index: str | Path = "../data/humaneval_subset.jsonl",
             metrics: str | None = None) -> Path:
        alg = root / "testalgorithms" / "gen" / "gen_algorithm.yaml"
        text = alg.read_text()
        head = text[: text.index("      hyperparameters:")]
        alg.write_text(head + "      hyperparameters:\n" + hyperparameters)
        env = root / "testenv" / "testenv.yaml"
        text = env.read_text().replace('test_index: "../data/humaneval_subset.jsonl"',
                                       f'test_index: "{test_index}"')
        if metrics is not None:
            start, end = text.index("  metrics:"), text.index("  sandbox:")
            text = text[:start] + metrics + text[end:]
        env.write_text(text)
        return root / "benchmarkingjob.yaml"

    return make
