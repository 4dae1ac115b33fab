"""Property: whatever text a program prints comes back verbatim (below the cap)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import run_one

_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(out=_TEXT, err=_TEXT)
def test_printed_text_round_trips(executor, out: str, err: str) -> None:
    program = (f"import sys\nsys.stdout.write({out!r})\nsys.stderr.write({err!r})\n"
               "def f():\n    return True\n")
    res = run_one(executor, program=program, test="def check(c):\n    assert c()\n", entry_point="f")
    assert res.passed, res.detail
    assert res.stdout == out and res.stderr == err
