"""``benchmarks/plain_data_calls.py``: the classifier on its own, then its core function
(:func:`probe_run`, a real pytest run in the repository environment with the probe plugin) on
the mini repository of conftest plus a few functions that take a callback, mutate their
argument, yield, recurse or are given an object. Each assertion names a case where the
measurement could be wrong: plain calls counted plain, non-plain ones not, mutation seen,
nested calls kept apart from the calls that would cross a process boundary."""

from __future__ import annotations

import textwrap
from pathlib import Path
from types import ModuleType
from typing import Any

from core.scenarios.repo.env import RepoEnv
from core.scenarios.repo.functions import find_functions
from tests.benchmark_scripts import benchmark_module

EXTRA_LIB = '''\
def append_one(xs):
    xs.append(1)
    return len(xs)


def count_up(n):
    for i in range(n):
        yield i


def call_it(fn, x):
    return fn(x)


def fact(n):
    return 1 if n <= 1 else n * fact(n - 1)
'''

EXTRA_TESTS = '''\
from minilib.core import twin
from minilib.extra import append_one, call_it, count_up, fact


class Opaque:
    pass


def triple(v):
    return v * 3


def test_twin_object():
    try:
        twin(Opaque())
    except TypeError:
        pass


def test_append():
    xs = [0]
    assert append_one(xs) == 2 and xs == [0, 1]


def test_gen():
    assert list(count_up(3)) == [0, 1, 2]


def test_callback():
    assert call_it(lambda v: v + 1, 1) == 2
    assert call_it(len, "ab") == 2
    assert call_it(triple, 2) == 6


def test_fact():
    assert fact(5) == 120
'''


def _module() -> ModuleType:
    return benchmark_module("plain_data_calls")


def test_classifier_tiers_and_fingerprints() -> None:
    pdc = _module()
    assert pdc.classify(1).tier == pdc.CORE
    assert pdc.classify([1, {"a": (2.5, b"x", {3})}, None]).tier == pdc.CORE
    assert pdc.classify(float("nan")).fingerprint == pdc.classify(float("nan")).fingerprint
    assert pdc.classify(object()).tier == pdc.HANDLE
    assert pdc.classify(lambda: 1).reasons == {"callback:function"}
    assert pdc.classify(len).tier == pdc.EXTENDED
    xs = [1, 2]
    before = pdc.classify(xs).fingerprint
    xs.append(3)
    assert pdc.classify(xs).fingerprint != before
    it = iter([7, 8])
    assert pdc.classify(it).tier == pdc.HANDLE and next(it) == 7       # never consumed
    assert pdc.classify(list(range(20)), pdc.Limits(max_items=10)).reasons == {"limit:items"}


def _task(site: Any, file: str, tests: list[str]) -> dict[str, Any]:
    return {"task_id": site.qualname, "qualname": site.qualname, "class_name": site.class_name, "file": file,
            "position": {"def_line": site.def_line, "body_start": site.body_start},
            "tests": {"fail_to_pass": tests, "pass_to_pass": [], "deselect": []}}


def test_probe_run_on_the_mini_repository(mini_repo: Path, repo_env: RepoEnv) -> None:
    pdc = _module()
    (mini_repo / "minilib" / "extra.py").write_text(EXTRA_LIB)
    (mini_repo / "tests" / "test_extra.py").write_text(textwrap.dedent(EXTRA_TESTS))
    core_tests = [f"tests/test_core.py::{n}" for n in ("test_add", "test_twin", "test_silent", "test_box")]
    extra_tests = [f"tests/test_extra.py::{n}" for n in ("test_twin_object", "test_append", "test_gen",
                                                          "test_callback", "test_fact")]
    tests = core_tests + extra_tests         # every task selects them all: one run, as --group selection
    tasks = [_task(s, f"minilib/{name}.py", tests) for name in ("core", "extra")
             for s in find_functions((mini_repo / "minilib" / f"{name}.py").read_text())]
    targets = [pdc.target_of(t, str(mini_repo)) for t in tasks]
    run = pdc.probe_run(str(repo_env.python), str(mini_repo), targets, tests, timeout=120)
    assert run["error"] is None, run
    got = {t["task_id"]: pdc.summarise_task(t, run, own_run=True) for t in tasks}

    assert got["add"]["verdict"] == "all_core" and got["add"]["classified"] == 1 and got["add"]["tests_ok"]
    assert got["uncovered"]["verdict"] == "no_calls" and not got["uncovered"]["found"]
    twin = got["twin"]                       # twin(4) is plain, twin(Opaque()) is not
    assert twin["classified"] == 2 and twin["plain"] == 1 and twin["raised_types"] == {"builtins.TypeError": 1}
    assert [r for r in twin["reasons"] if r.startswith("state[test]:") and r.endswith(".Opaque")], twin["reasons"]
    assert twin["where"] == {"args": 1}
    append = got["append_one"]               # mutated list: carried back, still plain data
    assert append["mutated"] == 1 and append["mutation_kinds"] == {"container": 1}
    assert append["verdict"] == "all_core"
    gen = got["count_up"]
    assert gen["generator"] == 1 and gen["verdict"] == "needs_handle"
    assert gen["reasons"] == {"iterator:generator-function": 1}
    call_it = got["call_it"]                 # a lambda and a test module's function are callbacks,
    assert call_it["reasons"] == {"callback:function": 1, "ref:builtin": 1,   # len a reference
                                  "callback:test-function": 1}
    assert (call_it["classified"], call_it["plain"], call_it["verdict"]) == (3, 1, "needs_handle")
    fact = got["fact"]                       # fact(5): one call crosses, four stay inside
    assert (fact["calls"], fact["nested"], fact["verdict"]) == (1, 4, "all_core")
    get = got["Box.get"]
    assert get["method"] == 1 and get["reasons"] == {"state[repo]:minilib.core.Box": 1}
    assert get["verdict"] == "needs_state" and get["self_mutated"] == 0
    assert got["Box.__init__"]["self_mutated"] == 1

    overall = pdc.aggregate(list(got.values()))   # all core: add, twin_too, silent, append_one, fact
    assert overall["tasks"] == len(tasks) == 11
    assert overall["verdicts"]["no_calls"] == 1 and overall["verdicts"]["all_core"] == 5
    assert overall["share_all_core"] == round(5 / 10, 4)
