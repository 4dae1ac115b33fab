"""The ``dataset:`` section of testenv.yaml: which files, and how they are parsed.

Precedence per split (train/test) is ``*_index`` > ``*_data`` > ``*_data_info``; the legacy
``*_url`` keys are aliases of ``*_index`` (upstream silently stopped supporting them).

=============== ======================================================================
key             accepted formats
=============== ======================================================================
``*_index``     ``txt`` (index of sample files), ``jsonl`` (the whole dataset, one
                record per line -- an extension), ``csv`` (fixed upstream's dead branch),
                ``json`` (COCO annotations as upstream, or an array of records)
``*_data``      ``jsonl``, ``csv``, ``json`` (upstream resolved it to nothing, which only
                worked where the split was never read)
``*_data_info`` ``metadata.json`` (+ sibling ``data.jsonl``)
=============== ======================================================================

A relative path that does not exist is an error. An *absolute* path that does not exist is
accepted as an empty dataset with a warning (upstream examples use this for "no training
data"). A test split is required; a missing train split means an empty train set.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from core.common.config_base import Section, resolve_path
from core.common.errors import ConfigError, DatasetError
from core.testenvmanager.dataset.formats import SUPPORTED, detect_format
from core.testenvmanager.dataset.parsers import (CsvDataset, DateWindow, JsonDataset,
                                                 JsonlDataset, MetaDataset, ParsedDataset,
                                                 TxtIndexDataset, parse_date)

logger = logging.getLogger(__name__)

KEYS = ("train_url", "test_url", "train_index", "test_index", "train_data", "test_data",
        "train_data_info", "test_data_info", "label", "x_field", "y_field", "after", "before",
        "date_field")

_ACCEPTED = {"index": ("txt", "jsonl", "csv", "json"), "data": ("jsonl", "csv", "json"),
             "data_info": ("jsonforllm",)}


@dataclass(frozen=True)
class DatasetSource:
    """One resolved split: which key named it, the file, and its format."""

    key: str          # e.g. "test_index"
    kind: str         # "index" | "data" | "data_info"
    path: Path
    fmt: str

    @property
    def exists(self) -> bool:
        return self.path.is_file()


@dataclass(frozen=True)
class DatasetConfig:
    """Resolved ``dataset:`` section."""

    train: DatasetSource | None
    test: DatasetSource
    label: str | None = None
    x_field: str = "question"
    y_field: str = "answer"
    #: a date window on JSONL records (``after:`` / ``before:``, field ``date_field``), or None
    window: DateWindow | None = None

    def parse(self, split: str, data_type: str) -> ParsedDataset:
        """Parse the ``"train"`` or ``"test"`` split with upstream's ``data_type`` tag."""
        source = self.train if split == "train" else self.test
        if source is None:
            return JsonlDataset(None, data_type)
        if source.fmt == "jsonforllm":
            return MetaDataset(source.path, data_type)
        if source.fmt == "jsonl":
            return JsonlDataset(source.path, data_type, self.x_field, self.y_field, self.window)
        if source.fmt == "json":
            return JsonDataset(source.path, data_type, self.x_field, self.y_field)
        if source.fmt == "csv":
            return CsvDataset(source.path, data_type, self.label)
        if source.fmt == "txt":
            return TxtIndexDataset(source.path, data_type)
        raise DatasetError(f"format {source.fmt!r} cannot be parsed", source=source.path)

    def check_test_split(self) -> int:
        """Read the whole test split once, streamed; return its number of samples.

        JSONL records (a ``jsonl`` index or data file) must parse and carry ``x_field``;
        other formats are parsed whole. Run before any test case so a bad
        line stops the job with one message instead of failing every test case.

        Raises:
            DatasetError: the first problem, naming file and line; or an empty test set (a
                leaderboard over no samples would rank nothing).
        """
        test = self.parse("test", "inference")
        if isinstance(test, JsonDataset) and test.is_coco:
            count = test.num_examples()
        elif self.test.fmt not in ("jsonl", "json") or not isinstance(test, JsonlDataset):
            count = test.num_examples()  # other formats (metadata.json + data.jsonl too)
        else:
            count = 0
            for line, record in test.numbered_records():
                if self.x_field not in record:
                    prefix, at = test.locate(line)
                    raise DatasetError(f"{prefix}record has no {self.x_field!r} field",
                                       source=test.path, line=at,
                                       hint="set dataset.x_field in testenv.yaml to the field "
                                            "holding the model input")
                count += 1
        if count == 0:
            raise DatasetError("the test set has no samples", source=self.test.path,
                               hint=f"check '{self.test.key}' in testenv.yaml")
        return count


