"""benchmarkingjob.yaml: parse the job, build its test cases, run them, rank them.

Schema (top-level key ``benchmarkingjob``): ``name`` (str), ``workspace`` (str, default
``./workspace``, relative to the current directory as upstream), ``testenv`` (path),
``test_object: {type: algorithms, algorithms: [{name, url}, ...]}``, ``rank`` (see
:mod:`core.storymanager.rank.types`), ``simulation`` (accepted and ignored, with a warning).

The job ``name`` and every algorithm ``name`` become folders (``<workspace>/<job>/<algorithm>``)
and must be plain names (:mod:`core.common.names`); the job name may also be empty or absent, as
upstream allows (the job's files then go straight into the workspace).
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from core.common.config_base import Section, load_top_section, require_file
from core.common.errors import ConfigError
from core.common.names import inside_workspace
from core.storymanager.rank.types import RankConfig, RankConfigError
from core.testcasecontroller.algorithm.config import AlgorithmConfig, load_algorithm
from core.testenvmanager.testenv.testenv import TestEnvConfig, load_testenv

logger = logging.getLogger(__name__)

KNOWN_KEYS = ("name", "workspace", "testenv", "test_object", "rank", "simulation")
#: keys upstream examples put in the job file although they are read elsewhere (upstream ignores
#: them here too): where they take effect
MISPLACED = {"hard_example_mining_mode": "it takes effect in the testenv or the algorithm YAML "
                                         "(upstream ignores it here too); move it there"}


@dataclass(frozen=True)
class JobConfig:
    """A fully parsed and validated benchmarking job (all three YAML kinds)."""

    source: Path
    name: str
    workspace: str
    testenv: TestEnvConfig
    algorithms: tuple[tuple[str, AlgorithmConfig], ...]
    rank: RankConfig
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def job_dir(self) -> Path:
        return Path(os.path.join(self.workspace, self.name))


def load_job(path: Path) -> JobConfig:
    """Load the job YAML and everything it names.

    Raises:
        ConfigError: any problem in any of the files, naming file, line and key.
    """
    warnings: list[str] = []
    sec = load_top_section(path, "benchmarkingjob", KNOWN_KEYS, warnings, what="job file",
                           misplaced=MISPLACED)
    name = sec.name("name", "the job's folder under the workspace", "", allow_empty=True)
    workspace = sec.get("workspace", str, "./workspace")
    testenv = load_testenv(require_file(sec.get("testenv", str), path, "testenv file", sec,
                                        "testenv"), warnings)
    tobj = sec.section("test_object")
    tobj.report_unknown(("type", "algorithms"))
    ttype = tobj.get("type", str)
    if ttype != "algorithms":
        raise tobj.error("type", f"is {ttype!r}; the only test object type is 'algorithms'")
    algs = tobj.sections("algorithms")
    if not algs:
        raise tobj.error("algorithms", "is empty", hint="list at least one algorithm")
    algorithms = []
    for asec in algs:
        asec.report_unknown(("name", "url"))
        aname = asec.name("name", "the algorithm's folder under the job's folder")
        algorithms.append((aname, load_algorithm(
            require_file(asec.get("url", str), path, "algorithm file", asec, "url"), warnings)))
    if "simulation" in sec.data:
        msg = f"{path}:{sec.line('simulation')}: 'simulation' is not supported and is ignored"
        warnings.append(msg)
        logger.warning(msg)
    try:
        rank = RankConfig.from_mapping(sec.get("rank", dict, None, allow_none=True), str(path))
    except RankConfigError as exc:
        raise ConfigError(str(exc), line=sec.line("rank")) from exc
    job = JobConfig(path, name, workspace, testenv, tuple(algorithms), rank, tuple(warnings))
    inside_workspace(workspace, job.job_dir, "the job folder", path)
    return job
