"""The train/test split of HumanEval for routers fitted on the train split.

The rule is stated in one line and needs no randomness: task ``HumanEval/<i>`` is a train task
when ``i % 5`` is 1 or 3 (66 tasks), a test task otherwise (98 tasks). It cuts across the whole
set, so the two halves draw from the same kinds of problems. The cloud-edge example ships both
halves (``examples/.../cloudedge/data/humaneval_train.jsonl`` and ``humaneval_test.jsonl``).
``python -m core.scenarios.cloudedge.split <humaneval.jsonl> <out folder>`` writes them again
from the codegen example's full set, and a test checks that the shipped files are what it
writes.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

TRAIN_RESIDUES = (1, 3)
MODULUS = 5


def is_train(task_id: str) -> bool:
    """Whether ``HumanEval/<i>`` (any ``<prefix>/<i>``) is a train task."""
    number = task_id.rpartition("/")[2]
    if not number.isdigit():
        raise ValueError(f"task id {task_id!r} does not end in a number")
    return int(number) % MODULUS in TRAIN_RESIDUES


def split(records: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(train, test) records, each in the input's order."""
    train: list[dict[str, Any]] = []
    test: list[dict[str, Any]] = []
    for record in records:
        (train if is_train(str(record["task_id"])) else test).append(record)
    return train, test


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.scenarios.cloudedge.split",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("humaneval", type=Path, help="the full HumanEval set (codegen records)")
    parser.add_argument("out", type=Path, help="folder for humaneval_train/test.jsonl")
    args = parser.parse_args(argv)
    lines = args.humaneval.read_text(encoding="utf-8").splitlines()
    train, test = split(json.loads(line) for line in lines if line.strip())
    args.out.mkdir(parents=True, exist_ok=True)
    for name, part in (("humaneval_train.jsonl", train), ("humaneval_test.jsonl", test)):
        (args.out / name).write_text("".join(json.dumps(r) + "\n" for r in part),
                                     encoding="utf-8")
    print(f"{len(train)} train and {len(test)} test tasks written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
