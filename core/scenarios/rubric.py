"""Judge rubrics: the YAML file format, the prompts built from it and strict reply parsing.

**Rubric** (a YAML file; a kind's default is ``rubric.yaml`` in its folder,
:meth:`~core.scenarios.base.TaskKind.rubric_path`): ``scale: [low,
high]``, ``accept_threshold``, ``dimensions`` (name -> what to grade; the Smart Coding
proposal's functionality, reliability and interpretability) and the two prompt templates
``score_prompt`` (fields ``{task} {reference} {answer} {low} {high} {dimensions} {format}``)
and ``pairwise_prompt`` (``{task} {answer_a} {answer_b}``).

**Strict parsing.** A score reply is accepted only if every dimension appears exactly once as a
line ``<name>: <integer>`` with the integer on the scale (other lines are ignored; a missing,
repeated or out-of-range dimension fails). A pairwise reply must be exactly ``A``, ``B`` or
``TIE`` (case-insensitive, optionally ``Answer A``, a final period allowed). Parsers return
None for a reply that breaks the format; callers count it, never score it as zero.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError
from core.common.yaml_loader import load_yaml

_PREF = re.compile(r"^\s*\**\s*(?:answer\s+)?(A|B|TIE)\s*\**\s*\.?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Rubric:
    """A parsed rubric file (see the module docstring)."""

    low: int
    high: int
    accept_threshold: float
    dimensions: dict[str, str]
    score_prompt: str
    pairwise_prompt: str
    source: str = ""


def kind_rubric(kind: Any, rubric: str | Path | None = None) -> Rubric:
    """The rubric file ``rubric`` (the metric's ``rubric:`` parameter), else the kind's own
    (:meth:`~core.scenarios.base.TaskKind.rubric_path`).

    Raises:
        ConfigError: the file is missing (saying how to give the kind a rubric) or malformed.
    """
    if rubric:
        return load_rubric(Path(rubric))
    path = kind.rubric_path()
    if not path.is_file():
        raise ConfigError(f"task kind {kind.name!r} has no judge rubric (looked for {path})",
                          hint=f"write one there (copy core/scenarios/issue/rubric.yaml and "
                               f"adapt its dimensions; docs/adding-a-scenario.md), give "
                               f"llm_judge a 'rubric:' file, or remove llm_judge from the "
                               f"testenv's metrics")
    return load_rubric(path)


def load_rubric(path: str | Path) -> Rubric:
    """Read (with :func:`core.common.yaml_loader.load_yaml`, the loader of every YAML file:
    ``.yaml``/``.yml``, bounded aliases) and check a rubric YAML file.

    Raises:
        ConfigError: naming the file (and line) and the key that is missing or wrong.
    """
    file = Path(path)
    data = load_yaml(file)
    if not isinstance(data, Mapping):
        raise ConfigError("a rubric must be a mapping", source=file)
    scale = data.get("scale")
    if (not isinstance(scale, list) or len(scale) != 2 or not all(isinstance(v, int) for v in scale)
            or scale[0] >= scale[1]):
        raise ConfigError("'scale' must be [low, high] integers with low < high", source=file)
    dims = data.get("dimensions")
    if not isinstance(dims, Mapping) or not dims or not all(
            isinstance(k, str) and re.fullmatch(r"[a-z_]+", k) and isinstance(v, str)
            for k, v in dims.items()):
        raise ConfigError("'dimensions' must map lower-case names to descriptions", source=file)
    threshold = data.get("accept_threshold")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        raise ConfigError("'accept_threshold' must be a number", source=file)
    prompts = {}
    for key, fields in (("score_prompt", ("{task}", "{answer}", "{format}")),
                        ("pairwise_prompt", ("{task}", "{answer_a}", "{answer_b}"))):
        text = data.get(key)
        if not isinstance(text, str) or any(f not in text for f in fields):
            raise ConfigError(f"{key!r} must be a template using {', '.join(fields)}",
                              source=file)
        prompts[key] = text
    return Rubric(scale[0], scale[1], float(threshold), dict(dims), prompts["score_prompt"],
                  prompts["pairwise_prompt"], str(file))


def parse_scores(text: str, rubric: Rubric) -> dict[str, int] | None:
    """Dimension -> score from a judge reply, or None if it breaks the format (see module)."""
    found: dict[str, list[str]] = {name: [] for name in rubric.dimensions}
    for line in text.splitlines():
        m = re.fullmatch(r"\s*[*_`]*\s*([A-Za-z_]+)\s*[*_`]*\s*:\s*[*_`]*\s*(-?\d+)\s*[*_`]*"
                         r"(?:\s*/\s*\d+)?\s*", line)
        if m and m.group(1).lower() in found:
            found[m.group(1).lower()].append(m.group(2))
    scores = {}
    for name, values in found.items():
        if len(values) != 1:
            return None
        value = int(values[0])
        if not rubric.low <= value <= rubric.high:
            return None
        scores[name] = value
    return scores


def parse_preference(text: str) -> str | None:
    """``"A"``, ``"B"`` or ``"TIE"`` from a pairwise reply; None if it is anything else."""
    m = _PREF.match(text.strip())
    return m.group(1).upper() if m else None


def score_messages(rubric: Rubric, view: Mapping[str, str], answer: str) -> list[dict[str, str]]:
    """The rubric-score prompt for ``answer`` to the task of ``view`` (an empty answer is shown
    as ``(empty answer)``)."""
    dims = "\n".join(f"- {name}: {desc}" for name, desc in rubric.dimensions.items())
    fmt = "\n".join(f"{name}: <{rubric.low}-{rubric.high}>" for name in rubric.dimensions)
    text = rubric.score_prompt.format(task=view["task"], reference=view["reference"],
                                      answer=answer or "(empty answer)", low=rubric.low,
                                      high=rubric.high, dimensions=dims, format=fmt)
    return [{"role": "user", "content": text}]


def pairwise_messages(rubric: Rubric, view: Mapping[str, str], a: str, b: str
                      ) -> list[dict[str, str]]:
    """The pairwise prompt comparing answers ``a`` (shown as A) and ``b`` (shown as B)."""
    text = rubric.pairwise_prompt.format(task=view["task"], answer_a=a or "(empty answer)",
                                         answer_b=b or "(empty answer)")
    return [{"role": "user", "content": text}]