def _source(section: Section, split: str) -> DatasetSource | None:
    for kind, key in (("index", f"{split}_index"), ("index", f"{split}_url"),
                      ("data", f"{split}_data"), ("data_info", f"{split}_data_info")):
        raw = section.get(key, str, None, allow_none=True)
        if not raw:
            continue
        path = resolve_path(raw, section.source)
        if not path.is_file():
            if not Path(raw).is_absolute():
                raise section.error(key, f"names {raw!r}, which is not a local file",
                                    hint=f"tried {Path.cwd() / raw} and "
                                    f"{section.source.parent / raw}")
            logger.warning("%s: dataset file %s (%s) does not exist; using an empty %s set",
                           section.source, raw, key, split)
        fmt = detect_format(path)
        if fmt not in SUPPORTED:
            raise section.error(key, f"names {raw!r} whose format {fmt!r} is not supported",
                                hint=f"supported: {', '.join(sorted(SUPPORTED))} "
                                "(extensions are case-sensitive)")
        if fmt not in _ACCEPTED[kind]:
            if kind == "data_info":
                hint = "the file must be named metadata.json, with data.jsonl beside it"
            else:
                hint = f"{key} accepts {', '.join(_ACCEPTED[kind])} files"
            raise section.error(key, f"cannot be a {fmt} file ({raw!r})", hint=hint)
        return DatasetSource(key, kind, path, fmt)
    return None


def parse_dataset_section(section: Section) -> DatasetConfig:
    """Build a :class:`DatasetConfig`; raises :class:`ConfigError` on any problem."""
    section.report_unknown(KEYS)
    test = _source(section, "test")
    if test is None:
        raise ConfigError(f"'{section.where}' names no test set", source=section.source,
                          line=section.line(),
                          hint="add test_index, test_data or test_data_info")
    return DatasetConfig(
        train=_source(section, "train"), test=test,
        label=section.get("label", str, None, allow_none=True),
        x_field=section.get("x_field", str, "question"),
        y_field=section.get("y_field", str, "answer"),
        window=_window(section, test))


def _window(section: Section, test: DatasetSource) -> DateWindow | None:
    """``after:`` / ``before:`` (dates; ``date_field``, default ``committed_at``): keep only the
    JSONL records whose date is ``after <= date < before`` (e.g. the changes after a model's
    training cut-off). None when neither is set."""
    bounds = {}
    for key in ("after", "before"):
        raw = section.data.get(key)
        if raw is None:
            continue
        try:
            bounds[key] = parse_date(str(raw))
        except ValueError:
            raise section.error(key, f"must be a date (YYYY-MM-DD or ISO 8601), got {raw!r}") from None
    if not bounds:
        if section.data.get("date_field") is not None:
            raise section.error("date_field", "is only used with after: or before:")
        return None
    if test.fmt != "jsonl":
        raise section.error("after" if "after" in bounds else "before",
                            f"a date window needs a JSONL test set, not {test.fmt}")
    if "after" in bounds and "before" in bounds and bounds["before"] <= bounds["after"]:
        raise section.error("before", "must be later than after")
    return DateWindow(bounds.get("after"), bounds.get("before"),
                      section.get("date_field", str, "committed_at"))
