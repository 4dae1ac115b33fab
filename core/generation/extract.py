"""Turn model output into a runnable Python module.

Two entry points:

* :func:`complete_code` for raw continuations: ``prompt + completion`` where the
  completion is cut at the first stop string (servers that ignore ``stop``).
* :func:`extract_code` for chat replies. Steps:

  1. **Pick the code.** Fenced blocks (```` ```python ````, ```` ``` ````, ``~~~``) win;
     an unterminated fence (reply cut by ``max_tokens``) runs to the end. With several
     blocks, the one defining ``entry_point`` at top level wins (the first such),
     with the import lines of the other blocks put in front; otherwise the longest.
     With no fence, the longest run of lines that parses as
     Python, starting at a line that looks like code, is taken (prose is dropped).
  2. **Clean it.** Top-level ``if __name__ == "__main__":`` blocks, top-level
     ``print(...)`` calls and ``assert`` statements (example usage the model adds)
     are removed, since they would run at import time under the tests.
  3. **Assemble.** If the code defines ``entry_point`` at top level (the model
     re-stated the signature), the module is ``prompt + "\\n\\n" + code``: the prompt's
     imports and helper functions stay defined, its docstring-only stub of the entry
     point is a valid function, and the reply's definition replaces it. (If the
     prompt alone does not parse, only its import lines are kept.) Otherwise the
     code is taken as a **body-only** answer: dedented, indented by 4 spaces and
     appended to the prompt.

The result is best effort and never raises: unparseable replies come back as
``prompt + reply-code`` so the test run reports the syntax error.
"""
from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from core.common import pyast

_FENCE_RE = re.compile(
    r"^[ \t]*(?P<fence>```+|~~~+)[ \t]*(?P<lang>[\w+.#-]*)[^\n]*\n(?P<body>.*?)(?:^[ \t]*(?P=fence)[ \t]*$|\Z)",
    re.DOTALL | re.MULTILINE,
)
_CODE_START_RE = re.compile(
    r"^(def |async def |class |from |import |@|if |for |while |try:|with |return\b|[A-Za-z_]\w*\s*=)"
)
_PY_LANGS = {"", "python", "py", "python3", "py3"}


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: its language tag (lowercase, may be empty) and text."""

    lang: str
    text: str


def truncate_at_stops(text: str, stops: Sequence[str]) -> str:
    """Cut ``text`` at the earliest occurrence of any stop string (stop excluded)."""
    cut = len(text)
    for stop in stops:
        if stop:
            pos = text.find(stop)
            if pos != -1:
                cut = min(cut, pos)
    return text[:cut]


def complete_code(prompt: str, completion: str, stops: Sequence[str] = ()) -> str:
    """Module for a raw completion: the prompt followed by the (truncated) completion."""
    return prompt + truncate_at_stops(completion, stops)


def fenced_blocks(text: str) -> list[CodeBlock]:
    """All fenced code blocks, in order; a final unterminated fence runs to the end."""
    return [CodeBlock(m.group("lang").lower(), m.group("body")) for m in _FENCE_RE.finditer(text)]


def _parses(code: str) -> bool:
    try:
        pyast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return True


def defines(code: str, name: str | None) -> bool:
    """True if ``code`` parses and defines function/class ``name`` at top level."""
    if not name:
        return False
    try:
        tree = pyast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.name == name
               for n in tree.body)


def _unfenced_code(text: str) -> str:
    """Longest parseable run of lines starting at a code-looking line (prose dropped)."""
    lines = text.splitlines()
    best = ""
    for start, line in enumerate(lines):
        if not _CODE_START_RE.match(line) and not (line.startswith((" ", "\t")) and line.strip()):
            continue
        for end in range(len(lines), start, -1):
            chunk = "\n".join(lines[start:end]).rstrip()
            if len(chunk) <= len(best):
                break
            candidate = textwrap.dedent(chunk)
            if _parses(candidate):
                best = chunk
                break
    return best + "\n" if best else ""


def select_code(reply: str, entry_point: str | None = None) -> str:
    """Step 1 of :func:`extract_code`: the code part of a chat reply (may be ``""``)."""
    blocks = [b for b in fenced_blocks(reply) if b.lang in _PY_LANGS and b.text.strip()]
    if blocks:
        chosen = next((b for b in blocks if defines(b.text, entry_point)), None)
        if chosen is None:
            return max(blocks, key=lambda b: len(b.text)).text
        imports = [ln for b in blocks if b is not chosen for ln in b.text.splitlines()
                   if ln.startswith(("import ", "from ")) and _parses(ln)]
        missing = [ln for ln in dict.fromkeys(imports) if ln not in chosen.text.splitlines()]
        return ("\n".join(missing) + "\n" + chosen.text) if missing else chosen.text
    return _unfenced_code(reply)


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
            and test.left.id == "__name__")


def _is_example_usage(node: ast.stmt) -> bool:
    if isinstance(node, ast.Assert) or _is_main_guard(node):
        return True
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name) and node.value.func.id == "print")


def strip_example_usage(code: str) -> str:
    """Remove top-level ``if __name__ ...`` blocks, ``print(...)`` calls and asserts.

    Code that does not parse is returned unchanged.
    """
    try:
        tree = pyast.parse(code)
    except (SyntaxError, ValueError):
        return code
    lines = code.splitlines(keepends=True)
    drop: set[int] = set()
    for node in tree.body:
        if _is_example_usage(node):
            start = node.lineno - 1
            decorators: list[ast.expr] = getattr(node, "decorator_list", None) or []
            if decorators:
                start = min(d.lineno for d in decorators) - 1  # pragma: no cover
            end = node.end_lineno if node.end_lineno is not None else node.lineno
            drop.update(range(start, end))
    if not drop:
        return code
    kept = "".join(line for i, line in enumerate(lines) if i not in drop)
    return kept.rstrip() + "\n"


def _prompt_header(prompt: str) -> str:
    """What of the prompt to keep in front of a full-function answer."""
    if _parses(prompt):
        return prompt.rstrip() + "\n"
    imports = [ln for ln in prompt.splitlines() if ln.startswith(("import ", "from "))]
    return ("\n".join(imports) + "\n") if imports else ""


def assemble(prompt: str, code: str, entry_point: str | None) -> str:
    """Step 3 of :func:`extract_code`: build the module from the prompt and the code."""
    if not code.strip():
        return prompt
    if defines(code, entry_point) or (entry_point is None and _parses(code)
                                      and re.search(r"^(async )?def ", code, re.M)):
        header = _prompt_header(prompt)
        return (header + "\n\n" + code.strip("\n") + "\n") if header else code.strip("\n") + "\n"
    body = textwrap.indent(textwrap.dedent(code).strip("\n"), "    ")
    return prompt.rstrip("\n") + "\n" + body + "\n"


def extract_code(reply: str, prompt: str, entry_point: str | None = None) -> str:
    """Module for a chat reply (see the module docstring for the rules)."""
    code = select_code(reply, entry_point)
    # dedent only when needed: it also blanks whitespace-only lines inside strings
    dedented = code if _parses(code) else textwrap.dedent(code)
    if defines(dedented, entry_point):
        code = strip_example_usage(dedented)
    elif entry_point is None and _parses(dedented) and re.search(r"^(async )?def ", dedented, re.M):
        code = strip_example_usage(dedented)
    return assemble(prompt, code, entry_point)
