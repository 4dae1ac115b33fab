"""What a repository declares about itself: its package, where it is imported from, its test dependencies.

The builder must run a repository's tests the way its own CI would, without installing the package
under test into the environment (samples read the environment: it would hold the original of every
function, see :mod:`.env`). So :func:`inspect_project`:

1. builds a wheel of a *copy* of the tree through its PEP 517 backend (``pip wheel --no-deps``:
   setuptools, hatchling, flit, poetry-core, ... whatever ``[build-system]`` names; a tree with
   only ``setup.py`` uses setuptools). An sdist has no VCS metadata, so its ``PKG-INFO`` version is
   given to setuptools-scm/hatch-vcs as ``SETUPTOOLS_SCM_PRETEND_VERSION`` (``--project-version``
   overrides; a git checkout gets its version from git as usual);
2. reads from the wheel the distribution's name, version, runtime requirements, extras, entry
   points and top-level modules, and finds where each top-level module lives in the tree: the
   *import roots* (``src`` for a ``src/`` layout, ``.`` for a flat one) put on ``sys.path`` of
   every test run, in the builder and in the job;
3. chooses the declared test dependencies (:func:`choose_test_dependencies`): extras and PEP 735
   dependency groups named ``test``/``tests``/``testing`` (``dev`` only when none of those
   exists), Poetry groups of those names, then ``tox.ini``'s ``[testenv]`` ``extras``/``deps``,
   then ``requirements*test*``/``test*requirements*`` files. Each choice is logged; ``--extra``,
   ``--group`` and ``--no-declared-deps`` override them.

:func:`resolve_requirements` turns the runtime requirements, the chosen test requirements and the
user's ``--requirement`` pins into exact pins with pip's resolver (``pip install --dry-run
--report``): the tasks record them, so a job rebuilds the same environment without the source.
Declared requirements on pytest, pytest-cov and coverage are replaced by the harness's pins
(:data:`.env.TEST_TOOLS`). Network: building and resolving need the package index (once).
"""

from __future__ import annotations

import configparser
import email.parser
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement

from core.common.errors import IanvsError
from core.common.lifetime import die_with_parent

__all__ = ["ProjectFacts", "DepsChoice", "inspect_project", "choose_test_dependencies", "resolve_requirements",
           "normalise", "ProjectError", "sdist_version", "declares_entry_points", "entry_points_stub"]

LOG = logging.getLogger(__name__)

#: group/extra names taken as test dependencies, in this order of preference
TEST_NAMES = ("test", "tests", "testing")
#: taken only when no group or extra has a :data:`TEST_NAMES` name
DEV_NAMES = ("dev", "develop", "development")
#: distributions the harness pins itself (declared versions of these are replaced)
HARNESS_TOOLS = {"pytest", "pytest-cov", "coverage"}
_OUTPUT_TAIL = 1500


class ProjectError(IanvsError):
    """The repository's package could not be built or its requirements could not be resolved."""


def normalise(name: str) -> str:
    """PEP 503 normalised name (``Foo_Bar.baz`` -> ``foo-bar-baz``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class DepsChoice:
    """One set of declared dependencies found in the tree: ``kind`` (``extra``,
    ``dependency-group``, ``poetry-group``, ``tox``, ``requirements-file``), its ``name`` and
    where it was declared (``origin``), and its requirement strings (extras: empty, pip resolves
    them from the wheel)."""
    kind: str
    name: str
    origin: str
    requirements: tuple[str, ...] = ()

    def describe(self) -> str:
        return f"{self.kind} {self.name!r} ({self.origin})"


@dataclass
class ProjectFacts:
    """What :func:`inspect_project` found (all of it logged; recorded in tasks via ``env``)."""
    name: str
    version: str
    backend: str
    import_roots: list[str]
    modules: list[str]
    requires: list[str]
    extras: list[str]
    entry_points: str = ""
    chosen: list[DepsChoice] = field(default_factory=list)
    missing_modules: list[str] = field(default_factory=list)

    def stub(self) -> dict[str, str]:
        """The metadata-only distribution written into the environment (see :mod:`.env`)."""
        return {"name": self.name, "version": self.version, "entry_points": self.entry_points}


def sdist_version(root: Path) -> str | None:
    """``Version:`` of the tree's ``PKG-INFO`` (present in an sdist), else ``None``."""
    info = root / "PKG-INFO"
    if not info.is_file():
        return None
    return email.parser.Parser().parsestr(info.read_text(errors="replace")).get("Version") or None


