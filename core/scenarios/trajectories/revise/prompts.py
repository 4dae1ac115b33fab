"""Prompt templates of the revise kind (data, not logic: edit here to change what is asked)."""

SYSTEM = ("You are an experienced software developer working on a pull request. You revise your "
          "code as the feedback asks, changing nothing else.")

USER = """Repository: {repo}. Pull request: {title}

Your previous commit in this pull request:
{previous_message}

```diff
{previous_diff}```
{feedback}
The next commit of the pull request is to do this:

{message}

The files it changes, as they are now:

{files}
Reply with the complete new content of every file you change, each as a line
FILE: <path>
followed by one fenced code block holding the whole file. (A unified diff in one ```diff block is
accepted too.)"""

FEEDBACK = """
Review comments on that commit:
{comments}
"""
