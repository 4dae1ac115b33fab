"""Bare-fork floor for the executor benchmark (stdlib only; run as ``python -I -S``).

Reads ``{"workers": n, "rounds": r, "tasks": [[program, test, entry_point], ...]}`` as JSON on
stdin. A warm, small parent (this process) forks one child per task, keeping ``workers`` children
in flight; each child execs program + test, calls ``check(entry_point)`` and exits 0/1 with
``os._exit``. No isolation of any kind: this is the cost floor an isolated executor is compared
against. Prints one JSON line: ``{"seconds": [per round], "passed": [per round]}``.
"""

import json
import os
import sys
import time

PRELOAD = ("math", "re", "collections", "itertools", "functools", "heapq", "string", "typing",
           "hashlib", "random", "fractions", "statistics", "decimal", "bisect", "copy")


def child(program: str, test: str, entry: str) -> int:
    try:
        ns: dict = {}
        exec(compile(program, "<program>", "exec"), ns)
        exec(compile(test, "<test>", "exec"), ns)
        ns["check"](ns[entry])
        return 0
    except BaseException:  # noqa: BLE001
        return 1


def one_round(tasks: list, workers: int) -> tuple[float, int]:
    start = time.perf_counter()
    running, passed, it = 0, 0, iter(tasks)
    pending = True
    while pending or running:
        while pending and running < workers:
            try:
                program, test, entry = next(it)
            except StopIteration:
                pending = False
                break
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    code = child(program, test, entry)
                finally:
                    os._exit(code)
            running += 1
        if running:
            _pid, status = os.wait()
            running -= 1
            passed += os.waitstatus_to_exitcode(status) == 0
    return time.perf_counter() - start, passed


def main() -> None:
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    cfg = json.loads(sys.stdin.read())
    seconds, passed = [], []
    for _ in range(int(cfg.get("rounds", 1))):
        sec, ok = one_round(cfg["tasks"], int(cfg["workers"]))
        seconds.append(sec)
        passed.append(ok)
    print(json.dumps({"seconds": seconds, "passed": passed}))


if __name__ == "__main__":
    main()
