"""Hostile samples grouped by the classes of weakness of issue 8 (run with ``pytest -k hostile``).

Every test runs against every registered backend (``backend`` / ``bare_backend`` fixtures in
conftest.py) and, where it applies, in both grading tiers. ``bare_backend`` has the interpreter's
audit hook switched off: what it still refuses, the kernel refuses (namespaces, Landlock,
seccomp, uid), which is the promise docs/sandbox.md makes.

A sample that "implements nothing" returns 0 from ``add``; a sample whose attack worked returns
the right answer only when it found it through the attack, so a forged pass shows up as
``passed`` and the tests say it must never happen in the boundary tier.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from core.testenvmanager.sandbox import ExecRequest, IsolationLevel, Outcome

from .conftest import CHECK_ADD, GOOD_PROGRAM, assert_alive, run_one, server_alive

NEVER_PASS = {Outcome.FAILED, Outcome.ERROR, Outcome.TIMEOUT, Outcome.SANDBOX_VIOLATION,
              Outcome.MEMORY_EXCEEDED, Outcome.SYNTAX_ERROR}
NOTHING = "def add(a, b):\n    return 0\n"
REPO = Path(__file__).resolve().parents[2]
DATASET = REPO / "examples/smart_coding/smart_coding_learning_bench/codegen/data/humaneval.jsonl"


def _needs(executor, level: IsolationLevel) -> None:
    if executor.isolation < level:
        pytest.skip(f"needs isolation >= {level} (this host reached {executor.isolation})")


# ------------------------------------------------------------------- 1. forging the verdict
FORGERIES = {
    # a signal handler receives a frame; walk it looking for the harness's nonce and verdict fd
    "handler_frames": (
        "import _imp, sys, importlib.machinery as m\n"
        "found = []\n"
        "def handler(sig, frame):\n"
        "    while frame is not None:\n"
        "        found.append(dict(frame.f_locals))\n"
        "        frame = frame.f_back\n"
        "try:\n"
        "    sig = _imp.create_builtin(m.ModuleSpec('_signal', None))\n"
        "    sig.signal(sig.SIGUSR1, handler)\n"
        "    import os\n"
        "    os.kill(os.getpid(), sig.SIGUSR1)\n"
        "except BaseException:\n"
        "    pass\n"
        "for loc in found:\n"
        "    if 'nonce' in loc and 'report' in loc:\n"
        "        loc['report']('passed', '', 0.0)\n"
        "        import os; os._exit(0)\n" + NOTHING),
    # patch functions the harness calls on its way out
    "patch_exit_path": (
        "import os, json, time, sys\n"
        "real = os.pwrite\n"
        "def fake(fd, data, off):\n"
        "    return real(fd, data.replace(b' failed ', b' passed '), off)\n"
        "os.pwrite = fake\n"
        "os.write = lambda fd, data: len(data)\n"
        "time.perf_counter = lambda: 0.0\n"
        "json.dumps = lambda *a, **k: '[\"ok\", true]'\n" + NOTHING),
    # write fake protocol frames / records on every descriptor, then leave
    "forge_frames_everywhere": (
        "import os, struct\n"
        "msg = b'[\"t\",[\"ok\",5,{},[]]]'\n"
        "frame = struct.pack('>I', len(msg)) + msg\n"
        "for fd in range(3, 64):\n"
        "    for data in (frame * 4, b'0' * 32 + b' passed 0.0\\n'):\n"
        "        try:\n"
        "            os.write(fd, data)\n"
        "        except OSError:\n"
        "            pass\n" + NOTHING),
    # answer every call with the values an always-true comparison would need
    "always_equal_subclass": (
        "class E(int):\n"
        "    def __eq__(self, other):\n"
        "        return True\n"
        "    __hash__ = int.__hash__\n"
        "def add(a, b):\n"
        "    return E(0)\n"),
    # look for the test (and so the expected values) on disk and in the environment
    "read_the_dataset": (
        "import os, json, glob\n"
        "answers = {}\n"
        f"paths = [{str(DATASET)!r}] + glob.glob('/usr/**/HumanEval*', recursive=True)\n"
        "paths += glob.glob('/root/**/HumanEval*', recursive=True)\n"
        "for path in paths:\n"
        "    try:\n"
        "        text = open(path, errors='replace').read()\n"
        "        answers[path] = 'candidate(2, 3) == 5' in text\n"
        "    except OSError:\n"
        "        pass\n"
        "LEAK = any(answers.values())\n"
        "def add(a, b):\n"
        "    return a + b if LEAK else 0\n"),
    # the tests' text, had it been in this process's memory, would be in some str object
    "scan_own_objects_for_test": (
        "import sys\n"
        "LEAK = False\n"
        "def walk(obj, depth=0, seen=set()):\n"
        "    global LEAK\n"
        "    if depth > 6 or id(obj) in seen:\n"
        "        return\n"
        "    seen.add(id(obj))\n"
        "    if isinstance(obj, str) and 'candidate(2, 3)' in obj:\n"
        "        LEAK = True\n"
        "    elif isinstance(obj, dict):\n"
        "        for v in list(obj.values()):\n"
        "            walk(v, depth + 1)\n"
        "    elif isinstance(obj, (list, tuple, set)):\n"
        "        for v in list(obj):\n"
        "            walk(v, depth + 1)\n"
        "    elif hasattr(obj, '__dict__'):\n"
        "        walk(vars(obj), depth + 1)\n"
        "for mod in list(sys.modules.values()):\n"
        "    try:\n"
        "        walk(mod)\n"
        "    except Exception:\n"
        "        pass\n"
        "def add(a, b):\n"
        "    return a + b if LEAK else 0\n"),
}


#: a forgery that silences its own replies waits for the timeout; any outcome but ``passed`` (and
#: ``infra_error``) is the right one, so a short limit loses nothing
FORGERY_TIMEOUT = 2.0


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_hostile_forgery_never_passes_in_boundary_tier(backend, name: str) -> None:
    res = run_one(backend, id=name, program=FORGERIES[name], test=CHECK_ADD, entry_point="add",
                  grading="boundary", timeout=FORGERY_TIMEOUT)
    assert res.outcome in NEVER_PASS, (res.outcome, res.detail)
    assert res.outcome is not Outcome.INFRA_ERROR
    assert_alive(backend)


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_hostile_forgery_without_audit_hook_never_passes(bare_backend, name: str) -> None:
    """The same attacks with the interpreter's audit hook off: the verdict still cannot be
    forged, because it is not computed in the sample's process."""
    res = run_one(bare_backend, id=name, program=FORGERIES[name], test=CHECK_ADD, entry_point="add",
                  grading="boundary", timeout=FORGERY_TIMEOUT)
    assert res.outcome in NEVER_PASS, (res.outcome, res.detail)
    assert_alive(bare_backend)


