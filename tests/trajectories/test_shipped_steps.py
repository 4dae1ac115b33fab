"""The shipped ELI5 steps are what the builder makes of the bundle (slow: about half a minute)."""
from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import pytest

from core.scenarios.trajectories.builder import TrajectoryOptions, build_trajectories
from tests.scenarios.conftest import BENCH

DATA = BENCH / "trajectories" / "data"
_REPO = Path(__file__).resolve().parents[2]
#: the project's shared data sits beside the checkout (``../shared``; a worktree is one deeper)
BUNDLE = next((p / "shared" / "data" / "repos" / "eli5.bundle" for p in (_REPO.parent, _REPO.parent.parent)
               if (p / "shared" / "data" / "repos" / "eli5.bundle").is_file()),
              _REPO.parent / "shared" / "data" / "repos" / "eli5.bundle")


def test_manifests_match_the_shipped_files() -> None:
    for name in ("eli5", "toolz"):
        manifest = json.loads((DATA / f"{name}-steps.jsonl.build.json").read_text())
        data = gzip.decompress((DATA / f"{name}-steps.jsonl.gz").read_bytes())
        assert hashlib.sha256(data).hexdigest() == manifest["output_sha256"]
        assert manifest["status"] == "complete" and sum(manifest["counts"].values()) == manifest["walked"]
        assert len(data.splitlines()) == manifest["counts"]["kept"]


@pytest.mark.slow
def test_eli5_steps_rebuild_from_the_recorded_range(tmp_path: Path) -> None:
    """Needs the project's shared data (the bundle); a test double would prove nothing here."""
    if not BUNDLE.is_file():
        pytest.skip(f"{BUNDLE} is not on this machine")
    out = tmp_path / "eli5-steps.jsonl"
    build_trajectories(TrajectoryOptions(repo=str(BUNDLE), output=out, show_progress=False,
                                         from_manifest=DATA / "eli5-steps.jsonl.build.json"))
    assert out.read_bytes() == gzip.decompress((DATA / "eli5-steps.jsonl.gz").read_bytes())
