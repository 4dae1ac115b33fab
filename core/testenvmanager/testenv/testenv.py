"""testenv.yaml: the dataset, the metrics and (our extension) the sandbox settings.

Schema (top-level key ``testenv``)::

    testenv:
      dataset: {test_index: ./data.jsonl, ...}      # see core.testenvmanager.dataset
      metrics:                                      # non-empty, evaluated in this order
        - name: pass_at_k                           # alias registered by url, or a built-in
          url: ./op_eval.py                         # optional
          k: [1, 10]                                # extra keys: keyword arguments of the metric
      sandbox: {backend: local, timeout: 10}        # extension: settings for code-executing metrics
      model_eval: {...}; incremental_rounds: 2; round: 1; client_number: 1; use_gpu: false

Keys of other paradigms are kept in :attr:`TestEnvConfig.extra` and reported as unknown.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.common.config_base import Section, load_top_section, require_file
from core.common.errors import ConfigError
from core.testenvmanager.dataset.dataset import DatasetConfig, parse_dataset_section

KNOWN_KEYS = ("dataset", "metrics", "model_eval", "incremental_rounds", "round",
              "client_number", "use_gpu", "sandbox")


@dataclass(frozen=True)
class MetricSpec:
    """One ``metrics:`` entry."""

    name: str
    url: Path | None
    params: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None
    line: int | None = None


@dataclass(frozen=True)
class TestEnvConfig:
    """Parsed testenv.yaml."""

    __test__ = False  # not a pytest class

    source: Path
    dataset: DatasetConfig
    metrics: tuple[MetricSpec, ...]
    sandbox: dict[str, Any] = field(default_factory=dict)
    model_eval: dict[str, Any] = field(default_factory=dict)
    incremental_rounds: int = 2
    round: int = 1
    client_number: int = 1
    use_gpu: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def load_testenv(path: Path, warnings: list[str] | None = None) -> TestEnvConfig:
    """Load and validate a testenv YAML file.

    Raises:
        ConfigError: anything wrong, naming file, line and key.
    """
    sec = load_top_section(path, "testenv", KNOWN_KEYS, warnings, what="file")
    dataset = parse_dataset_section(sec.section("dataset"))
    metric_secs = sec.sections("metrics")
    if not metric_secs:
        raise sec.error("metrics", "is empty", hint="list at least one metric")
    metrics = []
    for msec in metric_secs:
        name = msec.get("name", str)
        url_raw = msec.get("url", str, None, allow_none=True)
        url = require_file(url_raw, path, "metric file", msec, "url") if url_raw else None
        params = {k: v for k, v in msec.data.items() if k not in ("name", "url")}
        metrics.append(MetricSpec(name, url, params, path, msec.line()))
    rounds = sec.get("incremental_rounds", int, 2)
    return TestEnvConfig(
        source=path, dataset=dataset, metrics=tuple(metrics),
        sandbox=dict(sec.get("sandbox", dict, {})),
        model_eval=dict(sec.get("model_eval", dict, {})),
        incremental_rounds=rounds, round=sec.get("round", int, 1),
        client_number=sec.get("client_number", int, 1),
        use_gpu=sec.get("use_gpu", bool, False),
        extra={k: v for k, v in sec.data.items() if k not in KNOWN_KEYS})
