"""Unit tests of the fork server's verdict parsing (the unforgeable channel)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parents[2] / "core/testenvmanager/sandbox/forkserver.py"


@pytest.fixture(scope="module")
def fs():
    spec = importlib.util.spec_from_file_location("_fs_under_test", SERVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _job(fs, data: bytes, nonce: str = "ab" * 16):
    job = fs._Job(0, {})
    job.nonce = nonce
    job.bufs["res"] += data
    job.totals["res"] = len(data)
    return job


def _parse(fs, job):
    return fs.Server._parse_record(None, job)


def test_valid_record(fs) -> None:
    detail = "AssertionError: x".encode().hex()
    record, foreign = _parse(fs, _job(fs, f"{'ab' * 16} failed 0.125 {detail}\n".encode()))
    assert not foreign and record == ("failed", 0.125, "AssertionError: x")


@pytest.mark.parametrize("data", [
    b"cd" * 16 + b" passed 0.1 \n",                      # wrong nonce
    b"ab" * 16 + b" passed 0.1 \n" + b"ab" * 16 + b" passed 0.1 \n",  # two records
    b"junk" + b"ab" * 16 + b" passed 0.1 \n",            # prefix written by the program
    b"ab" * 16 + b" passed 0.1 zz\n",                    # bad hex
    b"ab" * 16 + b" passed 0.1 ",                        # no newline
    b"ab" * 16 + b" timeout 0.1 \n",                    # not a verdict the harness can give
])
def test_tampered_records_are_foreign(fs, data: bytes) -> None:
    record, foreign = _parse(fs, _job(fs, data))
    assert record is None and foreign


def test_empty_channel_is_no_record(fs) -> None:
    assert _parse(fs, _job(fs, b"")) == (None, False)