def test_hostile_test_text_is_not_in_the_candidates_memory(backend) -> None:
    """Read a running candidate's memory from outside (we are root): the test's text, and so its
    expected values, is not there, while the judge does hold it (which shows the scan works)."""
    if os.geteuid() != 0 or backend.name != "local":
        pytest.skip("reads another process's memory: needs root and the local backend")
    marker = "MARKER_" + os.urandom(6).hex()
    test = f"def check(candidate):\n    assert candidate(2, 3) == 5, {marker!r}\n"
    program = "import time\ndef add(a, b):\n    time.sleep(2)\n    return a + b\n"
    found: dict[tuple[str, int], bool] = {}  # (role, pid) -> marker found in its memory

    def scan() -> None:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    uid = int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0])
                except (OSError, IndexError, ValueError):
                    continue
                base, workers = backend.uid_base, backend.workers
                role = ("cand" if base <= uid < base + workers else
                        "judge" if base + workers <= uid < base + 2 * workers else None)
                if role is None or found.get((role, int(pid))):
                    continue
                found[(role, int(pid))] = _memory_contains(int(pid), marker.encode())
            if any(v for (role, _), v in found.items() if role == "judge") and any(
                    role == "cand" for role, _ in found):
                break
            time.sleep(0.05)

    thread = threading.Thread(target=scan)
    thread.start()
    res = run_one(backend, id="mem", program=program, test=test, entry_point="add", timeout=10)
    thread.join()
    assert res.passed, res.detail
    assert any(v for (role, _), v in found.items() if role == "judge"), found
    assert any(role == "cand" for role, _ in found), found
    assert not any(v for (role, _), v in found.items() if role == "cand"), found
    # nor does the fork server ever hold a test or a program
    assert not _memory_contains(backend._proc.pid, marker.encode())


