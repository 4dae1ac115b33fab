"""Answer-leak measures: is a task's reference (or a near copy of it) in what the model sees?

A task *leaks* when copying something shown to the model would already give its answer. Two
measures, both stdlib only and deterministic, one for prose and one for code:

**Prose** (:func:`text_leak`; commit subjects, comments, issue answers). Both texts are
normalised (:func:`normalise`: NFKC, case-folded, every run of non-word characters one space,
so ``"Fix #12: foo()"`` and ``"fix 12 foo"`` are equal). The reference leaks into a shown text

* ``exact``      -- when the normalised texts are equal (and not empty);
* ``near_copy``  -- when their character similarity (:class:`difflib.SequenceMatcher` ratio,
  ``2*matches/(len(a)+len(b))``) is at least :data:`NEAR_COPY_RATIO` (0.80): a typo, a
  dropped or added word or issue number ("add asdict method that return json encodable object"
  against "... returns ...", 0.99; "dicttoolz" against "add dicttoolz", 0.82), not a related
  summary ("add assoc and update_in" against "implement assoc and update-in", 0.73);
* ``contained``  -- when the reference has at least :data:`MIN_CONTAINED_TOKENS` (4) words and
  at least :data:`CONTAINED_COVERAGE` (80 %) of its word 4-grams occur in the shown text: the
  answer copied into a longer text (a diff adding "Not to be confused with ``itertools.count``"
  holds the subject "not to be confused with itertools.count"). Shorter references are too
  generic for containment ("fix typo" occurs in many diffs) and are only caught by the two
  whole-text tests. A reference of several pieces (a function's separate comments) counts the
  4-grams of each piece, none spanning two.

**Code** (:func:`code_leak`; implement-change and revise revisions, repo function bodies). The
reference and the shown texts are compared as *code lines*: stripped, inner whitespace
collapsed, blank and ``#``-only lines dropped. The reference leaks (``contained``) when its
lines hold at least :data:`MIN_CODE_CHARS` (40) non-blank characters and lines carrying at least
:data:`CODE_COVERAGE` (80 %) of those characters occur among the shown lines (a line of a
unified diff counts without its ``+``/``-``/space prefix). Weighting by characters keeps
ubiquitous short lines (``pass``, ``return rv``, ``else:``) from deciding; the 40-character floor
keeps one-liners such as ``return self._x`` -- which legitimately recur in a class -- out.

What *is* shown, what the reference is and which shown field may be masked differ per task
kind: :mod:`core.scenarios.leak_views` applies these measures to each kind's records.
"""
from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["NEAR_COPY_RATIO", "CONTAINED_COVERAGE", "MIN_CONTAINED_TOKENS", "NGRAM",
           "CODE_COVERAGE", "MIN_CODE_CHARS", "Finding", "normalise", "tokens", "ratio",
           "coverage", "text_leak", "code_lines", "code_coverage", "code_leak", "first_leak"]

#: character similarity (difflib ratio of the normalised texts) from which a text is a near copy
NEAR_COPY_RATIO = 0.80
#: share of the reference's word n-grams found in a shown text from which it is contained there
CONTAINED_COVERAGE = 0.80
#: a reference needs this many words before containment in a longer text counts as a leak
MIN_CONTAINED_TOKENS = 4
#: word n-gram length of the containment test
NGRAM = 4
#: share of the reference code's characters, by line, found among the shown lines
CODE_COVERAGE = 0.80
#: reference code with fewer non-blank characters than this never counts as leaked
MIN_CODE_CHARS = 40

_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)
_SPACE = re.compile(r"\s+")
_DIFF_HEADER = ("diff --git ", "index ", "--- ", "+++ ", "@@ ")


@dataclass(frozen=True)
class Finding:
    """One leak: the shown field holding the reference, how it was matched and the score
    (ratio or coverage, 0-1) that passed the threshold."""

    field: str
    reason: str
    score: float

    def describe(self) -> str:
        return f"{self.reason} in {self.field} ({self.score:.2f})"


def normalise(text: str) -> str:
    """NFKC, case-folded, runs of non-word characters (and ``_``) as one space, stripped."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(_NON_WORD.sub(" ", folded).split())


def tokens(text: str) -> list[str]:
    """The words of :func:`normalise`'s text."""
    return normalise(text).split()


