"""Real-kernel tests for ``core/testenvmanager/sandbox/walls.py`` (Landlock + seccomp-BPF).

Every check that installs a wall runs in a forked child: the child applies the walls, tries the
action, reports a short text through a pipe and ``os._exit``s; the parent asserts on the report
and the wait status (``SIGSYS`` for ``KILL_PROCESS``). Denials are paired with a control (the same
action in the same child before the walls went up) so that a denial cannot come from somewhere
else (DAC, a missing file). The module is loaded by file path under an arbitrary name, as the fork
server does.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import importlib.util
import json
import os
import resource
import select
import signal
import socket
import struct
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Callable

import pytest

_WALLS_PATH = Path(__file__).resolve().parents[2] / "core" / "testenvmanager" / "sandbox" / "walls.py"


def _load_walls():
    spec = importlib.util.spec_from_file_location("walls_loaded_by_path_for_tests", _WALLS_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


walls = _load_walls()
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long
ARCH = os.uname().machine

_PR_SET_DUMPABLE = 4
_CLONE_THREAD = 0x00010000
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_SIGCHLD = 17

# syscall numbers the tests need, kept independent of the module under test
_TEST_NR = {
    "x86_64": {"read": 0, "getpid": 39, "clone": 56, "fork": 57, "execve": 59, "ptrace": 101,
               "personality": 135, "socket": 41, "socketpair": 53, "shmget": 29, "unshare": 272,
               "io_uring_setup": 425, "clone3": 435, "mount": 165, "bpf": 321, "mq_open": 240},
    "aarch64": {"read": 63, "getpid": 172, "clone": 220, "execve": 221, "ptrace": 117,
                "personality": 92, "socket": 198, "socketpair": 199, "shmget": 194, "unshare": 97,
                "io_uring_setup": 425, "clone3": 435, "mount": 40, "bpf": 280, "mq_open": 180},
}
_AUDIT = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_KILL, _ALLOW = 0x80000000, 0x7FFF0000


def _errno_ret(code: int) -> int:
    return 0x00050000 | code


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def need_seccomp() -> None:
    if not walls.seccomp_available():
        pytest.skip(f"seccomp filters unavailable here ({walls.describe()})")


@pytest.fixture
def need_landlock() -> None:
    if walls.landlock_abi() == 0:
        pytest.skip(f"Landlock unavailable here ({walls.describe()})")


def _need_scopes() -> None:
    if walls.landlock_abi() < 6:
        pytest.skip(f"Landlock ABI {walls.landlock_abi()} < 6 has no IPC scopes")


def run_child(body: Callable[[], object], *, no_core: bool = False, timeout: float = 60.0) -> tuple[int, str]:
    """Fork; the child runs *body* and reports ``str(result)`` (or ``EXC ...``) through a pipe.

    Returns (wait status, report). ``no_core`` makes the child non-dumpable first so that an
    expected SIGSYS leaves no core file behind.
    """
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        code = 0
        try:
            os.close(rfd)
            if no_core:
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
                LIBC.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
            report = str(body())
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            report, code = f"EXC {type(exc).__name__}: {exc}", 3
        try:
            os.write(wfd, report.encode(errors="replace"))
        finally:
            os._exit(code)
    os.close(wfd)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([rfd], [], [], left)[0]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail(f"child timed out; report so far: {b''.join(chunks)!r}")
            chunk = os.read(rfd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(rfd)
    _, status = os.waitpid(pid, 0)
    return status, b"".join(chunks).decode(errors="replace")


def assert_sigsys(status: int, report: str) -> None:
    assert os.WIFSIGNALED(status), f"not killed: status={status:#x} report={report!r}"
    assert os.WTERMSIG(status) == signal.SIGSYS, f"signal {os.WTERMSIG(status)}, report={report!r}"


def assert_exit0(status: int, report: str) -> None:
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"status={status:#x} report={report!r}"


def _syscall(name: str, *args: int) -> tuple[int, int]:
    """Raw syscall by name (test-local numbers); returns (result, errno)."""
    ctypes.set_errno(0)
    res = LIBC.syscall(ctypes.c_long(_TEST_NR[ARCH][name]), *(ctypes.c_long(a) for a in args))
    return res, ctypes.get_errno()


def _seccomp_only(allow_subprocess: bool, action: Callable[[], object], *,
                  allow_inet: bool = False) -> Callable[[], object]:
    def body() -> object:
        walls.apply_seccomp(walls.seccomp_program(allow_subprocess, allow_inet=allow_inet), os.getpid())
        return action()
    return body


def _outcome(action: Callable[[], object]) -> str:
    """Run *action*: "ok", "denied" (PermissionError), "exdev", or the exception's repr."""
    try:
        action()
    except PermissionError:
        return "denied"
    except OSError as exc:
        if exc.errno == errno.EXDEV:
            return "exdev"
        return f"{type(exc).__name__}({exc.errno}): {exc}"
    return "ok"


