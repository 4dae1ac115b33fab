"""Comments and docstrings of Python code, mapped to the lines of the uncommented code.

The comment scenario's scoring rests on three functions:

* :func:`code_fingerprint` -- the program without its comments and docstrings (the AST dump,
  docstrings removed, positions ignored). Two sources with the same fingerprint are the same
  program; ``None`` when the source does not parse.
* :func:`strip_comments` -- the source with ``#`` comments and docstrings removed, other
  lines kept verbatim (the dataset's ``code_snippet``).
* :func:`extract_annotations` -- every comment and docstring of a commented source, attached to
  the code line it annotates (an inline comment: its own line; a comment on its own line: the
  next code line; a docstring: its ``def``/``class`` line) and renumbered to the lines of a
  *base* source (the ``code_snippet``). The mapping aligns the two token streams; when the
  commented code was reformatted (same program, different layout) it falls back to the AST
  positions of corresponding nodes.

Annotation texts are whitespace-normalised (``#`` markers and docstring indentation removed,
runs of whitespace collapsed); several annotations of the same line are joined by one space in
source order. Comment-only directives (``# noqa``, ``# type: ...``, ``# pragma ...``,
shebangs and encoding lines) are not annotations.
"""
from __future__ import annotations

import ast
import inspect
import io
import re
import tokenize
from dataclasses import dataclass
from core.common import pyast

_DIRECTIVE = re.compile(r"^(!|noqa\b|type:|pragma\b|-\*-|fmt:|pylint:|mypy:|isort:)", re.I)
_SIGNIFICANT = (tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING)
_DOC_OWNERS = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Annotation:
    """One annotated line: 1-based ``line_number`` in the base code and its text."""

    line_number: int
    annotation: str

    def to_dict(self) -> dict[str, object]:
        return {"line_number": self.line_number, "annotation": self.annotation}


def _parse(source: str) -> ast.Module | None:
    try:
        return pyast.parse(source)
    except (SyntaxError, ValueError):
        return None


def _docstring_nodes(tree: ast.AST) -> list[tuple[ast.AST, ast.Expr]]:
    """(owner, docstring expression) for every module/class/function docstring."""
    found: list[tuple[ast.AST, ast.Expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, _DOC_OWNERS) and node.body:
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str)):
                found.append((node, first))
    return found


def _without_docstrings(tree: ast.Module) -> ast.Module:
    for owner, doc in _docstring_nodes(tree):
        body = owner.body  # type: ignore[attr-defined]
        body.remove(doc)
        if not body:
            body.append(ast.Pass())
    return tree


def code_fingerprint(source: str) -> str | None:
    """The program without comments and docstrings, as a comparable string; None if it does
    not parse (see the module docstring)."""
    tree = _parse(source)
    if tree is None:
        return None
    return ast.dump(_without_docstrings(tree), include_attributes=False)


def same_program(a: str, b: str) -> bool:
    """True when both parse and are the same program once comments/docstrings are removed."""
    fa = code_fingerprint(a)
    return fa is not None and fa == code_fingerprint(b)


def _tokens(source: str) -> list[tokenize.TokenInfo]:
    return list(tokenize.generate_tokens(io.StringIO(source).readline))


def _docstring_rows(tree: ast.Module) -> dict[int, tuple[int, int, str]]:
    """docstring start row -> (end row, owner's row, normalised text)."""
    rows = {}
    for owner, doc in _docstring_nodes(tree):
        text = " ".join(inspect.cleandoc(doc.value.value).split())  # type: ignore[attr-defined]
        owner_row = getattr(owner, "lineno", 1)
        rows[doc.lineno] = (doc.end_lineno or doc.lineno, owner_row, text)
    return rows


def strip_comments(source: str) -> str | None:
    """``source`` without ``#`` comments and docstrings; None when that is impossible.

    Comment-only lines and docstring lines are removed; inline comments are cut off; every
    other line is kept as it is. None when the source does not parse, when a docstring shares
    a line with other code, or when a body would be left empty (a function that is only a
    docstring has no code to comment).
    """
    tree = _parse(source)
    if tree is None:
        return None
    docs = _docstring_rows(tree)
    lines = source.splitlines()
    drop: set[int] = set()
    cut: dict[int, int] = {}
    for start, (end, _owner, _text) in docs.items():
        if start == _owner_row_of(tree, start) or _shares_line(lines, start, end):
            return None
        drop.update(range(start, end + 1))
    for tok in _tokens(source):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            if lines[row - 1][:col].strip():
                cut[row] = col
            else:
                drop.add(row)
    out = []
    for row, text in enumerate(lines, start=1):
        if row in drop:
            continue
        out.append(text[:cut[row]].rstrip() if row in cut else text)
    stripped = "\n".join(out) + "\n"
    if _parse(stripped) is None or code_fingerprint(stripped) != code_fingerprint(source):
        return None  # e.g. a body that was only a docstring
    left = _parse(stripped)
    if left is None or _docstring_nodes(left):
        return None  # a docstring survived (it shared a line): not a clean snippet
    return stripped


