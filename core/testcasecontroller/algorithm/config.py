"""The algorithm YAML: paradigm, modules and the hyperparameter grid.

Grid rules (upstream, with its silent quirks turned into errors):

* ``hyperparameters`` is a list of one-key mappings ``{name: {values: [...]}}``. An element
  with several keys, a missing ``values`` or a ``values`` that is not a list is an error
  (upstream dropped keys silently and iterated strings per character).
* ``other_hyperparameters: {values: [a.yaml, b.yaml]}`` merges those files' mappings, later
  files winning; the result is the *base* of every combination.
* The other names form a Cartesian product in list order, the last varying fastest. A name
  already in the base keeps its position and takes the new value.
* Modules combine by a further product in module order (last fastest); two modules of the
  same ``type`` are an error (upstream silently kept the later one).
"""
from __future__ import annotations

import itertools
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.common.class_factory import ClassType
from core.common.config_base import Section, load_top_section, resolve_path
from core.common.errors import ConfigError, Problems, suggest
from core.common.yaml_loader import load_yaml

logger = logging.getLogger(__name__)

PARADIGMS = ("singletasklearning", "incrementallearning", "multiedgeinference",
             "lifelonglearning", "federatedlearning", "federatedclassincrementallearning",
             "jointinference")
IMPLEMENTED_PARADIGMS = ("singletasklearning", "jointinference")

MODULE_GROUPS: dict[str, str] = {
    "basemodel": ClassType.GENERAL, "edgemodel": ClassType.GENERAL,
    "cloudmodel": ClassType.GENERAL, "dataset_processor": ClassType.GENERAL,
    "hard_example_mining": ClassType.HEM,
    "task_definition": ClassType.STP, "task_relationship_discovery": ClassType.STP,
    "task_allocation": ClassType.STP, "task_remodeling": ClassType.STP,
    "inference_integrate": ClassType.STP, "task_update_decision": ClassType.KM,
    "unseen_task_allocation": ClassType.UTP, "unseen_sample_recognition": ClassType.UTD,
    "unseen_sample_re_recognition": ClassType.UTD, "aggregation": ClassType.FL_AGG,
}

KNOWN_KEYS = ("paradigm_type", "initial_model_url", "incremental_learning_data_setting",
              "lifelong_learning_data_setting", "fl_data_setting", "third_party_packages",
              "mode", "quantization_type", "llama_quantize_path", "modules",
              "predict_chunk_size", "hard_example_mining_mode")


@dataclass(frozen=True)
class ModuleSpec:
    """One ``modules:`` entry with its expanded hyperparameter variants."""

    type: str
    name: str
    url: Path | None
    variants: tuple[dict[str, Any], ...]
    #: the algorithm YAML's line of this entry, and of each hyperparameter name (its
    #: ``hyperparameters`` item; names from ``other_hyperparameters`` files: that item's line),
    #: for messages; not compared
    line: int | None = field(default=None, compare=False)
    hp_lines: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    #: hyperparameter items left out of :attr:`variants` because of a problem already reported
    #: (``ianvs validate`` only: a run stops at the first problem)
    skipped: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def group(self) -> str:
        return MODULE_GROUPS[self.type]

    def line_of(self, hyperparameter: str | None) -> int | None:
        """The line of ``hyperparameter`` (else of the module entry)."""
        if hyperparameter is not None and hyperparameter in self.hp_lines:
            return self.hp_lines[hyperparameter]
        return self.line


@dataclass(frozen=True)
class AlgorithmConfig:
    """Parsed algorithm YAML."""

    source: Path
    paradigm_type: str
    modules: tuple[ModuleSpec, ...]
    initial_model_url: str = ""
    third_party_packages: tuple[Path, ...] = ()
    mode: str = ""
    quantization_type: str = ""
    llama_quantize_path: str = ""
    predict_chunk_size: int | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    #: the file's line of ``paradigm_type`` and ``modules`` (for messages; not compared)
    lines: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def combinations(self) -> list[dict[str, tuple[ModuleSpec, dict[str, Any]]]]:
        """Every module combination: module type -> (spec, hyperparameters)."""
        per_module = [[(m, v) for v in m.variants] for m in self.modules]
        return [{m.type: (m, hp) for m, hp in combo} for combo in itertools.product(*per_module)]


#: hyperparameter names whose values are file system paths (resolved like YAML paths)
PATH_SUFFIXES = ("_path", "_file", "_dir")


