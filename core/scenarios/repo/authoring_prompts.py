"""Prompts (chat messages) and reply cleaning for model-written problems and tests of repo tasks.

Both prompts show the model the *reference* function (signature, docstring or problem, body) and
the nearest ``CONTEXT_CHARS`` of its file's context: the builder knows the answer, the model's
job is to describe it (problem) or to pin its behaviour down (tests).
"""

from __future__ import annotations

import re
import textwrap

from core.generation.extract import fenced_blocks, select_code

__all__ = ["module_of", "problem_messages", "tests_messages", "clean_problem", "tests_code",
           "CONTEXT_CHARS", "PROBLEM_LIMIT"]

#: Context characters shown (the nearest ones, cut at a line start).
CONTEXT_CHARS = 1200
#: Upper bound, in characters, of a stored problem statement.
PROBLEM_LIMIT = 1200


def module_of(rel_file: str) -> str:
    """Dotted module name of a repository file (``pkg/sub/mod.py`` -> ``pkg.sub.mod``;
    ``pkg/__init__.py`` -> ``pkg``)."""
    parts = rel_file.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _near_context(task: dict) -> str:
    context = str(task.get("context") or "")
    if len(context) > CONTEXT_CHARS:
        context = context[-CONTEXT_CHARS:]
        context = context[context.find("\n") + 1:]
    return context.rstrip()


def _function(task: dict, with_doc: bool) -> str:
    sig = textwrap.dedent(task["signature"])
    doc = task.get("docstring") or task.get("problem")
    body = textwrap.indent(textwrap.dedent(task["reference"]), "    ")
    head = sig + "\n"
    if with_doc and doc:
        head += textwrap.indent(f'"""{doc}\n"""', "    ") + "\n"
    return head + body


def _where(task: dict) -> str:
    where = f"`{task['qualname']}` in `{task['file']}` of the Python repository `{task['repo']['name']}`"
    return where


def problem_messages(task: dict) -> list[dict[str, str]]:
    """Ask for a problem statement of the task's function (it has no docstring)."""
    text = (f"Here is the function {_where(task)}, with the code before it.\n\n"
            f"```python\n{_near_context(task)}\n\n\n{_function(task, with_doc=False)}```\n\n"
            "Write the docstring this function should have: what it does, its parameters and what it "
            "returns or raises, in at most five sentences of plain English. Do not repeat its code. "
            "Reply with the docstring text only.")
    return [{"role": "user", "content": text}]


def tests_messages(task: dict) -> list[dict[str, str]]:
    """Ask for a pytest module testing the task's function."""
    module = module_of(task["file"])
    target = task.get("class_name") or task["name"]
    how = (f"Create instances of `{target}` to call the method `{task['name']}`." if task.get("class_name")
           else f"Call `{target}` directly.")
    text = (f"Here is the function {_where(task)}, with the code before it.\n\n"
            f"```python\n{_near_context(task)}\n\n\n{_function(task, with_doc=True)}```\n\n"
            f"Write a pytest test module for it. Start with `from {module} import {target}`. {how} "
            "Write three short test functions named `test_...`, each calling it with concrete inputs and "
            "checking the exact result with `assert`. Use only pytest, the standard library and this "
            "repository; no files, network or subprocesses. Reply with one ```python code block.")
    return [{"role": "user", "content": text}]


_FENCED = re.compile(r"```[^\n]*\n?(.*?)(?:```|\Z)", re.S)


def clean_problem(raw: str) -> str:
    """The statement in a reply: fences and surrounding quotes removed, ``\"\"\"`` replaced by
    ``'''`` and backslashes dropped (the job's prompt puts the problem in a docstring), cut
    to :data:`PROBLEM_LIMIT` at a sentence end when possible. ``""`` when nothing is left."""
    text = raw.strip()
    fenced = _FENCED.findall(text)
    if fenced and text.startswith("```"):
        text = fenced[0]
    text = text.strip().strip('"').strip("'").strip()
    text = text.replace('"""', "'''").replace("\\", "")
    if len(text) > PROBLEM_LIMIT:
        cut = text.rfind(". ", 0, PROBLEM_LIMIT)
        text = text[:cut + 1] if cut > 0 else text[:PROBLEM_LIMIT]
    return text.strip()


def tests_code(raw: str) -> str:
    """The test module in a reply: its Python fenced block (the longest, with the other blocks'
    imports), else the whole reply as is -- so a module that does not parse is reported as a
    syntax error, never silently cut down to a part that does."""
    if not fenced_blocks(raw):
        return raw.strip() + "\n"
    return select_code(raw).strip() + "\n"
