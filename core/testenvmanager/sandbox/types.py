"""Value types shared by every sandbox backend.

Contracts
---------
* :class:`Outcome` is the fixed taxonomy of what happened to one request. Exactly one outcome is
  reported per request. ``infra_error`` means the harness (not the code under test) failed and must
  never be counted against the model.
* :class:`IsolationLevel` is ordered: a higher value strictly adds protections to a lower one.
* :class:`GradingTier` says where a verdict was computed: ``boundary`` (a trusted judge process;
  the sample only returns plain data) or ``in_process`` (in the sample's own process).
* :class:`ExecRequest` validates itself on construction (``ValueError`` on bad input), so a
  backend can trust its fields.
"""

from __future__ import annotations

import enum
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

__all__ = [
    "Outcome",
    "IsolationLevel",
    "GradingTier",
    "ExecMode",
    "ExecRequest",
    "ExecResult",
    "SandboxError",
    "IsolationUnavailableError",
    "UnknownBackendError",
    "ExecutorClosedError",
]


class Outcome(str, enum.Enum):
    """What happened to one request (fixed taxonomy, values are stable strings)."""

    PASSED = "passed"                        # the harness itself reported that every test passed
    FAILED = "failed"                        # a test assertion failed (AssertionError / unittest failure)
    ERROR = "error"                          # any other exception or abnormal exit of program or tests
    SYNTAX_ERROR = "syntax_error"            # the program under test does not compile
    TIMEOUT = "timeout"                      # wall-clock or CPU limit reached; process group killed
    MEMORY_EXCEEDED = "memory_exceeded"      # MemoryError or killed near the address-space limit
    SANDBOX_VIOLATION = "sandbox_violation"  # the program attempted something the sandbox blocks
    INFRA_ERROR = "infra_error"              # the harness failed; not the model's fault

    @property
    def counts_against_model(self) -> bool:
        """True for every outcome except ``infra_error`` (which must be retried or excluded)."""
        return self is not Outcome.INFRA_ERROR


