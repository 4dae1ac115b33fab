"""Prompt templates of the implement-change kind (data, not logic: edit here to change what is asked)."""

SYSTEM = ("You are an experienced software developer. You change a repository's code exactly as a "
          "commit message asks, keeping everything else as it is.")

USER = """Repository: {repo}. Make the change this commit message describes:{pull_request}

{message}

The files to change, as they are now:

{files}
Reply with the complete new content of every file you change, each as a line
FILE: <path>
followed by one fenced code block holding the whole file. (A unified diff in one ```diff block is
accepted too.) Do not change the tests."""

#: one file shown or given whole; ``fence`` is three or more backticks, more than any run in
#: ``text`` (``implement_change.fenced_file``), so a file holding fences itself stays one block
FILE = """FILE: {path}
{fence}python
{text}{fence}
"""
