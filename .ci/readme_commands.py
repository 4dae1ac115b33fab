#!/usr/bin/env python3
"""Run the README's two commands as a new user would: on a clean clone, in a fresh virtual
environment, without `.ci/run`'s system set-up (no Chromium install, no PostgreSQL user, no
docker engine started). Prints each command's exit status and wall time, and exits non-zero
when either failed.

    python .ci/readme_commands.py                      # both commands, the whole suite
    python .ci/readme_commands.py --pytest-args "tests/suite -q"   # command 2 on a selection
    python .ci/readme_commands.py --only 1             # just the install and the default job

The commands are read from the README's first fenced block (its first two lines), never
retyped here, so the check follows the README. ``--pytest-args`` replaces what follows
``python -m pytest`` in command 2 (for a quick check; the README's own arguments otherwise).
``--system-site-packages`` lets the fresh environment see this interpreter's packages (saves
the downloads; a truly fresh machine has none). The clone is of the committed HEAD of this
checkout (``git clone``), so uncommitted changes are not in it.
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
logger = logging.getLogger("readme_commands")


def readme_commands(readme: Path = REPO / "README.md") -> list[str]:
    """The first two lines of the README's first fenced code block.

    Raises:
        ValueError: the README has no fenced block with two command lines.
    """
    found = re.search(r"```[a-z]*\n(.*?)```", readme.read_text(encoding="utf-8"), re.S)
    lines = [line.strip() for line in (found.group(1) if found else "").splitlines()
             if line.strip()]
    if len(lines) < 2:
        raise ValueError(f"{readme}: the first fenced block does not hold two commands")
    return lines[:2]


def with_pytest_args(command: str, args: str | None) -> str:
    """``command`` with what follows ``python -m pytest`` replaced by ``args`` (unchanged
    when ``args`` is None)."""
    if args is None:
        return command
    head, sep, _tail = command.partition("python -m pytest")
    if not sep:
        raise ValueError(f"no 'python -m pytest' in {command!r}")
    return f"{head}python -m pytest {args}"


def run(command: str, cwd: Path, env: dict[str, str], log: Path) -> tuple[int, float]:
    """Run one README command with bash in ``cwd``; its output goes to ``log``."""
    started = time.monotonic()
    with log.open("w", encoding="utf-8") as out:
        code = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, stdout=out,
                              stderr=subprocess.STDOUT).returncode
    return code, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pytest-args", help="replace command 2's pytest arguments")
    parser.add_argument("--only", choices=["1", "2"], help="run one of the two commands")
    parser.add_argument("--system-site-packages", action="store_true",
                        help="let the fresh environment see this interpreter's packages")
    parser.add_argument("--keep", type=Path, help="clone into this folder and keep it")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    commands = readme_commands()
    commands[1] = with_pytest_args(commands[1], args.pytest_args)
    base = args.keep or Path(tempfile.mkdtemp(prefix="ianvs-readme-"))
    clone = base / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)]
                   + (["--system-site-packages"] if args.system_site_packages else []),
                   check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    failed = 0
    for number, command in enumerate(commands, 1):
        if args.only and args.only != str(number):
            continue
        log = base / f"command{number}.log"
        logger.info("command %d: %s (output: %s)", number, command, log)
        code, seconds = run(command, clone, env, log)
        logger.info("command %d: exit %d after %.0f s", number, code, seconds)
        if code:
            failed += 1
            tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
            logger.info("last output of command %d:\n%s", number, tail)
    logger.info("clone and logs: %s", base)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