def _pyproject(root: Path) -> dict:
    path = root / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ProjectError(f"pyproject.toml is not valid TOML: {exc}", source=path) from None


def build_backend(root: Path) -> str:
    """The PEP 517 backend the tree names (``setuptools.build_meta:__legacy__`` when none)."""
    return str(_pyproject(root).get("build-system", {}).get("build-backend") or "setuptools.build_meta:__legacy__")


def _tail(text: str) -> str:
    return text.strip()[-_OUTPUT_TAIL:]


def build_wheel(root: Path, work: Path, version: str | None) -> Path:
    """A wheel of a copy of ``root`` (the tree itself stays untouched) built by its backend."""
    copy = work / "build-src"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(root, copy, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = work / "wheel"
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "TMPDIR": str(work)}
    if version:
        env["SETUPTOOLS_SCM_PRETEND_VERSION"] = version
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "--disable-pip-version-check",
           "-w", str(out), str(copy)]
    LOG.info("building the package with its backend %s%s", build_backend(root),
             f" (version {version} from PKG-INFO/--project-version)" if version else "")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=work,
                          preexec_fn=die_with_parent(signal.SIGKILL))
    wheels = sorted(out.glob("*.whl")) if out.is_dir() else []
    if proc.returncode != 0 or not wheels:
        hint = ("an sdist or a shallow copy without git metadata needs --project-version X.Y.Z"
                if "setuptools-scm" in proc.stderr or "setuptools_scm" in proc.stderr or "vcs" in proc.stderr
                else "fix the build, or give --no-build with --import-root and --requirement pins")
        raise ProjectError(f"building the package with {build_backend(root)} failed: {_tail(proc.stderr or proc.stdout)}",
                           hint=hint)
    return wheels[0]


def declares_entry_points(root: Path) -> bool:
    """Whether the tree may declare entry points (plugins, backends, scripts): ``[project]``'s
    ``entry-points``, ``scripts`` or ``gui-scripts`` (given or ``dynamic``) in ``pyproject.toml``,
    ``[options.entry_points]`` in ``setup.cfg``, or ``entry_points`` anywhere in ``setup.py``.
    A cheap look at the files; ``False`` means the built wheel would have none."""
    project = _pyproject(root).get("project", {})
    if isinstance(project, dict) and ({"entry-points", "scripts", "gui-scripts"} & (
            set(project) | set(project.get("dynamic") or []))):
        return True
    cfg = root / "setup.cfg"
    if cfg.is_file() and "[options.entry_points]" in cfg.read_text(errors="replace"):
        return True
    setup = root / "setup.py"
    return setup.is_file() and "entry_points" in setup.read_text(errors="replace")


def entry_points_stub(root: Path, work: Path) -> dict[str, str] | None:
    """The metadata stub (:func:`core.scenarios.repo.env.write_metadata_stub`: name, version,
    ``entry_points.txt``) of the package in ``root`` when it declares entry points, else ``None``.

    A tree run from source is not installed, so what it registers through its own entry points
    (a test backend its ``conftest.py`` looks up, a pytest plugin of its own) is missing unless
    the environment carries this stub. :func:`declares_entry_points` decides cheaply whether to
    build; otherwise the package is built as :func:`inspect_project` builds it (a copy of the
    tree, its own backend, ``work`` as scratch) and read from the wheel, so setup.py-era
    declarations count too. Raises :class:`ProjectError` when the build fails."""
    if not declares_entry_points(root):
        return None
    meta, eps, _names = _wheel_metadata(build_wheel(root, work, sdist_version(root)))
    if not eps.strip():
        return None
    return {"name": str(meta["Name"]), "version": str(meta["Version"]), "entry_points": eps}


def _top_modules(names: list[str]) -> list[str]:
    tops: set[str] = set()
    for name in names:
        first = name.split("/", 1)[0]
        if first.endswith((".dist-info", ".data")) or first.endswith(".pth"):
            continue
        if "/" in name:
            tops.add(first)
        elif first.endswith(".py"):
            tops.add(first[:-3])
        elif re.match(r"^[A-Za-z_]\w*\.(cpython|abi3).*\.so$", first):
            tops.add(first.split(".", 1)[0])
    return sorted(t for t in tops if t.isidentifier())


_SKIP_DIRS = {".git", ".tox", ".nox", ".venv", "venv", "build", "dist", "node_modules", "__pycache__"}