def _memory_contains(pid: int, needle: bytes) -> bool:
    try:
        maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            for line in maps:
                addr, perms = line.split()[:2]
                if "r" not in perms:
                    continue
                start, end = (int(x, 16) for x in addr.split("-"))
                if end - start > 256 << 20:
                    continue
                try:
                    mem.seek(start)
                    if needle in mem.read(end - start):
                        return True
                except (OSError, ValueError, OverflowError):
                    continue
    except OSError:
        return False
    return False


# ------------------------------------------------------------------- 2. steering toward infra_error
HOSTILE_EXCEPTIONS = {
    "bad_class_property": "class E(Exception):\n    @property\n    def __class__(self):\n        raise RuntimeError\n",
    "str_raises": "class E(Exception):\n    def __str__(self):\n        raise E()\n",
    "str_not_a_string": "class E(Exception):\n    def __str__(self):\n        return 42\n",
    "metaclass_name_raises": ("class M(type):\n    @property\n    def __name__(cls):\n        raise SystemExit\n"
                              "class E(Exception, metaclass=M):\n    pass\n"),
    "base_exception": "class E(BaseException):\n    pass\n",
    "system_exit": "E = SystemExit\n",
    "keyboard_interrupt": "E = KeyboardInterrupt\n",
}


@pytest.mark.parametrize("where", ["load", "call"])
@pytest.mark.parametrize("tier", ["boundary", "in_process"])
@pytest.mark.parametrize("name", sorted(HOSTILE_EXCEPTIONS))
def test_hostile_exceptions_are_never_infra(backend, name: str, tier: str, where: str) -> None:
    raiser = "raise E()\n" if where == "load" else "def add(a, b):\n    raise E()\n"
    program = HOSTILE_EXCEPTIONS[name] + raiser + ("def add(a, b):\n    return 0\n" if where == "load" else "")
    res = run_one(backend, id=name, program=program, test=CHECK_ADD, entry_point="add", grading=tier)
    assert res.outcome in NEVER_PASS, (res.outcome, res.detail)


INFRA_STEERING = {
    "systemexit_from_stdlib_main": "import unittest.__main__\n" + GOOD_PROGRAM,
    "exit_in_excepthook": "import sys\nsys.excepthook = lambda *a: sys.exit(0)\nraise ValueError\n",
    "close_std_streams": "import os\nos.close(1)\nos.close(2)\nraise ValueError('x')\n",
    "replace_std_streams": "import sys\nsys.stdout = None\nsys.stderr = 5\nraise ValueError\n",
    "exhaust_descriptors": "fs = []\ntry:\n    while True:\n        fs.append(open('/dev/null'))\nexcept OSError:\n    pass\nraise ValueError\n",
    "sigterm_self": "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n",
    "sigxcpu_self": "import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)\n",
    "exit_70": "import os\nos._exit(70)\n",
}


@pytest.mark.parametrize("tier", ["boundary", "in_process"])
@pytest.mark.parametrize("name", sorted(INFRA_STEERING))
def test_hostile_sample_cannot_claim_infra_error(backend, name: str, tier: str) -> None:
    res = run_one(backend, id=name, program=INFRA_STEERING[name], test=CHECK_ADD, entry_point="add",
                  grading=tier)
    assert res.outcome is not Outcome.INFRA_ERROR, res.detail
    assert_alive(backend)


def test_infra_error_is_reported_for_harness_failures_before_the_sample_runs(backend) -> None:
    """The other direction: a test that does not compile is the dataset's problem (infra)."""
    res = run_one(backend, program=GOOD_PROGRAM, test="def check(candidate)\n", entry_point="add")
    assert res.outcome is Outcome.INFRA_ERROR and "test" in res.detail, res.detail


