"""Progress reporting: tqdm on terminals, periodic log lines elsewhere, nothing when disabled."""
from __future__ import annotations

import fcntl
import logging
import os
import struct
import sys
import termios

import pytest

from core.common import progress
from core.common.progress import progress_bar


def test_non_terminal_gets_log_lines_not_control_characters(monkeypatch, caplog,
                                                            tmp_path) -> None:
    with open(tmp_path / "err.txt", "w") as fake:
        monkeypatch.setattr(sys, "stderr", fake)
        monkeypatch.setattr(progress, "LOG_INTERVAL_S", 3600.0)
        with caplog.at_level(logging.INFO, logger="core.common.progress"):
            with progress_bar(total=5, desc="execute") as bar:
                for _ in range(5):
                    bar.update(1)
    assert (tmp_path / "err.txt").read_text() == ""  # no \r bar redraws in log files
    assert [r.getMessage() for r in caplog.records] == ["execute: 5/5 in 0s"]


def test_non_terminal_reports_partial_progress_at_close(monkeypatch, caplog, tmp_path) -> None:
    with open(tmp_path / "err.txt", "w") as fake:
        monkeypatch.setattr(sys, "stderr", fake)
        monkeypatch.setattr(progress, "LOG_INTERVAL_S", 3600.0)
        with caplog.at_level(logging.INFO, logger="core.common.progress"):
            with pytest.raises(KeyboardInterrupt):
                with progress_bar(total=10, desc="generate") as bar:
                    bar.update(3)
                    raise KeyboardInterrupt
    assert [r.getMessage() for r in caplog.records] == ["generate: 3/10, 0s, about 0s left"]


def test_log_lines_give_the_time_so_far_and_left(monkeypatch, caplog, tmp_path) -> None:
    """On a clock the test moves: 4 of 10 items in 2 minutes leaves about 3 minutes at that
    pace; the last line gives the whole time; hours show as hours and minutes."""
    now = [1000.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    with open(tmp_path / "err.txt", "w") as fake:
        monkeypatch.setattr(sys, "stderr", fake)
        monkeypatch.setattr(progress, "LOG_INTERVAL_S", 60.0)
        with caplog.at_level(logging.INFO, logger="core.common.progress"):
            with progress_bar(total=10, desc="generate (embedded)") as bar:
                bar.set_postfix_str("9.4 tokens/s")
                now[0] += 120
                bar.update(4)
                now[0] += 30  # within the interval: no line
                bar.update(1)
                now[0] += 4 * 3600
                bar.update(1)
                now[0] += 150
                bar.update(4)
    assert [r.getMessage() for r in caplog.records] == [
        "generate (embedded): 4/10, 2m 00s, about 3m 00s left (9.4 tokens/s)",
        "generate (embedded): 6/10, 4h 02m, about 2h 41m left (9.4 tokens/s)",
        "generate (embedded): 10/10 in 4h 05m (9.4 tokens/s)"]


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (59.4, "59s"), (60, "1m 00s"),
                                           (3599, "59m 59s"), (3600, "1h 00m"),
                                           (90061, "25h 01m")])
def test_durations_read_as_the_larger_two_units(seconds: float, text: str) -> None:
    assert progress.duration(seconds) == text


def test_disabled_reports_nothing(caplog) -> None:
    with caplog.at_level(logging.INFO, logger="core.common.progress"):
        with progress_bar(total=3, desc="x", enabled=False) as bar:
            bar.update(3)
            bar.set_postfix_str("ignored")
    assert caplog.records == []


def test_terminal_bar_keeps_log_lines_readable(monkeypatch) -> None:
    """On a real pseudo-terminal, log records print above the bar, and the bar stays."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    term = os.fdopen(slave, "w", buffering=1)
    monkeypatch.setattr(sys, "stderr", term)
    handler = logging.StreamHandler(term)
    handler.setFormatter(logging.Formatter("LOG %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    old_level = root.level
    root.setLevel(logging.INFO)
    try:
        with progress_bar(total=3, desc="execute", unit="sample") as bar:
            bar.update(1)
            logging.getLogger("core.test").info("halfway")
            bar.update(2)
        assert handler in root.handlers  # restored after the bar
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        term.close()
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    text = out.decode("utf-8", "replace")
    lines = text.replace("\r", "\n").splitlines()
    assert "LOG halfway" in lines  # on a line of its own, not glued to the bar
    assert any("execute" in line and "3/3" in line for line in lines), repr(text)