def _errno_of(action: Callable[[], object]) -> str:
    try:
        action()
    except OSError as exc:
        return errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return "ok"


# ---------------------------------------------------------------------------------------------
# probes and pure program checks (no walls installed)
# ---------------------------------------------------------------------------------------------

def test_probes_and_describe() -> None:
    info = walls.describe()
    assert set(info) == {"landlock_abi", "seccomp", "arch"}
    assert isinstance(info["landlock_abi"], int) and info["landlock_abi"] >= 0
    assert isinstance(info["seccomp"], bool)
    assert info["arch"] == ARCH
    assert walls.landlock_abi() == info["landlock_abi"]
    assert walls.seccomp_available() is info["seccomp"]
    assert "KILL_PROCESS" in walls.SECCOMP_POLICY_DOC and "ptrace" in walls.SECCOMP_POLICY_DOC


def _bpf_run(program: bytes, nr: int, arch: int, args: tuple[int, ...] = (0,) * 6) -> int:
    """Minimal classic-BPF interpreter over a seccomp_data record (little endian)."""
    data = struct.pack("<IIQ6Q", nr & 0xFFFFFFFF, arch, 0, *(list(args) + [0] * (6 - len(args))))
    insns = [struct.unpack_from("<HBBI", program, off) for off in range(0, len(program), 8)]
    acc, pc = 0, 0
    for _ in range(len(insns) + 1):
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld w abs
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif code == 0x15:  # jeq k
            pc += 1 + (jt if acc == k else jf)
        elif code == 0x35:  # jge k (unsigned)
            pc += 1 + (jt if acc >= k else jf)
        elif code == 0x45:  # jset k
            pc += 1 + (jt if acc & k else jf)
        elif code == 0x06:  # ret k
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x} at {pc}")
    raise AssertionError("program did not terminate")


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
@pytest.mark.parametrize("allow", [False, True])
def test_program_structure(arch: str, allow: bool) -> None:
    program = walls.seccomp_program(allow, arch)
    assert program is walls.seccomp_program(allow, arch)  # cached
    assert len(program) % 8 == 0 and 0 < len(program) // 8 <= 4096
    insns = [struct.unpack_from("<HBBI", program, off) for off in range(0, len(program), 8)]
    assert insns[0] == (0x20, 0, 0, 4)  # first instruction loads seccomp_data.arch
    assert insns[-1][0] == 0x06
    for pc, (code, jt, jf, _) in enumerate(insns):
        assert code in (0x20, 0x15, 0x35, 0x45, 0x06), f"opcode {code:#x}"
        if code in (0x15, 0x35, 0x45):
            assert pc + 1 + max(jt, jf) < len(insns)


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_program_decisions_emulated(arch: str) -> None:
    """Both architectures' programs, checked in a BPF interpreter (aarch64 cannot run here)."""
    nr, audit = _TEST_NR[arch], _AUDIT[arch]
    strict = walls.bind_self_pid(walls.seccomp_program(False, arch), 4242)
    loose = walls.bind_self_pid(walls.seccomp_program(True, arch), 4242)
    for prog in (strict, loose):
        assert _bpf_run(prog, nr["getpid"], audit) == _ALLOW
        assert _bpf_run(prog, nr["read"], audit) == _ALLOW
        assert _bpf_run(prog, nr["getpid"], 0x40000003) == _KILL  # i386 / foreign arch
        for name in ("ptrace", "unshare", "mount", "io_uring_setup", "bpf"):
            assert _bpf_run(prog, nr[name], audit) == _KILL, name
        assert _bpf_run(prog, nr["clone3"], audit) == _errno_ret(errno.ENOSYS)
        assert _bpf_run(prog, nr["shmget"], audit) == _errno_ret(errno.EPERM)
        assert _bpf_run(prog, nr["mq_open"], audit) == _errno_ret(errno.EPERM)
        assert _bpf_run(prog, nr["socket"], audit, (socket.AF_INET,)) == _errno_ret(errno.EACCES)
        assert _bpf_run(prog, nr["socket"], audit, (socket.AF_INET6,)) == _errno_ret(errno.EACCES)
        assert _bpf_run(prog, nr["socket"], audit, (socket.AF_UNIX,)) == _errno_ret(errno.EACCES)
        assert _bpf_run(prog, nr["socket"], audit, (16,)) == _errno_ret(errno.EACCES)  # netlink
        assert _bpf_run(prog, nr["socketpair"], audit, (socket.AF_UNIX,)) == _ALLOW
        assert _bpf_run(prog, nr["personality"], audit, (0xFFFFFFFF,)) == _ALLOW
        assert _bpf_run(prog, nr["personality"], audit, (0x0040000,)) == _errno_ret(errno.EPERM)
        for ns in (_CLONE_NEWUSER, _CLONE_NEWNS, _CLONE_NEWPID, _CLONE_NEWNET, 0x80):
            assert _bpf_run(prog, nr["clone"], audit, (ns | _SIGCHLD,)) == _KILL
            assert _bpf_run(prog, nr["clone"], audit, (ns | _CLONE_THREAD | 0x900,)) == _KILL
        assert _bpf_run(prog, nr["clone"], audit, (0x3D0F00,)) == _ALLOW  # pthread_create flags
    for allow in (False, True):
        for unix in (False, True):
            prog = walls.bind_self_pid(
                walls.seccomp_program(allow, arch, allow_unix=unix, allow_inet=True), 4242)
            assert _bpf_run(prog, nr["socket"], audit, (socket.AF_INET,)) == _ALLOW
            assert _bpf_run(prog, nr["socket"], audit, (socket.AF_INET6,)) == _ALLOW
            assert _bpf_run(prog, nr["socket"], audit, (socket.AF_UNIX,)) == (
                _ALLOW if unix else _errno_ret(errno.EACCES))
            assert _bpf_run(prog, nr["socket"], audit, (16,)) == _errno_ret(errno.EACCES)
    assert _bpf_run(strict, nr["clone"], audit, (_SIGCHLD | 0x01200000,)) == _KILL  # fork()
    assert _bpf_run(loose, nr["clone"], audit, (_SIGCHLD | 0x01200000,)) == _ALLOW
    assert _bpf_run(strict, nr["execve"], audit) == _KILL
    assert _bpf_run(loose, nr["execve"], audit) == _ALLOW
    if arch == "x86_64":
        assert _bpf_run(strict, nr["fork"], audit) == _KILL
        assert _bpf_run(loose, nr["fork"], audit) == _ALLOW
        for prog in (strict, loose):
            assert _bpf_run(prog, 0x40000000 | nr["getpid"], audit) == _KILL  # x32 ABI


