"""Arguments and action of ``ianvs dataset repo`` (wired into :mod:`core.cmd.benchmarking`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from core.common.errors import ConfigError, IanvsError
from core.common.yaml_loader import parse_yaml
from core.scenarios.repo.authoring import AuthoringOptions
from core.scenarios.repo.builder import BuildOptions, build
from core.scenarios.base import DatasetCommand

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo", required=True,
                        help="git work tree, bare repo or .bundle; an sdist (.tar.gz/.zip); or a folder")
    parser.add_argument("-o", "--output", required=True, type=Path, help="tasks file to write (JSON lines)")
    parser.add_argument("--rev", help="git revision to check out (default HEAD)")
    parser.add_argument("--requirement", action="append", default=[], metavar="PIN",
                        help="pinned dependency installed in the repository environment (repeatable)")
    parser.add_argument("--env", type=Path, help="use this existing virtualenv instead of creating one")
    parser.add_argument("--cache-dir", type=Path, help="where environments are cached")
    parser.add_argument("--tests", action="append", default=[], metavar="PATH",
                        help="test paths to run (default: pytest's discovery)")
    parser.add_argument("--deselect", action="append", default=[], metavar="NODEID",
                        help="tests never run (e.g. ones that need the network)")
    parser.add_argument("--max-tasks", type=int, default=200,
                        help="stop once this many tasks are kept (functions are blanked in file order; the "
                             "ones past the cap are never run)")
    parser.add_argument("--max-covering", type=int, default=40, help="covering tests run per function")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per blanked run")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--licence", help="SPDX id recorded in every task")
    parser.add_argument("--service", action="append", default=[], choices=["postgres"], dest="services",
                        help="start this service for the test runs (postgres: a private server, one fresh "
                             "database per run in DATABASE_URL/PG*; needs .ci/postgres-deps.sh)")
    parser.add_argument("--suite-timeout", type=float, default=1800.0, help="seconds for the baseline run")
    parser.add_argument("--no-sandbox-check", action="store_true",
                        help="do not run the kept tasks' references in the sandbox (tests that cannot pass there "
                             "then fail every sample of the job)")
    parser.add_argument("--fresh", action="store_true",
                        help="start over instead of resuming from <output>.progress of a killed build")
    decl = parser.add_argument_group(
        "the repository's own declarations",
        "By default the package is built with its PEP 517 backend (an sdist's PKG-INFO version is given to "
        "setuptools-scm/hatch-vcs), its runtime requirements and its declared test dependencies are "
        "installed (extras or dependency groups named test/tests/testing, else dev; else tox.ini [testenv] "
        "deps; else a requirements*test* file), and it is imported from where its modules are (src/ layouts). "
        "Every choice is logged; these flags override them.")
    decl.add_argument("--extra", action="append", dest="extras", metavar="NAME",
                      help="install this extra of the package as test dependencies (repeatable; replaces the "
                           "automatic choice)")
    decl.add_argument("--group", action="append", dest="groups", metavar="NAME",
                      help="install this PEP 735 (or Poetry) dependency group (repeatable; replaces the automatic choice)")
    decl.add_argument("--no-declared-deps", action="store_true",
                      help="install no declared test dependencies (only the runtime ones and --requirement)")
    decl.add_argument("--project-version", metavar="X.Y.Z",
                      help="version given to setuptools-scm/hatch-vcs when building (default: PKG-INFO's)")
    decl.add_argument("--no-build", action="store_true",
                      help="do not build the package: no runtime requirements from its metadata, import roots "
                           "guessed (src/ if it holds the package) unless --import-root")
    decl.add_argument("--import-root", action="append", dest="import_roots", metavar="DIR",
                      help="folder (relative to the repository) put on sys.path of every test run (repeatable)")
    decl.add_argument("--pytest-plugin", action="append", default=[], dest="keep_plugins", metavar="NAME",
                      help="keep this installed pytest plugin (entry-point name, as the log's 'pytest plugin' lines "
                           "give it) enabled although no selected test uses its fixtures, markers or ini options "
                           "(repeatable; the others are disabled in every run with -p no:NAME)")
    llm = parser.add_argument_group(
        "model-written problems and tests",
        "Ask a model (any configured generator) to write problem statements and extra unit tests for "
        "the kept tasks. A written test is kept only if it passes on the original function and fails on "
        "the blanked one, run in the sandbox like the job's samples; counts go to the report.")
    llm.add_argument("--llm-problems", action="store_true",
                     help="write a problem statement for every task whose function has no docstring")
    llm.add_argument("--llm-tests", action="store_true", help="write extra pytest tests for every task")
    llm.add_argument("--llm-generator", default="embedded", metavar="NAME",
                     help="generator: embedded (default, the offline GGUF model), openai, replay, ...")
    llm.add_argument("--llm-option", action="append", default=[], metavar="KEY=VALUE",
                     help="generator keyword argument (repeatable; VALUE read as YAML), e.g. "
                          "samples_path=written.jsonl for replay, base_url=... model=... for openai")
    llm.add_argument("--llm-test-samples", type=int, default=1, metavar="N",
                     help="test modules asked per task (default 1; N > 1 samples at temperature 0.8)")
    llm.add_argument("--llm-max-tokens", type=int, default=512, help="token budget of one test module")
    llm.add_argument("--llm-timeout", type=float, default=30.0, help="seconds per validation run of written tests")


def generator_options(pairs: list[str], generator: str) -> dict[str, object]:
    """``--llm-option KEY=VALUE`` pairs as keyword arguments, checked against the generator's
    constructor (before the build starts). Raises :class:`ConfigError` / ``RegistryError``."""
    from core.generation import generator_parameters  # noqa: PLC0415 - imports no model
    params = generator_parameters(generator)
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--llm-option {pair!r}: expected KEY=VALUE")
        if not params.takes_any and key not in params.accepted:
            raise ConfigError(f"--llm-option {key}: generator {generator!r} has no such option",
                              hint=f"known: {', '.join(params.accepted)}")
        out[key] = parse_yaml(value, f"--llm-option {key}") if value else ""
    missing = [r for r in params.required if r not in out]
    if missing:
        raise ConfigError(f"--llm-generator {generator}: missing --llm-option {missing[0]}=...")
    return out


def run(args: argparse.Namespace) -> int:
    authoring = None
    if args.llm_problems or args.llm_tests:
        authoring = AuthoringOptions(problems=args.llm_problems, tests=args.llm_tests, generator=args.llm_generator,
                                     generator_options=generator_options(args.llm_option, args.llm_generator),
                                     test_samples=args.llm_test_samples, max_tokens=args.llm_max_tokens,
                                     timeout=args.llm_timeout, workers=args.jobs)
    opts = BuildOptions(repo=args.repo, output=args.output, rev=args.rev, requirements=args.requirement,
                        env=args.env, cache_dir=args.cache_dir, test_paths=args.tests, deselect=args.deselect,
                        max_tasks=args.max_tasks, max_covering=args.max_covering, timeout=args.timeout,
                        jobs=args.jobs, licence=args.licence, services=args.services,
                        authoring=authoring, suite_timeout=args.suite_timeout, fresh=args.fresh,
                        extras=args.extras, groups=args.groups, declared_deps=not args.no_declared_deps,
                        project_version=args.project_version, build_package=not args.no_build,
                        import_roots=args.import_roots, sandbox_check=not args.no_sandbox_check,
                        keep_plugins=args.keep_plugins)
    if (args.extras or args.groups) and args.no_declared_deps:
        raise ConfigError("--no-declared-deps cannot be combined with --extra/--group")
    for flag, value in (("--max-tasks", args.max_tasks), ("--max-covering", args.max_covering), ("--jobs", args.jobs)):
        if value < 1:
            raise ConfigError(f"{flag} {value}: expected a positive number")
    if args.import_roots and any(Path(r).is_absolute() or ".." in Path(r).parts for r in args.import_roots):
        raise ConfigError("--import-root takes folders relative to the repository (no '..')")
    report = build(opts)
    sys.stdout.write(json.dumps(report.as_dict()) + "\n")
    sys.stdout.write(f"wrote {report.kept} tasks to {args.output}\n")
    return 0


COMMAND = DatasetCommand("reverse-engineer tasks from a repository and its own tests",
                         add_arguments, run, errors=(IanvsError, OSError, ValueError),
                         logging_options=True)
