"""Prompts of the ``repo`` kind: repository context, the file's name, then the function's header.

* :func:`header_of` -- the ``def`` line(s) and the docstring (or the model-written ``problem``
  when the function has none), dedented to column 0: what a completion model continues.
* :func:`prompt_of` -- completion prompt: the nearest :data:`PROMPT_CONTEXT_CHARS` characters of
  the recorded context (cut at a line start), a ``# file:`` line, the header.
* :func:`chat_messages` -- the same material as a chat request asking for the whole function.
* :func:`reference_code` -- the original function (header + recorded body): the gold answer.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any

__all__ = ["PROMPT_CONTEXT_CHARS", "header_of", "prompt_of", "chat_messages", "reference_code"]

#: Context characters put in the prompt (the nearest ones): small models on shared CPUs spend
#: most of their time reading the prompt.
PROMPT_CONTEXT_CHARS = 1500

SYSTEM = ("You are an expert Python developer working inside an existing repository. Write the "
          "requested function so that the repository's own tests pass. Reply with the complete "
          "function (its def line and body) in one ```python block, and nothing else.")


def header_of(task: Mapping[str, Any]) -> str:
    """The task's ``def`` line(s) and docstring, dedented to column 0 (what the model continues)."""
    sig = textwrap.dedent(str(task["signature"]))
    doc = task.get("docstring") or task.get("problem")
    if not doc:
        return sig + "\n"
    return sig + "\n" + textwrap.indent(f'"""{doc}\n"""', "    ") + "\n"


def _context(task: Mapping[str, Any], context_chars: int) -> str:
    context = str(task["context"])
    if len(context) > context_chars:
        context = context[-context_chars:]
        context = context[context.find("\n") + 1:]
    return context.rstrip()


def _where(task: Mapping[str, Any]) -> str:
    cls = task.get("class_name")
    return f"# file: {task['file']}" + (f" (method of class {cls})" if cls else "")


def prompt_of(task: Mapping[str, Any], context_chars: int = PROMPT_CONTEXT_CHARS) -> str:
    """Completion prompt (see the module docstring)."""
    return f"{_context(task, context_chars)}\n\n\n{_where(task)}\n{header_of(task)}"


def chat_messages(task: Mapping[str, Any], context_chars: int = PROMPT_CONTEXT_CHARS
                  ) -> list[dict[str, str]]:
    """Chat request for the whole function (see the module docstring)."""
    user = (f"Repository code around the function:\n```python\n{_context(task, context_chars)}\n```\n\n"
            f"{_where(task)}\nImplement this function:\n```python\n{header_of(task)}```")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def reference_code(task: Mapping[str, Any]) -> str:
    """The original function: header plus the recorded reference body."""
    return header_of(task) + textwrap.indent(textwrap.dedent(str(task["reference"])), "    ")
