"""The examples a code task states in its prompt, as a test the sandbox can run.

A HumanEval-style prompt shows how its function behaves, either doctest-style::

    >>> separate_paren_groups('( ) (( )) (( )( ))')
    ['()', '(())', '(()())']

or in prose lines such as ``add(2, 3) == 5`` / ``add(2, 3) ➞ 5``. :func:`prompt_examples`
extracts ``(call, expected)`` pairs whose both sides are Python expressions (others are skipped,
not guessed) and :func:`examples_test` writes them as a ``check(candidate)`` test. The prompt is
the task's own text (trusted, never the model's); the test runs in the sandbox's judge like any
hidden test, so the model's program is never executed here.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

from core.common import pyast

_ARROWS = r"(?:==|➞|=>|->|should return|returns?)"


def _expression(text: str) -> bool:
    try:
        pyast.parse_expression(text)
    except SyntaxError:
        return False
    return True


def _free_names(text: str, entry_point: str) -> bool:
    """True when the expression names something other than ``entry_point`` and builtins (e.g.
    ``is_happy(a)`` in prose, where ``a`` stands for a value the prose describes)."""
    import builtins

    return any(isinstance(node, ast.Name) and node.id != entry_point
               and not hasattr(builtins, node.id)
               for node in ast.walk(pyast.parse_expression(text)))


def prompt_examples(prompt: str, entry_point: str) -> list[tuple[str, str]]:
    """``(call, expected)`` pairs stated in ``prompt`` for ``entry_point``, in order, without
    duplicates; the call must call ``entry_point``, both sides must parse as expressions, and
    neither may name anything but the entry point and builtins."""
    lines = prompt.splitlines()
    found: list[tuple[str, str]] = []
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.startswith(">>>"):
            call = stripped[3:].strip()
            wanted: list[str] = []
            j = i + 1
            while j < len(lines):
                nxt = lines[j].strip()
                if not nxt or nxt.startswith(">>>") or nxt.startswith(('"""', "'''")):
                    break
                wanted.append(nxt)
                j += 1
            found.append((call, " ".join(wanted)))
            i = j
            continue
        i += 1
    prose = re.compile(r"^\s*(?:[-*]\s*)?(" + re.escape(entry_point) + r"\(.*\))\s*" + _ARROWS
                       + r"\s*(.+?)\s*\.?\s*$")
    for line in lines:
        match = prose.match(line)
        if match:
            found.append((match.group(1), match.group(2)))
    seen: set[tuple[str, str]] = set()
    kept = []
    for call, want in found:
        if (call, want) in seen or not want or not _expression(call) or not _expression(want):
            continue
        if _free_names(call, entry_point) or _free_names(want, entry_point):
            continue
        if not any(isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                   and node.func.id == entry_point for node in ast.walk(pyast.parse_expression(call))):
            continue
        seen.add((call, want))
        kept.append((call, want))
    return kept


def examples_check(record: Mapping[str, Any]) -> dict[str, Any] | None:
    """``record`` with its hidden test replaced by a test of the examples its prompt states
    (task id ``<id>#examples``, so its execution is cached apart), or None when the prompt
    states no usable example (or the record names no entry point)."""
    entry = str(record.get("entry_point") or "")
    examples = prompt_examples(str(record.get("prompt") or ""), entry) if entry else []
    if not examples:
        return None
    return {**record, "test": examples_test(examples, entry),
            "task_id": f"{record.get('task_id')}#examples"}


def _asserts(examples: list[tuple[str, str]], indent: str) -> list[str]:
    """One comparison per example, each side on lines of its own (a trailing comment stays
    harmless); floats within a relative 1e-6 (the prompt's printed values are rounded)."""
    body = []
    for call, want in examples:
        body.extend([f"{indent}_got = (", f"{indent}    {call}", f"{indent})",
                     f"{indent}_want = (", f"{indent}    {want}", f"{indent})"])
        body.append(f"{indent}if isinstance(_want, float) and isinstance(_got, (int, float)):")
        body.append(f"{indent}    assert abs(_got - _want) <= 1e-6 * max(1.0, abs(_want)), "
                    f"{call!r}")
        body.append(f"{indent}else:")
        body.append(f"{indent}    assert _got == _want, {call!r}")
    return body


def examples_test(examples: list[tuple[str, str]], entry_point: str) -> str:
    """A ``check(candidate)`` test asserting every example (the entry point's name is bound to
    the candidate in the judge, so the calls read as in the prompt). Floats compare with a
    relative tolerance of 1e-6, as the prompt's printed values are rounded."""
    body = ["def check(candidate):", f"    {entry_point} = candidate", *_asserts(examples, "    ")]
    return "\n".join(body) + "\n"


def examples_unit(examples: list[tuple[str, str]]) -> str:
    """The same asserts as :func:`examples_test`, as top-level statements calling the entry
    point by name: a test *unit* in the self-align scenario's sense (its judge binds the name
    to the candidate and checks the unit statically like a model-written one)."""
    return "\n".join(_asserts(examples, "")) + "\n"
