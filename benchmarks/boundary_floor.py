"""Bare floor of *safe* boundary grading (stdlib only; run as ``python -I -S``).

Reads ``{"workers": n, "rounds": r, "programs": [[program, entry_point], ...], "tests_file": path}``
as JSON on stdin; ``tests_file`` holds ``[[helpers, test], ...]`` in the same order. Prints one
JSON line: ``{"seconds": [per round], "passed": [per round], "image": {"vmas": n, "anon_kb":
n}}`` (``image``: the forker's mappings and anonymous memory after the last round, what each of
its forks copies).

This is the ``local`` executor's boundary tier with every wall, every safety check and the caller
API taken out, keeping only what makes the score unforgeable by design:

* the process that forks candidates (this one, the *forker*) never holds a test: it reads only
  programs and entry points. A candidate forked from a process that held the tests could read
  the expected values from memory it inherits and return them (the judge-forks-candidate
  design of ``judge_forks_floor.py`` allows exactly that);
* a long-lived *judge* per worker, forked before any task was read, loads the tests itself (from
  ``tests_file``), compiles each once, and runs one sample's test at a time, calling the candidate
  through a proxy over two pipes with the project's codec (:mod:`codec`, loaded by path);
* per sample the forker creates the two pipes, forks a fresh candidate (execs the program,
  answers calls), hands the judge its pipe ends over a ``SOCK_SEQPACKET`` socket
  (``SCM_RIGHTS``), and reaps the candidate when the judge reports.

No memfds, namespaces, uids, rlimits, cgroups, Landlock, seccomp, timeouts or output capture.
"""

import array
import importlib.util
import json
import os
import select
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PRELOAD = ("math", "re", "collections", "itertools", "functools", "heapq", "string", "typing",
           "hashlib", "random", "fractions", "statistics", "decimal", "bisect", "copy")


def load_codec():
    path = os.path.join(HERE, "..", "core", "testenvmanager", "sandbox", "codec.py")
    spec = importlib.util.spec_from_file_location("_floor_codec", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def candidate(codec, program: str, entry: str, rfd: int, wfd: int) -> int:
    ns: dict = {}
    try:
        exec(compile(program, "<program>", "exec"), ns)
        fn = ns[entry]
    except BaseException:  # noqa: BLE001
        return 1
    codec.write_frame(wfd, codec.encode(("ready",)))
    while True:
        frame = codec.read_frame(rfd, 1 << 24)
        if frame is None:
            return 0
        _kind, args, kwargs = codec.decode(frame)
        try:
            reply = ("ok", fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001
            reply = ("raise", type(exc).__name__, str(exc))
        codec.write_frame(wfd, codec.encode(reply))


def run_check(codec, compiled: dict, helpers: str, test: str, entry: str, rfd: int,
              wfd: int) -> bool:
    """Helpers and test (each compiled once per distinct text) in a fresh namespace; ``check``
    calls the candidate through a proxy over the pipes. True when it passes."""
    try:
        ns: dict = {}
        for name, source in (("<helpers>", helpers), ("<test>", test)):
            code = compiled.get(source)
            if code is None:
                code = compiled[source] = compile(source, name, "exec")
            exec(code, ns)

        def proxy(*args, **kwargs):
            codec.write_frame(wfd, codec.encode(("call", args, kwargs)))
            reply = codec.decode(codec.read_frame(rfd, 1 << 24))
            if reply[0] == "raise":
                raise RuntimeError(reply[2])
            return reply[1]

        ns[entry] = proxy
        if codec.decode(codec.read_frame(rfd, 1 << 24))[0] != "ready":
            return False
        ns["check"](proxy)
        return True
    except BaseException:  # noqa: BLE001
        return False


def judge(codec, sock: socket.socket, tests_file: str) -> int:
    """Long-lived: receive ``index`` plus the two pipe ends, run that test, reply ``0``/``1``."""
    with open(tests_file, encoding="utf-8") as fh:
        tests = json.load(fh)
    compiled: dict = {}
    while True:
        data, anc, _flags, _addr = sock.recvmsg(64, socket.CMSG_SPACE(2 * 4))
        if not data:
            return 0
        fds = array.array("i")
        for _level, _kind, payload in anc:
            fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
        rfd, wfd = fds
        index, entry = data.decode().split(" ", 1)
        helpers, test = tests[int(index)]
        ok = run_check(codec, compiled, helpers, test, entry, rfd, wfd)
        os.close(rfd)
        os.close(wfd)
        sock.send(b"1" if ok else b"0")


def image(pid: int) -> dict:
    """What every fork of process ``pid`` copies: its mappings and anonymous memory (kB)."""
    with open(f"/proc/{pid}/maps") as fh:
        vmas = sum(1 for _line in fh)
    with open(f"/proc/{pid}/smaps_rollup") as fh:
        anon = next(int(line.split()[1]) for line in fh if line.startswith("Anonymous:"))
    return {"vmas": vmas, "anon_kb": anon}


def main() -> None:
    codec = load_codec()
    for name in PRELOAD:
        importlib.import_module(name)
    config_line = sys.stdin.readline()
    cfg = json.loads(config_line)
    workers, tests_file = int(cfg["workers"]), cfg["tests_file"]
    judges: list[socket.socket] = []
    pids = []
    for _ in range(workers):  # judges first: they read the tests themselves, never from us
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                mine.close()
                for other in judges:
                    other.close()
                code = judge(codec, theirs, tests_file)
            finally:
                os._exit(code)
        theirs.close()
        judges.append(mine)
        pids.append(pid)
    programs = json.loads(sys.stdin.readline())
    seconds, passed = [], []
    for _ in range(int(cfg.get("rounds", 1))):
        start = time.perf_counter()
        ok_count = 0
        next_task = 0
        running: dict[int, int] = {}  # judge socket fd -> candidate pid
        by_fd = {j.fileno(): j for j in judges}

        def launch(judge_sock: socket.socket, index: int) -> None:
            program, entry = programs[index]
            c2j_r, c2j_w = os.pipe()
            j2c_r, j2c_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                code = 1
                try:
                    os.close(c2j_r)
                    os.close(j2c_w)
                    code = candidate(codec, program, entry, j2c_r, c2j_w)
                finally:
                    os._exit(code)
            judge_sock.sendmsg([f"{index} {entry}".encode()], [
                (socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [c2j_r, j2c_w]).tobytes())])
            for fd in (c2j_r, c2j_w, j2c_r, j2c_w):
                os.close(fd)
            running[judge_sock.fileno()] = pid

        for sock in judges:
            if next_task < len(programs):
                launch(sock, next_task)
                next_task += 1
        while running:
            ready, _w, _x = select.select(list(running), [], [])
            for fd in ready:
                ok_count += by_fd[fd].recv(8) == b"1"
                os.waitpid(running.pop(fd), 0)
                if next_task < len(programs):
                    launch(by_fd[fd], next_task)
                    next_task += 1
        seconds.append(time.perf_counter() - start)
        passed.append(ok_count)
    for sock in judges:
        sock.close()
    for pid in pids:
        os.waitpid(pid, 0)
    print(json.dumps({"seconds": seconds, "passed": passed, "image": image(os.getpid())}))


if __name__ == "__main__":
    main()
