"""AST facts: blanking keeps the docstring, injection goes by position, bad code is refused."""

from __future__ import annotations

import ast

import pytest

from core.scenarios.repo.functions import InjectionError, blank, context_for, find_functions, inject
from tests.scenarios.repo.conftest import MINI_LIB


def _site(name: str):
    return next(s for s in find_functions(MINI_LIB) if s.qualname == name)


def test_blank_keeps_signature_and_docstring() -> None:
    out = blank(MINI_LIB, _site("add"))
    tree = ast.parse(out)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "add")
    assert ast.get_docstring(fn) == "Return a + b."
    assert isinstance(fn.body[1], ast.Raise) and len(fn.body) == 2
    assert "return a + b" not in out and "return x * 2" in out


def test_inject_by_position_not_text() -> None:
    # twin and twin_too have identical bodies: only the one at the task's position changes
    site = _site("twin_too")
    out = inject(MINI_LIB, site, "```python\ndef twin_too(x):\n    return x + x\n```")
    assert out.count("return x * 2") == 1 and "return x + x" in out
    lines = out.splitlines()
    assert lines[site.body_start - 1].strip() == "return x + x"


def test_inject_method_reindents_and_drops_generated_docstring() -> None:
    out = inject(MINI_LIB, _site("Box.get"), 'def get(self):\n  """other doc"""\n  if True:\n    return self.v\n')
    ns: dict = {}
    exec(compile(out, "m", "exec"), ns)
    assert ns["Box"](7).get() == 7
    assert "other doc" not in out and '"""The stored value."""' in out


@pytest.mark.parametrize("code", ["def nothing():\n    pass\n", "def add(a, b:\n", ""])
def test_inject_refuses_missing_or_broken(code: str) -> None:
    with pytest.raises(InjectionError):
        inject(MINI_LIB, _site("add"), code)


def test_context_is_bounded_and_blanked() -> None:
    ctx = context_for(MINI_LIB, _site("Box.get"), limit=120)
    assert len(ctx) <= 120
    assert "class Box" in context_for(MINI_LIB, _site("Box.get"))
    assert "import math" in context_for(MINI_LIB, _site("silent"), limit=60)


def test_one_line_bodies_are_not_candidates() -> None:
    assert find_functions("def f(): return 1\n") == []


def test_inject_a_function_whose_docstring_holds_a_fenced_example() -> None:
    """humanize's docstrings hold ```pycon blocks: the fenced block defines no function, so the
    whole text is used (it used to be a syntax_error for the reference itself)."""
    src = 'def f(x):\n    """Doc.\n\n    ```pycon\n    >>> f(1)\n    2\n    ```\n    """\n    return x + 1\n'
    site = find_functions(src)[0]
    answer = 'def f(x):\n    """Doc.\n\n    ```pycon\n    >>> f(1)\n    2\n    ```\n    """\n    return 1 + x\n'
    assert inject(src, site, answer).endswith("    return 1 + x\n")
