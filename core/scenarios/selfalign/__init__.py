"""The self-align scenario: a model writes a function and its own tests, the tests run against
the code in the sandbox, and the model retries until they agree; measured against the
dataset's hidden tests (issue 27).

One home for its pieces:

* :mod:`.reply` -- the reply's JSON schema (structured output), the prompts of each try, parsing;
* :mod:`.units` -- model-written tests as units, checked statically (never run here);
* :mod:`.sandbox` -- each unit graded in the sandbox (boundary tier), with a cache;
* :mod:`.store` -- the record of every try (``selfalign_tries.jsonl``), resumable;
* :mod:`.loop` -- the loop of one task, and the responders (generators, gold controls);
* :mod:`.model` -- the basemodel (``generator``, ``max_tries``, ``generate``, ``feedback``, ...);
* :mod:`.metrics` -- alignment, hidden pass@1, false alignment, test validity, cost;
* :mod:`.amplify` -- amplified hidden tests within a derived precondition;
* :mod:`.repo` -- the repository-level set (repo kind records, tests run in the repository).
* :mod:`.selection` -- the selection baselines beside the loop: CodeT's dual execution
  agreement and the prompt-examples anchor over K samples (``selection``).

Records are codegen records (HumanEval layout: ``task_id``, ``prompt``, ``entry_point``,
``canonical_solution``, ``test``; the model sees only ``prompt``) or repo kind records (a
repository function; the model sees the repo kind's prompt, never the repository's tests). See
docs/proposals/scenarios/smart_coding/selfalign.md.
"""
