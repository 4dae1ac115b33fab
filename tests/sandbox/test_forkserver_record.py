"""Unit tests of the fork server's verdict parsing (the judge's / harness's verdict memfd)."""

from __future__ import annotations

import importlib.util
import os
import types
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parents[2] / "core/testenvmanager/sandbox/forkserver.py"
NONCE = "ab" * 16


@pytest.fixture(scope="module")
def fs():
    spec = importlib.util.spec_from_file_location("_fs_under_test", SERVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _parse(fs, data: bytes, nonce: str = NONCE):
    job = fs._Job(0, {}, {})
    job.nonce = nonce
    fd = os.memfd_create("verdict")
    try:
        os.write(fd, data)
        job.mem["verdict"] = fd
        server = types.SimpleNamespace(record_buf=bytearray(fs._RECORD_HEAD))
        record = fs.Server._record(server, job)
        # the header went through one buffer that is zeroed again: no detail byte stays behind
        assert server.record_buf == bytes(fs._RECORD_HEAD)
        return record
    finally:
        os.close(fd)


def test_valid_record(fs) -> None:
    record = _parse(fs, f"{NONCE} failed 0.125\nAssertionError: x".encode())
    header = len(f"{NONCE} failed 0.125\n")
    assert record == ("failed", 0.125, header)


@pytest.mark.parametrize("data", [
    b"cd" * 16 + b" passed 0.1\n",                       # wrong nonce
    b"junk" + b"ab" * 16 + b" passed 0.1\n",             # prefix written by the program
    b"ab" * 16 + b" passed 0.1",                         # no newline: not a finished header
    b"ab" * 16 + b" passed\n",                           # missing field
    b"ab" * 16 + b" passed 0.1 extra\n",                 # extra field
    b"ab" * 16 + b" passed zero\n",                      # not a number
    b"ab" * 16 + b" timeout 0.1\n",                      # not a verdict a harness can give
    b"\xff" * 40 + b"\n",                                # not ASCII
    b"",                                                 # nothing written
])
def test_tampered_or_missing_records_are_rejected(fs, data: bytes) -> None:
    assert _parse(fs, data) is None
