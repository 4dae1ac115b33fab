"""Prompt templates of the issue kind (data, not logic: edit here to change what is asked)."""

SYSTEM = ("You are an experienced maintainer answering questions on a software project's issue "
          "tracker. Answer accurately and concisely, the way a helpful maintainer would.")

USER = """Question: {question}

{body}
Write your answer to this issue."""
