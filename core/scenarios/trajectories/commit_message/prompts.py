"""Prompt templates of the commit-message kind (data, not logic: edit here to change what is asked)."""

SYSTEM = "You are an experienced software developer who writes clear, accurate git commit messages."

USER = """Write the git commit message for the change below. Follow common practice: a summary
line of at most 72 characters in the imperative mood ("Fix ...", "Add ..."), then, only if the
change needs it, a blank line and a short body. Reply with the commit message only.

Repository: {repo}{pull_request}
Files changed: {files}
{context}
```diff
{diff}```
"""

CONTEXT = """Outline of the changed files before the change:
{outline}
"""
