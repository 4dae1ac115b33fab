"""Stand-ins for ``sedna.datasources``: ``BaseDataSource`` and its parsers.

Upstream Ianvs plugins build datasets themselves, e.g.::

    data = TxtDataParse(data_type="train", func=per_line_fn)
    data.parse(index_file, use_raw=False)
    len(data), data.x, data.y

Every parser keeps Sedna's constructor ``(data_type, func=None)`` and attributes ``x``,
``y``, ``data_type``, ``process_func``, ``meta_attr``, ``is_test_data``, ``num_examples()``,
``len()``, ``parse(*args, **kwargs)`` and ``save(output)``. ``func`` is a callable or an
alias registered in the ``ClassType.CALLBACK`` group; an alias names a class, which is
instantiated without arguments and the instance used as the function (as Sedna does).

Optional dependencies are imported only inside ``parse``: :class:`CSVDataParse` needs
pandas, :class:`JSONDataParse` needs pycocotools. Importing this module imports neither;
a missing one raises :class:`ModuleNotFoundError` naming the ``pip install`` command.
(Sedna's CSV parser also imported pycocotools; that was a bug and is not copied.)

Differences from Sedna's text parser, all where Sedna failed or produced garbage:

* blank lines are skipped *before* ``func`` is called (Sedna called ``func("")``);
* a ``func`` that returns a string is taken as a rewritten line and split on whitespace
  (Sedna took its first *character* as ``x``);
* ragged rows with ``use_raw`` give a 1-D object array of rows (numpy refuses to build a
  ragged array, so Sedna raised).
"""
from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from core.common.class_factory import ClassFactory, ClassType
from core.compat.sedna_file_ops import FileOps, PathLike
from core.compat.arrays import to_array  # numpy coercion as upstream

logger = logging.getLogger(__name__)

__all__ = ["BaseDataSource", "TxtDataParse", "IndexDataParse", "CSVDataParse",
           "JSONDataParse"]