def resolve_path_hyperparameters(hyperparameters: dict[str, Any], yaml_file: Path
                                 ) -> dict[str, Any]:
    """Hyperparameters with relative paths resolved like every other path in a YAML file.

    A string value of a hyperparameter named ``*_path``, ``*_file`` or ``*_dir`` that is a
    relative path is tried against the working directory first, then against the folder of
    ``yaml_file`` (the algorithm YAML); the one that exists is passed as an absolute path and a
    log line says which was used. A value found in neither place is passed unchanged (it may be
    an output location or the plugin's own concern). The configured values (rank columns, test
    case identity) are not changed.
    """
    out = dict(hyperparameters)
    for name, value in hyperparameters.items():
        if not (isinstance(value, str) and value and name.endswith(PATH_SUFFIXES)):
            continue
        raw = Path(os.path.expanduser(value))
        if raw.is_absolute() or "://" in value:
            continue
        for base, where in ((Path.cwd(), "the working directory"),
                            (yaml_file.parent, f"the folder of {yaml_file.name}")):
            candidate = base / raw
            if candidate.exists():
                out[name] = str(candidate.resolve())
                logger.info("%s: hyperparameter %s=%r resolved against %s: %s", yaml_file,
                            name, value, where, out[name])
                break
    return out


def _expand_hyperparameters(sec: Section, problems: Problems | None = None
                            ) -> tuple[tuple[dict[str, Any], ...], dict[str, int], list[str]]:
    """``(variants, lines, skipped)``: the grid, the line of each hyperparameter name, and the
    names of items left out because of a problem (each one added to ``problems``)."""
    problems = problems or Problems()
    items = sec.get("hyperparameters", list, [], allow_none=True) or []
    base: dict[str, Any] = {}
    names: list[str] = []
    value_lists: list[list[Any]] = []
    lines: dict[str, int] = {}
    skipped: list[str] = []
    for i, item in enumerate(items):
        line = items.line_of(i) if hasattr(items, "line_of") else sec.line("hyperparameters")
        before = len(problems.found)
        with problems.part():
            _expand_item(sec, i, item, line, base, names, value_lists, lines)
        if len(problems.found) > before and isinstance(item, dict) and len(item) == 1:
            skipped.append(str(next(iter(item))))
    variants = []
    for combo in itertools.product(*value_lists):
        variant = dict(base)
        variant.update(zip(names, combo))
        variants.append(variant)
    return tuple(variants), lines, skipped


def _expand_item(sec: Section, i: int, item: Any, line: int | None, base: dict[str, Any],
                 names: list[str], value_lists: list[list[Any]], lines: dict[str, int]) -> None:
    """Check item ``i`` of ``hyperparameters`` and add it to the grid being built."""
    where = f"hyperparameters[{i}]"
    if not isinstance(item, dict) or len(item) != 1:
        raise ConfigError(f"'{sec.child(where)}' must be a mapping with exactly one key "
                          f"(a hyperparameter name), got {item!r}", source=sec.source,
                          line=line, hint="write one '- name: {values: [...]}' per item")
    (name, spec), = item.items()
    if not isinstance(spec, dict) or "values" not in spec:
        raise ConfigError(f"hyperparameter {name!r} needs a 'values' list",
                          source=sec.source, line=line,
                          hint=f"write '- {name}: {{values: [...]}}'")
    values = spec["values"]
    if not isinstance(values, list):
        raise ConfigError(f"'values' of hyperparameter {name!r} must be a list, got "
                          f"{type(values).__name__} ({values!r})", source=sec.source,
                          line=line, hint=f"write 'values: [{values!r}]'")
    if name == "other_hyperparameters":
        for raw in values:
            path = resolve_path(str(raw), sec.source)
            if not path.is_file():
                raise ConfigError(f"other hyperparameters file {raw!r} not found",
                                  source=sec.source, line=line)
            data = load_yaml(path)
            if data is None:
                continue
            if not isinstance(data, dict):
                raise ConfigError("other hyperparameters file must hold a mapping",
                                  source=path, line=1)
            base.update(data)
            if line is not None:
                lines.update({str(k): line for k in data})
        return
    if not values:
        raise ConfigError(f"hyperparameter {name!r} has an empty 'values' list",
                          source=sec.source, line=line, hint="give at least one value")
    names.append(name)
    value_lists.append(values)
    if line is not None:
        lines[str(name)] = line