def test_program_rejects_unknown_arch_and_bad_bytes() -> None:
    with pytest.raises(ValueError):
        walls.seccomp_program(False, "riscv64")
    with pytest.raises(ValueError):
        walls.apply_seccomp(b"")
    with pytest.raises(ValueError):
        walls.apply_seccomp(b"\x06\x00\x00\x00\x00\x00")  # not a multiple of 8


# ---------------------------------------------------------------------------------------------
# seccomp in real children
# ---------------------------------------------------------------------------------------------

def _fork_and_reap() -> str:
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    _, status = os.waitpid(pid, 0)
    return f"grandchild exit {os.WEXITSTATUS(status)}"


def _run_true() -> str:
    return f"rc {subprocess.run(['/bin/true'], check=False).returncode}"


def _exec_true() -> str:
    os.execv("/bin/true", ["true"])
    return "exec returned"  # unreachable


@pytest.mark.usefixtures("need_seccomp")
@pytest.mark.parametrize("action", [_fork_and_reap, _run_true, _exec_true], ids=["fork", "subprocess", "execve"])
def test_process_creation_killed_when_not_allowed(action: Callable[[], object]) -> None:
    assert_sigsys(*run_child(_seccomp_only(False, action), no_core=True))


@pytest.mark.usefixtures("need_seccomp")
def test_process_creation_works_when_allowed() -> None:
    def action() -> str:
        return f"{_fork_and_reap()} / {_run_true()}"

    status, report = run_child(_seccomp_only(True, action))
    assert_exit0(status, report)
    assert report == "grandchild exit 7 / rc 0"
    status, report = run_child(_seccomp_only(True, _exec_true))
    assert_exit0(status, report)  # /bin/true replaced the child and exited 0


