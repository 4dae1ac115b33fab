"""Parsed datasets: what ``train``/``predict`` and metrics receive.

Every parsed dataset has upstream's attributes ``x``, ``y``, ``data_type``, ``meta_attr``,
``process_func``, ``num_examples()``, ``len()`` and ``is_test_data``. ``x``/``y`` are numpy
arrays built with numpy's own coercion (all strings -> str array, mixed str/int -> all
strings, equal-length lists -> 2-D), as upstream plugins expect.

JSONL files are *streamed*: :meth:`JsonlDataset.records` reads one line at a time, and ``x``
and ``y`` are only materialised when first asked for. Blank lines are skipped (upstream
crashed on them). Every record keeps all its fields. A malformed line raises
:class:`DatasetError` naming file and line.
"""
from __future__ import annotations

import csv
import io
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from core.common.errors import DatasetError, read_utf8
from core.compat.arrays import to_array
from core.common.jsonl import (NON_FINITE_HINT, iter_jsonl, non_finite_message,
                               read_json_file)

logger = logging.getLogger(__name__)


class ParsedDataset:
    """Common interface of the parsed datasets (upstream ``BaseDataSource`` shape)."""

    def __init__(self, path: Path | None, data_type: str) -> None:
        self.path = path
        self.data_type = data_type
        self.meta_attr: Any = None
        self.process_func: Any = None
        self._x: np.ndarray | None = None
        self._y: np.ndarray | None = None

    @property
    def is_test_data(self) -> bool:
        return self.data_type == "test"

    @property
    def x(self) -> np.ndarray:
        if self._x is None:
            self._materialise()
        return self._x  # type: ignore[return-value]

    @x.setter
    def x(self, value: np.ndarray) -> None:
        self._x = value

    @property
    def y(self) -> np.ndarray:
        if self._y is None:
            self._materialise_y()
        return self._y  # type: ignore[return-value]

    @y.setter
    def y(self, value: np.ndarray) -> None:
        self._y = value

    def _materialise(self) -> None:
        self._x, self._y = np.array([]), np.array([])

    def _materialise_y(self) -> None:
        """Fill ``_y``; the default parses everything (formats where x and y come together)."""
        self._materialise()

    def num_examples(self) -> int:
        return len(self.x)

    def __len__(self) -> int:
        return self.num_examples()

    def x_of(self, indices: list[int], records: list[dict[str, Any]]) -> np.ndarray:
        """``x`` of the samples at ``indices`` (whose records are given), as upstream's
        ``x[indices]``. The default slices the materialised ``x``; JSONL sets build it from the
        records alone, so a window of a large set never materialises the whole column."""
        return self.x[np.asarray(indices, dtype=int)]

    def records(self) -> Iterator[dict[str, Any]]:
        """Every sample as a dict with all its fields (default: ``{"x": .., "y": ..}``)."""
        ys = self.y
        for i, x in enumerate(self.x):
            yield {"x": x, "y": ys[i] if i < len(ys) else None}


def parse_date(text: str) -> datetime:
    """An ISO 8601 date or date-time as an aware datetime (UTC when it has no offset).
    Raises ValueError."""
    when = datetime.fromisoformat(text)
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class DateWindow:
    """``after <= record[field] < before`` (either bound optional): testenv's ``after:`` /
    ``before:`` on a JSONL dataset (the trajectory kinds' commit dates)."""

    after: datetime | None
    before: datetime | None
    field: str = "committed_at"

    def contains(self, record: dict[str, Any], source: Path | None = None, line: int | None = None) -> bool:
        """Whether ``record`` is inside; DatasetError when its date field is missing or bad."""
        raw = record.get(self.field)
        try:
            when = parse_date(str(raw)) if isinstance(raw, str) else None
        except ValueError:
            when = None
        if when is None:
            raise DatasetError(f"record has no date in {self.field!r} for the after:/before: window "
                               f"(got {raw!r})", source=source, line=line,
                               hint="set dataset.date_field to the record's ISO 8601 date field")
        return (self.after is None or when >= self.after) and (self.before is None or when < self.before)