# ------------------------------------------------------------------- 3. shadowing the test's builtins
SHADOWS = {
    "abs": "abs = lambda x: 0\n",
    "range": "range = lambda *a: []\n",
    "len": "len = lambda x: 0\n",
    "all": "all = lambda x: True\n",
    "isinstance": "isinstance = lambda *a: True\n",
    "AssertionError": "AssertionError = KeyError\n",
}
SHADOW_TEST = ("def check(candidate):\n"
               "    for i in range(1, 3):\n"
               "        assert abs(candidate(i, 3) - (i + 3)) < 1e-9\n"
               "    assert len([candidate(1, 1)]) == 1 and all([isinstance(candidate(1, 1), int)])\n")


@pytest.mark.parametrize("tier", ["boundary", "in_process"])
@pytest.mark.parametrize("name", sorted(SHADOWS))
def test_hostile_program_globals_do_not_shadow_test_builtins(backend, name: str, tier: str) -> None:
    program = SHADOWS[name] + "def add(a, b):\n    return a * 10\n"
    res = run_one(backend, id=name, program=program, test=SHADOW_TEST, entry_point="add", grading=tier)
    assert res.outcome is Outcome.FAILED, (res.outcome, res.detail)


# ------------------------------------------------------------------- 4. file system walls (kernel)
def _host_listing(path: str) -> set[str]:
    try:
        return set(os.listdir(path))
    except OSError:
        return set()


ESCAPES = {
    "write_tmp_absolute": "open('/tmp/ianvs_escape_a', 'w').write('x')",
    "write_tmp_double_slash": "open('//tmp/ianvs_escape_b', 'w').write('x')",
    "write_tmp_dot_path": "open('/./tmp/../tmp/ianvs_escape_c', 'w').write('x')",
    "write_dev_shm": "open('/dev/shm/ianvs_escape_d', 'w').write('x')",
    "relative_symlink_from_subdir": ("os.mkdir('d'); os.chdir('d'); os.symlink('../../../../../../../../tmp', 'up');"
                                     " os.chdir('..'); open('d/up/ianvs_escape_e', 'w').write('x')"),
    "absolute_symlink": "os.symlink('/tmp', 'tmp'); open('tmp/ianvs_escape_f', 'w').write('x')",
    "dir_fd_to_tmp": ("fd = os.open('/tmp', os.O_RDONLY | os.O_DIRECTORY);"
                      " os.close(os.open('ianvs_escape_g', os.O_WRONLY | os.O_CREAT, dir_fd=fd))"),
    "rename_out": "open('x', 'w').write('x'); os.rename('x', '/tmp/ianvs_escape_h')",
    "hardlink_in": "os.link('/etc/passwd', 'passwd'); open('passwd', 'a').write('x')",
    "read_proc_self": "open('/proc/self/status').read()",
    "read_proc_double_slash": "open('//proc/self/status').read()",
    "read_server_environ": "open(f'/proc/{os.getppid()}/environ').read()",
    "read_server_mem": "open(f'/proc/{os.getppid()}/mem', 'rb').read(16)",
    "list_proc": "os.listdir('/proc')",
    "read_root_home": f"open({str(DATASET)!r}).read()",
    "read_site_packages": "import sysconfig; os.listdir(sysconfig.get_paths()['purelib'])[0]",
    "chdir_up_and_write": "os.chdir('/'); open('tmp/ianvs_escape_i', 'w').write('x')",
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_hostile_file_escape_is_refused_by_the_kernel(bare_backend, name: str) -> None:
    """Each escape runs with the audit hook off; the sample returns a wrong answer if any
    escape worked, so a blocked escape is ``passed`` and a working one is ``failed``."""
    _needs(bare_backend, IsolationLevel.KERNEL)
    before = {d: _host_listing(d) for d in ("/tmp", "/dev/shm")}
    program = ("import os\nESCAPED = True\ntry:\n    " + ESCAPES[name] + "\nexcept Exception as e:\n"
               "    ESCAPED = False\n    print(type(e).__name__, e)\n"
               "def add(a, b):\n    return -1 if ESCAPED else a + b\n")
    res = run_one(bare_backend, id=name, program=program, test=CHECK_ADD, entry_point="add")
    assert res.outcome is Outcome.PASSED, (res.outcome, res.detail, res.stdout)
    for d, names in before.items():
        assert not {n for n in _host_listing(d) - names if n.startswith("ianvs_escape")}, d


def test_hostile_unix_socket_on_the_host_is_unreachable(bare_backend, tmp_path) -> None:
    _needs(bare_backend, IsolationLevel.KERNEL)
    path = "/tmp/ianvs-host-socket-" + os.urandom(4).hex()
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen()
    server.settimeout(0.5)
    try:
        program = ("import socket\nok = False\ntry:\n    s = socket.socket(socket.AF_UNIX)\n"
                   f"    s.connect({path!r})\n    ok = True\nexcept OSError:\n    pass\n"
                   "def add(a, b):\n    return -1 if ok else a + b\n")
        res = run_one(bare_backend, program=program, test=CHECK_ADD, entry_point="add")
        assert res.outcome is Outcome.PASSED, (res.outcome, res.detail)
        with pytest.raises(OSError):
            server.accept()  # nobody connected
    finally:
        server.close()
        os.unlink(path)


@pytest.mark.parametrize("network", ["none", "loopback"])
def test_hostile_loopback_server_of_the_host_is_unreachable(bare_backend, network: str) -> None:
    _needs(bare_backend, IsolationLevel.NETNS)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.5)
    port = server.getsockname()[1]
    try:
        program = ("import socket\nok = False\ntry:\n"
                   f"    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n    ok = True\n"
                   "except OSError:\n    pass\ndef add(a, b):\n    return -1 if ok else a + b\n")
        res = run_one(bare_backend, program=program, test=CHECK_ADD, entry_point="add", network=network)
        assert res.outcome is Outcome.PASSED, (res.outcome, res.detail)
        with pytest.raises(OSError):
            server.accept()
    finally:
        server.close()


