"""Is the test suite independent of what earlier runs left? A script, run by hand or by CI jobs
that have the time (it runs the chosen tier four to five times):

1. **twice in a row**: the tier passes, then passes again on the same machine;
2. **after a SIGKILL**: the tier is started and the pytest process is killed with SIGKILL once
   ``--kill-after`` seconds have passed (its daemons, fork servers and scratch are left to fend
   for themselves); the tier then passes with no clean-up in between, and ``ianvs sandbox
   doctor`` is asked what the killed run left behind (printed; ``ianvs sandbox clean`` removes
   it);
3. **two at once**: two runs of the tier start together and both pass.

Usage::

    python tests/suite/resilience.py [--tier fast|full] [--kill-after 60] [--skip twice,kill,concurrent]
        [-- extra pytest args]

Prints one line per run (what, exit status, seconds, pytest's summary line) and exits 1 if any run
that should pass did not.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TIERS = {"fast": ["-m", "not slow"], "full": []}


def _pytest(tier: str, extra: list[str], log: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TIERS[tier], *extra]
    out = log.open("wb")
    try:
        return subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    finally:
        out.close()


def _summary(log: Path) -> str:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "(no output)"


def _run(name: str, tier: str, extra: list[str], logs: Path) -> bool:
    log = logs / f"{name}.log"
    started = time.monotonic()
    proc = _pytest(tier, extra, log)
    code = proc.wait()
    print(f"{name}: exit {code} in {time.monotonic() - started:.0f}s: {_summary(log)}", flush=True)
    return code == 0


def _killed(tier: str, extra: list[str], logs: Path, after: float) -> None:
    log = logs / "killed.log"
    proc = _pytest(tier, extra, log)
    try:
        proc.wait(timeout=after)
        print(f"killed: the run ended by itself before {after:.0f}s (exit {proc.returncode}); "
              "use a smaller --kill-after", flush=True)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        print(f"killed: pytest (pid {proc.pid}) got SIGKILL after {after:.0f}s", flush=True)


def _doctor(logs: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "core.cmd.benchmarking", "sandbox", "doctor"],
                         cwd=REPO, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    (logs / "doctor.txt").write_text(res.stdout + res.stderr)
    print(f"doctor after the killed run (exit {res.returncode}):\n{res.stdout.rstrip()}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", choices=sorted(TIERS), default="fast")
    parser.add_argument("--kill-after", type=float, default=60.0)
    parser.add_argument("--skip", default="", help="comma-separated: twice, kill, concurrent")
    parser.add_argument("--logs", type=Path, help="folder for the runs' output (default: a temp one)")
    parser.add_argument("extra", nargs="*", help="further pytest arguments (after --)")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    logs = args.logs or Path(tempfile.mkdtemp(prefix="ianvs-resilience-"))
    logs.mkdir(parents=True, exist_ok=True)
    print(f"logs in {logs}", flush=True)
    ok = True
    if "twice" not in skip:
        ok &= _run("first", args.tier, args.extra, logs)
        ok &= _run("second", args.tier, args.extra, logs)
    if "kill" not in skip:
        _killed(args.tier, args.extra, logs, args.kill_after)
        _doctor(logs)
        ok &= _run("after-kill", args.tier, args.extra, logs)
    if "concurrent" not in skip:
        started = time.monotonic()
        procs = {name: _pytest(args.tier, args.extra, logs / f"{name}.log") for name in ("concurrent-a", "concurrent-b")}
        for name, proc in procs.items():
            code = proc.wait()
            print(f"{name}: exit {code} after {time.monotonic() - started:.0f}s: "
                  f"{_summary(logs / f'{name}.log')}", flush=True)
            ok &= code == 0
    print("resilience: " + ("all runs passed" if ok else "FAILED"), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
