"""``core.common.pyast.parse`` from many threads at once.

CPython 3.11's ``ast.parse`` can fail with ``SystemError: AST constructor recursion depth
mismatch`` when another thread parses while a garbage collection in the middle of the conversion
runs a finalizer (Python code, so the interpreter switches threads). It made the repository
builder's real-layout test fail three times in one clean-clone CI run. This test makes that
situation as likely as it can (cyclic garbage with finalizers, a tiny switch interval, eight
threads) and insists the locked parse never fails; the same test with plain ``ast.parse``
failed in each of three runs.
"""
from __future__ import annotations

import gc
import sys
import threading

from core.common import pyast

SOURCE = "\n".join(
    f"def f{i}(x):\n    return [{{k: (x, [y for y in range(k)])}} for k in range({i})]\n"
    for i in range(60))


class _Finalized:
    def __del__(self) -> None:
        sum(range(50))


def test_parse_from_many_threads_never_fails() -> None:
    errors: list[str] = []
    interval, thresholds = sys.getswitchinterval(), gc.get_threshold()
    sys.setswitchinterval(1e-6)
    gc.set_threshold(50, 5, 5)

    def work() -> None:
        for _ in range(25):
            for _ in range(40):
                a, b = _Finalized(), _Finalized()
                a.other, b.other = b, a  # type: ignore[attr-defined]
            try:
                tree = pyast.parse(SOURCE)
                assert len(tree.body) == 60
            except SystemError as exc:
                errors.append(str(exc))

    try:
        threads = [threading.Thread(target=work) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
        gc.set_threshold(*thresholds)
    assert not errors, errors[:3]