# ------------------------------------------------------------------- 5. processes, modules re-created
PROCESS_ROUTES = {
    "recreated_posixsubprocess": (
        "import _imp, importlib.util as u, os\n"
        "spec = u.find_spec('_posixsubprocess')\n"
        "ps = _imp.create_builtin(spec) if spec.origin == 'built-in' else _imp.create_dynamic(spec)\n"
        "r, w = os.pipe()\n"
        "ps.fork_exec([b'/bin/sh', b'-c', b'touch spawned'], [b'/bin/sh'], True, (), None, None,\n"
        "             -1, -1, -1, -1, -1, -1, r, w, True, False, -1, -1, None, -1, -1, None, False)\n"),
    "recreated_posix_fork": (
        "import _imp, importlib.machinery as m, os\n"
        "px = _imp.create_builtin(m.ModuleSpec('posix', None))\n"
        "if px.fork() == 0:\n    open('spawned', 'w').write('x')\n    px._exit(0)\n"),
    "posix_spawn": "import os\nos.posix_spawn('/bin/sh', ['sh', '-c', 'touch spawned'], {})\n",
    "ctypes_fork": ("import _imp, importlib.util as u\n"
                    "spec = u.find_spec('_ctypes')\nct = _imp.create_dynamic(spec)\n"
                    "import ctypes\nctypes.CDLL(None).fork()\n"),
    "ctypes_ptrace_server": ("import ctypes, os\nlibc = ctypes.CDLL(None)\n"
                             "libc.ptrace(16, os.getppid(), 0, 0)\n"),
    "unshare_user_namespace": ("import ctypes\nctypes.CDLL(None).unshare(0x10000000)\n"),
    "io_uring": "import ctypes\nctypes.CDLL(None).syscall(425, 8, 0)\n",
}


@pytest.mark.parametrize("name", sorted(PROCESS_ROUTES))
def test_hostile_process_routes_are_killed_by_the_kernel(bare_backend, name: str) -> None:
    _needs(bare_backend, IsolationLevel.KERNEL)
    res = run_one(bare_backend, id=name, program=PROCESS_ROUTES[name] + GOOD_PROGRAM, test=CHECK_ADD,
                  entry_point="add")
    assert res.outcome is Outcome.SANDBOX_VIOLATION and "seccomp" in res.detail, (res.outcome, res.detail)
    assert_alive(bare_backend)


