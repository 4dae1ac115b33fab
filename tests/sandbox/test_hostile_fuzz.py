"""Property-based fuzz of the executor with random and hostile programs (``pytest -k hostile``).

Hypothesis composes programs from snippets that attack the harness (exits, signals, forged
frames, hostile exceptions, descriptor games, deep trees, floods) mixed with ordinary code and
with arbitrary text, in both grading tiers. Properties:

* no outcome is ``infra_error`` (anything after the sample starts is the sample's outcome);
* the fork server survives every example and still grades a correct program as passed;
* nothing is left behind: no process of the sandbox's uids, nothing new in the host's ``/tmp``
  and ``/dev/shm``, and no cgroup once the executor is closed.
"""

from __future__ import annotations

import os
import time

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.testenvmanager.sandbox import ExecRequest, Outcome, get_executor

from .conftest import CHECK_ADD, GOOD_PROGRAM, uid_processes

SNIPPETS = [
    "import os\nos._exit(0)\n",
    "import os\nos._exit(70)\n",
    "import sys\nsys.exit(0)\n",
    "raise SystemExit(3)\n",
    "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
    "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
    "import os, signal\nos.kill(0, signal.SIGTERM)\n",
    "import os\ntry:\n    os.kill(os.getppid(), 9)\nexcept BaseException:\n    pass\n",
    "import os, struct\nfor fd in range(3, 16):\n    try:\n        os.write(fd, struct.pack('>I', 9) + b'[\"ready\"]')\n    except OSError:\n        pass\n",
    "import os\nfor fd in range(0, 16):\n    try:\n        os.close(fd)\n    except OSError:\n        pass\n",
    "import os\nfor fd in range(3, 16):\n    try:\n        os.write(fd, b'\\xff' * 70000)\n    except OSError:\n        pass\n",
    "class E(Exception):\n    def __str__(self):\n        raise E()\nraise E()\n",
    "class E(BaseException):\n    @property\n    def __class__(self):\n        raise SystemExit\nraise E()\n",
    "import sys\nsys.setrecursionlimit(100000)\ndef f(n):\n    return f(n + 1)\nf(0)\n",
    "x = [0] * (10 ** 9)\n",
    "while True:\n    pass\n",
    "import time\ntime.sleep(30)\n",
    "import os\nfor i in range(300):\n    os.mkdir('d')\n    os.chdir('d')\n",
    "for i in range(2000):\n    open(f'f{i}', 'w').close()\n",
    "import threading, time\nthreading.Thread(target=lambda: time.sleep(30)).start()\n",
    "print('x' * 200000)\n",
    "import sys\nsys.stdout = None\n",
    "import builtins\nbuiltins.print = None\nbuiltins.len = lambda x: 0\n",
    "import gc\ngc.get_objects()\n",
    "import os\ntry:\n    os.fork()\nexcept BaseException:\n    pass\n",
    "open('/tmp/ianvs_fuzz_left', 'w').write('x')\n",
    "def add(a, b):\n    return a + b\n",
    "def add(a, b):\n    raise ValueError(a)\n",
    "def add(a, b):\n    import os\n    os._exit(0)\n",
    "def add(a, b):\n    return object()\n",
    "def add(a, b):\n    return (x for x in range(10 ** 12))\n",
    "def add(a, b):\n    while True:\n        pass\n",
]
program_strategy = st.one_of(
    st.lists(st.sampled_from(SNIPPETS), min_size=1, max_size=4).map("".join),
    st.text(max_size=200),
    st.lists(st.sampled_from(SNIPPETS), min_size=1, max_size=2).map("".join).map(lambda p: p + GOOD_PROGRAM),
)


def _listing() -> set[tuple[str, str]]:
    found = set()
    for d in ("/tmp", "/dev/shm"):
        try:
            found.update((d, name) for name in os.listdir(d))
        except OSError:
            pass
    return found


@pytest.mark.slow
def test_hostile_fuzz_random_programs() -> None:
    before = _listing()
    executor = get_executor("local", workers=2)  # leased uids: 4 from uid_base
    cgroups = list(executor.facts.get("cgroups", {}).values())
    uid_base = executor.uid_base
    server = executor._proc.pid
    try:
        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck),
                  database=None)
        @given(programs=st.lists(program_strategy, min_size=1, max_size=4),
               tiers=st.lists(st.sampled_from(["boundary", "in_process"]), min_size=4, max_size=4))
        def check(programs: list[str], tiers: list[str]) -> None:
            reqs = [ExecRequest(id=f"p{i}", program=p or "pass\n", test=CHECK_ADD, entry_point="add",
                                timeout=1.0, memory_mb=256, grading=tiers[i % 4])
                    for i, p in enumerate(programs)]
            results = list(executor.run(reqs))
            assert len(results) == len(reqs)
            bad = [(r.id, r.detail) for r in results if r.outcome is Outcome.INFRA_ERROR]
            assert not bad, bad
            assert executor._proc.poll() is None, "the fork server died"

        check()
        (alive,) = executor.run([ExecRequest(id="alive", program=GOOD_PROGRAM, test=CHECK_ADD,
                                             entry_point="add")])
        assert alive.outcome is Outcome.PASSED, alive.detail
    finally:
        executor.close()
    deadline = time.monotonic() + 3
    while uid_processes(uid_base, 4) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not uid_processes(uid_base, 4), "sandboxed processes outlived the executor"
    assert not {p for p in cgroups if os.path.exists(p)}, "cgroups left behind"
    # what this executor could leave on the host carries its server's pid (other runs on the
    # machine make ianvs-* folders of their own meanwhile)
    assert not {n for n in _listing() - before if f"ianvs-sandbox-{server}-" in n[1]}, _listing() - before