class JsonlDataset(ParsedDataset):
    """A JSONL file: one record per line; ``x``/``y`` from ``x_field``/``y_field``.

    Upstream's parser took ``question``/``answer``; those stay the defaults. For the test
    set ``y`` is still filled (metrics need it); a record lacking ``y_field`` gets ``None``
    only if *every* record lacks it, otherwise it is an error naming the line.
    """

    def __init__(self, path: Path | None, data_type: str, x_field: str = "question",
                 y_field: str = "answer", window: DateWindow | None = None) -> None:
        super().__init__(path, data_type)
        self.x_field = x_field
        self.y_field = y_field
        self.window = window
        self._count: int | None = None

    def records(self) -> Iterator[dict[str, Any]]:
        for _, obj in self.numbered_records():
            yield obj

    def numbered_records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(line, record)`` pairs, for messages that must name the line (only the records
        inside :attr:`window` when one is set)."""
        if self.path is None or not self.path.exists():
            return
        for line, obj in iter_jsonl(self.path):
            if self.window is None or self.window.contains(obj, self.path, line):
                yield line, obj

    def x_of(self, indices: list[int], records: list[dict[str, Any]]) -> np.ndarray:
        if self._x is not None:
            return self._x[np.asarray(indices, dtype=int)]
        missing = [r for r in records if self.x_field not in r]
        if missing:
            raise DatasetError(f"record has no {self.x_field!r} field", source=self.path,
                               hint="set dataset.x_field in testenv.yaml")
        return to_array([r[self.x_field] for r in records])

    def locate(self, number: int) -> tuple[str, int | None]:
        """(message prefix, line) of the record ``numbered_records`` numbered ``number``."""
        return "", number

    def num_examples(self) -> int:
        if self._x is not None:
            return len(self._x)
        if self._count is None:
            self._count = sum(1 for _ in self.numbered_records())
        return self._count

    def _materialise(self) -> None:
        self._x, self._count = self._column(self.x_field, required=True)
        if self._y is None:
            self._materialise_y()

    def _materialise_y(self) -> None:
        """Only the ``y_field`` column: metrics need ``y`` of a large set without its ``x``."""
        self._y, self._count = self._column(self.y_field, required=False)

    def _column(self, name: str, required: bool) -> tuple[np.ndarray, int]:
        """One field of every record. ``required``: every record must have it; otherwise a
        record may lack it only if *every* record does (then the column is empty)."""
        values: list[Any] = []
        missing: int | None = None
        count = 0
        for line, obj in self.numbered_records():
            count += 1
            if name in obj:
                values.append(obj[name])
                continue
            prefix, at = self.locate(line)
            if required:
                raise DatasetError(
                    f"{prefix}record has no {name!r} field", source=self.path, line=at,
                    hint=f"set dataset.x_field to one of {sorted(obj)} in testenv.yaml")
            if missing is None:
                missing = line
        if missing is not None and values:
            prefix, at = self.locate(missing)
            raise DatasetError(f"{prefix}record has no {name!r} field", source=self.path,
                               line=at, hint="set dataset.y_field in testenv.yaml")
        return to_array(values), count


class MetaDataset(JsonlDataset):
    """``metadata.json`` + sibling ``data.jsonl`` (upstream "jsonforllm").

    ``x[i] = prompt + query`` (no separator, as upstream), ``y[i] = response``; also
    ``explanation``, ``judge_prompts``, ``level_3``, ``level_4`` arrays and the metadata
    attributes ``dataset_name``, ``description``, ``level_1_dim``, ``level_2_dim``
    (+ ``level_3_dim``/``level_4_dim`` if present). ``need_other_info`` is True: single-task
    ``predict`` then receives this object instead of ``x``. ``description`` and per-line
    ``level_3_dim``/``level_4_dim`` are optional here (upstream required them).
    """

    need_other_info = True

    def x_of(self, indices: list[int], records: list[dict[str, Any]]) -> np.ndarray:
        return self.x[np.asarray(indices, dtype=int)]  # x is prompt + query, not one field

    def _materialise_y(self) -> None:
        self._materialise()  # every column at once, with this format's own checks

    def __init__(self, path: Path | None, data_type: str) -> None:
        data_path = Path(str(path).replace("metadata.json", "data.jsonl")) if path else None
        super().__init__(data_path, data_type, x_field="query", y_field="response")
        self.metadata_path = path
        self.dataset_name = self.description = self.level_1_dim = self.level_2_dim = ""
        if path is not None and path.exists():
            meta = read_json_file(path)
            if not isinstance(meta, dict) or "dataset" not in meta:
                raise DatasetError("metadata must be a JSON object with a 'dataset' field",
                                   source=path)
            self.dataset_name = meta["dataset"]
            self.description = meta.get("description", "")
            self.level_1_dim = meta.get("level_1_dim", "")
            self.level_2_dim = meta.get("level_2_dim", "")
            for key in ("level_3_dim", "level_4_dim"):
                if key in meta:
                    setattr(self, key, meta[key])

    def _materialise(self) -> None:
        cols: dict[str, list[Any]] = {k: [] for k in
                                      ("x", "y", "explanation", "judge", "l3", "l4")}
        for line, obj in self.numbered_records():
            for required in ("query", "response"):
                if required not in obj:
                    raise DatasetError(f"record has no {required!r} field", source=self.path,
                                       line=line, hint="metadata.json datasets need "
                                       "'query' and 'response' on every line")
            cols["x"].append(str(obj.get("prompt", "") or "") + str(obj["query"]))
            cols["y"].append(obj["response"])
            cols["explanation"].append(obj.get("explanation", ""))
            cols["judge"].append(obj.get("judge_prompt", ""))
            cols["l3"].append(obj.get("level_3_dim", ""))
            cols["l4"].append(obj.get("level_4_dim", ""))
        self._x, self._y = to_array(cols["x"]), to_array(cols["y"])
        self.explanation = to_array(cols["explanation"])
        self.judge_prompts = to_array(cols["judge"])
        self.level_3 = to_array(cols["l3"])
        self.level_4 = to_array(cols["l4"])
        self._count = len(cols["x"])

    def __getattr__(self, name: str) -> Any:
        if name in ("explanation", "judge_prompts", "level_3", "level_4"):
            self._materialise()
            return self.__dict__[name]
        raise AttributeError(name)


class JsonDataset(JsonlDataset):
    """A ``.json`` file, read only when its data is first used (an unused train file never
    stops a job).

    * a JSON **array of objects**: one record per element, ``x``/``y`` from
      ``x_field``/``y_field`` as for JSONL (an extension: upstream could not read it);
    * a **COCO annotation file** (an object with ``images``): upstream's ``JSONDataParse`` layout
      (``x`` a mapping with ``data_dir``, ``coco``, ``ids``, ``class_ids``, ``annotations``; ``y`` the
      ``*/gt/gt_val_half.txt`` files), parsed by ``sedna.datasources.JSONDataParse`` (needs
      pycocotools). Such a set has no per-sample records (``per_sample`` is False): ``predict``
      gets ``x`` in one call and metrics get its result unchanged.

    JSON cannot be streamed: the file is parsed whole when first used (use JSONL for large
    sets, which are read record by record).
    """

    def __init__(self, path: Path | None, data_type: str, x_field: str = "question",
                 y_field: str = "answer") -> None:
        super().__init__(path, data_type, x_field, y_field)
        self._data: Any = None

    def _load(self) -> Any:
        if self._data is None:
            if self.path is None or not self.path.exists():
                self._data = []
            else:
                self._data = read_json_file(self.path)
        return self._data

    @property
    def is_coco(self) -> bool:
        data = self._load()
        return isinstance(data, dict) and "images" in data

    @property
    def per_sample(self) -> bool:
        return not self.is_coco

    def numbered_records(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(record number, record)``; the number counts array elements from 1."""
        data = self._load()
        if isinstance(data, dict) and "images" in data:
            raise DatasetError("a COCO annotation file has no per-sample records",
                               source=self.path)
        if not isinstance(data, list):
            raise DatasetError(f"expected a JSON array of objects, found a "
                               f"{type(data).__name__}", source=self.path,
                               hint="use a JSON array of records, a COCO annotation file, or "
                                    "a .jsonl file")
        for number, obj in enumerate(data, 1):
            if not isinstance(obj, dict):
                raise DatasetError(f"element {number} is a {type(obj).__name__}, not an "
                                   "object", source=self.path)
            problem = non_finite_message(obj)
            if problem:
                raise DatasetError(f"array element {number}: {problem}", source=self.path,
                                   hint=NON_FINITE_HINT)
            yield number, obj

    def records(self) -> Iterator[dict[str, Any]]:
        for _, obj in self.numbered_records():
            yield obj

    def locate(self, number: int) -> tuple[str, int | None]:
        return f"array element {number}: ", None

    def _materialise_y(self) -> None:
        if self.is_coco:
            self._materialise()
        else:
            super()._materialise_y()

    def _materialise(self) -> None:
        if not self.is_coco:
            super()._materialise()
            return
        import importlib

        try:
            parser = importlib.import_module("sedna.datasources").JSONDataParse(self.data_type)
            parser.parse(str(self.path))
        except ImportError as exc:
            raise DatasetError(f"a COCO annotation file needs pycocotools ({exc})",
                               source=self.path, hint="pip install pycocotools") from exc
        self._x, self._y = parser.x, parser.y
        self._count = len(parser.ids or [])

    def num_examples(self) -> int:
        if self.is_coco:
            if self._x is None:
                self._materialise()
            return int(self._count or 0)
        return super().num_examples()


