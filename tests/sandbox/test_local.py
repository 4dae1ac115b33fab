"""Functional tests of the ``local`` backend (real fork server, real children). The backend-neutral
ones (taxonomy, limits, modes, timeouts) take the ``backend`` fixture and so run on every backend
(``local`` and ``docker``) from these same definitions."""

from __future__ import annotations

import os
import time

import pytest

from core.testenvmanager.sandbox import (
    ExecRequest, ExecutorClosedError, IsolationLevel, IsolationUnavailableError, Outcome,
    get_executor,
)
from core.testenvmanager.sandbox.local import LocalExecutor

from .conftest import CHECK_ADD, GOOD_PROGRAM, SECRET, run_one

PROBE_TEST = "def check(candidate):\n    assert candidate()\n"


def timeout_scale(executor, res) -> float:
    """How much the backend stretched this result's timeout: a dispatching backend gives a node
    whose gold check ran slower proportionally longer limits (dask's ``slowdown``); 1 elsewhere."""
    slowdown = getattr(executor, "slowdown", None)
    return float(slowdown().get(res.node, 1.0)) if slowdown is not None else 1.0


def probe(executor, body: str, **extra):
    """Run ``def probe(): <body>`` and return the result (passed iff body returns truthy)."""
    program = "def probe():\n" + "".join(f"    {line}\n" for line in body.splitlines())
    return run_one(executor, program=program, test=PROBE_TEST, entry_point="probe", **extra)


def test_results_carry_backend_isolation_and_limits(backend) -> None:
    res = run_one(backend, program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add", timeout=2.5,
                  memory_mb=300)
    assert res.passed and res.exit_status == 0
    # a dispatching backend names what graded on the node too (dask: "dask:local")
    assert res.backend.split(":")[0] == backend.name and res.isolation is backend.isolation
    assert res.timeout_s == pytest.approx(2.5 * timeout_scale(backend, res)) and res.memory_mb == 300
    assert res.exec_time_s is not None and 0 <= res.exec_time_s <= res.duration_s


def test_failed_error_and_syntax_error_taxonomy(backend) -> None:
    cases = {
        "failed": ("def add(a, b):\n    return 0\n", Outcome.FAILED),
        "error": ("def add(a, b):\n    raise KeyError(a)\n", Outcome.ERROR),
        "missing": ("def plus(a, b):\n    return a + b\n", Outcome.ERROR),
        "syntax": ("def add(a, b) return\n", Outcome.SYNTAX_ERROR),
        "module_error": ("import does_not_exist_anywhere\n", Outcome.ERROR),
    }
    reqs = [ExecRequest(id=k, program=p, test=CHECK_ADD, entry_point="add") for k, (p, _) in cases.items()]
    got = {r.id: r for r in backend.run(reqs)}
    for key, (_, expected) in cases.items():
        assert got[key].outcome is expected, (key, got[key].detail)
    assert "KeyError" in got["error"].detail


def test_broken_test_code_is_infra_error(backend) -> None:
    res = run_one(backend, program=GOOD_PROGRAM, test="def check(:\n", entry_point="add")
    assert res.outcome is Outcome.INFRA_ERROR and not res.outcome.counts_against_model


