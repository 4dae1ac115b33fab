"""Developer trajectories mined from a repository's history (shared by the trajectory kinds).

Modules:

* :mod:`.git`       -- the git command as the only reader of history; bundles mirrored.
* :mod:`.history`   -- commits of a range, their changed files, bounded diffs.
* :mod:`.filters`   -- one decision per commit: kept, or why not (bot, merge-only, ...).
* :mod:`.pulls`     -- pull requests (``refs/pull/*`` and merge commits) and step positions.
* :mod:`.codehost`  -- optional review comments and issue text from an exported JSON file.
* :mod:`.builder`   -- ``ianvs dataset trajectories``: resumable, repeatable step records.
* :mod:`.cli`       -- its arguments.

* :mod:`.periods`   -- commit dates: the periods metrics are split by, windows.

The task kinds built from these records live in their own homes:
:mod:`core.scenarios.commit_message`, :mod:`core.scenarios.implement_change` and
:mod:`core.scenarios.revise`
(docs/proposals/scenarios/smart_coding/trajectories.md).
"""