def load_algorithm(path: Path, warnings: list[str] | None = None,
                   problems: Problems | None = None) -> AlgorithmConfig:
    """Load and validate an algorithm YAML file.

    With a collecting ``problems`` (``ianvs validate``), every problem of the file is added to
    it (each module, hyperparameter item and setting on its own) and the config holds what is
    left; only a file that cannot be read at all raises.

    Raises:
        ConfigError: anything wrong, naming file, line and key.
    """
    problems = problems or Problems()
    sec = load_top_section(path, "algorithm", KNOWN_KEYS, warnings, what="file")
    paradigm = sec.data.get("paradigm_type")
    paradigm = paradigm if isinstance(paradigm, str) else ""
    with problems.part():
        paradigm = sec.get("paradigm_type", str)
        if paradigm not in PARADIGMS:
            raise sec.error("paradigm_type", f"is {paradigm!r}, which is not a paradigm",
                            hint=suggest(paradigm, PARADIGMS) or f"one of {', '.join(PARADIGMS)}")
    modules: list[ModuleSpec] = []
    seen_types: set[str] = set()
    msecs: list[Section] = []
    with problems.part():
        msecs = sec.sections("modules")
        if not msecs:
            raise sec.error("modules", "is empty", hint="add a basemodel module")
    for msec in msecs:
        with problems.part():
            modules.append(_module(msec, path, seen_types, problems))
    packages = []
    for psec in _sections(sec, "third_party_packages", problems):
        with problems.part():
            raw = psec.get("url", str)
            package = resolve_path(raw, path)
            if not package.exists():
                raise psec.error("url", f"names {raw!r}, which was not found")
            packages.append(package)
    chunk = None
    with problems.part():
        value = sec.get("predict_chunk_size", int, None, allow_none=True)
        if value is not None and value < 1:
            raise sec.error("predict_chunk_size", f"must be >= 1, got {value}")
        chunk = value
    settings = {k: sec.data[k] for k in ("incremental_learning_data_setting",
                                         "lifelong_learning_data_setting", "fl_data_setting")
                if k in sec.data}
    if "hard_example_mining_mode" in sec.data:
        from core.testenvmanager.testenv.testenv import MINING_MODES as MODES

        with problems.part():
            mining = sec.get("hard_example_mining_mode", str)
            if mining not in MODES:
                raise sec.error("hard_example_mining_mode",
                                f"is {mining!r}, which is not a mining mode",
                                hint=suggest(mining, MODES) or f"one of {', '.join(MODES)}")
            settings["hard_example_mining_mode"] = mining
    texts = {}
    for key in ("initial_model_url", "mode", "quantization_type", "llama_quantize_path"):
        texts[key] = ""
        with problems.part():
            texts[key] = sec.get(key, str, "", allow_none=True) or ""
    return AlgorithmConfig(
        source=path, paradigm_type=paradigm, modules=tuple(modules),
        initial_model_url=texts["initial_model_url"], third_party_packages=tuple(packages),
        mode=texts["mode"], quantization_type=texts["quantization_type"],
        llama_quantize_path=texts["llama_quantize_path"], predict_chunk_size=chunk,
        settings=settings, lines={key: line for key in ("paradigm_type", "modules")
                                  if (line := sec.line(key)) is not None})


def _sections(sec: Section, key: str, problems: Problems) -> list[Section]:
    """``sec.sections(key, [])``, or none when that is a problem (added to ``problems``)."""
    with problems.part():
        return sec.sections(key, [])
    return []


def _module(msec: Section, path: Path, seen_types: set[str], problems: Problems) -> ModuleSpec:
    """One ``modules:`` entry (its hyperparameter items' problems go to ``problems``)."""
    msec.report_unknown(("type", "name", "url", "hyperparameters"))
    mtype = msec.get("type", str)
    if mtype not in MODULE_GROUPS:
        raise msec.error("type", f"is {mtype!r}, which is not a module type",
                         hint=suggest(mtype, MODULE_GROUPS) or
                         f"one of {', '.join(MODULE_GROUPS)}")
    if mtype in seen_types:
        raise msec.error("type", f"{mtype!r} appears twice in this algorithm",
                         hint="each module type may appear once")
    seen_types.add(mtype)
    name = msec.get("name", str)
    url_raw = msec.get("url", str, "", allow_none=True)
    url = None
    if url_raw:
        url = resolve_path(url_raw, path)
        if not url.exists():
            raise msec.error("url", f"names {url_raw!r}, which was not found",
                             hint=f"tried {Path.cwd() / url_raw} and {path.parent / url_raw}")
    variants, lines, skipped = _expand_hyperparameters(msec, problems)
    return ModuleSpec(mtype, name, url, variants, line=msec.line(), hp_lines=lines,
                      skipped=tuple(skipped))