@pytest.mark.usefixtures("need_seccomp")
@pytest.mark.parametrize("allow", [False, True])
def test_threads_work(allow: bool) -> None:
    def action() -> str:
        box: list[int] = []
        threads = [threading.Thread(target=box.append, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return f"threads {sorted(box)}"

    status, report = run_child(_seccomp_only(allow, action))
    assert_exit0(status, report)
    assert report == "threads [0, 1, 2, 3]"


@pytest.mark.usefixtures("need_seccomp")
def test_clone3_reports_enosys() -> None:
    status, report = run_child(_seccomp_only(True, lambda: _syscall("clone3", 0, 0)))
    assert_exit0(status, report)
    assert report == f"(-1, {errno.ENOSYS})"


def _ptrace_traceme() -> object:
    return _syscall("ptrace", 0, 0, 0, 0)  # PTRACE_TRACEME


def _unshare_user() -> object:
    return _syscall("unshare", _CLONE_NEWUSER)


def _mount_nothing() -> object:
    # would fail with ENOENT without the filter: nothing can get mounted if the filter is broken
    return LIBC.mount(None, b"/nonexistent-walls-test-target", None, 0, None)


def _io_uring_setup() -> object:
    params = ctypes.create_string_buffer(256)
    return _syscall("io_uring_setup", 1, ctypes.addressof(params))


def _clone_with(ns_flag: int) -> Callable[[], object]:
    def action() -> object:
        # CLONE_THREAD without CLONE_SIGHAND is EINVAL: nothing is created if the filter is broken
        return _syscall("clone", ns_flag | _CLONE_THREAD, 0, 0, 0, 0)
    return action


def _x32_getpid() -> object:
    return LIBC.syscall(ctypes.c_long(0x40000000 | 39))


_KILLED_ACTIONS = {
    "ptrace": _ptrace_traceme,
    "unshare-newuser": _unshare_user,
    "mount": _mount_nothing,
    "io_uring_setup": _io_uring_setup,
    "clone-newuser": _clone_with(_CLONE_NEWUSER),
    "clone-newns": _clone_with(_CLONE_NEWNS),
    "clone-newnet": _clone_with(_CLONE_NEWNET),
}


@pytest.mark.usefixtures("need_seccomp")
@pytest.mark.parametrize("allow", [False, True], ids=["strict", "allow_subprocess"])
@pytest.mark.parametrize("name", sorted(_KILLED_ACTIONS))
def test_dangerous_syscalls_killed(name: str, allow: bool) -> None:
    assert_sigsys(*run_child(_seccomp_only(allow, _KILLED_ACTIONS[name]), no_core=True))


@pytest.mark.usefixtures("need_seccomp")
@pytest.mark.skipif(ARCH != "x86_64", reason="x32 ABI exists only on x86_64")
def test_x32_syscalls_killed() -> None:
    assert_sigsys(*run_child(_seccomp_only(True, _x32_getpid), no_core=True))


@pytest.mark.usefixtures("need_seccomp")
@pytest.mark.parametrize("inet", [False, True], ids=["default", "allow_inet"])
def test_sockets(inet: bool) -> None:
    def action() -> str:
        results = {
            "unix": _errno_of(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()),
            "unix-abstract": _errno_of(lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).close()),
            "netlink": _errno_of(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()),
            "packet": _errno_of(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0).close()),
            "inet": _errno_of(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()),
            "inet-udp": _errno_of(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close()),
            "inet6": _errno_of(lambda: socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()),
        }

        def pair() -> None:
            left, right = socket.socketpair()
            left.sendall(b"ping")
            assert right.recv(4) == b"ping"
            left.close()
            right.close()

        results["socketpair"] = _errno_of(pair)
        return json.dumps(results)

    status, report = run_child(_seccomp_only(False, action, allow_inet=inet))
    assert_exit0(status, report)
    results = json.loads(report)
    assert results["unix"] == results["unix-abstract"] == "EACCES"
    assert results["netlink"] == results["packet"] == "EACCES"
    if inet:
        assert results["inet"] == results["inet-udp"] == "ok"
        assert results["inet6"] in ("ok", "EAFNOSUPPORT")  # IPv6 may be disabled on the host
    else:
        assert results["inet"] == results["inet-udp"] == results["inet6"] == "EACCES"
    assert results["socketpair"] == "ok"


