"""Copies of the example jobs in a temporary folder, and cuts of their test sets."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "examples" / "smart_coding" / "smart_coding_learning_bench"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


CUT = "suite_cut.jsonl"


def cut_test_index(root: Path, pick: Callable[[list[dict]], list[dict]], testenv: str = "testenv.yaml") -> list[dict]:
    """Point the job copy at ``root`` to ``pick(records)`` of its test set: the records are
    written to ``suite_cut.jsonl`` beside the shipped file (so paths relative to it still
    resolve) and the testenv's active ``test_index`` line names it. Returns the cut records.

    The suite runs the embedded-model jobs on such cuts: their configuration, generators,
    metrics and judge as shipped, on fewer records (the full-size jobs are timed by
    ``benchmarks/default_job.py``)."""
    env = root / "testenv" / testenv
    text = env.read_text()
    line = next(l for l in text.splitlines() if l.strip().startswith("test_index:"))
    index = Path(line.split('"')[1])
    shipped = (env.parent / index).resolve()
    records = pick(read_jsonl(shipped))
    assert records, f"the cut of {shipped} is empty"
    write_jsonl(shipped.parent / CUT, records)
    indent = line[:line.index("test_index:")]
    env.write_text(text.replace(line, f'{indent}test_index: "{(index.parent / CUT).as_posix()}"'))
    return records


@pytest.fixture
def scenario_job(tmp_path: Path):
    """``make(kind, generators=[...], test_index=None, judge=None)``: a copy of the example
    job with the generator list, test set and judge settings replaced (``judge``: the testenv
    text of the judge's metric entry, ``""`` for none; put where the shipped entry is, or before
    ``human_judgment`` where the example ships without a judge); returns its job YAML."""

    def make(kind: str, generators: list[str], test_index: str | Path | None = None,
             judge: str | None = None) -> Path:
        root = tmp_path / kind
        if not root.exists():
            shutil.copytree(BENCH / kind, root, ignore=shutil.ignore_patterns("workspace"))
        alg = root / "testalgorithms" / "gen" / "gen_algorithm.yaml"
        text = alg.read_text()
        start = text.index("        - generator:")
        end = text.index("        - max_tokens:")
        alg.write_text(text[:start] + "        - generator:\n            values: "
                       + json.dumps(generators) + "\n" + text[end:])
        env = root / "testenv" / "testenv.yaml"
        text = env.read_text()
        if test_index is not None:
            old = next(l for l in text.splitlines() if l.strip().startswith("test_index:"))
            text = text.replace(old, f'    test_index: "{test_index}"')
        if judge is not None:  # replaces the shipped judge entry, or goes before human_judgment
            end = text.index('    - name: "human_judgment"')
            start = text.find('    - name: "llm_judge"')
            text = text[:start if start >= 0 else end] + judge + text[end:]
        env.write_text(text)
        return root / "benchmarkingjob.yaml"

    return make


def swap_cloudedge_models(routing: Path, answers: Path) -> None:
    """In a copy of the cloud-edge example's ``testalgorithms/routing`` folder: the edge model
    replays the recorded ``answers`` (no log-probabilities asked of it) and the cloud model is
    the ``canonical`` generator, so every answer's correctness is known."""
    for alg in routing.glob("*.yaml"):
        text = alg.read_text()
        edge, cloud = text.split('type: "cloudmodel"')
        edge = edge.replace('generator: {values: ["embedded"]}',
                            f'generator: {{values: ["replay"]}}\n        - samples_path: {{values: ["{answers}"]}}')
        edge = edge.replace("        - logprobs: {values: [true]}\n", "")
        cloud = cloud.replace('generator: {values: ["embedded"]}', 'generator: {values: ["canonical"]}')
        cloud = cloud.replace('        - model: {values: ["qwen2.5-coder-1.5b"]}\n', "")
        alg.write_text(edge + 'type: "cloudmodel"' + cloud)


def stub_kind(kind_name: str) -> type:
    """A minimal :class:`~core.scenarios.base.TaskKind` subclass named ``kind_name`` (records
    pass as they are, no prompt, no reference, no leak view), for registry tests."""
    from typing import Any

    from core.scenarios.base import TaskKind

    class Stub(TaskKind):
        name = kind_name

        def validate(self, record: Any, source: str | None = None,
                     line: int | None = None) -> dict[str, Any]:
            return dict(record)

        def messages(self, record: Any) -> list[dict[str, str]]:
            return []

        def reference(self, record: Any) -> str:
            return ""

        def judge_view(self, record: Any) -> dict[str, str]:
            return {}

    return Stub


def rank_rows_by_algorithm(rank_csv: Path) -> dict[str, list[dict[str, str]]]:
    """The rows of a rank file, grouped by algorithm (several per algorithm in a sweep)."""
    import csv

    with open(rank_csv, newline="") as fh:
        rows = list(csv.DictReader(fh))
    out: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        out.setdefault(row["algorithm"], []).append(row)
    return out
