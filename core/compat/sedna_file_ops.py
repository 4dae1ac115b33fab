"""Stand-in for ``sedna.common.file_ops.FileOps``, for local paths only.

Upstream Ianvs plugins call ``FileOps.upload(src, dst)``, ``FileOps.exists(path)`` and a few
more class methods. Sedna's ``FileOps`` also talks to S3, GCS and HTTP servers; this stand-in
never touches the network: every method given a remote URL (any ``scheme://`` other than
``file://``, e.g. ``s3://``, ``obs://``, ``http(s)://``) raises :class:`RemoteStorageError`,
which says that remote storage needs the real KubeEdge Sedna. The predicates
:meth:`FileOps.is_local` and :meth:`FileOps.is_remote` never raise.

Semantics kept from Sedna (read before use):

* ``upload(src, dst)`` *moves* by default: with ``clean=True`` (the default) the source is
  deleted after it was copied, unless source and destination are the same file. With
  ``tar=True`` the source is first packed into ``<src>.tar.gz``; that archive is what is
  copied and (with ``clean``) deleted, the original source stays.
* A file copied onto an existing directory lands inside it under its own name; a directory
  copied onto an existing directory is merged into it (files of the same name are replaced).
* ``dump``/``load`` pickle. ``load`` unpickles, which runs code chosen by whoever wrote the
  file: only load files you wrote yourself.
* ``join_path`` strips leading separators of every part but the first
  (``join_path("/a", "/b") == "/a/b"``, unlike :func:`os.path.join`).

Deliberate differences from Sedna, all where Sedna fails silently or surprisingly:

* A missing local source raises :class:`FileNotFoundError` in ``upload``, ``download`` and
  ``load`` (Sedna copied an empty temporary file instead, or failed later on it).
* ``file://`` prefixes are stripped (Sedna accepted them in ``is_local`` and then could not
  open the path).
* ``clean_folder`` also creates single-component relative folders such as ``"out"`` (Sedna
  skipped paths without a separator).
* ``tar=True`` stores entries under the source's base name (Sedna stored each file under its
  full path, so unpacking recreated that path).
* ``upload(src, "")`` raises :class:`ValueError` (Sedna copied nothing and then deleted
  the source).
* ``dump(obj, "")`` writes a temporary file and returns its path, like ``dump(obj)`` (Sedna
  wrote nothing and returned ``""``).
* ``dump`` writes plain pickle (Sedna used joblib, which reads plain pickle); ``load`` uses
  joblib when it is installed, so files written by Sedna load too, else :mod:`pickle`.
"""
from __future__ import annotations

import hashlib
import logging
import os
import pickle
import re
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Union

from core.common.errors import IanvsError

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]

_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_LOCAL_PREFIX = "file://"


class RemoteStorageError(IanvsError, NotImplementedError):
    """A remote URL was given to the local-only ``FileOps`` stand-in."""


def _text(path: PathLike) -> str:
    return os.fspath(path)


def _local(path: PathLike, action: str) -> str:
    """``path`` as a local path string; a remote URL raises :class:`RemoteStorageError`."""
    text = _text(path)
    if text.startswith(_LOCAL_PREFIX):
        return text[len(_LOCAL_PREFIX):]
    if _URL_RE.match(text):
        raise RemoteStorageError(
            f"cannot {action} {text!r}: this FileOps stand-in handles local paths only",
            hint="remote storage (s3://, obs://, http(s)://, ...) needs the real KubeEdge "
                 "Sedna installed; or use a local path")
    return text