def _owner_row_of(tree: ast.Module, doc_row: int) -> int:
    for owner, doc in _docstring_nodes(tree):
        if doc.lineno == doc_row:
            return getattr(owner, "lineno", 0)
    return 0


def _shares_line(lines: list[str], start: int, end: int) -> bool:
    """True when the docstring's first or last line holds something besides the string."""
    first, last = lines[start - 1].lstrip(), lines[end - 1].rstrip()
    return not (first[:1] in "\"'rRbBuUfF" and last[-1:] in "\"'")


def _code_rows(tokens: list[tokenize.TokenInfo], doc_rows: set[int]) -> list[int]:
    return sorted({t.start[0] for t in tokens if t.type in _SIGNIFICANT
                   and t.start[0] not in doc_rows})


def _significant(tokens: list[tokenize.TokenInfo], doc_starts: set[int]
                 ) -> list[tuple[str, int]]:
    return [(t.string, t.start[0]) for t in tokens if t.type in _SIGNIFICANT
            and not (t.type == tokenize.STRING and t.start[0] in doc_starts)]


def _row_map(commented: str, tree_c: ast.Module, base: str, tree_b: ast.Module,
             doc_starts_c: set[int], doc_starts_b: set[int]) -> dict[int, int]:
    """commented row -> base row, by token alignment, else by corresponding AST nodes."""
    sig_c = _significant(_tokens(commented), doc_starts_c)
    sig_b = _significant(_tokens(base), doc_starts_b)
    mapping: dict[int, int] = {}
    if [s for s, _ in sig_c] == [s for s, _ in sig_b]:
        for (_, rc), (_, rb) in zip(sig_c, sig_b):
            mapping.setdefault(rc, rb)
        return mapping
    stripped_c = _without_docstrings(tree_c)
    stripped_b = _without_docstrings(tree_b)
    for nc, nb in zip(ast.walk(stripped_c), ast.walk(stripped_b)):
        line_c, line_b = getattr(nc, "lineno", None), getattr(nb, "lineno", None)
        if isinstance(line_c, int) and isinstance(line_b, int):
            mapping.setdefault(line_c, line_b)
    return mapping


def _lookup(mapping: dict[int, int], row: int) -> int | None:
    """Base row of ``row``, or of the nearest mapped row above it (a layout change)."""
    best = None
    for rc, rb in mapping.items():
        if rc <= row and (best is None or rc > best[0]):
            best = (rc, rb)
    return best[1] if best else None


def extract_annotations(commented: str, base: str) -> list[Annotation] | None:
    """Annotations of ``commented`` numbered by the lines of ``base`` (see module docstring).

    Returns None when ``commented`` does not parse or is not the same program as ``base``.
    """
    tree_c, tree_b = _parse(commented), _parse(base)
    if tree_c is None or tree_b is None or not same_program(commented, base):
        return None
    docs_c = _docstring_rows(tree_c)
    docs_b = _docstring_rows(tree_b)
    doc_rows_c = {r for s, (e, _, _) in docs_c.items() for r in range(s, e + 1)}
    tokens = _tokens(commented)
    code_rows = _code_rows(tokens, doc_rows_c)
    lines = commented.splitlines()
    found: list[tuple[tuple[int, int], int, str]] = []  # (position, target row, text)
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        text = " ".join(tok.string.lstrip("#").split())
        if not text or _DIRECTIVE.match(text):
            continue
        row, col = tok.start
        if lines[row - 1][:col].strip():
            target = row
        else:
            target = next((r for r in code_rows if r > row), 0)
        if target:
            found.append(((row, col), target, text))
    for start, (_end, owner_row, text) in docs_c.items():
        if text:
            found.append(((start, 0), owner_row, text))
    mapping = _row_map(commented, tree_c, base, tree_b, set(docs_c), set(docs_b))
    by_line: dict[int, list[str]] = {}
    for _pos, target, text in sorted(found):
        base_row = _lookup(mapping, target)
        if base_row is not None:
            by_line.setdefault(base_row, []).append(text)
    return [Annotation(row, " ".join(texts)) for row, texts in sorted(by_line.items())]


def render_annotations(base: str, annotations: list[Annotation]) -> str:
    """``base`` with each annotation inserted as a ``#`` comment line above its line, at that
    line's indentation: the reply a perfect model gives (round-trips through
    :func:`extract_annotations` for any line that starts a statement or an expression)."""
    lines = base.splitlines()
    by_line: dict[int, list[str]] = {}
    for ann in annotations:
        by_line.setdefault(ann.line_number, []).append(ann.annotation)
    out: list[str] = []
    for row, text in enumerate(lines, start=1):
        if row in by_line:
            indent = text[:len(text) - len(text.lstrip())]
            out.append(f"{indent}# {' '.join(by_line[row])}")
        out.append(text)
    return "\n".join(out) + "\n"