@pytest.mark.parametrize("name", sorted(PROCESS_ROUTES))
def test_hostile_process_routes_with_audit_hook(backend, name: str) -> None:
    res = run_one(backend, id=name, program=PROCESS_ROUTES[name] + GOOD_PROGRAM, test=CHECK_ADD,
                  entry_point="add")
    assert res.outcome is Outcome.SANDBOX_VIOLATION, (res.outcome, res.detail)


# ------------------------------------------------------------------- 6. signals and /proc of the server
SIGNALS = {
    "kill_server": "os.kill(os.getppid(), signal.SIGKILL)",
    "kill_all": "os.kill(-1, signal.SIGKILL)",
    "kill_every_pid": ("for pid in range(2, 1 << 15):\n        try:\n            os.kill(pid, signal.SIGKILL)\n"
                       "        except OSError:\n            pass"),
    "stop_server": "os.kill(os.getppid(), signal.SIGSTOP)",
}


@pytest.mark.parametrize("name", sorted(SIGNALS))
def test_hostile_signals_cannot_reach_the_server_or_judge(bare_backend, name: str) -> None:
    _needs(bare_backend, IsolationLevel.KERNEL)
    program = ("import os, signal\ntry:\n    " + SIGNALS[name] + "\nexcept OSError:\n    pass\n" + GOOD_PROGRAM)
    res = run_one(bare_backend, id=name, program=program, test=CHECK_ADD, entry_point="add", timeout=10)
    # the candidate may kill itself (kill -1 includes processes of its own domain): never a pass
    # forged by killing the judge, and the server lives on
    assert res.outcome is not Outcome.INFRA_ERROR, res.detail
    assert server_alive(bare_backend)
    assert_alive(bare_backend)


# ------------------------------------------------------------------- 7. clean-up the sample cannot steer
def _deep_tree_is_cleaned_up(ex) -> None:
    """A tree as deep as the kernel lets the sample build (it stops near PATH_MAX), thousands of
    files, a symlink to / and an unreadable directory: the server survives and the next sample
    in every slot starts in an empty directory."""
    program = ("import os\nbase = os.getcwd()\ndepth = 0\n"
               "try:\n    for depth in range(5000):\n        os.mkdir('d')\n        os.chdir('d')\n"
               "except OSError:\n    pass\n"
               "os.chdir(base)\nfor i in range(5000):\n    open(f'f{i}', 'w').close()\n"
               "try:\n    os.symlink('/', 'root')\nexcept OSError:\n    pass\n"
               "os.chmod('d', 0)\nprint(depth)\n" + GOOD_PROGRAM)
    for attempt in range(2):
        res = run_one(ex, id=f"deep{attempt}", program=program, test=CHECK_ADD, entry_point="add",
                      timeout=30)
        assert res.outcome in (Outcome.PASSED, Outcome.SANDBOX_VIOLATION), (res.outcome, res.detail)
        assert int(res.stdout.split()[0]) > 1000, res.stdout
    for attempt in range(4):  # both slots
        after = run_one(ex, id=f"after{attempt}", program="import os\nLEFT = os.listdir('.')\n"
                        "def add(a, b):\n    return a + b if not LEFT else -1\n",
                        test=CHECK_ADD, entry_point="add")
        assert after.outcome is Outcome.PASSED, after.detail
    assert server_alive(ex)


# each test takes one parametrised executor fixture: with both (``backend`` and
# ``bare_backend``) pytest crosses their parameters, 3 x 3 runs of which 6 differ
def test_hostile_deep_tree_and_many_files_are_cleaned_up(backend) -> None:
    _deep_tree_is_cleaned_up(backend)


def test_hostile_deep_tree_and_many_files_are_cleaned_up_by_the_walls_alone(bare_backend) -> None:
    _deep_tree_is_cleaned_up(bare_backend)


# ------------------------------------------------------------------- 8. samples cannot affect each other
LEAVE_STATE = (
    "import os, socket, threading, time\n"
    "open('left.txt', 'w').write('x')\n"
    "for path in ('/tmp/left', '/dev/shm/left', os.path.expanduser('~/left2')):\n"
    "    try:\n        open(path, 'w').write('x')\n    except OSError:\n        pass\n"
    "os.environ['LEFT'] = '1'\n"
    "try:\n    s = socket.socket()\n    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "    s.bind(('127.0.0.1', 47811))\n    s.listen()\n    KEEP = s\nexcept PermissionError:\n    pass\n"
    "threading.Thread(target=lambda: time.sleep(30)).start()\n" + GOOD_PROGRAM)
