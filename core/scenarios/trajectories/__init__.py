"""The trajectory family: developer work mined from a repository's history, and the three task
kinds built from it, each in its own subpackage.

The miner (shared by the kinds):

* :mod:`.git`       -- the git command as the only reader of history; bundles mirrored.
* :mod:`.history`   -- commits of a range, their changed files, bounded diffs.
* :mod:`.filters`   -- one decision per commit: kept, or why not (bot, merge-only, ...).
* :mod:`.pulls`     -- pull requests (``refs/pull/*`` and merge commits) and step positions.
* :mod:`.codehost`  -- optional review comments and issue text from an exported JSON file.
* :mod:`.builder`   -- ``ianvs dataset trajectories``: resumable, repeatable step records.
* :mod:`.cli`       -- its arguments.

* :mod:`.periods`   -- commit dates: the periods metrics are split by, windows.

The kinds (registered as ``commit_message``, ``implement_change`` and ``revise``):
:mod:`.commit_message`, :mod:`.implement_change` and :mod:`.revise`
(docs/proposals/scenarios/smart_coding/trajectories.md).
"""
