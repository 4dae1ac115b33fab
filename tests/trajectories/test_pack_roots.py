"""``ianvs dataset pack-roots``: the task roots of a set in one git bundle. The roots are built by
the real implement-change builder on a history made here; after packing, the tasks point into
the bundle, each root reads back with its recorded content hash, and the reference change still
passes (and the parent still fails) in the sandbox through the bundled root."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from core.common.errors import ConfigError
from core.scenarios import get_kind
from core.scenarios.repo.scoring import source_root
from core.scenarios.repo.source import RepoSourceError, materialise
from core.scenarios.trajectories.builder import TrajectoryOptions, build_trajectories
from core.scenarios.trajectories.implement_change.builder import (ImplementOptions,
                                                                  build_implement_tasks)
from core.scenarios.trajectories.roots import pack_roots
from tests.runner.conftest import run_cli
from tests.scenarios.conftest import read_jsonl
from tests.trajectories.gold import gold_and_unchanged
from tests.trajectories.test_implement_builder import CALC, MUL, TESTS
from tests.trajectories.conftest import MIT, commit, git


def _built(tmp_path: Path) -> tuple[Path, Path]:
    """Two implement-change tasks (two roots) built from a history made here."""
    root = tmp_path / "proj"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, {"LICENSE": MIT, "calc.py": CALC, "tests/test_calc.py": TESTS},
           "Initial adder", "2021-01-01T12:00:00+00:00")
    mul = CALC + "\n\ndef mul(a, b):\n    return a * b\n"
    commit(root, {"calc.py": mul, "tests/test_calc.py": TESTS + MUL}, "Add mul",
           "2021-02-01T12:00:00+00:00")
    commit(root, {"calc.py": mul + "\n\ndef neg(a):\n    return -a\n",
                  "tests/test_calc.py": TESTS + MUL + "\n\ndef test_neg():\n"
                  "    assert calc.neg(2) == -2\n"}, "Add neg", "2021-03-01T12:00:00+00:00")
    steps = tmp_path / "steps.jsonl"
    build_trajectories(TrajectoryOptions(repo=str(root), output=steps, show_progress=False))
    out = tmp_path / "data" / "tasks.jsonl"
    build_implement_tasks(ImplementOptions(steps=steps, repo=str(root), output=out,
                                           sources_dir=tmp_path / "sources", timeout=120,
                                           show_progress=False))
    return out, tmp_path / "sources"


def test_packed_roots_read_back_and_grade_as_the_archives_did(tmp_path: Path) -> None:
    tasks_file, sources = _built(tmp_path)
    before = read_jsonl(tasks_file)
    assert len(before) == 2 and all(t["repo"]["source"].endswith(".tar.gz") for t in before)
    bundle = tmp_path / "data" / "proj-roots.bundle"
    report = pack_roots([tasks_file], sources, bundle)
    assert len(report.roots) == 2 and report.rewritten == {str(tasks_file): 2}
    after = read_jsonl(tasks_file)
    for old, new in zip(before, after):
        name = old["repo"]["source"].removesuffix(".tar.gz")
        assert new["repo"]["source"] == f"proj-roots.bundle#{name}"
        assert {**new, "repo": {**new["repo"], "source": old["repo"]["source"]}} == old
        got = materialise(f"{bundle}#{name}", tmp_path / f"check-{name}")
        assert got.content_hash == old["repo"]["content_hash"] and got.root.name == name
    # the archives are no longer needed: grading reads the bundle
    shutil.rmtree(sources)
    kind = get_kind("implement_change")
    read = list(kind.read(tasks_file))
    results = gold_and_unchanged(read, kind.reference, tmp_path / "data")
    for task in read:
        form, ref, parent = results[task["id"]]
        assert form == "files" and ref.outcome == "passed", ref.detail[-500:]
        assert parent.outcome != "passed"
    # packing again (from the bundle itself) is a no-op on the records
    again = pack_roots([tasks_file], tmp_path / "data", tmp_path / "data" / "proj-roots.bundle")
    assert len(again.roots) == 2 and read_jsonl(tasks_file) == after


def test_a_root_that_is_not_what_the_task_was_built_from_is_refused(tmp_path: Path) -> None:
    tasks_file, sources = _built(tmp_path)
    tasks = read_jsonl(tasks_file)
    tasks[0]["repo"]["content_hash"] = "0" * 64
    tasks_file.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    with pytest.raises(ConfigError, match="content hash"):
        pack_roots([tasks_file], sources, tmp_path / "r.bundle")
    assert not (tmp_path / "r.bundle").exists()
    assert read_jsonl(tasks_file) == tasks  # nothing rewritten


def test_errors_name_what_is_missing(tmp_path: Path) -> None:
    tasks_file, sources = _built(tmp_path)
    with pytest.raises(ConfigError, match="no root archive"):
        pack_roots([tasks_file], tmp_path / "elsewhere", tmp_path / "r.bundle")
    bundle = tmp_path / "r.bundle"
    pack_roots([tasks_file], sources, bundle)
    with pytest.raises(RepoSourceError, match="has no root 'nope'"):
        materialise(f"{bundle}#nope", tmp_path / "x")
    with pytest.raises(RepoSourceError, match="no such file"):
        materialise(f"{tmp_path / 'missing.bundle'}#nope", tmp_path / "y")
    task = read_jsonl(tasks_file)[0]
    assert source_root(tmp_path / task["repo"]["source"], task["repo"]["content_hash"]).is_dir()


def test_cli_packs_and_refuses_a_bad_output_name(tmp_path: Path) -> None:
    tasks_file, sources = _built(tmp_path)
    res = run_cli("dataset", "pack-roots", str(tasks_file), "--sources-dir", str(sources),
                  "-o", str(tmp_path / "roots.tar"), cwd=tmp_path)
    assert res.returncode != 0 and "ends in .bundle" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("dataset", "pack-roots", str(tasks_file), "--sources-dir", str(sources),
                  "-o", str(tmp_path / "out" / "roots.bundle"), cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "packed 2 roots" in res.stdout and (tmp_path / "out" / "roots.bundle").is_file()