def test_results_stream_in_completion_order(backend) -> None:
    slow = ExecRequest(id="slow", program="import time\ntime.sleep(0.8)\n" + GOOD_PROGRAM, test=CHECK_ADD,
                       entry_point="add")
    fast = ExecRequest(id="fast", program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add")
    start = time.monotonic()
    stream = backend.run([slow, fast])
    first = next(stream)
    first_at = time.monotonic() - start
    rest = list(stream)
    assert first.id == "fast"
    if backend.streams_each_result:  # a batching backend returns both with their batch
        assert first_at < 0.6
    assert [r.id for r in rest] == ["slow"]


def test_duplicate_ids_are_rejected(backend) -> None:
    req = ExecRequest(id="dup", program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add")
    with pytest.raises(ValueError, match="duplicate"):
        list(backend.run([req, req]))
    assert run_one(backend, program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add").passed


def test_run_all_keeps_input_order(backend) -> None:
    reqs = [ExecRequest(id=f"q{i}", program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add") for i in range(7)]
    assert [r.id for r in backend.run_all(reqs)] == [r.id for r in reqs]


def test_environment_is_scrubbed(backend) -> None:
    """Nothing of the caller's environment; native thread pools sized to one thread per sample
    (``THREAD_ENV``: the executor runs its workers side by side)."""
    from core.testenvmanager.sandbox.forkserver import THREAD_ENV

    allowed = {'PATH', 'LANG', 'LC_ALL', 'HOME', 'TMPDIR', 'PWD', 'PYTHONDONTWRITEBYTECODE',
               'PYTHONIOENCODING', *THREAD_ENV}
    res = probe(backend, "import os\nprint(sorted(os.environ))\n"
                         f"return set(os.environ) <= {allowed!r} and os.environ['OMP_NUM_THREADS'] == '1'")
    assert res.passed, res.stdout
    assert SECRET not in res.stdout


def test_private_workdir_is_removed_afterwards(executor) -> None:
    res = probe(executor, "import os\nopen('f.txt', 'w').write('x')\nprint(os.getcwd())\n"
                          "return os.environ['HOME'] == os.getcwd() and os.listdir('.') == ['f.txt']")
    assert res.passed, res.detail
    workdir = res.stdout.strip()
    assert workdir and not os.path.exists(workdir)
    assert os.path.dirname(workdir) != os.getcwd()


def test_resource_limits_are_applied(backend) -> None:
    # the CPU limit follows the timeout the request ran with (timeout_s: stretched on a slow node)
    res = probe(backend, "import resource as r\n"
                          "print(r.getrlimit(r.RLIMIT_CPU)[0])\n"
                          "return (r.getrlimit(r.RLIMIT_AS)[0] == 200 << 20 and r.getrlimit(r.RLIMIT_NOFILE)[0] == 256"
                          " and r.getrlimit(r.RLIMIT_FSIZE)[0] == 64 << 20 and r.getrlimit(r.RLIMIT_CORE)[0] == 0)",
                memory_mb=200, timeout=2.0)
    assert res.passed, res.detail
    assert res.stdout.split() == [str(int(res.timeout_s) + 2)]
    assert res.timeout_s == pytest.approx(2.0 * timeout_scale(backend, res))


def test_own_session_and_process_group(backend) -> None:
    res = probe(backend, "import os\nreturn os.getsid(0) == os.getpid() == os.getpgid(0)")
    assert res.passed, res.detail


def test_network_namespace_has_only_loopback() -> None:
    """Listing interfaces needs a netlink socket, which the seccomp filter refuses; this checks
    the network namespace alone, with the other walls off."""
    with LocalExecutor(workers=1, seccomp=False, landlock=False) as ex:
        if not ex.facts.get("netns"):
            pytest.skip("no network namespace on this host")
        res = probe(ex, "import socket\nnames = [n for _, n in socket.if_nameindex()]\nprint(names)\n"
                        "return names == ['lo']")
    assert res.passed, (res.stdout, res.detail)


def test_loopback_works_inside_namespace(backend) -> None:
    res = probe(backend, "import socket\nsrv = socket.socket()\nsrv.bind(('127.0.0.1', 0))\nsrv.listen()\n"
                          "c = socket.create_connection(srv.getsockname())\nconn, _ = srv.accept()\n"
                          "c.sendall(b'hi')\nreturn conn.recv(2) == b'hi'", network="loopback")
    assert res.passed, res.detail


def test_unprivileged_uid_when_full(executor) -> None:
    if executor.isolation < IsolationLevel.FULL:
        pytest.skip("full isolation unavailable")
    base = executor.uid_base
    res = probe(executor, f"import os\nreturn {base} <= os.getuid() < {base + executor.workers} "
                          f"and os.getgid() == os.getuid() and os.getgroups() == []")
    assert res.passed, res.detail


def test_stdout_and_stderr_are_captured_separately(backend) -> None:
    res = probe(backend, "import sys\nprint('to-out')\nprint('to-err', file=sys.stderr)\nreturn True")
    assert res.passed and res.stdout == "to-out\n" and res.stderr == "to-err\n"


def test_output_cap_is_configurable() -> None:
    with LocalExecutor(workers=1, output_limit=100) as ex:
        res = probe(ex, "print('z' * 5000)\nreturn True")
    assert res.passed and res.stdout == "z" * 100 and res.stdout_truncated and not res.stderr_truncated


def test_script_mode(backend) -> None:
    ok = run_one(backend, mode="script", program="def sq(x):\n    return x * x\n",
                 test="assert sq(3) == 9\nassert __name__ == '__main__'\n")
    bad = run_one(backend, mode="script", program="def sq(x):\n    return x + x\n", test="assert sq(3) == 9\n")
    assert ok.outcome is Outcome.PASSED and bad.outcome is Outcome.FAILED


def test_script_runs_as_a_registered_main_module(backend) -> None:
    """As under ``python program.py``: the program is ``sys.modules['__main__']``, so code that
    looks itself up there (``inspect.getmodule``, pickling its own classes) works. (Frame
    introspection itself is refused while the audit hook is on; repo runs turn it off.)"""
    program = ("import inspect, pickle, sys\n"
               "class Point:\n    pass\n"
               "assert sys.modules['__main__'].Point is Point\n"
               "assert inspect.getmodule(Point) is sys.modules['__main__']\n"
               "assert type(pickle.loads(pickle.dumps(Point()))) is Point\n")
    res = run_one(backend, mode="script", program=program, test="")
    assert res.outcome is Outcome.PASSED, res.detail + res.stderr


UT_TEST = ("import unittest\nfrom solution import add\nclass T(unittest.TestCase):\n"
           "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
           "    def test_raises(self):\n        with self.assertRaises(TypeError):\n            add(1, None)\n")


@pytest.mark.parametrize("solution, expected", [
    ("def add(a, b):\n    return a + b\n", Outcome.PASSED),
    ("def add(a, b):\n    return a - b\n", Outcome.FAILED),
    ("def add(a, b):\n    raise RuntimeError('boom')\n", Outcome.ERROR),
    ("def add(a, b)\n    return a + b\n", Outcome.SYNTAX_ERROR),
])
def test_unittest_mode(backend, solution: str, expected: Outcome) -> None:
    res = run_one(backend, mode="unittest", files={"solution.py": solution, "tests/test_solution.py": UT_TEST,
                                                     "tests/__init__.py": ""},
                  test_pattern="test_*.py")
    assert res.outcome is expected, res.detail


def test_unittest_mode_without_tests_is_error(backend) -> None:
    res = run_one(backend, mode="unittest", files={"solution.py": "x = 1\n"})
    assert res.outcome is Outcome.ERROR and "no tests" in res.detail


def test_stdin_is_fed(backend) -> None:
    res = probe(backend, "return input() == 'line one' and input() == 'two'", stdin="line one\ntwo\n")
    assert res.passed, res.detail


def _sandbox_dirs() -> set[str]:
    import glob

    return set(glob.glob("/dev/shm/ianvs-sandbox-*") + glob.glob("/tmp/ianvs-sandbox-*")
               + glob.glob("/sys/fs/cgroup/*/ianvs-sandbox-*"))


def test_min_isolation_refuses_with_clear_message() -> None:
    from core.testenvmanager.sandbox.owners import pid_alive

    before = _sandbox_dirs()
    with pytest.raises(IsolationUnavailableError, match="network namespace"):
        LocalExecutor(workers=1, netns=False, drop_uid=False, min_isolation="netns")
    # new folders of live servers belong to other runs on this machine; the refused executor's
    # server is gone, so anything of it would have a dead owner
    left = [d for d in _sandbox_dirs() - before
            if not pid_alive(int(os.path.basename(d).split("-")[2]))]
    assert not left, "a refused executor left its scratch dir or cgroups behind"


def test_isolation_levels_follow_options() -> None:
    with LocalExecutor(workers=1, netns=False, drop_uid=False, min_isolation="process") as ex:
        assert ex.isolation is IsolationLevel.PROCESS
        res = probe(ex, "return True")
        assert res.passed and res.isolation is IsolationLevel.PROCESS
    if os.geteuid() == 0:
        with get_executor("local", workers=1, drop_uid=False) as ex:
            assert ex.isolation is IsolationLevel.KERNEL
        with get_executor("local", workers=1, landlock=False) as ex:
            assert ex.isolation is IsolationLevel.NETNS
            assert ex.mechanisms["landlock_abi"] == 0 and ex.mechanisms["seccomp"]


def test_close_is_idempotent_and_run_after_close_fails() -> None:
    ex = LocalExecutor(workers=1)
    ex.close()
    ex.close()
    with pytest.raises(ExecutorClosedError):
        ex.run([])


def test_server_death_is_infra_error_never_a_model_failure() -> None:
    ex = LocalExecutor(workers=1)
    reqs = [ExecRequest(id=f"s{i}", program="import time\ntime.sleep(5)\n", test=CHECK_ADD, entry_point="add")
            for i in range(2)]
    stream = ex.run(reqs)
    time.sleep(0.3)
    ex._proc.kill()  # simulate the harness dying (not something a sample can do)
    got = []
    with pytest.raises(ExecutorClosedError):
        for res in stream:
            got.append(res)
    assert got and all(r.outcome is Outcome.INFRA_ERROR for r in got)
    ex.close()
    left = [p for p in [ex.facts.get("scratch"), *ex.facts.get("cgroups", {}).values()] if p and os.path.exists(p)]
    assert not left, left


def test_abandoned_stream_does_not_confuse_the_next_run(executor) -> None:
    reqs = [ExecRequest(id=f"ab{i}", program="import time\ntime.sleep(0.2)\n" + GOOD_PROGRAM, test=CHECK_ADD,
                        entry_point="add") for i in range(12)]
    stream = executor.run(reqs)
    first = next(stream)
    assert first.passed
    stream.close()  # abandon the rest
    follow = [ExecRequest(id=f"next{i}", program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add") for i in range(4)]
    got = executor.run_all(follow)
    assert [r.id for r in got] == [r.id for r in follow] and all(r.passed for r in got)


def test_executor_wide_cgroups_when_available(executor) -> None:
    groups = executor.facts.get("cgroups", {})
    if not groups:
        pytest.skip("cgroup v1 pids/memory not writable here")
    res = probe(executor, "return True")
    assert res.passed
    for path in groups.values():
        with open(os.path.join(path, "cgroup.procs")) as fh:
            assert str(executor._proc.pid) in fh.read().split()


def test_cgroup_oom_kill_is_memory_exceeded_and_groups_are_removed() -> None:
    ex = LocalExecutor(workers=1, cgroup_memory_mb=160)
    groups = dict(ex.facts.get("cgroups", {}))
    try:
        if "memory" not in groups:
            pytest.skip("memory cgroup not writable here")
        # RLIMIT_AS (1 GiB) allows it, the executor's 160 MiB memory group does not
        res = probe(ex, "x = b'x' * (400 << 20)\nreturn True", memory_mb=1024)
        assert res.outcome is Outcome.MEMORY_EXCEEDED, (res.outcome, res.detail)
        assert probe(ex, "return True").passed
    finally:
        ex.close()
    assert not any(os.path.exists(p) for p in groups.values())


def test_child_setup_failure_is_infra_error() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (uid drop)")
    # no such uid: setgid fails in the child (one per process: two suites at once each lease theirs)
    with LocalExecutor(workers=1, uid_base=2**32 + 64 * os.getpid()) as ex:
        res = probe(ex, "return True")
    assert res.outcome is Outcome.INFRA_ERROR and "setup failed" in res.detail, res.detail


def test_unstartable_server_raises() -> None:
    with pytest.raises(ExecutorClosedError):
        LocalExecutor(workers=1, mountns=False, scratch_parent="/nonexistent/dir", start_timeout=10)


def test_oom_score_of_a_running_child(executor) -> None:
    """A running sample has oom_score_adj 1000 (read from outside, the child cannot read /proc);
    the slot's spawner that forked it keeps the server's (it must not be the first victim)."""
    import threading

    seen: list[str] = []
    spawners: list[str] = []

    def parent(pid: str) -> int:
        with open(f"/proc/{pid}/status") as fh:
            return int(next(line for line in fh if line.startswith("PPid:")).split()[1])

    def watch() -> None:
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and not seen:
            for entry in os.listdir("/proc"):
                if entry.isdigit():
                    try:
                        with open(f"/proc/{entry}/cmdline", "rb") as fh:
                            if b"sandbox/boot.py" not in fh.read():
                                continue
                        up = parent(entry)  # a sample's parent is a spawner, the server's child
                        if up != executor._proc.pid and parent(str(up)) == executor._proc.pid:
                            with open(f"/proc/{entry}/oom_score_adj") as fh:
                                seen.append(fh.read().strip())
                            with open(f"/proc/{up}/oom_score_adj") as fh:
                                spawners.append(fh.read().strip())
                    except (OSError, StopIteration):
                        continue
            time.sleep(0.02)

    thread = threading.Thread(target=watch)
    thread.start()
    res = run_one(executor, program="import time\ntime.sleep(1.5)\n" + GOOD_PROGRAM, test=CHECK_ADD,
                  entry_point="add", id="oom-watch")
    thread.join()
    assert res.passed and seen and seen[0] == "1000", seen
    assert spawners[0] != "1000", spawners


def test_workers_run_in_parallel(backend) -> None:
    reqs = [ExecRequest(id=f"par{i}", program="import time\ntime.sleep(0.6)\n" + GOOD_PROGRAM, test=CHECK_ADD,
                        entry_point="add") for i in range(2)]
    start = time.monotonic()
    results = backend.run_all(reqs)
    assert all(r.passed for r in results)
    assert time.monotonic() - start < 1.1  # two workers: both sleeps overlap


def test_timeout_kills_the_whole_process_group(backend) -> None:
    program = ("import subprocess, time\nsubprocess.Popen(['sleep', '60'])\n"
               "open('started', 'w').close()\nwhile True:\n    time.sleep(0.01)\n")
    res = run_one(backend, program=program, test=CHECK_ADD, entry_point="add", timeout=0.8,
                  allow_subprocess=True)
    assert res.outcome is Outcome.TIMEOUT and res.exit_status == -9
    assert res.timeout_s == pytest.approx(0.8 * timeout_scale(backend, res))


def test_custom_preload_keeps_the_harness_modules() -> None:
    """A caller's own preload list replaces the default one but never the harness's needs,
    and a module it leaves out is still importable by the request (at every isolation level)."""
    with get_executor("local", workers=1, preload=["math"]) as ex:
        res = probe(ex, "import statistics, typing\nreturn statistics.mean([1, 3]) == 2")
        assert res.passed, (res.outcome, res.detail, res.stderr[-500:])
        res = probe(ex, "import subprocess\nsubprocess.run(['true'])\nreturn True")
        assert res.outcome is not Outcome.PASSED  # subprocesses are still blocked


def _judge_pids(uid: int) -> set[int]:
    from .conftest import uid_processes

    return set(uid_processes(uid, 1))


def test_judges_are_replaced_after_their_request_budget() -> None:
    """A slot's judge runs at most ``judge_requests`` tests; the next one starts fresh."""
    with LocalExecutor(workers=1, judge_requests=2) as ex:
        seen = []
        for i in range(5):
            res = probe(ex, "return True")
            assert res.passed, res.detail
            seen.append(frozenset(_judge_pids(ex.uid_base + 1)) if ex.facts.get("drop_uid") else None)
        if ex.facts.get("drop_uid"):
            assert len({s for s in seen if s}) >= 2, seen


def test_a_test_that_kills_its_judge_is_never_a_pass_and_the_slot_recovers() -> None:
    """Test code is trusted, but if it (or anything) kills the judge mid-test, the request is
    graded from that death (never passed, never infra once the sample runs) and the slot's
    next request gets a fresh judge."""
    with LocalExecutor(workers=1) as ex:
        for test in ("import os\ndef check(candidate):\n    candidate(1, 2)\n    os._exit(0)\n",
                     "import os, signal\ndef check(candidate):\n    os.kill(os.getpid(), signal.SIGKILL)\n"):
            res = run_one(ex, program=GOOD_PROGRAM, test=test, entry_point="add")
            assert res.outcome is Outcome.ERROR, (res.outcome, res.detail)
            assert "judge" in res.detail, res.detail
            res = run_one(ex, program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add")
            assert res.passed, res.detail


def test_a_timed_out_test_replaces_the_judge() -> None:
    with LocalExecutor(workers=1) as ex:
        res = run_one(ex, program=GOOD_PROGRAM, test="def check(candidate):\n    while True:\n        pass\n",
                      entry_point="add", timeout=1.0)
        assert res.outcome is Outcome.TIMEOUT, res.detail
        res = run_one(ex, program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add")
        assert res.passed, res.detail


@pytest.mark.parametrize("off, missing", [
    ({"landlock": False}, "Landlock"),
    ({"seccomp": False}, "seccomp"),
    ({"mountns": False}, "private mount namespace"),
])
def test_min_isolation_kernel_refuses_without_each_kernel_wall(off: dict, missing: str) -> None:
    """`kernel` (and so `full`) needs every kernel wall; without one the executor refuses to
    start and says which one is missing."""
    with pytest.raises(IsolationUnavailableError, match=missing):
        LocalExecutor(workers=1, min_isolation="kernel", **off)


def test_mechanisms_are_reported(executor) -> None:
    mech = executor.mechanisms
    if executor.isolation >= IsolationLevel.KERNEL:
        assert mech["netns"] and mech["mountns"] and mech["seccomp"] and mech["landlock_abi"] >= 1
        assert mech["readonly_root"] and mech["hidden_packages"] >= 1
    if executor.isolation is IsolationLevel.FULL:
        assert mech["uid_drop"] and mech["subreaper"]


def test_server_modules_come_from_boot_compiled_code(executor) -> None:
    """boot.py compiled every module the server loads in a throwaway child (no compiler garbage
    in the image every sample's fork copies; docs/sandbox.md, "Speed")."""
    assert executor.facts.get("compact_boot") is True, executor.facts


AFFINITY_PROGRAM = "import os\ndef cpus():\n    return sorted(os.sched_getaffinity(0))\n"
#: the judge's side: the sample and the judge run on the same single CPU
SAME_CPU_TEST = ("import os\ndef check(candidate):\n"
                 "    assert candidate() == sorted(os.sched_getaffinity(0)) and len(candidate()) == 1\n")
UNPINNED_TEST = ("import os\ndef check(candidate):\n"
                 "    assert candidate() == sorted(os.sched_getaffinity(0)) and len(candidate()) > 1\n")


def test_each_slot_runs_on_its_own_cpu_when_the_slots_cover_the_cpus() -> None:
    """With as many slots as usable CPUs, each slot's judge and samples (both tiers) share one
    CPU, a different one per slot (docs/sandbox.md, "Slots pinned to CPUs"). Fewer slots than
    CPUs, or ``pin_slots=False``, pin nothing: the samples may run on every CPU."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one usable CPU: nothing to pin")
    with LocalExecutor(workers=len(cpus)) as ex:
        assert ex.facts["slot_cpus"] == cpus
        reqs = [ExecRequest(id=f"{tier}{i}", program=AFFINITY_PROGRAM, test=SAME_CPU_TEST,
                            entry_point="cpus", grading=tier)
                for i in range(4 * len(cpus)) for tier in ("boundary", "in_process")]
        results = list(ex.run(reqs))
        assert all(r.passed for r in results), [(r.id, r.detail) for r in results if not r.passed]
        # requests that come one at a time take turns over the slots, so over the CPUs, instead
        # of all running on one CPU (several executors doing that would crowd onto it)
        seen = set()
        for i in range(2 * len(cpus)):
            res = run_one(ex, id=f"one{i}", program=AFFINITY_PROGRAM + "print(cpus())\n",
                          test=SAME_CPU_TEST, entry_point="cpus")
            assert res.passed, res.detail
            seen.add(res.stdout.strip())
        assert seen == {str([cpu]) for cpu in cpus}, seen
    for options in ({"workers": len(cpus) - 1}, {"workers": len(cpus), "pin_slots": False}):
        if not options["workers"]:
            continue
        with LocalExecutor(**options) as ex:
            assert ex.facts["slot_cpus"] == []
            res = run_one(ex, program=AFFINITY_PROGRAM, test=UNPINNED_TEST, entry_point="cpus")
            assert res.passed, (options, res.detail)


WRITE_PROBE = """import os
out = []
for what, act in (("cwd", lambda: open("mine.txt", "w").write("x")),
                  ("beside", lambda: open("../beside.txt", "w").write("x")),
                  ("mkdir beside", lambda: os.mkdir("../dir")),
                  ("list parent", lambda: os.listdir(".."))):
    try:
        act()
        out.append(what + ": ok")
    except OSError as exc:
        out.append(what + ": " + type(exc).__name__)
return "; ".join(out)"""


def test_a_sample_writes_only_in_its_working_directory_across_slot_resets() -> None:
    """The spawner's prepared Landlock ruleset grants the slot's tmpfs root; the root's owner
    and mode keep the sample to its working directory. A request that leaves files behind
    makes the server replace the slot's tmpfs (a new root inode): the next request must get a
    ruleset for the new mount, so it can still write where it should, and still nowhere else."""
    with LocalExecutor(workers=1, audit_hook=False) as ex:  # the kernel walls alone
        if not (ex.facts.get("drop_uid") and ex.facts.get("mountns") and ex.facts.get("landlock_abi")):
            pytest.skip("needs uid drop, slot mounts and Landlock")
        expected = "cwd: ok; beside: PermissionError; mkdir beside: PermissionError; list parent: PermissionError"
        program = "def probe():\n" + "".join(f"    {line}\n" for line in WRITE_PROBE.splitlines())
        for _attempt in range(3):  # each one leaves mine.txt behind: the slot is reset after each
            res = run_one(ex, program=program, entry_point="probe",
                          test=f"def check(candidate):\n    assert candidate() == {expected!r}\n")
            assert res.passed, (res.outcome, res.detail)
        reads = run_one(ex, program="import os\ndef probe():\n    return sorted(os.listdir('.'))\n",
                        test="def check(candidate):\n    assert candidate() == []\n",
                        entry_point="probe")
    assert reads.passed, (reads.outcome, reads.detail)  # a fresh slot: nothing left over