class TxtIndexDataset(ParsedDataset):
    """A whitespace-separated index file: first token -> ``x``, second -> ``y`` (or 0).

    Relative tokens are resolved against the index file's folder; plain labels that do
    not exist as files are left as they are (upstream made every token a path).
    ``y`` stays empty for ``data_type == "test"``, as upstream.
    """

    def _materialise(self) -> None:
        xs: list[Any] = []
        ys: list[Any] = []
        if self.path is not None and self.path.exists():
            base = self.path.parent
            for raw in read_utf8(self.path, DatasetError).splitlines():
                tokens = raw.split()
                if not tokens:
                    continue
                tokens = [str(base / t) if not Path(t).is_absolute() and (base / t).exists()
                          else t for t in tokens]
                xs.append(tokens[0])
                if self.data_type != "test":
                    ys.append(tokens[1] if len(tokens) > 1 else 0)
        self._x, self._y = to_array(xs), to_array(ys)


class CsvDataset(ParsedDataset):
    """A CSV file with a header: ``y`` is the ``label`` column, ``x`` the other columns.

    ``x`` is a 2-D array of row values (strings), ``y`` a 1-D array. Without ``label``,
    ``x`` holds whole rows and ``y`` is empty.
    """

    def __init__(self, path: Path | None, data_type: str, label: str | None) -> None:
        super().__init__(path, data_type)
        self.label = label
        self.columns: list[str] = []

    def records(self) -> Iterator[dict[str, Any]]:
        if self.path is None or not self.path.exists():
            return
        yield from csv.DictReader(io.StringIO(read_utf8(self.path, DatasetError), newline=""))

    def _materialise(self) -> None:
        xs: list[list[str]] = []
        ys: list[str] = []
        if self.path is not None and self.path.exists():
            reader = csv.DictReader(io.StringIO(read_utf8(self.path, DatasetError), newline=""))
            self.columns = list(reader.fieldnames or [])
            if self.label and self.label not in self.columns:
                raise DatasetError(f"CSV has no label column {self.label!r}",
                                   source=self.path, line=1,
                                   hint=f"columns are: {', '.join(self.columns)}")
            for row in reader:
                if self.label:
                    ys.append(row[self.label])
                xs.append([v for k, v in row.items() if k != self.label])
        self._x, self._y = to_array(xs), to_array(ys)


def subset(dataset: ParsedDataset, indices: list[int]) -> ParsedDataset:
    """A shallow copy of ``dataset`` whose per-sample arrays hold only ``indices``.

    Used to hand a chunk of a ``metadata.json`` dataset object to ``predict``.
    """
    import copy

    part = copy.copy(dataset)
    idx = np.asarray(indices, dtype=int)
    for name in ("x", "y"):
        arr = getattr(dataset, name)
        setattr(part, name, arr[idx] if len(arr) else arr)
    for name in ("explanation", "judge_prompts", "level_3", "level_4"):
        arr = getattr(dataset, name, None)
        if isinstance(arr, np.ndarray):
            part.__dict__[name] = arr[idx] if len(arr) else arr
    return part
