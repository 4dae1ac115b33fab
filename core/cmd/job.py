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
from core.common.errors import ConfigError, IanvsError, Problems
from core.common.names import inside_workspace
from core.storymanager.rank.types import RankConfig
from core.testcasecontroller.algorithm.config import AlgorithmConfig, load_algorithm
from core.testenvmanager.testenv.testenv import TestEnvConfig, TestEnvRead, read_testenv

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


def check_task_kind(testenv: TestEnvConfig | TestEnvRead) -> None:
    """The kind the testenv names must be registered (built in, or by its ``url`` file).

    Raises:
        ConfigError: naming the testenv file, the ``task_kind`` line and the known kinds.
    """
    if not testenv.task_kind:
        return
    from core.scenarios import get_kind

    try:
        get_kind(testenv.task_kind)
    except IanvsError as exc:
        raise ConfigError(f"'testenv.task_kind' {exc.message}", source=testenv.source,
                          line=testenv.task_kind_line, hint=exc.hint) from None


@dataclass
class JobRead:
    """What :func:`read_job` could read of a job and the files it names, problems or not
    (``ianvs validate`` checks the rest with it).

    Attributes:
        name / workspace: None when the key has a problem (already reported).
        testenv: None when the testenv file could not be named or read at all.
        algorithms: the algorithm files that could be read (each with what it holds).
        rank: None when the ``rank`` section is not a mapping.
        kind_ok: False when the testenv's task kind is not registered (reported).
    """

    source: Path
    name: str | None = None
    workspace: str | None = None
    testenv: TestEnvRead | None = None
    algorithms: list[tuple[str, AlgorithmConfig]] = field(default_factory=list)
    rank: RankConfig | None = None
    warnings: list[str] = field(default_factory=list)
    kind_ok: bool = True

    def job(self) -> JobConfig | None:
        """The job as a run sees it (parts with problems left out or defaulted); None
        without a testenv configuration."""
        if self.testenv is None or self.testenv.config is None:
            return None
        return JobConfig(self.source, self.name or "", self.workspace or "./workspace",
                         self.testenv.config, tuple(self.algorithms), self.rank or RankConfig(),
                         tuple(self.warnings))


def load_job(path: Path) -> JobConfig:
    """Load the job YAML and everything it names.

    Raises:
        ConfigError: any problem in any of the files, naming file, line and key.
    """
    job = read_job(path, Problems()).job()
    if job is None:  # a raising Problems() never lets a part fail silently
        raise ConfigError("the job could not be read", source=path)
    return job


def read_job(path: Path, problems: Problems) -> JobRead:
    """Read the job YAML and everything it names, part by part: with a collecting
    ``problems`` (``ianvs validate``) every problem is added to it (the testenv file, each
    algorithm file, the rank section, each in its own parts) and the result holds what is
    left; otherwise the first one raises.

    Raises:
        ConfigError: the job file cannot be read at all (missing, malformed YAML, no
            ``benchmarkingjob:``).
    """
    read = JobRead(path)
    warnings = read.warnings
    sec = load_top_section(path, "benchmarkingjob", KNOWN_KEYS, warnings, what="job file",
                           misplaced=MISPLACED)
    with problems.part():
        read.name = sec.name("name", "the job's folder under the workspace", "",
                             allow_empty=True)
    with problems.part():
        read.workspace = sec.get("workspace", str, "./workspace")
    with problems.part():
        read.testenv = read_testenv(require_file(sec.get("testenv", str), path, "testenv file",
                                                 sec, "testenv"), warnings, problems)
    if read.testenv is not None and read.testenv.task_kind_ok:
        read.kind_ok = False
        with problems.part():
            check_task_kind(read.testenv)
            read.kind_ok = True
    algs: list[Section] = []
    with problems.part():
        tobj = sec.section("test_object")
        tobj.report_unknown(("type", "algorithms"))
        with problems.part():
            ttype = tobj.get("type", str)
            if ttype != "algorithms":
                raise tobj.error("type", f"is {ttype!r}; the only test object type is "
                                 "'algorithms'")
        algs = tobj.sections("algorithms")
        if not algs:
            raise tobj.error("algorithms", "is empty", hint="list at least one algorithm")
    for asec in algs:
        with problems.part():
            asec.report_unknown(("name", "url"))
            aname = asec.name("name", "the algorithm's folder under the job's folder")
            read.algorithms.append((aname, load_algorithm(
                require_file(asec.get("url", str), path, "algorithm file", asec, "url"),
                warnings, problems)))
    if "simulation" in sec.data:
        msg = f"{path}:{sec.line('simulation')}: 'simulation' is not supported and is ignored"
        warnings.append(msg)
        logger.warning(msg)
    with problems.part():
        read.rank = RankConfig.from_mapping(sec.get("rank", dict, None, allow_none=True),
                                            str(path), problems)
    if read.name is not None and read.workspace is not None:
        with problems.part():
            inside_workspace(read.workspace, Path(os.path.join(read.workspace, read.name)),
                             "the job folder", path)
    return read