SEE_STATE = (
    "import os, socket\nfound = []\n"
    "if os.listdir('.'):\n    found.append('cwd')\n"
    "for path in ('/tmp/left', '/dev/shm/left'):\n    if os.path.exists(path):\n        found.append(path)\n"
    "if os.environ.get('LEFT'):\n    found.append('env')\n"
    "try:\n    socket.create_connection(('127.0.0.1', 47811), timeout=0.5)\n    found.append('listener')\n"
    "except OSError:\n    pass\n"
    "def add(a, b):\n    return a + b if not found else -1\n")


def _next_sample_sees_a_clean_state(ex, tier: str) -> None:
    for attempt in range(3):  # both worker slots, more than once
        first = run_one(ex, id=f"leave{attempt}", program=LEAVE_STATE, test=CHECK_ADD, entry_point="add",
                        grading=tier)
        assert first.outcome in (Outcome.PASSED, Outcome.SANDBOX_VIOLATION), first.detail
        second = run_one(ex, id=f"see{attempt}", program=SEE_STATE, test=CHECK_ADD, entry_point="add",
                         grading=tier)
        assert second.outcome is Outcome.PASSED, (second.outcome, second.detail, second.stdout)


@pytest.mark.parametrize("tier", ["boundary", "in_process"])
def test_hostile_pairs_next_sample_sees_a_clean_state(backend, tier: str) -> None:
    _next_sample_sees_a_clean_state(backend, tier)


@pytest.mark.parametrize("tier", ["boundary", "in_process"])
def test_hostile_pairs_next_sample_sees_a_clean_state_by_the_walls_alone(bare_backend, tier: str) -> None:
    _next_sample_sees_a_clean_state(bare_backend, tier)


def test_hostile_pairs_concurrent_batch_each_sees_clean_state(backend) -> None:
    reqs = []
    for i in range(8):
        reqs.append(ExecRequest(id=f"l{i}", program=LEAVE_STATE.replace("47811", str(47900 + i)),
                                test=CHECK_ADD, entry_point="add", network="loopback"))
        reqs.append(ExecRequest(id=f"s{i}", program=SEE_STATE.replace("47811", str(47900 + i - 1)),
                                test=CHECK_ADD, entry_point="add", network="loopback"))
    results = {r.id: r for r in backend.run(reqs)}
    # each request has a loopback of its own: not even a neighbour that is still running (its
    # listener open) can be seen
    for i in range(8):
        assert results[f"s{i}"].outcome is Outcome.PASSED, (results[f"s{i}"].outcome, results[f"s{i}"].detail)


# ------------------------------------------------------------ huge answers cross as data
#: answers of several megabytes as one value (a 32-million-bit integer is 8 MB of hex in one
#: frame, under the frame limit): they cross to the judge as data and are compared there, so a
#: wrong one is ``failed`` well inside the request's limit (issue 42: such an answer once ran
#: its request into the timeout)
HUGE_ANSWERS = {
    "int_32M_bits": ("def add(a, b):\n    return 1 << 32_000_000\n", "failed"),
    "negative_int": ("def add(a, b):\n    return -(1 << 32_000_000) + a\n", "failed"),
    "int_in_list": ("def add(a, b):\n    return [1 << 30_000_000]\n", "failed"),
    "the_right_int": ("def add(a, b):\n    x = 1 << 32_000_000\n    return x - x + a + b\n", "passed"),
}


@pytest.mark.parametrize("tier", ["boundary", "in_process"])
@pytest.mark.parametrize("name", sorted(HUGE_ANSWERS))
def test_hostile_huge_answers_are_compared_as_data(backend, name: str, tier: str) -> None:
    program, expected = HUGE_ANSWERS[name]
    res = run_one(backend, id=name, program=program, test=CHECK_ADD, entry_point="add",
                  grading=tier, timeout=10)
    assert res.outcome.value == expected, (res.outcome, res.detail[:300])