@pytest.mark.usefixtures("need_seccomp")
def test_sysv_ipc_and_mqueue_eperm() -> None:
    def action() -> str:
        out = []
        for call in (lambda: LIBC.shmget(0, 4096, 0o1600),   # IPC_PRIVATE, IPC_CREAT | 0600
                     lambda: LIBC.semget(0, 1, 0o1600),
                     lambda: LIBC.msgget(0, 0o1600),
                     lambda: LIBC.mq_open(b"/walls-test", os.O_CREAT | os.O_RDWR, 0o600, None)):
            ctypes.set_errno(0)
            res = call()
            out.append(f"{res}/{errno.errorcode.get(ctypes.get_errno(), '0')}")
        return " ".join(out)

    status, report = run_child(_seccomp_only(False, action))
    assert_exit0(status, report)
    assert report == "-1/EPERM -1/EPERM -1/EPERM -1/EPERM"


@pytest.mark.usefixtures("need_seccomp")
def test_personality() -> None:
    def action() -> str:
        query = _syscall("personality", 0xFFFFFFFF)
        no_aslr = _syscall("personality", 0x0040000)  # ADDR_NO_RANDOMIZE
        return f"{query[0] >= 0} {no_aslr}"

    status, report = run_child(_seccomp_only(False, action))
    assert_exit0(status, report)
    assert report == f"True (-1, {errno.EPERM})"


# ---------------------------------------------------------------------------------------------
# Landlock in real children
# ---------------------------------------------------------------------------------------------

