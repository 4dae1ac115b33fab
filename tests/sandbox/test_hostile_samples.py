"""Hostile-sample suite: every sample is graded with a pinned outcome and the harness survives.

Run only these with ``pytest -k hostile``. Each case is a program that attacks the harness or the
host; the expected outcome is the one documented in docs/sandbox.md.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable

import pytest

from core.testenvmanager.sandbox import IsolationLevel, Outcome

from .conftest import (CHECK_ADD, GOOD_PROGRAM, SECRET, assert_alive, own_sample_uids, run_one,
                       uid_processes)

WRONG = "def add(a, b):\n    return a - b\n"


TIERS = ("boundary", "in_process")


@dataclass
class Case:
    """A hostile sample. ``expected`` is one outcome, or one per grading tier."""

    name: str
    program: str
    expected: Outcome | dict[str, Outcome]
    test: str = CHECK_ADD
    extra: dict = field(default_factory=dict)
    post: Callable | None = None

    def outcome_for(self, tier: str) -> Outcome:
        return self.expected[tier] if isinstance(self.expected, dict) else self.expected


def _no_file(path: str) -> Callable:
    def check(res) -> None:
        assert not os.path.exists(path), f"{path} was created"
    return check


def _stdout_lacks(text: str) -> Callable:
    def check(res) -> None:
        assert text not in res.stdout and text not in res.stderr
    return check


def _sandbox_uid_processes() -> list[int]:
    # the sample uids of this session's executors (leased; their judges, at uid_base + workers,
    # are long-lived and never run sample code)
    return [pid for first, count in own_sample_uids() for pid in uid_processes(first, count)]


def _no_survivors(res) -> None:
    deadline = time.monotonic() + 2.0
    while _sandbox_uid_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _sandbox_uid_processes(), "sandboxed processes survived their request"


def _fast(limit: float) -> Callable:
    def check(res) -> None:
        assert res.duration_s < limit, res.duration_s
    return check


CASES = [
    Case("infinite_loop", "while True:\n    pass\n" + GOOD_PROGRAM, Outcome.TIMEOUT, extra={"timeout": 1.0}),
    Case("infinite_loop_in_candidate", "def add(a, b):\n    while True:\n        pass\n", Outcome.TIMEOUT,
         extra={"timeout": 1.0}),
    Case("sleep_forever", "import time\ntime.sleep(3600)\n", Outcome.TIMEOUT, extra={"timeout": 0.5}),
    Case("fork_bomb_blocked", "import os\nwhile True:\n    os.fork()\n", Outcome.SANDBOX_VIOLATION),
    Case("fork_bomb_contained",
         "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
         Outcome.TIMEOUT, extra={"timeout": 1.5, "allow_subprocess": True}, post=_no_survivors),
    Case("subprocess_blocked", "import subprocess\nsubprocess.run(['true'])\n" + GOOD_PROGRAM,
         Outcome.SANDBOX_VIOLATION),
    Case("posixsubprocess_direct", "import _posixsubprocess\n_posixsubprocess.fork_exec()\n",
         Outcome.SANDBOX_VIOLATION),
    Case("memory_bomb_list", "a = []\nwhile True:\n    a.append(' ' * 10**6)\n", Outcome.MEMORY_EXCEEDED,
         extra={"memory_mb": 256}),
    Case("memory_bomb_single", "x = bytearray(10**11)\n", Outcome.MEMORY_EXCEEDED, extra={"memory_mb": 256}),
    Case("huge_output_then_pass", "print('x' * 1_000_000)\n" + GOOD_PROGRAM, Outcome.PASSED,
         post=lambda r: (len(r.stdout) <= 64 * 1024 and r.stdout_truncated) or pytest.fail(str(len(r.stdout)))),
    Case("endless_output", "import sys\nwhile True:\n    sys.stdout.write('y' * 65536)\n", Outcome.ERROR,
         extra={"timeout": 10.0}, post=lambda r: r.stdout_truncated or pytest.fail("not truncated")),
    Case("sleeping_children_outlive_parent",
         "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(60)\n"
         "    os._exit(0)\n" + GOOD_PROGRAM,
         Outcome.PASSED, extra={"allow_subprocess": True}, post=lambda r: (_fast(3.0)(r), _no_survivors(r))),
    Case("background_popen_sleep", "import subprocess\nsubprocess.Popen(['sleep', '60'])\n" + GOOD_PROGRAM,
         Outcome.PASSED, extra={"allow_subprocess": True}, post=lambda r: (_fast(3.0)(r), _no_survivors(r))),
    # with ``network: loopback`` the sample has AF_INET sockets on a loopback of its own; the
    # interpreter policy reports any other address as a violation
    Case("network_tcp_connect", "import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)\n",
         Outcome.SANDBOX_VIOLATION, extra={"network": "loopback"}),
    Case("network_udp_sendto", "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
         "s.sendto(b'x', ('8.8.8.8', 53))\n", Outcome.SANDBOX_VIOLATION, extra={"network": "loopback"}),
    Case("network_swallowed_violation", "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 80))\n"
         "except Exception:\n    pass\n" + GOOD_PROGRAM, Outcome.SANDBOX_VIOLATION, extra={"network": "loopback"}),
    # without it (the default) the kernel refuses the socket itself
    Case("network_none_inet_socket_refused", "import socket\nsocket.socket()\n", Outcome.ERROR,
         post=lambda r: "Permission denied" in r.detail or pytest.fail(r.detail)),
    Case("network_none_udp_refused", "import socket\nsocket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n",
         Outcome.ERROR, post=lambda r: "Permission denied" in r.detail or pytest.fail(r.detail)),
    Case("write_outside_workdir", "open('/tmp/ianvs_pwned.txt', 'w').write('x')\n", Outcome.SANDBOX_VIOLATION,
         post=_no_file("/tmp/ianvs_pwned.txt")),
    Case("write_outside_via_os_open", "import os\nos.open('/tmp/ianvs_pwned2.txt', os.O_WRONLY | os.O_CREAT)\n",
         Outcome.SANDBOX_VIOLATION, post=_no_file("/tmp/ianvs_pwned2.txt")),
    Case("symlink_escape", "import os\nos.symlink('/tmp', 'out')\nopen('out/ianvs_pwned3.txt', 'w')\n",
         Outcome.SANDBOX_VIOLATION, post=_no_file("/tmp/ianvs_pwned3.txt")),
    Case("dir_fd_escape", "import os\nfd = os.open('/tmp', os.O_RDONLY)\n"
         "os.close(os.open('ianvs_pwned4.txt', os.O_WRONLY | os.O_CREAT, dir_fd=fd))\n",
         Outcome.SANDBOX_VIOLATION, post=_no_file("/tmp/ianvs_pwned4.txt")),
    Case("mkdir_dir_fd_escape", "import os\nos.mkdir('ianvs_pwned5', dir_fd=3)\n", Outcome.SANDBOX_VIOLATION),
    # unix sockets are refused by the kernel (seccomp: EACCES on socket(AF_UNIX)); socketpair works
    Case("unix_socket_outside", "import socket\ns = socket.socket(socket.AF_UNIX)\n"
         "s.connect('/var/run/docker.sock')\n", Outcome.ERROR,
         post=lambda r: "Permission denied" in r.detail or pytest.fail(r.detail)),
    Case("unix_socket_abstract", "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('\\0ianvs')\n",
         Outcome.ERROR),
    Case("raw_socket", "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_RAW, 1)\n",
         Outcome.SANDBOX_VIOLATION, extra={"network": "loopback"}),
    Case("crafted_code_object",
         "def add(a, b):\n    return a + b\nadd.__code__ = add.__code__.replace(co_consts=(None,))\n",
         Outcome.SANDBOX_VIOLATION),
    Case("unix_socket_inside_refused", "import socket\ns = socket.socket(socket.AF_UNIX)\ns.bind('sock')\n"
         + GOOD_PROGRAM, Outcome.ERROR),
    Case("socketpair_ok", "import socket\na, b = socket.socketpair()\na.send(b'x')\nassert b.recv(1) == b'x'\n"
         + GOOD_PROGRAM, Outcome.PASSED),
    Case("chdir_escape", "import os\nos.chdir('/tmp')\n", Outcome.SANDBOX_VIOLATION),
    Case("write_inside_workdir_ok", "open('scratch.txt', 'w').write('fine')\n" + GOOD_PROGRAM, Outcome.PASSED),
    Case("read_env_secrets",
         "import os\ndef add(a, b):\n    leaked = [v for v in os.environ.values() if 'sk-' in v]\n"
         "    print(os.environ.get('OPENAI_API_KEY'), os.environ.get('GITHUB_TOKEN'), leaked)\n    return a + b\n",
         Outcome.PASSED, post=_stdout_lacks(SECRET)),
    Case("read_parent_environ_via_proc", "import os\nprint(open(f'/proc/{os.getppid()}/environ').read())\n",
         Outcome.SANDBOX_VIOLATION, post=_stdout_lacks(SECRET)),
    Case("read_self_mem", "f = open('/proc/self/mem', 'rb')\n", Outcome.SANDBOX_VIOLATION),
    Case("kill_parent", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + GOOD_PROGRAM,
         Outcome.SANDBOX_VIOLATION),
    Case("kill_everything", "import os\nos.kill(-1, 9)\n", Outcome.SANDBOX_VIOLATION),
    Case("os_exit_zero_before_tests", "import os\nos._exit(0)\n", Outcome.ERROR),
    Case("sys_exit_zero_before_tests", "import sys\nsys.exit(0)\n", Outcome.ERROR),
    Case("exit_zero_inside_candidate", "import os\ndef add(a, b):\n    os._exit(0)\n", Outcome.ERROR),
    Case("print_forged_success", "print('passed')\nprint('All tests passed! 1/1 OK')\n" + WRONG, Outcome.FAILED),
    Case("forge_record_on_result_fd",
         "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'0' * 32 + b' passed 0.0 \\n')\n"
         "    except OSError:\n        pass\nos._exit(0)\n",
         {"boundary": Outcome.ERROR, "in_process": Outcome.SANDBOX_VIOLATION}),
    Case("close_result_fd", "import os\nfor fd in range(3, 64):\n    try:\n        os.close(fd)\n"
         "    except OSError:\n        pass\n" + GOOD_PROGRAM, Outcome.ERROR),
    Case("atexit_forgery", "import atexit, os\natexit.register(lambda: os.write(1, b'passed'))\n" + WRONG,
         Outcome.FAILED),
    Case("monkeypatch_assertionerror", "import builtins\nbuiltins.AssertionError = KeyError\n" + WRONG,
         Outcome.FAILED),
    Case("monkeypatch_builtins_used_by_tests", "import builtins\nbuiltins.abs = lambda x: 0\n"
         "def add(a, b):\n    return a * 10\n", Outcome.FAILED,
         test="def check(candidate):\n    assert abs(candidate(2, 3) - 5) < 1e-9\n"),
    Case("monkeypatch_builtins_from_candidate", "import builtins\ndef add(a, b):\n    builtins.abs = lambda x: 0\n"
         "    return a * 10\n", Outcome.FAILED,
         test="def check(candidate):\n    candidate(1, 1)\n    assert abs(candidate(2, 3) - 5) < 1e-9\n"),
    Case("monkeypatch_exec", "import builtins\nbuiltins.exec = lambda *a, **k: None\n" + WRONG, Outcome.FAILED),
    Case("replace_sys_modules_entry", "import sys, types\nfake = types.ModuleType('math')\n"
         "fake.isclose = lambda *a, **k: True\nsys.modules['math'] = fake\n" + WRONG, Outcome.FAILED,
         test="import math\ndef check(candidate):\n    assert math.isclose(candidate(2, 3), 5)\n"),
    Case("harness_globals_via_planted_function",
         "import signal\ng = signal.signal.__globals__\nb = g.get('_TEST_BUILTINS') or g['__builtins__']\n"
         "b['abs'] = lambda x: 0\ndef add(a, b):\n    return a * 10\n", Outcome.FAILED,
         test="def check(candidate):\n    assert abs(candidate(2, 3) - 5) < 1e-9\n"),
    Case("predefine_check", "def check(candidate):\n    pass\n" + WRONG, Outcome.FAILED),
    Case("settrace_tampering", "import sys\nsys.settrace(lambda *a: None)\n" + WRONG, Outcome.SANDBOX_VIOLATION),
    Case("gc_walk_for_nonce", "import gc\nobjs = gc.get_objects()\n" + GOOD_PROGRAM, Outcome.SANDBOX_VIOLATION),
    Case("frame_walk_for_nonce", "import sys\nf = sys._getframe(1)\n", Outcome.ERROR),
    Case("traceback_frame_walk", "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n"
         "    f = e.__traceback__.tb_frame.f_back\n", Outcome.ERROR),
    Case("ctypes_import", "import ctypes\n", Outcome.SANDBOX_VIOLATION),
    Case("signal_handler_install", "import signal\nsignal.signal(signal.SIGALRM, lambda s, f: None)\n",
         Outcome.SANDBOX_VIOLATION),
    Case("recursion_overflow", "def add(a, b):\n    return add(a, b)\n", Outcome.ERROR),
    Case("c_stack_overflow", "import sys\nsys.setrecursionlimit(10**7)\nclass A:\n    def __repr__(self):\n"
         "        return repr(self)\nrepr(A())\n", Outcome.ERROR,
         post=lambda r: r.exit_status == -11 or pytest.fail(str(r.exit_status))),
    Case("self_sigkill", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", Outcome.ERROR,
         post=lambda r: r.exit_status == -9 or pytest.fail(str(r.exit_status))),
    Case("self_sigsegv", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n", Outcome.ERROR),
    Case("alarm_signal", "import signal, time\nsignal.alarm(1)\ntime.sleep(5)\n", Outcome.ERROR,
         extra={"timeout": 4.0}),
    Case("syntax_error", "def add(a, b)\n    return a + b\n", Outcome.SYNTAX_ERROR),
    Case("indentation_error", "def add(a, b):\nreturn a + b\n", Outcome.SYNTAX_ERROR),
    Case("null_byte_source", "def add(a, b):\n    return a + b\x00\n", Outcome.SYNTAX_ERROR),
    Case("unicode_identifiers_and_text", "def add(a, b):\n    ñ = 'λ🙂\u200b'\n    print(ñ)\n    return a + b\n",
         Outcome.PASSED, post=lambda r: "λ🙂" in r.stdout or pytest.fail(r.stdout)),
    Case("invalid_utf8_output", "import os\nos.write(1, b'\\xff\\xfe\\x00bad')\n" + GOOD_PROGRAM, Outcome.PASSED,
         post=lambda r: "bad" in r.stdout or pytest.fail(r.stdout)),
    Case("lone_surrogate_print", "print('\\ud800')\n", Outcome.ERROR),
    Case("stdin_read", "x = input()\n" + GOOD_PROGRAM, Outcome.ERROR),
    Case("stdin_read_provided", "x = input()\nassert x == 'hello'\n" + GOOD_PROGRAM, Outcome.PASSED,
         extra={"stdin": "hello\n"}),
    Case("thread_outlives_check", "import threading, time\n"
         "threading.Thread(target=lambda: time.sleep(60), daemon=False).start()\n" + GOOD_PROGRAM,
         Outcome.PASSED, post=_fast(3.0)),
    Case("always_equal_return_object",  # in-process: residual risk, pinned so it is visible
         "class E:\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return E()\n",
         {"boundary": Outcome.ERROR, "in_process": Outcome.PASSED}),
]


@pytest.mark.parametrize("tier", TIERS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_sample(backend, case: Case, tier: str) -> None:
    res = run_one(backend, id=case.name, program=case.program, test=case.test, entry_point="add",
                  grading=tier, **case.extra)
    assert res.outcome is case.outcome_for(tier), (res.outcome, res.detail, res.stderr[-500:])
    assert res.grading.value == tier
    if case.post is not None:
        if backend.isolation < IsolationLevel.FULL and case.name in (
                "fork_bomb_contained", "sleeping_children_outlive_parent", "background_popen_sleep"):
            pytest.skip("survivor checks need per-worker uids (isolation=full)")
        case.post(res)
    assert_alive(backend)


def test_hostile_unittest_rewrites_test_file(backend) -> None:
    """A solution that deletes/rewrites the test file at import time is still graded by the real tests."""
    solution = ("import os\nfor name in os.listdir('.'):\n    if name.startswith('test_'):\n"
                "        try:\n            os.remove(name)\n        except OSError:\n            pass\n"
                "        try:\n            open(name, 'w').write('')\n        except OSError:\n            pass\n"
                "def add(a, b):\n    return a - b\n")
    tests = ("import unittest\nfrom solution import add\nclass T(unittest.TestCase):\n"
             "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n")
    res = run_one(backend, mode="unittest", files={"solution.py": solution, "test_solution.py": tests})
    assert res.outcome is Outcome.FAILED, (res.outcome, res.detail)
    assert_alive(backend)


def test_hostile_unittest_monkeypatches_framework(backend) -> None:
    """Patching unittest at import time of the solution is undone before the tests run."""
    solution = ("import unittest\nunittest.TestCase.assertEqual = lambda self, a, b, msg=None: None\n"
                "unittest.TestCase.run = lambda self, result=None: None\n"
                "def add(a, b):\n    return a - b\n")
    tests = ("import unittest\nfrom solution import add\nclass T(unittest.TestCase):\n"
             "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n")
    res = run_one(backend, mode="unittest", files={"solution.py": solution, "test_solution.py": tests})
    assert res.outcome is Outcome.FAILED, (res.outcome, res.detail)
    assert_alive(backend)


def test_hostile_batch_does_not_disturb_neighbours(backend) -> None:
    """Hostile samples running concurrently with honest ones do not change the honest verdicts."""
    from core.testenvmanager.sandbox import ExecRequest

    reqs = []
    for i in range(6):
        reqs.append(ExecRequest(id=f"ok{i}", program=GOOD_PROGRAM, test=CHECK_ADD, entry_point="add"))
        reqs.append(ExecRequest(id=f"bad{i}", program="import os\nos.kill(os.getppid(), 9)\n",
                                test=CHECK_ADD, entry_point="add"))
    results = {r.id: r for r in backend.run(reqs)}
    assert all(results[f"ok{i}"].passed for i in range(6))
    assert all(results[f"bad{i}"].outcome is Outcome.SANDBOX_VIOLATION for i in range(6))


def test_hostile_unittest_patches_result_class(backend) -> None:
    """Patching the harness's result class (found via __subclasses__) at import time is undone."""
    solution = ("import unittest\nfor cls in unittest.TestResult.__subclasses__():\n"
                "    cls.addFailure = lambda self, test, err: None\n"
                "    cls.addError = lambda self, test, err: None\n"
                "unittest.TestResult.addFailure = lambda self, test, err: None\n"
                "def add(a, b):\n    return a - b\n")
    tests = ("import unittest\nfrom solution import add\nclass T(unittest.TestCase):\n"
             "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n")
    res = run_one(backend, mode="unittest", files={"solution.py": solution, "test_solution.py": tests})
    assert res.outcome is Outcome.FAILED, (res.outcome, res.detail)