def find_import_roots(root: Path, modules: list[str], wheel_files: list[str] | None = None) -> tuple[list[str], list[str]]:
    """``(roots, missing)``: for each top-level module, the shallowest directory ``D`` of the tree
    (relative, ``.`` for the top) where the module's files are: ``D/<module>.py``, or a folder
    ``D/<module>/`` holding the first three of the module's ``.py`` files in the wheel
    (``wheel_files``; without them, any ``.py`` file), so a ``tests/<module>/`` folder is not
    mistaken for the package. Modules found nowhere (generated at build time) are ``missing``."""
    roots: list[str] = []
    missing: list[str] = []
    for mod in modules:
        inside = sorted(f for f in (wheel_files or []) if f.startswith(mod + "/") and f.endswith(".py"))[:3]
        best: Path | None = None
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.endswith(".egg-info"))
            here = Path(dirpath)
            if best is not None and len(here.relative_to(root).parts) >= len(best.relative_to(root).parts):
                continue
            if f"{mod}.py" in filenames:
                best = here
            elif mod in dirnames and (all((here / f).is_file() for f in inside) if inside
                                      else any((here / mod).rglob("*.py"))):
                best = here
        if best is None:
            missing.append(mod)
            continue
        rel = str(best.relative_to(root)) or "."
        if rel not in roots:
            roots.append(rel)
    return roots, missing


def _wheel_metadata(wheel: Path) -> tuple[email.message.Message, str, list[str]]:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        info = next(n.split("/", 1)[0] for n in names if n.split("/", 1)[0].endswith(".dist-info"))
        meta = email.parser.Parser().parsestr(zf.read(f"{info}/METADATA").decode())
        eps = zf.read(f"{info}/entry_points.txt").decode() if f"{info}/entry_points.txt" in names else ""
    return meta, eps, names


def _req_list(values: object) -> list[str]:
    return [str(v) for v in values] if isinstance(values, list) else []


def _dependency_group(groups: dict, name: str, seen: tuple[str, ...] = ()) -> list[str]:
    """PEP 735 group ``name`` with ``{include-group = ...}`` entries expanded."""
    out: list[str] = []
    for item in groups.get(name, []):
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and "include-group" in item and item["include-group"] not in seen:
            out += _dependency_group(groups, item["include-group"], (*seen, name))
    return out


def _poetry_requirement(name: str, spec: object) -> str | None:
    """A Poetry dependency entry as a PEP 508 requirement (``^``/``~`` constraints translated)."""
    version = spec.get("version", "*") if isinstance(spec, dict) else spec
    if not isinstance(version, str) or name.lower() == "python":
        return None
    parts = []
    for clause in version.split(","):
        clause = clause.strip()
        if clause in ("", "*"):
            continue
        if clause[0] in "^~" and not clause.startswith("~="):
            nums = [int(x) for x in re.findall(r"\d+", clause)[:3]] or [0]
            if clause[0] == "^":
                lead = next((i for i, n in enumerate(nums) if n), len(nums) - 1)
                upper = [*nums[:lead], nums[lead] + 1]
            else:
                upper = [nums[0] + 1] if len(nums) == 1 else [nums[0], nums[1] + 1]
            parts += [f">={'.'.join(map(str, nums))}", f"<{'.'.join(map(str, upper))}"]
        elif clause[0].isdigit():
            parts.append(f"=={clause}")
        else:
            parts.append(clause)
    return name + ",".join(parts)


def _requirements_file(path: Path, root: Path, seen: set[Path]) -> list[str]:
    if path in seen or not path.is_file():
        return []
    seen.add(path)
    out: list[str] = []
    for raw in path.read_text(errors="replace").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(("-r ", "--requirement ", "-c ", "--constraint ")):
            if line.startswith(("-r", "--requirement")):
                out += _requirements_file((path.parent / line.split(None, 1)[1]).resolve(), root, seen)
            continue
        if line.startswith(("-", ".")) or "://" in line or line.startswith("/"):
            continue
        out.append(line)
    return out


def _by_name(names: list[str], prefer: tuple[str, ...]) -> list[str]:
    return [n for n in names if normalise(n) in prefer]