def _require(module: str, package: str, user: str) -> Any:
    """Import ``module`` or raise a ModuleNotFoundError saying how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ModuleNotFoundError(
            f"{user} needs {package}, which is not installed: pip install {package}",
            name=module) from exc




class BaseDataSource:
    """A parsed dataset: ``x`` (features) and ``y`` (labels), both None until parsed.

    Args:
        data_type: ``"train"``, ``"eval"``, ``"test"``, ...; ``"test"`` data has no labels.
        func: per-sample processing function, or an alias of the CALLBACK registry group.

    Raises:
        RegistryError: ``func`` is a string that no CALLBACK registration answers to.
    """

    def __init__(self, data_type: str = "train",
                 func: Callable[..., Any] | str | None = None) -> None:
        self.data_type = data_type
        self.process_func: Callable[..., Any] | None = None
        if callable(func):
            self.process_func = func
        elif func:
            self.process_func = ClassFactory.get_cls(ClassType.CALLBACK, func)()
        self.x: Any = None
        self.y: Any = None
        self.meta_attr: Any = None

    def num_examples(self) -> int:
        """``len(x)``; raises :class:`TypeError` before anything was parsed (x is None)."""
        if self.x is None:
            raise TypeError(f"{type(self).__name__} has no data: x is None (nothing parsed, "
                            "or every input was skipped)")
        return len(self.x)

    def __len__(self) -> int:
        return self.num_examples()

    def parse(self, *args: Any, **kwargs: Any) -> None:
        """Fill ``x`` and ``y`` from the given inputs (subclasses)."""
        raise NotImplementedError

    @property
    def is_test_data(self) -> bool:
        """True iff ``data_type == "test"``."""
        return self.data_type == "test"

    def save(self, output: PathLike = "") -> str:
        """Pickle this object with :meth:`FileOps.dump`; returns the file written."""
        return FileOps.dump(self, output)


class TxtDataParse(BaseDataSource):
    """Whitespace-separated text files, one sample per line (e.g. an image index).

    ``parse(*files, use_raw=False)``: for each existing file (missing or empty names are
    skipped), each non-blank line is split into tokens, or passed (stripped) to
    ``process_func``, which returns the tokens (a sequence) or a rewritten line (a string,
    split on whitespace). A row with no tokens is skipped. Otherwise ``x`` gets the first
    token (with ``use_raw``: the whole row) and, unless ``data_type == "test"``, ``y`` gets
    the second token or the integer ``0``. Both become numpy arrays with numpy's coercion
    (mixed strings and ints all become strings); no input gives empty float arrays. Files
    are read as UTF-8.
    """

    def __init__(self, data_type: str, func: Callable[..., Any] | str | None = None) -> None:
        super().__init__(data_type=data_type, func=func)

    def _lines(self, path: str) -> list[str]:
        """The stripped, non-blank lines of ``path`` as ``process_func`` should see them."""
        with open(path, encoding="utf-8") as handle:
            return [s for s in (line.strip() for line in handle) if s]

    def _row(self, line: str) -> Sequence[Any] | np.ndarray:
        if self.process_func is None:
            return line.split()
        row = self.process_func(line)
        if isinstance(row, str):
            return row.split()
        if row is None:
            return ()
        if not isinstance(row, (list, tuple, np.ndarray)):
            raise TypeError(f"{type(self).__name__}: func {self.process_func!r} returned "
                            f"{type(row).__name__} for line {line!r}; it must return a "
                            "sequence of tokens or a line string")
        return row

    def parse(self, *args: Any, **kwargs: Any) -> None:
        """Parse the text files ``args``; see the class docs. Only ``use_raw`` is read."""
        use_raw = bool(kwargs.get("use_raw"))
        xs: list[Any] = []
        ys: list[Any] = []
        for name in args:
            if not name or not FileOps.exists(name):
                logger.debug("%s: skipping missing file %r", type(self).__name__, name)
                continue
            for line in self._lines(os.fspath(name)):
                row = self._row(line)
                if not len(row):
                    continue
                if use_raw:
                    xs.append(row)
                    continue
                xs.append(row[0])
                if not self.is_test_data:
                    ys.append(row[1] if len(row) > 1 else 0)
        self.x = to_array(xs)
        self.y = to_array(ys)


class IndexDataParse(TxtDataParse):
    """An index file: :class:`TxtDataParse` with paths relative to the index's folder.

    ``IndexDataParse`` exists in no published Sedna; upstream Ianvs examples call it as
    ``IndexDataParse(data_type=..., func=per_line_fn).parse(index_file, use_raw=False)``.
    This stand-in reads it as the index-file parser: the same call shape and result as
    :class:`TxtDataParse`, except that each relative token of a line that names an existing
    file or folder *relative to the index file's folder* is replaced by that absolute path
    before the line is split or handed to ``func`` (the line is re-joined with single
    spaces). This is what Ianvs does to a txt index before parsing it, with one difference
    shared by this project's own index reader: tokens that are not existing paths (class
    labels such as ``3``, or missing files) are left as they are, where Ianvs turned every
    token into a path. Absolute tokens are never changed. A ``func`` that resolves paths
    itself (``os.path.join(folder, token)``) sees absolute tokens and so still works.
    """

    def _lines(self, path: str) -> list[str]:
        folder = os.path.dirname(os.path.abspath(path))
        lines = []
        for line in super()._lines(path):
            tokens = []
            for token in line.split():
                candidate = os.path.join(folder, token)
                if not os.path.isabs(token) and os.path.exists(candidate):
                    token = os.path.abspath(candidate)
                tokens.append(token)
            lines.append(" ".join(tokens))
        return lines


class CSVDataParse(BaseDataSource):
    """CSV files (or mappings) read with pandas; ``label`` names the target column.

    ``parse(*inputs, label="", usecols=..., **read_csv_options)``: each input is a CSV path
    (read with ``pandas.read_csv(path, **options)``; missing paths skipped), a mapping (one
    row) or a list of mappings (rows). ``usecols`` may be a comma-separated string; the
    label column is added to it. ``process_func``, if set, receives each DataFrame and
    returns the one to use. With ``label``, an input without that column is skipped;
    ``y`` is the concatenated label Series and ``x`` the DataFrames without it (also when
    ``usecols`` is given: Sedna's ``read_csv`` then raised). Without ``label``, ``y``
    stays None (Sedna raised). When every input is skipped, ``x`` and ``y``
    stay None. Needs pandas (imported here, not at module import).
    """

    def __init__(self, data_type: str, func: Callable[..., Any] | str | None = None) -> None:
        super().__init__(data_type=data_type, func=func)

    @staticmethod
    def parse_json(lines: dict[str, Any] | list[dict[str, Any]], **kwargs: Any) -> Any:
        """A DataFrame of one mapping (one row) or of a list of mappings (one row each).

        Only ``usecols`` of the keyword options is applied (a column selection).
        """
        pd = _require("pandas", "pandas", "CSVDataParse")
        frame = pd.DataFrame([lines] if isinstance(lines, dict) else list(lines))
        usecols = kwargs.get("usecols")
        if usecols:
            frame = frame[[c for c in usecols if c in frame.columns]]
        return frame

    @staticmethod
    def _read_csv(pd: Any, path: Any, label: str, options: dict[str, Any]) -> Any:
        """``pandas.read_csv``; named ``usecols`` may lack the label column (then the file
        is skipped by the caller), any other missing column is a :class:`ValueError`."""
        usecols = options.get("usecols")
        if not label or not usecols or not all(isinstance(c, str) for c in usecols):
            return pd.read_csv(path, **options)
        wanted = set(usecols)
        frame = pd.read_csv(path, **{**options, "usecols": lambda c: c in wanted})
        missing = [c for c in usecols if c != label and c not in frame.columns]
        if missing:
            raise ValueError(f"{path}: usecols not found in the CSV: {missing}")
        return frame

    def parse(self, *args: Any, **kwargs: Any) -> None:
        """Parse CSV files or mappings; see the class docs."""
        pd = _require("pandas", "pandas", "CSVDataParse")
        label = kwargs.pop("label", "") or ""
        usecols = kwargs.get("usecols", "")
        if isinstance(usecols, str):
            usecols = [c for c in usecols.split(",") if c] if usecols else []
        if usecols:
            usecols = list(usecols)
            if label and label not in usecols:
                usecols.append(label)
            kwargs["usecols"] = usecols
        else:
            kwargs.pop("usecols", None)
        xs: list[Any] = []
        ys: list[Any] = []
        for item in args:
            if isinstance(item, (dict, list)):
                frame = self.parse_json(item, **kwargs)
            else:
                if not item or not FileOps.exists(item):
                    logger.debug("CSVDataParse: skipping missing file %r", item)
                    continue
                frame = self._read_csv(pd, item, label, kwargs)
            if self.process_func is not None:
                frame = self.process_func(frame)
            if label:
                if label not in frame.columns:
                    logger.debug("CSVDataParse: %r has no column %r; skipped", item, label)
                    continue
                ys.append(frame[label])
                frame = frame.drop(columns=[label])
            xs.append(frame)
        if not xs:
            return
        self.x = pd.concat(xs)
        self.y = pd.concat(ys) if ys else None


class JSONDataParse(BaseDataSource):
    """A COCO annotation file in the MOT17 layout (images carry ``frame_id``/``video_id``,
    annotations ``track_id``).

    ``parse(annotation_file)`` (several arguments are joined into one path, as Sedna):
    ``data_dir`` is ``<parent of the file's folder>/train``; ``x`` is the mapping
    ``{"data_dir", "coco", "ids", "class_ids", "annotations"}`` where each annotation is
    ``(N x 6 array [x1, y1, x2, y2, class_index, track_id], (height, width, frame_id,
    video_id, file_name), file_name)`` over the image's boxes with positive area and
    non-negative size; ``y`` is the list of ``*/gt/gt_val_half.txt`` files under
    ``data_dir``. Needs pycocotools (imported here, not at module import).

    Raises:
        ValueError: no file given.
        KeyError: an image or annotation lacks a MOT17 field.
    """

    DIRECTORY = "train"
    LABEL_PATH = "*/gt/gt_val_half.txt"

    def __init__(self, data_type: str, func: Callable[..., Any] | str | None = None) -> None:
        super().__init__(data_type=data_type, func=func)
        self.data_dir: Path | None = None
        self.coco: Any = None
        self.ids: list[int] | None = None
        self.class_ids: list[int] | None = None
        self.annotations: list[tuple[np.ndarray, tuple[Any, ...], str]] | None = None

    def parse(self, *args: Any, **kwargs: Any) -> None:
        """Read the annotation file; see the class docs."""
        if not args:
            raise ValueError("JSONDataParse.parse needs the annotation file")
        coco_module = _require("pycocotools.coco", "pycocotools", "JSONDataParse")
        filepath = Path(*[os.fspath(a) for a in args]).absolute()
        self.data_dir = filepath.parents[1] / self.DIRECTORY
        self.coco = coco_module.COCO(str(filepath))
        self.ids = list(self.coco.getImgIds())
        self.class_ids = sorted(self.coco.getCatIds())
        self.annotations = [self.load_anno_from_ids(i) for i in self.ids]
        self.x = {"data_dir": self.data_dir, "coco": self.coco, "ids": self.ids,
                  "class_ids": self.class_ids, "annotations": self.annotations}
        self.y = sorted(self.data_dir.glob(self.LABEL_PATH))

    def load_anno_from_ids(self, id_: int) -> tuple[np.ndarray, tuple[Any, ...], str]:
        """Boxes, image info and file name of image ``id_`` (see the class docs)."""
        assert self.coco is not None and self.class_ids is not None, "call parse() first"
        image = self.coco.loadImgs(id_)[0]
        boxes = []
        for ann in self.coco.loadAnns(self.coco.getAnnIds(imgIds=[int(id_)], iscrowd=False)):
            x, y, w, h = ann["bbox"][:4]
            if ann["area"] > 0 and w >= 0 and h >= 0:
                ann["clean_bbox"] = [x, y, x + w, y + h]  # Sedna adds it to the dict too
                boxes.append((x, y, x + w, y + h,
                              self.class_ids.index(ann["category_id"]), ann["track_id"]))
        res = np.zeros((len(boxes), 6))
        for i, box in enumerate(boxes):
            res[i] = box
        file_name = image["file_name"] if "file_name" in image else f"{id_:012}.jpg"
        info = (image["height"], image["width"], image["frame_id"], image["video_id"],
                file_name)
        return res, info, file_name
