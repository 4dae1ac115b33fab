"""Judge-forks-candidate floor (stdlib only; run as ``python -I -S``). Informational only: a
candidate forked from the judge inherits the judge's memory, so it could read the tests' expected
values and forge a pass; the executor never does this, so ``boundary_floor.py`` (where the
process that forks candidates never holds a test) is the floor ``floor_ratio`` uses.

Reads ``{"workers": n, "rounds": r, "tasks": [[program, test, entry_point, helpers], ...]}`` as
JSON on stdin. The same architecture as the ``local`` executor's boundary tier, without any
isolation: a warm, small parent (this process) starts one long-lived *judge* per worker and keeps
``workers`` samples in flight; per sample it forks a fresh *candidate* child (execs the program,
answers calls) connected to the worker's judge by two new pipes, and the judge (helpers and test
compiled once per distinct text, executed fresh per sample) calls ``check`` with a proxy, speaking
the project's own codec (:mod:`codec`, loaded by path). No memfds, uids, rlimits, namespaces or
walls. Prints one JSON line:
``{"seconds": [per round], "passed": [per round]}``.
"""

import importlib.util
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_sibling(name: str):
    """The safe floor's helpers (codec loading, candidate loop), loaded by path (-I -S)."""
    spec = importlib.util.spec_from_file_location(f"_floor_{name}", os.path.join(HERE, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_SAFE = _load_sibling("boundary_floor")
PRELOAD, load_codec, candidate = _SAFE.PRELOAD, _SAFE.load_codec, _SAFE.candidate


CACHE: dict = {}


def run_judge(codec, task, rfd: int, wfd: int) -> bool:
    program, test, entry, helpers = task
    return _SAFE.run_check(codec, CACHE, helpers, test, entry, rfd, wfd)


def worker(codec, tasks: list, jobs_r: int, done_w: int) -> int:
    """One worker: a judge process that forks each sample's candidate itself is not the same
    shape as ours (there the server forks candidates); the closest simple equivalent is a
    long-lived judge that receives a task index, creates the pipes, forks the candidate from the
    small parent image it was forked from, runs the test and reports."""
    reader = os.fdopen(jobs_r, "r")
    for line in reader:
        task = tasks[int(line)]
        c2j_r, c2j_w = os.pipe()
        j2c_r, j2c_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(c2j_r), os.close(j2c_w)
                code = candidate(codec, task[0], task[2], j2c_r, c2j_w)
            finally:
                os._exit(code)
        os.close(c2j_w), os.close(j2c_r)
        ok = run_judge(codec, task, c2j_r, j2c_w)
        os.close(c2j_r), os.close(j2c_w)
        os.waitpid(pid, 0)
        os.write(done_w, b"1\n" if ok else b"0\n")
    return 0


def start_workers(codec, tasks: list, workers: int) -> tuple[list[int], int, list[int]]:
    """Long-lived workers (judges), kept across rounds like the executor's judges."""
    done_r, done_w = os.pipe()
    feeds, pids = [], []
    for _ in range(workers):
        jobs_r, jobs_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(jobs_w)
                os.close(done_r)
                for fd in feeds:
                    os.close(fd)
                code = worker(codec, tasks, jobs_r, done_w)
            finally:
                os._exit(code)
        os.close(jobs_r)
        feeds.append(jobs_w)
        pids.append(pid)
    os.close(done_w)
    return feeds, done_r, pids


def one_round(tasks: list, feeds: list[int], results) -> tuple[float, int]:
    start_t = time.perf_counter()
    for i in range(len(tasks)):  # round-robin; each worker runs its share in order
        os.write(feeds[i % len(feeds)], f"{i}\n".encode())
    passed = 0
    for _ in range(len(tasks)):
        passed += results.readline().strip() == b"1"
    return time.perf_counter() - start_t, passed


def main() -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    codec = load_codec()
    cfg = json.loads(sys.stdin.read())
    feeds, done_r, pids = start_workers(codec, cfg["tasks"], int(cfg["workers"]))
    seconds, passed = [], []
    with os.fdopen(done_r, "rb") as results:
        for _ in range(int(cfg.get("rounds", 1))):
            sec, ok = one_round(cfg["tasks"], feeds, results)
            seconds.append(sec)
            passed.append(ok)
        for fd in feeds:
            os.close(fd)
    for pid in pids:
        os.waitpid(pid, 0)
    print(json.dumps({"seconds": seconds, "passed": passed}))


if __name__ == "__main__":
    main()