class FileOps:
    """Sedna's ``FileOps`` class methods, for local files and folders (see module docs)."""

    _LOCAL_PREFIX = _LOCAL_PREFIX

    @classmethod
    def is_remote(cls, src: PathLike) -> bool:
        """True for a URL with a scheme other than ``file://`` (never raises)."""
        text = _text(src)
        return bool(_URL_RE.match(text)) and not text.startswith(_LOCAL_PREFIX)

    @classmethod
    def is_local(cls, src: PathLike) -> bool:
        """As Sedna: a ``file://`` URL, or an existing local file or folder (never raises)."""
        text = _text(src)
        if text.startswith(_LOCAL_PREFIX):
            return True
        return not cls.is_remote(text) and (os.path.isdir(text) or os.path.isfile(text))

    @classmethod
    def exists(cls, folder: PathLike) -> bool:
        """Is ``folder`` an existing local folder or file? Remote URLs raise."""
        path = _local(folder, "check the existence of")
        return os.path.isdir(path) or os.path.isfile(path)

    @classmethod
    def join_path(cls, *args: PathLike) -> str:
        """Join parts; leading separators of all parts but the first are dropped.

        One argument is returned unchanged (as a string). A first part containing ``:`` (a
        URL) is kept as it is and the rest appended, as Sedna does.
        """
        if not args:
            raise TypeError("join_path() needs at least one part")
        parts = [_text(a) for a in args]
        if len(parts) == 1:
            return parts[0]
        root = os.path.sep if parts[0].startswith(os.path.sep) else ""
        parts = [p.lstrip(os.path.sep) for p in parts]
        parts[0] = root + parts[0]
        return os.path.join(*parts)

    @classmethod
    def make_dir(cls, *args: PathLike) -> None:
        """Create the folder ``join_path(*args)`` (and its parents) if it does not exist."""
        path = _local(cls.join_path(*args), "create")
        if not os.path.isdir(path):
            os.makedirs(path, exist_ok=True)

    @classmethod
    def make_base_dir(cls, *args: PathLike) -> None:
        """Create the parent folder of the file ``join_path(*args)`` if needed."""
        path = _local(cls.join_path(*args), "create the folder of")
        if os.path.isfile(path):
            return
        parent = os.path.dirname(path)
        if parent and not os.path.isdir(parent):
            os.makedirs(parent, exist_ok=True)

    @classmethod
    def clean_folder(cls, target: PathLike | list[PathLike],
                     clean: bool = True) -> list[PathLike]:
        """Make each target folder exist; with ``clean``, empty it (delete, re-create) first.

        A target that is an existing *file* is deleted with ``clean``; without ``clean``, its
        parent folder is created instead. Empty strings are skipped. Returns the targets as
        a list.
        """
        targets: list[PathLike] = [target] if isinstance(target, (str, os.PathLike)) \
            else list(target)
        for item in dict.fromkeys(targets):
            path = _local(item, "clean")
            if not path:
                continue
            if clean:
                cls.delete(path)
            if os.path.isfile(path):
                path = os.path.dirname(path)
            if path:
                os.makedirs(path, exist_ok=True)
        return targets

    @classmethod
    def delete(cls, path: PathLike) -> None:
        """Remove a file or a folder tree; a missing path or an OS error is ignored (Sedna)."""
        local = _local(path, "delete")
        try:
            if os.path.isdir(local) and not os.path.islink(local):
                shutil.rmtree(local)
            elif os.path.lexists(local):
                os.remove(local)
        except OSError as exc:
            logger.debug("could not delete %s: %s", local, exc)

    @classmethod
    def remove_path_prefix(cls, org_str: str, prefix: str) -> str:
        """``org_str`` without a leading ``prefix`` (a trailing separator of it ignored)."""
        if not prefix:
            return org_str
        head = prefix[:-1] if prefix.endswith(os.path.sep) else prefix
        return org_str.replace(head, "", 1) if org_str.startswith(head) else org_str

    @classmethod
    def get_file_hash(cls, filepath: PathLike) -> str:
        """MD5 hex digest of a file's bytes; ``""`` when it is not an existing file."""
        if not filepath:
            return ""
        path = _local(filepath, "hash")
        if not os.path.isfile(path):
            return ""
        digest = hashlib.md5(usedforsecurity=False)
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()

    @classmethod
    def copy_file(cls, src: PathLike, dst: PathLike) -> None:
        """Copy a file or a folder; see the module docs for the landing rules.

        An empty ``dst`` does nothing (Sedna). A missing ``src`` raises
        :class:`FileNotFoundError`.
        """
        if not _text(dst):
            return
        source, target = _local(src, "copy"), _local(dst, "copy to")
        if os.path.isfile(source):
            if os.path.isdir(target):
                target = os.path.join(target, os.path.basename(source))
            if os.path.isfile(target) and os.path.samefile(source, target):
                return
            parent = os.path.dirname(target)
            if parent:
                os.makedirs(parent, exist_ok=True)
            shutil.copy(source, target)
        elif os.path.isdir(source):
            cls.copy_folder(source, target)
        else:
            raise FileNotFoundError(f"cannot copy {source!r}: no such file or folder")

    @classmethod
    def copy_folder(cls, src: PathLike, dst: PathLike) -> None:
        """Copy folder ``src`` to ``dst``, merging into an existing ``dst``.

        Does nothing when ``dst`` is empty or ``src`` is not a folder (Sedna). Copying a
        folder into a folder inside itself raises :class:`ValueError`.
        """
        if not _text(dst):
            return
        source, target = _local(src, "copy"), _local(dst, "copy to")
        if not os.path.isdir(source):
            return
        if os.path.exists(target) and os.path.samefile(source, target):
            return
        real_src, real_dst = Path(source).resolve(), Path(target).resolve()
        if real_src in real_dst.parents:
            raise ValueError(f"cannot copy folder {source!r} into itself ({target!r})")
        shutil.copytree(source, target, dirs_exist_ok=True)

    @classmethod
    def upload(cls, src: PathLike, dst: PathLike | None, tar: bool = False,
               clean: bool = True) -> str:
        """Copy ``src`` (file or folder) to the local ``dst``; returns ``dst``.

        ``dst=None`` copies to a new temporary file (a new temporary folder for a folder
        source). ``tar`` packs ``src`` into ``<src>.tar.gz`` first and copies that.
        ``clean`` (the default, as Sedna) deletes what was copied, i.e. ``src`` itself or,
        with ``tar``, the archive, unless it is the same file as ``dst``.

        Raises:
            RemoteStorageError: ``src`` or ``dst`` is a remote URL.
            FileNotFoundError: ``src`` does not exist.
            ValueError: ``dst`` is an empty string.
        """
        source = _local(src, "upload")
        target = _local(dst, "upload to") if dst is not None else None
        if target == "":
            raise ValueError("upload needs a destination (an empty one would only delete "
                             "the source, as Sedna did)")
        if not os.path.exists(source):
            raise FileNotFoundError(f"cannot upload {source!r}: no such file or folder")
        if target is None:
            target = cls._temp_target(source, tar)
        result = target if dst is None else _text(dst)
        if tar:
            archive = f"{source.rstrip(os.path.sep)}.tar.gz"
            cls._tar(source, archive)
            source = archive
        cls.copy_file(source, target)
        if clean:
            if os.path.exists(target) and os.path.samefile(source, target):
                return result
            cls.delete(source)
            logger.debug("upload moved %s to %s (clean=True)", source, target)
        return result

    @classmethod
    def download(cls, src: PathLike, dst: PathLike | None = None,
                 unzip: bool = False) -> str:
        """Copy the local ``src`` to ``dst`` (new temporary file/folder if None); returns it.

        With ``unzip`` and a ``dst`` ending in ``.tar.gz``, the copied archive is unpacked
        into ``dst``'s folder (entries that would land outside it are refused). The
        keyword keeps Sedna's name ``unzip``.

        Raises:
            RemoteStorageError: ``src`` or ``dst`` is a remote URL.
            FileNotFoundError: ``src`` does not exist.
        """
        source = _local(src, "download")
        target = _local(dst, "download to") if dst is not None else ""
        if not os.path.exists(source):
            raise FileNotFoundError(f"cannot download {source!r}: no such file or folder")
        if dst is None:
            target = cls._temp_target(source, False)
            dst = target
        parent = os.path.dirname(target)
        if parent:
            os.makedirs(parent, exist_ok=True)
        cls.copy_file(source, target)
        if unzip and target.endswith(".tar.gz"):
            cls._untar(target)
        return _text(dst)

    @classmethod
    def dump(cls, obj: Any, dst: PathLike | None = None) -> str:
        """Pickle ``obj`` to ``dst`` (a folder: a new file in it); returns where it went.

        Like Sedna, the object is written to a temporary file which is then uploaded (moved)
        to ``dst``; with ``dst`` None or empty the temporary file itself is returned.
        """
        target = _local(dst, "dump to") if dst is not None else ""
        fd, name = tempfile.mkstemp()
        with os.fdopen(fd, "wb") as handle:
            pickle.dump(obj, handle)
        if not target:
            return name
        return cls.upload(name, target)

    @classmethod
    def load(cls, src: PathLike) -> Any:
        """Unpickle the local file ``src``: only for files you wrote (unpickling runs code).

        Raises:
            RemoteStorageError: ``src`` is a remote URL.
            FileNotFoundError: ``src`` is not an existing file.
        """
        path = _local(src, "load")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"cannot load {path!r}: no such file")
        try:
            import joblib  # reads Sedna's joblib files and plain pickle
        except ImportError:
            with open(path, "rb") as handle:
                return pickle.load(handle)  # noqa: S301 - documented: own files only
        return joblib.load(path)

    @classmethod
    def dump_pickle(cls, obj: Any, filename: PathLike) -> None:
        """Pickle ``obj`` to ``filename``, creating its folder."""
        path = _local(filename, "write")
        cls.make_base_dir(path)
        with open(path, "wb") as handle:
            pickle.dump(obj, handle)

    @classmethod
    def load_pickle(cls, filename: PathLike) -> Any:
        """Unpickle ``filename`` (own files only); None when it is not a file (Sedna)."""
        path = _local(filename, "load")
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as handle:
            return pickle.load(handle)  # noqa: S301 - documented: own files only

    @classmethod
    def obj_to_pickle_string(cls, x: Any) -> str:
        """Pickle ``x`` and return it base64-encoded (with line breaks, as Sedna)."""
        import codecs

        return codecs.encode(pickle.dumps(x), "base64").decode()

    @classmethod
    def pickle_string_to_obj(cls, s: str) -> Any:
        """Inverse of :meth:`obj_to_pickle_string` (own strings only: unpickling runs code)."""
        import codecs

        return pickle.loads(codecs.decode(s.encode(), "base64"))  # noqa: S301

    @staticmethod
    def _temp_target(source: str, tar: bool) -> str:
        """A new temporary folder for a folder source, else a new temporary file."""
        if os.path.isdir(source) and not tar:
            return tempfile.mkdtemp()
        fd, name = tempfile.mkstemp()
        os.close(fd)
        return name

    @classmethod
    def _tar(cls, src: str, dst: str) -> None:
        with tarfile.open(dst, "w:gz") as archive:
            archive.add(src, arcname=os.path.basename(src.rstrip(os.path.sep)))

    @classmethod
    def _untar(cls, src: str, dst: str | None = None) -> None:
        folder = dst if dst is not None else (os.path.dirname(src) or ".")
        with tarfile.open(src, "r:gz") as archive:
            if hasattr(tarfile, "data_filter"):
                archive.extractall(path=folder, filter="data")
                return
            root = Path(folder).resolve()
            for member in archive.getmembers():
                where = (root / member.name).resolve()
                if (where != root and root not in where.parents) or member.issym() \
                        or member.islnk():
                    raise ValueError(f"refusing to unpack {member.name!r} from {src}")
            archive.extractall(path=folder)  # noqa: S202 - members checked above