def choose_test_dependencies(root: Path, extras: list[str], want_extras: list[str] | None = None,
                            want_groups: list[str] | None = None) -> list[DepsChoice]:
    """The declared test dependencies to install (see the module docstring for the order).
    ``want_extras``/``want_groups`` (``--extra``/``--group``) replace the automatic choice; a
    name that the tree does not declare is a :class:`ProjectError` listing the declared ones."""
    py = _pyproject(root)
    groups = py.get("dependency-groups", {}) if isinstance(py.get("dependency-groups"), dict) else {}
    poetry = py.get("tool", {}).get("poetry", {}).get("group", {})
    poetry = poetry if isinstance(poetry, dict) else {}
    if want_extras is not None or want_groups is not None:
        out = []
        for name in want_extras or []:
            if not any(normalise(name) == normalise(e) for e in extras):
                raise ProjectError(f"--extra {name}: the package declares no such extra",
                                   hint=f"declared extras: {', '.join(extras) or 'none'}")
            out.append(DepsChoice("extra", name, "package metadata"))
        for name in want_groups or []:
            if name in groups:
                out.append(DepsChoice("dependency-group", name, "pyproject.toml [dependency-groups]",
                                      tuple(_dependency_group(groups, name))))
            elif name in poetry:
                deps = poetry[name].get("dependencies", {})
                out.append(DepsChoice("poetry-group", name, "pyproject.toml [tool.poetry.group]",
                                      tuple(r for k, v in deps.items() if (r := _poetry_requirement(k, v)))))
            else:
                raise ProjectError(f"--group {name}: pyproject.toml declares no such dependency group",
                                   hint=f"declared groups: {', '.join([*groups, *poetry]) or 'none'}")
        return out
    for names in (TEST_NAMES, DEV_NAMES):
        found = [DepsChoice("extra", e, "package metadata") for e in _by_name(extras, names)]
        found += [DepsChoice("dependency-group", g, "pyproject.toml [dependency-groups]",
                             tuple(_dependency_group(groups, g))) for g in _by_name(list(groups), names)]
        for g in _by_name(list(poetry), names):
            deps = poetry[g].get("dependencies", {}) if isinstance(poetry[g], dict) else {}
            found.append(DepsChoice("poetry-group", g, "pyproject.toml [tool.poetry.group]",
                                    tuple(r for k, v in deps.items() if (r := _poetry_requirement(k, v)))))
        if names is TEST_NAMES:  # legacy Poetry dev-dependencies count as a dev group
            legacy = py.get("tool", {}).get("poetry", {}).get("dev-dependencies")
        else:
            legacy = None
        if found:
            return found
        if isinstance(legacy, dict) and legacy:
            return [DepsChoice("poetry-group", "dev-dependencies", "pyproject.toml [tool.poetry.dev-dependencies]",
                               tuple(r for k, v in legacy.items() if (r := _poetry_requirement(k, v))))]
    tox = root / "tox.ini"
    if tox.is_file():
        cfg = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            cfg.read(tox)
        except configparser.Error:
            cfg = configparser.ConfigParser()
        if cfg.has_section("testenv"):
            out = [DepsChoice("extra", e.strip(), "tox.ini [testenv] extras")
                   for e in cfg.get("testenv", "extras", fallback="").split()
                   if any(normalise(e.strip()) == normalise(x) for x in extras)]
            tox_deps: list[str] = []
            for line in cfg.get("testenv", "deps", fallback="").splitlines():
                line = line.strip()
                if not line or "{" in line or line.startswith("#"):
                    continue
                if line.startswith("-r"):
                    tox_deps += _requirements_file((root / line[2:].strip()).resolve(), root, set())
                elif not line.startswith(("-", ".")):
                    tox_deps.append(line)
            if tox_deps:
                out.append(DepsChoice("tox", "testenv", "tox.ini [testenv] deps", tuple(tox_deps)))
            if out:
                return out
    files = sorted({p for pattern in ("*requirements*test*.txt", "test*requirements*.txt", "requirements/test*.txt",
                                      "requirements/*test*.txt", "requirements*dev*.txt")
                    for p in root.glob(pattern)})
    return [DepsChoice("requirements-file", p.name, str(p.relative_to(root)),
                       tuple(_requirements_file(p, root, set()))) for p in files[:1]]