class IsolationLevel(enum.IntEnum):
    """Ordered isolation tiers; each one includes everything of the tiers below it.

    * ``NONE``: the request runs in a separate process, nothing else is promised.
    * ``PROCESS``: own process group/session, resource limits (CPU, address space, processes,
      file size, open files), private temporary working directory, scrubbed environment,
      in-process audit policy (precise ``sandbox_violation`` messages; not a wall).
    * ``NETNS``: plus a fresh network namespace with only a loopback interface (no network).
    * ``KERNEL``: plus walls enforced by the kernel: a private mount namespace (read-only host
      view, private ``/tmp`` and ``/dev/shm``, site-packages hidden), Landlock (reads only system
      and interpreter directories, writes only the private working directory, no signals to
      processes outside the sandbox) and a seccomp filter (no process creation unless allowed,
      no tracing, no namespaces, no mounts, no SysV IPC, no unix sockets).
    * ``FULL``: plus a per-worker unprivileged uid/gid (a different one for the judge), so
      RLIMIT_NPROC applies and neither the server nor the judge can be signalled or traced, and
      reaping of escaped descendants (child subreaper).
    """

    NONE = 0
    PROCESS = 1
    NETNS = 2
    KERNEL = 3
    FULL = 4

    @classmethod
    def parse(cls, value: "IsolationLevel | str | int") -> "IsolationLevel":
        """Accept a member, its case-insensitive name or its integer value."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            try:
                return cls[value.strip().upper()]
            except KeyError:
                names = ", ".join(m.name.lower() for m in cls)
                raise ValueError(f"unknown isolation level {value!r}; expected one of {names}") from None
        return cls(int(value))

    def __str__(self) -> str:
        return self.name.lower()


class GradingTier(str, enum.Enum):
    """Where the verdict of a request was computed.

    * ``BOUNDARY``: a trusted judge process runs the test and calls the sample's entry point in a
      separate sandboxed process; arguments and results cross as plain data (no pickle). The
      sample controls only the values it returns: it cannot write or forge the verdict.
    * ``IN_PROCESS``: test and sample share one process (``script`` and ``unittest`` modes, or a
      function task whose test needs objects the sample defines). Interpreter-level defences make
      forging hard, not impossible: a sample that breaks them can write its own verdict.
    """

    BOUNDARY = "boundary"
    IN_PROCESS = "in_process"

    def __str__(self) -> str:
        return self.value


class ExecMode(str, enum.Enum):
    """How the child runs a request.

    * ``FUNCTION`` (HumanEval style): exec ``program``, then ``test`` (which defines
      ``check(candidate)``), then call ``check(<entry_point>)``. Passed iff ``check`` returns.
    * ``SCRIPT``: exec ``program`` then ``test`` as ``__main__`` (MBPP style, plain asserts).
      Passed iff both run to completion.
    * ``UNITTEST``: write ``files`` into the workdir and run unittest discovery there
      (``test_pattern``). Passed iff at least one test ran and none failed or errored.
    """

    FUNCTION = "function"
    SCRIPT = "script"
    UNITTEST = "unittest"


#: values of :attr:`ExecRequest.network`
NETWORK_MODES: tuple[str, ...] = ("none", "loopback")


def _check_relpath(path: str) -> None:
    parts = path.replace("\\", "/").split("/")
    if not path or path.startswith(("/", "\\")) or ".." in parts or "\x00" in path:
        raise ValueError(f"extra file path must be relative and stay inside the workdir: {path!r}")


@dataclass(frozen=True)
class ExecRequest:
    """One program to execute and grade.

    ``id`` is echoed in the result (results stream back in completion order, not input order).
    ``timeout`` is wall-clock seconds for the whole request; the CPU limit is derived from it.
    ``memory_mb`` caps the address space of the child. ``files`` maps relative paths to text
    written into the private working directory before the program starts (read-only to the
    program when the backend drops privileges). ``stdin`` is fed to the program's standard input
    (default: empty, so ``input()`` raises ``EOFError``).

    ``helpers`` is trusted code from the dataset (for HumanEval, the prompt) that the test may
    need (``poly`` for HumanEval/32): in the boundary tier it runs in the judge before the test;
    the sample's own definitions never reach the test there. ``grading`` picks the tier: default
    ``boundary`` for function mode, ``in_process`` otherwise (``boundary`` is only defined for
    function mode).

    ``network`` is ``"none"`` (default: the sample cannot create ``AF_INET``/``AF_INET6``
    sockets at all) or ``"loopback"`` (it may, on a loopback made for this request alone, in a
    network namespace of its own that ends with the request: nothing a sample leaves in kernel
    network state reaches a later one). ``read_paths`` are absolute paths the sample may read in
    addition to the executor's read-only environment (a repository task's own view); nothing
    else under the executor's request roots is visible to it.
    """

    id: str
    program: str = ""
    test: str = ""
    entry_point: str = ""
    mode: ExecMode = ExecMode.FUNCTION
    files: Mapping[str, str] = field(default_factory=dict)
    test_pattern: str = "test*.py"
    stdin: str = ""
    timeout: float = 10.0
    memory_mb: int = 1024
    allow_subprocess: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)
    helpers: str = ""
    grading: GradingTier | str | None = None
    network: str = "none"
    read_paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError("ExecRequest.id must be a non-empty string")
        object.__setattr__(self, "mode", ExecMode(self.mode))
        if not (isinstance(self.timeout, (int, float)) and math.isfinite(self.timeout) and self.timeout > 0):
            raise ValueError(f"timeout must be a positive finite number of seconds, got {self.timeout!r}")
        if not isinstance(self.memory_mb, int) or self.memory_mb < 16:
            raise ValueError(f"memory_mb must be an int >= 16, got {self.memory_mb!r}")
        for path in self.files:
            _check_relpath(path)
        if self.network not in NETWORK_MODES:
            raise ValueError(f"network must be one of {', '.join(NETWORK_MODES)}, got {self.network!r}")
        paths = (self.read_paths,) if isinstance(self.read_paths, str) else tuple(self.read_paths)
        for path in paths:
            if not isinstance(path, str) or not path.startswith("/") or "\0" in path:
                raise ValueError(f"read_paths must be absolute paths, got {path!r}")
        object.__setattr__(self, "read_paths", paths)
        if self.mode is ExecMode.FUNCTION and not self.entry_point:
            raise ValueError("function mode needs an entry_point")
        if self.mode is not ExecMode.UNITTEST and not (self.program or self.test):
            raise ValueError("a request needs a program and/or test code")
        default = GradingTier.BOUNDARY if self.mode is ExecMode.FUNCTION else GradingTier.IN_PROCESS
        tier = GradingTier(self.grading) if self.grading is not None else default
        if tier is GradingTier.BOUNDARY and self.mode is not ExecMode.FUNCTION:
            raise ValueError(f"boundary grading needs function mode, not {self.mode.value!r}")
        object.__setattr__(self, "grading", tier)

    @property
    def tier(self) -> GradingTier:
        """The grading tier (``grading`` after normalisation)."""
        return GradingTier(self.grading)

    def payloads(self) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """What a backend sends: ``(meta, parts)``.

        ``meta`` holds only limits and flags (no code): a backend's scheduler may keep it in its
        memory. ``parts`` maps a process role to the data only that process may see: ``single``
        (in-process tier: everything), or ``cand`` (the program and files) and ``judge`` (the
        test and helpers) for the boundary tier. Metadata stays on the caller's side.
        """
        meta = {"timeout": float(self.timeout), "memory_mb": self.memory_mb,
                "allow_subprocess": self.allow_subprocess, "grading": self.tier.value,
                "network": self.network, "read_paths": list(self.read_paths)}
        if self.tier is GradingTier.BOUNDARY:
            return meta, {
                "cand": {"program": self.program, "entry_point": self.entry_point,
                         "files": dict(self.files), "allow_subprocess": self.allow_subprocess},
                "judge": {"test": self.test, "helpers": self.helpers,
                          "entry_point": self.entry_point},
            }
        return meta, {"single": {
            "program": self.program, "test": self.test, "entry_point": self.entry_point,
            "mode": self.mode.value, "files": dict(self.files), "test_pattern": self.test_pattern,
            "allow_subprocess": self.allow_subprocess}}


@dataclass(frozen=True)
class ExecResult:
    """The graded outcome of one :class:`ExecRequest`.

    ``exit_status`` is the child's exit code, or ``-signal`` when it was killed by a signal, or
    ``None`` when no process ran (infra errors). ``duration_s`` is wall-clock from fork to reap.
    ``exec_time_s`` is the time the harness measured around program+tests (``None`` when it did
    not report). ``stdout``/``stderr`` are decoded (UTF-8, replacement) and capped.
    ``timeout_s``/``memory_mb`` are the limits actually applied. ``node`` names the machine that
    graded the request when a backend dispatches to several (``dask``: the worker's name);
    empty for backends that grade on this machine. ``runtime`` names the container runtime of
    backends that use one (``runc``, or ``runsc``: gVisor's user-space kernel, a tier beside the
    ordered levels: it has its own system-call implementation but no Landlock).
    """

    id: str
    outcome: Outcome
    exit_status: int | None
    duration_s: float
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    backend: str = ""
    isolation: IsolationLevel = IsolationLevel.NONE
    timeout_s: float = 0.0
    memory_mb: int = 0
    detail: str = ""
    exec_time_s: float | None = None
    max_rss_kb: int | None = None
    grading: GradingTier = GradingTier.IN_PROCESS
    node: str = ""
    runtime: str = ""

    @property
    def isolation_label(self) -> str:
        """The isolation level, with ``+gvisor`` when the request ran under gVisor."""
        return str(self.isolation) + ("+gvisor" if self.runtime == "runsc" else "")

    @property
    def passed(self) -> bool:
        """True iff the outcome is ``passed``."""
        return self.outcome is Outcome.PASSED

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly dict (enums as strings)."""
        data = asdict(self)
        data["outcome"] = self.outcome.value
        data["isolation"] = str(self.isolation)
        data["grading"] = self.grading.value
        return data


class SandboxError(RuntimeError):
    """Base class of sandbox errors raised to the caller (never used for outcomes)."""


class IsolationUnavailableError(SandboxError):
    """The backend cannot reach the configured minimum isolation level."""


class UnknownBackendError(SandboxError, LookupError):
    """``get_executor`` was asked for a backend name that is not registered."""


class ExecutorClosedError(SandboxError):
    """``run`` was called on a closed executor, or its worker process died."""
