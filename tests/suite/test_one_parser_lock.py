"""Every parse of Python source in the harness goes through :mod:`core.common.pyast`'s lock.

CPython 3.11 fails two threads converting parse trees at once with ``SystemError: AST
constructor recursion depth mismatch`` (gh-106905). The full self-align job's gold controls
failed that way on 2026-11-29 (a ``select`` test case with ``task_workers: 2``, whose grading
policy parsed with ``ast.parse`` directly while another thread parsed under the lock): a lock
that some callers skip protects nothing. So no module under ``core/`` calls ``ast.parse`` or
``ast.literal_eval`` itself, except the sandbox's boundary code, which runs in the sample's
single-threaded process, never in the harness."""
from __future__ import annotations

import re
import threading
from pathlib import Path

from core.common import pyast

CORE = Path(__file__).resolve().parents[2] / "core"
DIRECT = re.compile(r"\bast\.(parse|literal_eval)\(")
#: modules allowed to parse directly, with why
EXEMPT = {"common/pyast.py": "the lock itself",
          "testenvmanager/sandbox/boundary.py": "runs in the sample's own process, one thread"}


def test_no_module_parses_outside_the_lock() -> None:
    found = [f"{path.relative_to(CORE)}:{n}: {line.strip()}"
             for path in sorted(CORE.rglob("*.py"))
             if str(path.relative_to(CORE)) not in EXEMPT
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if DIRECT.search(line) and not line.lstrip().startswith("#")]
    assert not found, "parse through core.common.pyast (parse, parse_expression, " \
                      "literal_eval) instead:\n" + "\n".join(found)


def test_locked_parsers_keep_ast_semantics() -> None:
    assert pyast.literal_eval("  {'a': (1, 2.5)}") == {"a": (1, 2.5)}
    assert pyast.literal_eval(pyast.parse_expression("[1, -2]").body) == [1, -2]
    assert pyast.parse("x = 1\n").body[0].lineno == 1
    for bad in ("f(", "__import__('os')"):
        try:
            pyast.literal_eval(bad)
        except (SyntaxError, ValueError):
            continue
        raise AssertionError(f"{bad!r} was accepted")


def test_threads_parsing_at_once_through_the_lock_do_not_fail() -> None:
    """Four threads parse deeply nested source through the lock for a while: no error."""
    source = "x = " + "(" * 60 + "1" + ")" * 60 + "\n" + "def f():\n    return [i for i in range(3)]\n" * 40
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(150):
                pyast.parse(source)
                pyast.literal_eval("[" * 30 + "]" * 30)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors[:1]
