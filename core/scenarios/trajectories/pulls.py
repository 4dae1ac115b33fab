"""Which pull request a commit belongs to, and its position in it.

Two sources, the first one that names a commit wins:

1. **Pull-request refs** (``refs/pull/<N>/head``, as GitHub exposes them and as a mirror or a
   bundle keeps them). The PR's commits are those reachable from its head but not from the
   mainline before it: when the head was merged, the mainline commit just before the first
   first-parent commit that contains it (found by bisection with ``merge-base
   --is-ancestor``); when it was not merged, the merge base with the mainline tip.
2. **Merge commits of the mainline** whose subject is GitHub's ``Merge pull request #N from
   ...``: the commits its second parent brings (``rev-list M^2 ^M^1``). Its number may belong
   to a repository the project had before (ELI5's early PRs were on another organisation's
   repository), so the identity of such a PR is its merge commit, and ``number`` is what the
   message says.

A PR's title comes from its merge commit's body (GitHub writes the title there) or from an
exported code-host file (:mod:`.codehost`). Positions are 1-based in topological order (oldest
first), over the PR's commits including any merge commits inside it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from core.scenarios.trajectories.git import GitRepo
from core.scenarios.trajectories.history import Commit

__all__ = ["PullRequest", "find_pulls", "membership", "pull_number_of"]

#: GitHub's subject of a squash-merged pull request: ``<title> (#N)``
_SQUASH_SUBJECT = re.compile(r"\(#([0-9]+)\)\s*$")

_PULL_REF = re.compile(r"^refs/pull/([0-9]+)/head$")
_MERGE_SUBJECT = re.compile(r"^Merge pull request #([0-9]+) from (\S+)")


@dataclass(frozen=True)
class PullRequest:
    """A pull request's identity and commits (oldest first)."""

    key: str            # "ref:refs/pull/58/head" or "merge:<merge commit>"
    number: int
    ref: str | None
    merge_commit: str | None
    title: str
    commits: tuple[str, ...]

    def as_dict(self, position: int) -> dict[str, object]:
        return {"number": self.number, "ref": self.ref, "merge_commit": self.merge_commit,
                "title": self.title, "position": position, "length": len(self.commits)}


def _mainline(repo: GitRepo, tip: str) -> list[str]:
    return repo.run("rev-list", "--first-parent", "--reverse", tip).split()


def _containing(repo: GitRepo, mainline: list[str], head: str) -> int | None:
    """Index of the first mainline commit that has ``head`` as an ancestor (None: not merged)."""
    if not mainline or not repo.ok("merge-base", "--is-ancestor", head, mainline[-1]):
        return None
    lo, hi = 0, len(mainline) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if repo.ok("merge-base", "--is-ancestor", head, mainline[mid]):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _title_of(message: str) -> str:
    lines = [line.strip() for line in message.strip().splitlines()[1:] if line.strip()]
    return lines[0] if lines else ""


def find_pulls(repo: GitRepo, tip: str, merges: dict[str, Commit],
               heads: dict[str, str] | None = None) -> list[PullRequest]:
    """Every pull request of the repository (see the module docstring). ``merges`` maps the
    mainline's merge commits (id -> commit) that the walk saw, for titles and source 2.
    ``heads`` (``refs/pull/<N>/head`` -> commit) are the pull-request heads of the recorded range;
    a build must pass them, so that a later mirror (more pull requests, moved heads) rebuilds the
    same steps; ``None`` reads the repository's refs as they are now."""
    mainline = _mainline(repo, tip)
    pulls: list[PullRequest] = []
    pr_merges: list[tuple[int, Commit]] = []
    for commit in merges.values():
        match = _MERGE_SUBJECT.match(commit.subject)
        if match and len(commit.parents) == 2:
            pr_merges.append((int(match.group(1)), commit))
    claimed_merges: set[str] = set()
    for ref, head in sorted((repo.refs("refs/pull/") if heads is None else heads).items(),
                            key=lambda kv: int(_PULL_REF.match(kv[0]).group(1))  # type: ignore[union-attr]
                            if _PULL_REF.match(kv[0]) else 0):
        match = _PULL_REF.match(ref)
        if not match:
            continue
        number = int(match.group(1))
        at = _containing(repo, mainline, head)
        if at is None:
            base = repo.run("merge-base", head, tip, check=False).strip()
            merge_commit = None
        else:
            base = mainline[at - 1] if at > 0 else ""
            merge_commit = mainline[at]
        commits = repo.run("rev-list", "--reverse", "--topo-order", head,
                           *([f"^{base}"] if base else [])).split()
        merge = merges.get(merge_commit or "")
        title = _title_of(merge.message) if merge is not None and \
            _MERGE_SUBJECT.match(merge.subject) else ""
        if merge_commit:
            claimed_merges.add(merge_commit)
        pulls.append(PullRequest(f"ref:{ref}", number, ref, merge_commit, title, tuple(commits)))
    for number, merge in pr_merges:
        if merge.sha in claimed_merges:
            continue
        commits = repo.run("rev-list", "--reverse", "--topo-order", merge.parents[1],
                           f"^{merge.parents[0]}").split()
        pulls.append(PullRequest(f"merge:{merge.sha}", number, None, merge.sha,
                                 _title_of(merge.message), tuple(commits)))
    return pulls


def membership(pulls: list[PullRequest]) -> dict[str, tuple[PullRequest, int]]:
    """commit id -> (its pull request, 1-based position). A commit in several PRs (a branch
    merged twice, stacked PRs) belongs to the first in ``pulls`` order: refs before merges."""
    out: dict[str, tuple[PullRequest, int]] = {}
    for pr in pulls:
        for pos, sha in enumerate(pr.commits, start=1):
            out.setdefault(sha, (pr, pos))
    return out


def pull_number_of(step: dict[str, object]) -> int | None:
    """The pull request a trajectory step belongs to: its ``pull_request.number``, else, for a
    mainline commit, the ``(#N)`` GitHub ends a squash-merged PR's subject with (the squash
    commit repeats the branch's commits, which the PR's ref still reaches); None otherwise."""
    pr = step.get("pull_request")
    if isinstance(pr, dict) and isinstance(pr.get("number"), int):
        return int(pr["number"])
    message = step.get("message")
    if step.get("on_mainline") and isinstance(message, str) and message:
        found = _SQUASH_SUBJECT.search(message.splitlines()[0])
        if found:
            return int(found.group(1))
    return None