def inspect_project(root: Path, work: Path, version: str | None = None, want_extras: list[str] | None = None,
                    want_groups: list[str] | None = None, declared_deps: bool = True) -> ProjectFacts:
    """Build ``root``'s package and read what it declares (module docstring). ``work`` is a
    scratch directory the caller owns and removes."""
    version = version or sdist_version(root)
    wheel = build_wheel(root, work, version)
    meta, eps, names = _wheel_metadata(wheel)
    modules = _top_modules(names)
    roots, missing = find_import_roots(root, modules, names)
    extras = list(dict.fromkeys(meta.get_all("Provides-Extra") or []))
    requires = []
    for line in meta.get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is None or not re.search(r"\bextra\b", str(req.marker)):
            requires.append(line)
    chosen = choose_test_dependencies(root, extras, want_extras, want_groups) if declared_deps else []
    every = meta.get_all("Requires-Dist") or []
    chosen = [DepsChoice(c.kind, c.name, c.origin, tuple(_extra_requirements(every, c.name)))
              if c.kind == "extra" else c for c in chosen]
    facts = ProjectFacts(name=str(meta["Name"]), version=str(meta["Version"]), backend=build_backend(root),
                         import_roots=roots or ["."], modules=modules, requires=requires, extras=extras,
                         entry_points=eps, chosen=chosen, missing_modules=missing)
    LOG.info("package %s %s (backend %s): modules %s imported from %s", facts.name, facts.version, facts.backend,
             ", ".join(modules) or "none", ", ".join(facts.import_roots))
    if missing:
        LOG.warning("modules %s are in the built wheel but not in the tree (generated at build time?): "
                    "tests that import them will fail", ", ".join(missing))
    if not declared_deps:
        LOG.info("test dependencies: none taken from the tree (--no-declared-deps)")
    elif chosen:
        for c in chosen:
            LOG.info("test dependencies: %s%s", c.describe(),
                     f": {', '.join(c.requirements)}" if c.requirements else "")
    else:
        LOG.info("test dependencies: the tree declares none (extras %s; no test dependency group, tox.ini "
                 "deps or requirements*test* file); add them with --requirement", ", ".join(extras) or "none")
    return facts


def _extra_requirements(wheel_meta_requires: list[str], extra: str) -> list[str]:
    out = []
    for line in wheel_meta_requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None and req.marker.evaluate({"extra": normalise(extra)}) \
                and not Marker(str(req.marker)).evaluate({"extra": "__none__"}):
            req.marker = None
            out.append(str(req))
    return out


def resolve_requirements(requirements: list[str], test_tools: list[str], work: Path,
                         exclude: str | None = None) -> list[str]:
    """Exact pins (``name==version``, sorted) of ``requirements`` and everything they need, as
    pip resolves them together with ``test_tools`` (the :data:`HARNESS_TOOLS` themselves are
    left out: :func:`.env.ensure_env` adds their pins; so is the distribution ``exclude``, the
    package under test, should a dependency need it). Raises :class:`ProjectError` with pip's
    message when they cannot be resolved."""
    keep = []
    for line in requirements:
        try:
            name = normalise(Requirement(line).name)
        except InvalidRequirement:
            raise ProjectError(f"requirement {line!r} is not a PEP 508 requirement",
                               hint="fix it, or leave it out with --no-declared-deps and give --requirement pins") from None
        if name in HARNESS_TOOLS:
            LOG.info("requirement %s replaced by the harness's pin of %s", line, name)
            continue
        keep.append(line)
    if not keep:
        return []
    report = work / "resolve.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q",
           "--disable-pip-version-check", "--report", str(report), *keep, *test_tools]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=work, env={**os.environ, "TMPDIR": str(work)},
                          preexec_fn=die_with_parent(signal.SIGKILL))
    if proc.returncode != 0:
        raise ProjectError(f"pip cannot resolve the repository's requirements {', '.join(keep)}: {_tail(proc.stderr)}",
                           hint="pin a compatible version with --requirement, or choose other groups with "
                                "--extra/--group/--no-declared-deps")
    pins = []
    for item in json.loads(report.read_text()).get("install", []):
        name, ver = item["metadata"]["name"], item["metadata"]["version"]
        if normalise(name) in HARNESS_TOOLS:
            continue
        if exclude is not None and normalise(name) == normalise(exclude):
            LOG.warning("a dependency needs %s itself; it is left out of the environment (samples would read it)",
                        name)
            continue
        pins.append(f"{name}=={ver}")
    return sorted(pins, key=str.lower)


def requirements_of(facts: ProjectFacts) -> list[str]:
    """Runtime requirements plus the chosen test dependencies (extras already expanded)."""
    out = list(facts.requires)
    for choice in facts.chosen:
        out += list(choice.requirements)
    return out