def ratio(a: str, b: str) -> float:
    """difflib similarity of two already normalised texts (0 when either is empty).

    Returns 0 without aligning when the length bound ``2*min/(len(a)+len(b))`` already rules
    out :data:`NEAR_COPY_RATIO` (a short reference against a whole diff)."""
    if not a or not b:
        return 0.0
    if 2 * min(len(a), len(b)) / (len(a) + len(b)) < NEAR_COPY_RATIO:
        return 0.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _pieces(reference: str | Sequence[str]) -> list[str]:
    return [reference] if isinstance(reference, str) else list(reference)


def coverage(reference: str | Sequence[str], shown: str, n: int = NGRAM) -> float:
    """Share of the reference's distinct word ``n``-grams found in ``shown``, 0-1.

    A reference given as several pieces (a function's separate comments) has the grams of each
    piece, none spanning two. A piece of fewer than ``n`` words is one gram (its whole word
    sequence); an empty reference or shown text gives 0."""
    seen = tokens(shown)
    grams: set[tuple[str, ...]] = set()
    for piece in _pieces(reference):
        words = tokens(piece)
        if words:
            grams |= _ngrams(words, min(n, len(words)))
    if not grams or not seen:
        return 0.0
    by_size = {size: _ngrams(seen, size) for size in {len(g) for g in grams}}
    return sum(1 for g in grams if g in by_size[len(g)]) / len(grams)


def text_leak(reference: str | Sequence[str], shown: Mapping[str, str]) -> Finding | None:
    """The first leak of a prose reference into the shown fields (name -> text), else None.

    Fields are tried in the mapping's order; per field ``exact``, then ``near_copy`` (on the
    pieces joined by a space when the reference is several), then ``contained`` (module
    docstring; grams per piece). An empty reference or field never leaks."""
    pieces = _pieces(reference)
    ref = normalise(" ".join(pieces))
    if not ref:
        return None
    for name, text in shown.items():
        seen = normalise(text)
        if not seen:
            continue
        if seen == ref:
            return Finding(name, "exact", 1.0)
        score = ratio(ref, seen)
        if score >= NEAR_COPY_RATIO:
            return Finding(name, "near_copy", round(score, 3))
        if len(ref.split()) >= MIN_CONTAINED_TOKENS:
            share = coverage(pieces, seen)
            if share >= CONTAINED_COVERAGE:
                return Finding(name, "contained", round(share, 3))
    return None


def code_lines(text: str, diff: bool = False) -> list[str]:
    """Code lines of a text: stripped, inner whitespace collapsed, blank and ``#``-only lines
    dropped. With ``diff`` the text is a unified diff: file and hunk headers are dropped and
    each line loses its one-character ``+``/``-``/space prefix."""
    out: list[str] = []
    for raw in text.splitlines():
        if diff:
            if raw.startswith(_DIFF_HEADER) or raw.startswith("\\"):
                continue
            raw = raw[1:] if raw[:1] in "+- " else raw
        line = _SPACE.sub(" ", raw.strip())
        if line and not line.startswith("#"):
            out.append(line)
    return out


def code_coverage(reference: Iterable[str], shown: Iterable[str]) -> tuple[float, int]:
    """(share of the reference lines' non-blank characters on lines found in ``shown``, that
    character total). Lines are :func:`code_lines` output; (0, 0) for no reference line."""
    seen = set(shown)
    total = found = 0
    for line in reference:
        weight = len(line.replace(" ", ""))
        total += weight
        found += weight if line in seen else 0
    return (found / total if total else 0.0), total


def code_leak(reference: Iterable[str], shown: Mapping[str, Iterable[str]]) -> Finding | None:
    """``contained`` when the reference code lines are (by :data:`CODE_COVERAGE` of their
    characters, :data:`MIN_CODE_CHARS` at least) among one shown field's lines, or among all
    shown fields' lines together (field ``"prompt"``); else None."""
    ref = list(reference)
    fields = {name: list(lines) for name, lines in shown.items()}
    together = [line for lines in fields.values() for line in lines]
    for name, lines in [*fields.items(), ("prompt", together)]:
        share, total = code_coverage(ref, lines)
        if total >= MIN_CODE_CHARS and share >= CODE_COVERAGE:
            return Finding(name, "contained", round(share, 3))
    return None


def first_leak(*findings: Finding | None) -> Finding | None:
    """The first finding that is not None (checks in priority order)."""
    return next((f for f in findings if f is not None), None)