@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    ro, rw, outside = tmp_path / "ro", tmp_path / "rw", tmp_path / "outside"
    for directory in (ro, rw, outside):
        directory.mkdir()
    (ro / "data.txt").write_text("readable")
    (outside / "secret.txt").write_text("secret")
    for tag in ("ctl", "walled"):
        (ro / f"del-{tag}").write_text("")
    return {"ro": ro, "rw": rw, "outside": outside}


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _read_some(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(8)


def _write(path: str) -> None:
    with open(path, "wb") as handle:
        handle.write(b"x")


def _rw_dir_ops(rw: Path, tag: str) -> None:
    base = rw / f"ops-{tag}"
    base.mkdir()
    _write(str(base / "a"))
    os.rename(base / "a", base / "b")
    os.symlink("b", base / "link")
    assert _read(str(base / "link")) == b"x"
    os.truncate(base / "b", 0)
    os.unlink(base / "b")
    os.unlink(base / "link")
    os.rmdir(base)


def _escape_symlink(rw: Path, outside: Path, tag: str, absolute: bool) -> None:
    link = rw / f"esc-{'abs' if absolute else 'rel'}-{tag}"
    target = str(outside) if absolute else "../" * 16 + str(outside).lstrip("/")
    os.symlink(target, link)
    _write(str(link / f"pwned-{tag}"))


def _landlock_actions(lay: dict[str, Path], tmp_name: str) -> dict[str, tuple[Callable[[str], object], str]]:
    """name -> (action(tag), expected outcome under the walls). Controls must all be "ok"."""
    ro, rw, outside = lay["ro"], lay["rw"], lay["outside"]
    return {
        "read /proc/self/status": (lambda tag: _read("/proc/self/status"), "denied"),
        "read //proc/self/status": (lambda tag: _read("//proc/self/status"), "denied"),
        "list /proc": (lambda tag: os.listdir("/proc"), "denied"),
        "read outside file": (lambda tag: _read(str(outside / "secret.txt")), "denied"),
        "list outside dir": (lambda tag: os.listdir(outside), "denied"),
        "read outside via ..": (lambda tag: _read(f"{rw}/../outside/secret.txt"), "denied"),
        "write outside dir": (lambda tag: _write(str(outside / f"x-{tag}")), "denied"),
        "write /tmp/x": (lambda tag: _write(f"{tmp_name}-{tag}"), "denied"),
        "write into read dir": (lambda tag: _write(str(ro / f"x-{tag}")), "denied"),
        "mkdir in read dir": (lambda tag: os.mkdir(ro / f"d-{tag}"), "denied"),
        "symlink in read dir": (lambda tag: os.symlink("data.txt", ro / f"s-{tag}"), "denied"),
        "mkfifo in read dir": (lambda tag: os.mkfifo(ro / f"f-{tag}"), "denied"),
        "unlink in read dir": (lambda tag: os.unlink(ro / f"del-{tag}"), "denied"),
        # TRUNCATE is a Landlock right since ABI 3; before that truncate(2) was not controlled
        "truncate allowed file": (lambda tag: os.truncate(ro / "data.txt", 8),
                                  "denied" if walls.landlock_abi() >= 3 else "ok"),
        "hardlink outside file into rw": (
            lambda tag: os.link(outside / "secret.txt", rw / f"stolen-{tag}"), "denied|exdev"),
        "relative symlink escape": (lambda tag: _escape_symlink(rw, outside, tag, False), "denied"),
        "absolute symlink escape": (lambda tag: _escape_symlink(rw, outside, tag, True), "denied"),
        "read allowed file": (lambda tag: _read(str(ro / "data.txt")), "ok"),
        "list allowed dir": (lambda tag: os.listdir(ro), "ok"),
        "rw dir operations": (lambda tag: _rw_dir_ops(rw, tag), "ok"),
        "write /dev/null": (lambda tag: _write("/dev/null"), "ok"),
        "read /dev/urandom": (lambda tag: _read_some("/dev/urandom"), "ok"),
    }


_LANDLOCK_CASES = sorted(_landlock_actions({"ro": Path("/"), "rw": Path("/"), "outside": Path("/")}, "/"))


@pytest.mark.usefixtures("need_landlock")
@pytest.mark.parametrize("how", ["apply", "prepared"])
@pytest.mark.parametrize("case", _LANDLOCK_CASES)
def test_landlock_filesystem(case: str, how: str, layout: dict[str, Path]) -> None:
    """Every action under the policy, built in the child (``apply``) or prepared in the parent
    and only enforced in the child (``ruleset`` + ``restrict``, as the spawners do)."""
    tmp_name = f"/tmp/walls-test-{uuid.uuid4().hex}"
    action, expected = _landlock_actions(layout, tmp_name)[case]
    policy = walls.LandlockPolicy([str(layout["ro"])])
    ruleset = policy.ruleset([str(layout["rw"])], min_fd=64) if how == "prepared" else -1
    try:
        def body() -> str:
            control = _outcome(lambda: action("ctl"))
            if how == "prepared":
                policy.restrict(ruleset)
            else:
                policy.apply(rw_dirs=[str(layout["rw"])])
            return f"{control} -> {_outcome(lambda: action('walled'))}"

        status, report = run_child(body)
    finally:
        if ruleset >= 0:
            assert ruleset >= 64 and not os.get_inheritable(ruleset)
            os.close(ruleset)
        policy.close()
        for leftover in (f"{tmp_name}-ctl", f"{tmp_name}-walled"):
            if os.path.lexists(leftover):
                os.unlink(leftover)
    assert_exit0(status, report)
    control, _, walled = report.partition(" -> ")
    assert control == "ok", f"control failed without walls: {report}"
    assert walled in expected.split("|"), report
    # nothing the walled attempt tried to create outside the rw dir exists
    assert not (layout["outside"] / "pwned-walled").exists()
    assert not (layout["outside"] / "x-walled").exists()
    assert not (layout["ro"] / "x-walled").exists()


@pytest.mark.usefixtures("need_landlock")
def test_landlock_policy_bookkeeping(layout: dict[str, Path]) -> None:
    missing = str(layout["ro"] / "does-not-exist")
    policy = walls.LandlockPolicy([str(layout["ro"]), missing, str(layout["ro"] / "data.txt")],
                                  rw_files=["/dev/null", "/nonexistent-walls-device"])
    try:
        assert policy.abi == walls.landlock_abi()
        assert policy.skipped == [missing, "/nonexistent-walls-device"]
        assert len(policy.fds) == 3
        for fd in policy.fds:
            assert not os.get_inheritable(fd)
            assert fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_PATH
    finally:
        policy.close()
    assert policy.fds == []
    policy.close()  # idempotent
    with pytest.raises(OSError):
        policy.apply()


@pytest.mark.usefixtures("need_landlock")
def test_landlock_apply_arguments(layout: dict[str, Path]) -> None:
    """extra_read_dirs grants reading; a file in rw_dirs works; a missing rw dir raises, naming the step."""
    extra = layout["outside"]
    rw_file = layout["rw"] / "single.txt"
    rw_file.write_text("")
    policy = walls.LandlockPolicy([str(layout["ro"])])
    try:
        def body() -> str:
            try:
                policy.apply(rw_dirs=[str(layout["rw"] / "missing")])
            except OSError as exc:
                first = f"raised {errno.errorcode[exc.errno or 0]} {'rw_dirs' in str(exc)}"
            else:
                first = "no error"
            policy.apply(rw_dirs=[str(rw_file)], extra_read_dirs=[str(extra), "/nonexistent-extra"])
            return " | ".join([
                first,
                _outcome(lambda: _read(str(extra / "secret.txt"))),
                _outcome(lambda: _write(str(extra / "x-walled"))),
                _outcome(lambda: _write(str(rw_file))),
                _outcome(lambda: _write(str(layout["rw"] / "other"))),
            ])

        status, report = run_child(body)
    finally:
        policy.close()
    assert_exit0(status, report)
    assert report == "raised ENOENT True | ok | denied | ok | denied"


@pytest.mark.usefixtures("need_landlock")
@pytest.mark.parametrize("scoped", [True, False])
def test_landlock_signal_scope(scoped: bool) -> None:
    _need_scopes()
    policy = walls.LandlockPolicy([], scope_signals=scoped)
    try:
        def body() -> str:
            parent = os.getppid()
            control = _outcome(lambda: os.kill(parent, 0))
            policy.apply()
            results = [control]
            results.append(_outcome(lambda: os.kill(parent, 0)))
            results.append(_outcome(lambda: os.kill(parent, signal.SIGCONT)))
            results.append(_outcome(lambda: os.kill(os.getpid(), 0)))
            return " ".join(results)

        status, report = run_child(body)
    finally:
        policy.close()
    assert_exit0(status, report)
    assert report == ("ok denied denied ok" if scoped else "ok ok ok ok")


@pytest.mark.usefixtures("need_landlock")
@pytest.mark.parametrize("scoped", [True, False])
def test_landlock_abstract_unix_scope(scoped: bool) -> None:
    _need_scopes()
    name = f"\0walls-test-{uuid.uuid4().hex}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(name)
    server.listen(4)
    policy = walls.LandlockPolicy([], scope_abstract_unix=scoped)
    try:
        def connect() -> None:
            client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                client.connect(name)
            finally:
                client.close()

        def body() -> str:
            control = _outcome(connect)
            policy.apply()
            return f"{control} {_outcome(connect)}"

        status, report = run_child(body)
    finally:
        policy.close()
        server.close()
    assert_exit0(status, report)
    assert report == ("ok denied" if scoped else "ok ok")


@pytest.mark.usefixtures("need_landlock", "need_seccomp")
def test_both_walls_with_subprocess(layout: dict[str, Path]) -> None:
    """Landlock and seccomp together; the domain is inherited by an exec'd program."""
    system = [d for d in ("/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache") if os.path.exists(d)]
    policy = walls.LandlockPolicy(system + [str(layout["ro"])])
    program = walls.seccomp_program(True)
    try:
        def body() -> str:
            policy.apply(rw_dirs=[str(layout["rw"])])
            walls.apply_seccomp(program, os.getpid())
            good = subprocess.run(["/bin/cat", str(layout["ro"] / "data.txt")], capture_output=True, check=False)
            bad = subprocess.run(["/bin/cat", str(layout["outside"] / "secret.txt")], capture_output=True,
                                 check=False)
            sock = _errno_of(lambda: socket.socket(socket.AF_UNIX).close())
            proc = _outcome(lambda: _read("/proc/self/status"))
            return f"{good.returncode} {good.stdout!r} {bad.returncode} {bad.stdout!r} {sock} {proc}"

        status, report = run_child(body)
    finally:
        policy.close()
    assert_exit0(status, report)
    assert report == "0 b'readable' 1 b'' EACCES denied"


@pytest.mark.usefixtures("need_landlock", "need_seccomp")
def test_both_walls_strict_still_kills_fork(layout: dict[str, Path]) -> None:
    policy = walls.LandlockPolicy([str(layout["ro"])])
    program = walls.seccomp_program(False)
    try:
        def body() -> object:
            policy.apply(rw_dirs=[str(layout["rw"])])
            walls.apply_seccomp(program, os.getpid())
            return _fork_and_reap()

        assert_sigsys(*run_child(body, no_core=True))
    finally:
        policy.close()



@pytest.mark.usefixtures("need_landlock", "need_seccomp")
def test_walls_after_dropping_to_unprivileged_uid() -> None:
    """The production order: the child drops to an unprivileged uid first, then builds the walls
    from the descriptors the (root) parent opened."""
    allowed_file = "/usr/bin/env"  # world-readable on any Linux (the stdlib may sit under /root)
    policy = walls.LandlockPolicy(["/usr"])
    program = walls.seccomp_program(False)
    try:
        def body() -> str:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            controls = _outcome(lambda: _read(allowed_file)) + _outcome(lambda: _read("/etc/passwd"))
            policy.apply()
            walls.apply_seccomp(program, os.getpid())
            return " ".join([
                str(os.geteuid() != 0),
                controls,
                _outcome(lambda: _read(allowed_file)),
                _outcome(lambda: _write("/dev/null")),
                _outcome(lambda: _read("/etc/passwd")),
                _errno_of(lambda: socket.socket(socket.AF_UNIX).close()),
            ])

        status, report = run_child(body)
    finally:
        policy.close()
    assert_exit0(status, report)
    assert report == "True okok ok ok denied EACCES"
