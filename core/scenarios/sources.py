"""Opening a builder's ``--from`` input: a folder, or a source archive (sdist).

Archives (``.tar.gz``, ``.tgz``, ``.tar.bz2``, ``.tar.xz``, ``.zip``) are unpacked into a
temporary folder that is removed when the ``with`` block ends; members that would land outside
it (absolute paths, ``..``, links) are skipped. An archive holding one top folder (as sdists
do) is read from inside that folder.
"""
from __future__ import annotations

import contextlib
import json
import os
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from core.common.errors import DatasetError

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".zip")


def _safe(name: str) -> bool:
    parts = Path(name).parts
    return bool(parts) and not Path(name).is_absolute() and ".." not in parts


@contextlib.contextmanager
def opened_source(path: Path) -> Iterator[Path]:
    """The folder to read: ``path`` itself, or the unpacked archive.

    Raises:
        DatasetError: the path does not exist or is neither a folder nor a known archive.
    """
    if path.is_dir():
        yield path
        return
    if not path.is_file():
        raise DatasetError("--from names nothing that exists", source=path)
    if not path.name.endswith(ARCHIVE_SUFFIXES):
        raise DatasetError("--from must be a folder or a source archive",
                           source=path, hint=f"archives: {', '.join(ARCHIVE_SUFFIXES)}")
    with tempfile.TemporaryDirectory(prefix="ianvs-src-") as tmp:
        root = Path(tmp)
        try:
            if path.name.endswith(".zip"):
                with zipfile.ZipFile(path) as zf:
                    for info in zf.infolist():
                        if _safe(info.filename):
                            zf.extract(info, root)
            else:
                with tarfile.open(path) as tf:
                    members = [m for m in tf.getmembers()
                               if _safe(m.name) and (m.isfile() or m.isdir())]
                    tf.extractall(root, members=members)
        except (tarfile.TarError, zipfile.BadZipFile, OSError) as exc:
            raise DatasetError(f"cannot unpack the archive: {exc}", source=path) from exc
        entries = list(root.iterdir())
        yield entries[0] if len(entries) == 1 and entries[0].is_dir() else root


def write_records(records: list[dict[str, Any]], out: Path) -> int:
    """Write JSONL atomically; returns the count."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(tmp, out)
    return len(records)


def write_built(records: list[dict[str, Any]], out: Path, leaks: Mapping[str, int]) -> int:
    """Write a builder's records and its build report ``<out>.build.json`` (record count and
    the leak check's tally), and say so on stdout; returns the count."""
    from core.scenarios.leak_views import tally

    count = write_records(records, out)
    found = tally(leaks)
    report_path = out.with_name(out.name + ".build.json")
    report_path.write_text(json.dumps({"records": count, "leaks": found}, indent=1) + "\n",
                           encoding="utf-8")
    print(f"wrote {count} records to {out} (leak check: {found['dropped']} dropped; "
          f"report {report_path})")
    return count
