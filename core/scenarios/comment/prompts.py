"""Prompt templates of the comment kind (data, not logic: edit here to change what is asked)."""

SYSTEM = "You are a careful Python developer who documents code for other developers."

USER = """Add a docstring and explanatory `#` comments to the following Python function.
Do not change the code: keep every statement, name, value and line exactly as it is; only add
comments and a docstring. Reply with the complete commented function in one ```python code block.

Context: {description}

```python
{code_snippet}```
"""
