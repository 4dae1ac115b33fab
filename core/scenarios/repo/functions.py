"""AST facts about a repository file: candidate functions, blanking and injection by position.

Contracts
---------
* Positions are 1-based line numbers from :mod:`ast` (``lineno``/``end_lineno``); edits replace
  whole lines of the function *body* (after the docstring), never by text search, so two functions
  with identical text are never confused.
* :func:`blank` keeps the ``def`` line(s), decorators and docstring and replaces the rest of the
  body with ``raise NotImplementedError`` at the body's indentation.
* :func:`inject` takes model output (a full ``def`` of the same name, possibly inside fences or
  with extra helpers) and puts *its body* in place of the original body; it raises
  :class:`InjectionError` when no such function can be found or the result does not compile.
"""

from __future__ import annotations

import ast
import re
import textwrap
import warnings
from dataclasses import dataclass
from typing import Callable

from core.common import pyast

__all__ = ["FunctionSite", "InjectionError", "find_functions", "blank", "inject", "reinject", "defines_function", "context_for"]

#: The upper bound, in characters, of the context a task records for the prompt.
CONTEXT_LIMIT = 4000


class InjectionError(ValueError):
    """The generated code cannot be put in place of the blanked function."""


@dataclass(frozen=True)
class FunctionSite:
    """One function definition in one file (module level or a method of a top-level class)."""

    qualname: str
    name: str
    def_line: int        # first line of the ``def`` (after decorators)
    body_start: int      # first line of the body part that is replaced (after the docstring)
    end_line: int        # last line of the function
    indent: str          # indentation of the body
    signature: str       # the ``def ...:`` header text
    docstring: str | None
    class_name: str | None

    def body_text(self, source: str) -> str:
        """The replaced part of the body (the reference), exactly as in the file."""
        lines = source.splitlines(keepends=True)
        return "".join(lines[self.body_start - 1:self.end_line])


def _sites(tree: ast.Module, lines: list[str]) -> list[FunctionSite]:
    found: list[FunctionSite] = []

    def visit(node: ast.FunctionDef | ast.AsyncFunctionDef, cls: str | None) -> None:
        body = node.body
        doc = ast.get_docstring(node, clean=True)
        rest = body[1:] if doc is not None else body
        if not rest or node.end_lineno is None:
            return
        first = rest[0]
        start = first.lineno
        if getattr(first, "decorator_list", None):
            start = min(d.lineno for d in first.decorator_list)  # type: ignore[attr-defined]
        # a body on the def line itself (``def f(): return 1``) cannot be replaced by lines
        if start <= node.lineno or lines[start - 1][:first.col_offset].strip():
            return
        header_end = body[0].lineno - 1
        signature = "".join(lines[node.lineno - 1:header_end]).strip() or lines[node.lineno - 1].strip()
        found.append(FunctionSite(
            qualname=f"{cls}.{node.name}" if cls else node.name, name=node.name,
            def_line=node.lineno, body_start=start, end_line=node.end_lineno,
            indent=lines[start - 1][:first.col_offset], signature=signature,
            docstring=doc, class_name=cls))

    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            visit(node, None)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    visit(item, node.name)
    return found


def find_functions(source: str) -> list[FunctionSite]:
    """Module-level functions and methods of top-level classes whose body can be blanked.
    The repository's own syntax warnings (invalid escapes) are not reported."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        tree = pyast.parse(source)
    return _sites(tree, source.splitlines(keepends=True))


def _splice(source: str, site: FunctionSite, new_body: str) -> str:
    lines = source.splitlines(keepends=True)
    if not new_body.endswith("\n"):
        new_body += "\n"
    return "".join(lines[:site.body_start - 1]) + new_body + "".join(lines[site.end_line:])


def blank(source: str, site: FunctionSite) -> str:
    """``source`` with the body of ``site`` replaced by ``raise NotImplementedError``."""
    return _splice(source, site, f"{site.indent}raise NotImplementedError\n")


_FENCE = re.compile(r"```[a-zA-Z0-9_+-]*\n(.*?)```", re.S)


def _candidate_def(code: str, name: str) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, str]:
    """The function ``name`` of a fenced block of ``code``, else of ``code`` as a whole (a
    docstring may hold a fenced example: the whole text is tried when no block defines it)."""
    blocks = [*_FENCE.findall(code), code]
    for block in blocks:
        text = textwrap.dedent(block)
        try:
            tree = pyast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return node, text
    raise InjectionError(f"the generated code has no parsable function named {name!r}")


def defines_function(code: str, name: str) -> bool:
    """Whether ``code`` (or one of its fenced blocks) parses and defines a function ``name``."""
    try:
        _candidate_def(code, name)
    except InjectionError:
        return False
    return True


def inject(source: str, site: FunctionSite, generated: str,
           confine: Callable[[str], str] | None = None) -> str:
    """``source`` with the body of ``site`` replaced by the body of ``generated``'s function.

    A generated docstring is dropped (the file keeps its own). ``confine`` (the grading
    policy, :func:`core.scenarios.repo.policy.confine_body`) rewrites the dedented body
    statements before they are placed; what it raises propagates. Raises
    :class:`InjectionError` when no function of that name parses or the spliced file does not
    compile.
    """
    node, text = _candidate_def(generated, site.name)
    body = node.body
    if ast.get_docstring(node) is not None and len(body) > 1:
        body = body[1:]
    elif ast.get_docstring(node) is not None:
        body = []
    if not body:
        raise InjectionError(f"the generated function {site.name!r} has an empty body")
    first = body[0]
    start = min([first.lineno, *[d.lineno for d in getattr(first, "decorator_list", [])]])
    lines = text.splitlines(keepends=True)
    chunk = textwrap.dedent("".join(lines[start - 1:node.end_lineno]))
    return _place(source, site, confine(chunk) if confine is not None else chunk)


def _place(source: str, site: FunctionSite, chunk: str) -> str:
    new_body = textwrap.indent(chunk, site.indent, lambda s: bool(s.strip()))
    result = _splice(source, site, new_body)
    try:
        compile(result, "<injected>", "exec")
    except SyntaxError as exc:
        raise InjectionError(f"the injected file does not compile: {exc.msg} (line {exc.lineno})") from None
    return result


def reinject(source: str, site: FunctionSite, confine: Callable[[str], str]) -> str:
    """``source`` with the body of ``site`` (its reference) passed through ``confine`` and put
    back: the gold control of a policy-compiled run. Raises like :func:`inject`."""
    return _place(source, site, confine(textwrap.dedent(site.body_text(source))))


def context_for(source: str, site: FunctionSite, limit: int = CONTEXT_LIMIT) -> str:
    """The surrounding code a prompt shows, bounded to ``limit`` characters.

    Imports of the module, the class header (when a method) and the neighbouring code before the
    function, with the function itself blanked; the nearest code is kept when trimming.
    """
    lines = blank(source, site).splitlines(keepends=True)
    tree = pyast.parse(source)
    imports = "".join("".join(lines[n.lineno - 1:(n.end_lineno or n.lineno)])
                      for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)))
    before = "".join(lines[:site.def_line - 1])
    if len(before) <= limit:
        return before
    imports = imports[:limit // 2]
    sep = "\n# ...\n"
    near = before[len(before) - max(0, limit - len(imports) - len(sep)):]
    cut = near.find("\n")
    near = near[cut + 1:] if cut >= 0 else ""  # start at a line boundary
    return imports + sep + near
