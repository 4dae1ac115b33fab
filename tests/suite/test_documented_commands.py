"""Every command the documentation shows still exists, with the flags it shows.

Collected from README.md and docs/**/*.md, in fenced code blocks and inline code spans
(a span may run over several lines):

* ``ianvs ...`` command lines (at the start of a line or span, or after ``&&``, ``;`` or a
  shell ``|``): the subcommand path (``ianvs sandbox image build``, ``ianvs edge certs``) must
  exist in the real argparse parsers (:func:`core.cmd.benchmarking.command_parser`), every
  ``--flag`` must be an option of the (sub)parser it is given to, and a literal value of a
  flag with ``choices`` must be one of them;
* ``python <script>.py ...`` and spans starting with ``benchmarks/x.py`` or ``tests/suite/x.py``:
  the script must exist and every flag must be in its argparse parser;
* any mention of ``benchmarks/*.py``, ``tests/suite/*.py`` or ``.ci/*`` in the text: the file
  must exist.

Documentation syntax is understood rather than executed: ``<placeholder ...>`` is one opaque
word (spaces inside allowed), ``[...]`` marks optional parts whose flags are still checked,
``a|b`` lists alternatives (each is checked), ``...`` and ``WS...`` stand for more words, and
``--flag value`` pairs are consumed as argparse would (a flag that takes no value takes none).
Positional words are not checked (they are examples), only subcommand names.

A script's flags are taken from its own parser: the script runs in a subprocess with ``--help``
and :meth:`argparse.ArgumentParser.parse_args` wrapped to report the option strings first; the
scripts build their parser before doing any work, so this takes well under a second each. When a
script fails before its parser is built, its flags are read from its ``add_argument`` calls
instead, and :func:`test_documented_script_help` fails for it.

Failures name ``file:line`` of every broken mention.
"""
from __future__ import annotations

import argparse
import ast
import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest

from core.cmd.benchmarking import SUBCOMMANDS, command_parser

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted([REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))])
SCRIPT_DIRS = ("benchmarks/", "tests/suite/")
HELP_TIMEOUT = 20.0  # seconds; a script's --help must answer well within this
#: A mentioned file: benchmarks/x.py, tests/suite/x.py or anything under .ci/.
FILE_MENTION = re.compile(
    r"(?<![\w./-])((?:benchmarks|tests/suite)/[\w.-]+\.py|\.ci/[\w.-]*[\w-])")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
SEPARATORS = ("&&", "||", ";", "|")
#: Scripts whose --help is known to fail, with why (a strict xfail: fix the script, drop it).
KNOWN_BROKEN_SCRIPTS: dict[str, str] = {}


@dataclass(frozen=True)
class Mention:
    """A command as written in the docs: the file, the line it starts on, and its words."""

    path: Path
    line: int
    text: str

    def where(self) -> str:
        return f"{_shown(self.path)}:{self.line}"


def _shown(path: Path) -> str:
    """*path* relative to the repository (as given when outside it)."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


# --- reading the documents -------------------------------------------------------------------


def code_snippets(path: Path) -> Iterator[tuple[int, str, bool]]:
    """``(line, text, fenced)`` of every fenced code line (``\\``-continuations joined) and every
    inline code span (newlines inside a span become spaces; ``\\|`` of tables becomes ``|``)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    prose: list[tuple[int, str]] = []
    fence: str | None = None
    pending: tuple[int, str] | None = None
    for number, line in enumerate(lines, 1):
        match = FENCE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)
                prose.append((number, ""))  # a fence ends a paragraph
            else:
                prose.append((number, line))
            continue
        if match and match.group(1).startswith(fence) and not line.strip()[len(match.group(1)):]:
            fence = None
            prose.append((number, ""))
            continue
        prose.append((number, ""))
        start, text = pending if pending else (number, "")
        text += line
        if text.endswith("\\"):
            pending = (start, text[:-1] + " ")
        else:
            pending = None
            yield start, text, True
    yield from _spans(prose)


def _spans(prose: list[tuple[int, str]]) -> Iterator[tuple[int, str, bool]]:
    """Inline code spans of the non-fenced text (a blank line ends an open span)."""
    for block in _paragraphs(prose):
        text = "\n".join(line for _, line in block)
        offsets = [0]
        for _, line in block:
            offsets.append(offsets[-1] + len(line) + 1)
        pos = 0
        for run in re.finditer(r"`+", text):
            if run.start() < pos:
                continue
            closing = re.compile(r"(?<!`)" + run.group(0) + r"(?!`)")
            end = closing.search(text, run.end())
            if end is None:
                pos = run.end()
                continue
            pos = end.end()
            index = max(i for i, offset in enumerate(offsets) if offset <= run.start())
            body = text[run.end():end.start()].replace("\n", " ").replace("\\|", "|")
            yield block[index][0], body.strip(), False


def _paragraphs(prose: list[tuple[int, str]]) -> Iterator[list[tuple[int, str]]]:
    block: list[tuple[int, str]] = []
    for number, line in prose:
        if line.strip():
            block.append((number, line))
        elif block:
            yield block
            block = []
    if block:
        yield block


def tokenize(text: str) -> list[str]:
    """Words of a documented command line: quotes and ``<...>`` keep their spaces, ``[`` and
    ``]`` at a word's edges are words of their own, a ``#`` word starts a comment (dropped)."""
    tokens: list[str] = []
    word = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "\"'" and text.find(ch, i + 1) > 0:
            end = text.find(ch, i + 1)
            word += text[i:end + 1]
            i = end + 1
            continue
        if ch == "<" and text.find(">", i + 1) > 0:
            end = text.find(">", i + 1)
            word += text[i:end + 1]
            i = end + 1
            continue
        if ch.isspace() or (ch == "[" and not word) or ch == "]":
            if word:
                tokens.append(word)
                word = ""
            if ch in "[]":
                tokens.append(ch)
            i += 1
            continue
        if ch == "#" and not word:
            break
        word += ch
        i += 1
    if word:
        tokens.append(word)
    return tokens


def commands(tokens: list[str]) -> Iterator[list[str]]:
    """The commands of a line: split at top-level ``&&``, ``||``, ``;`` and ``|`` words (a ``|``
    inside ``[...]`` separates alternatives and stays)."""
    depth = 0
    current: list[str] = []
    for token in tokens:
        depth += {"[": 1, "]": -1}.get(token, 0)
        if depth <= 0 and token in SEPARATORS:
            yield current
            current = []
            depth = 0
        else:
            current.append(token)
    yield current


def _assignment(word: str) -> bool:
    return re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", word) is not None


def mentions(path: Path) -> Iterator[tuple[str, Mention, list[str]]]:
    """``(kind, mention, arguments)`` of every ``ianvs`` (kind "ianvs") and script (kind: the
    script's repo-relative path) command in *path*; arguments exclude the command word(s)."""
    for line, text, _fenced in code_snippets(path):
        for words in commands(tokenize(text)):
            while words and (words[0] in ("$", "sudo") or _assignment(words[0])):
                words = words[1:]  # a prompt, sudo, or VAR=value before the command
            if not words:
                continue
            mention = Mention(path, line, " ".join(words))
            if words[0] == "ianvs":
                yield "ianvs", mention, words[1:]
            elif words[0] in ("python", "python3") and len(words) > 1 \
                    and words[1].endswith(".py"):
                yield words[1].removeprefix("./"), mention, words[2:]
            elif words[0].startswith(SCRIPT_DIRS) and words[0].endswith(".py"):
                yield words[0], mention, words[1:]


# --- checking against the parsers ------------------------------------------------------------


def _placeholder(token: str) -> bool:
    return token in ("[", "]", "|", "...", "…") or token.startswith("<") or "..." in token


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return None


def check_ianvs(words: list[str]) -> list[str]:
    """Problems of ``ianvs words``: as :func:`core.cmd.benchmarking.main` dispatches, only the
    first word can name a subcommand (each of ``a|b``); otherwise the job runner's parser gets
    the words (its positional words, e.g. in a diagram, are not checked)."""
    first = words[0] if words else "-"
    if first.startswith("-") or _placeholder(first):
        return check_arguments("ianvs", command_parser(None), words)
    unknown = [name for name in first.split("|") if name not in SUBCOMMANDS]
    if unknown:
        return [f"{'|'.join(unknown)!r} is not a subcommand of 'ianvs' ({', '.join(SUBCOMMANDS)})"]
    return [problem for name in first.split("|")
            for problem in check_arguments(f"ianvs {name}", command_parser(name), words[1:])]


def check_arguments(prog: str, parser: argparse.ArgumentParser, words: list[str]) -> list[str]:
    """Problems of *words* given to *parser* (called *prog* in messages).

    Flags must be option strings of the parser they reach, and a literal value of a flag with
    choices one of them; a word reaching a parser with subparsers must name one of them (each
    of ``a|b``), and a placeholder there (``<kind>``) stands for any of them: the rest must then
    suit at least one; other positional words are not checked.
    """
    problems: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if word.startswith("-") and len(word) > 1 and not _placeholder(word):
            flag, _, inline = word.partition("=")
            action = parser._option_string_actions.get(flag)
            if action is None:
                problems.append(f"{flag} is not an option of '{prog}'")
                continue
            value: str | None = inline or None
            if action.nargs != 0 and not inline and i < len(words) \
                    and not words[i].startswith("-") and words[i] not in ("[", "]", "|"):
                value = words[i]
                i += 1
            if value is not None and action.choices is not None:
                for choice in value.split("|"):  # a|b|... : each literal alternative
                    if choice and not _placeholder(choice) and choice not in action.choices:
                        problems.append(f"{flag} {choice}: not one of "
                                        f"{sorted(map(str, action.choices))} of '{prog}'")
            continue
        choices = _subparsers(parser)
        if choices is None or word in ("[", "]", "|"):
            continue  # a positional value: an example, not checked
        if _placeholder(word):
            each = [check_arguments(f"{prog} {name}", sub, words[i:])
                    for name, sub in choices.items()]
            if all(each):
                problems.append(f"no subcommand of '{prog}' takes what follows {word} (e.g. "
                                f"{min(each, key=len)[0]})")
            break
        unknown = [name for name in word.split("|") if name not in choices]
        if unknown:
            problems.append(f"{'|'.join(unknown)!r} is not a subcommand of '{prog}' "
                            f"({', '.join(choices)})")
            break
        for name in word.split("|"):
            problems += check_arguments(f"{prog} {name}", choices[name], words[i:])
        break
    return problems


_PROBE = """
import argparse, json, runpy, sys
original = argparse.ArgumentParser.parse_args
def parse_args(self, *args, **kwargs):
    options = {flag: (None if a.choices is None else [str(c) for c in a.choices], a.nargs != 0)
               for flag, a in self._option_string_actions.items()}
    sys.stdout.write("IANVS-OPTIONS " + json.dumps(options) + "\\n")
    sys.stdout.flush()
    return original(self, *args, **kwargs)
argparse.ArgumentParser.parse_args = parse_args
sys.argv = [sys.argv[1], "--help"]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@dataclass(frozen=True)
class ScriptHelp:
    """What ``python <script> --help`` did: its parser (or None), exit status and output."""

    parser: argparse.ArgumentParser | None
    returncode: int
    output: str


@lru_cache(maxsize=None)
def script_help(script: str) -> ScriptHelp:
    """Run *script* (repo-relative) with ``--help`` and rebuild its parser's options.

    A script without an ``ArgumentParser`` is not run (it takes no flags: an empty parser);
    one whose parser was never reached gives ``parser=None``."""
    source = (REPO / script).read_text(encoding="utf-8")
    if "ArgumentParser" not in source:
        return ScriptHelp(argparse.ArgumentParser(prog=script, add_help=False), 0, "")
    done = subprocess.run([sys.executable, "-c", _PROBE, script], cwd=REPO,
                          capture_output=True, text=True, timeout=HELP_TIMEOUT)
    output = done.stdout + done.stderr
    for line in done.stdout.splitlines():
        if line.startswith("IANVS-OPTIONS "):
            parser = argparse.ArgumentParser(prog=script, add_help=False)
            for flag, (choices, takes_value) in json.loads(line[len("IANVS-OPTIONS "):]).items():
                if takes_value:
                    parser.add_argument(flag, choices=choices)
                else:
                    parser.add_argument(flag, action="store_true")
            return ScriptHelp(parser, done.returncode, output)
    return ScriptHelp(None, done.returncode, output)


def static_parser(script: str) -> argparse.ArgumentParser:
    """Options of *script* read from its ``add_argument("--x", ...)`` calls (not imported)."""
    parser = argparse.ArgumentParser(prog=script, add_help=True)
    tree = ast.parse((REPO / script).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "add_argument":
            flags = [a.value for a in node.args if isinstance(a, ast.Constant)
                     and isinstance(a.value, str) and a.value.startswith("-")]
            if flags and not any(flag in parser._option_string_actions for flag in flags):
                parser.add_argument(*flags)
    return parser


def check_script(script: str, words: list[str]) -> list[str]:
    """Problems of ``python <script> words``: a missing file, or flags its parser lacks."""
    if not (REPO / script).is_file():
        return [f"{script} does not exist"]
    if not script.startswith(SCRIPT_DIRS):
        return []
    parser = script_help(script).parser
    if parser is None:
        logger.warning("%s --help failed; its flags are read from its source", script)
        parser = static_parser(script)
    return check_arguments(f"python {script}", parser, words)


def problems_of(path: Path) -> list[str]:
    """Every broken command and file mention in *path*, as ``file:line: `command`: what``."""
    problems: list[str] = []
    for kind, mention, words in mentions(path):
        if kind == "ianvs":
            found = check_ianvs(words)
        else:
            found = check_script(kind, words)
        problems += [f"{mention.where()}: `{mention.text}`: {problem}" for problem in found]
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        for match in FILE_MENTION.finditer(line):
            if not (REPO / match.group(1)).exists():
                problems.append(f"{_shown(path)}:{number}: {match.group(1)} does not exist")
    return problems


def documented_scripts() -> list[str]:
    """Scripts under benchmarks/ and tests/suite/ that the docs show being run."""
    found = {kind for path in DOCS for kind, _, _ in mentions(path) if kind != "ianvs"}
    return sorted(s for s in found if s.startswith(SCRIPT_DIRS) and (REPO / s).is_file())


# --- tests -----------------------------------------------------------------------------------


@pytest.mark.parametrize("doc", DOCS, ids=[str(p.relative_to(REPO)) for p in DOCS])
def test_documented_commands_exist(doc: Path) -> None:
    """Each doc file: its commands, subcommands, flags and files exist as written."""
    problems = problems_of(doc)
    assert not problems, "documented commands that do not exist:\n" + "\n".join(problems)


@pytest.mark.parametrize("script", [
    pytest.param(s, marks=pytest.mark.xfail(reason=KNOWN_BROKEN_SCRIPTS[s], strict=True))
    if s in KNOWN_BROKEN_SCRIPTS else s for s in documented_scripts()])
def test_documented_script_help(script: str) -> None:
    """A script the docs show being run answers ``--help`` quickly (its parser comes first)."""
    result = script_help(script)
    assert result.returncode == 0, f"python {script} --help failed:\n{result.output[-2000:]}"


def test_the_checker_finds_what_is_wrong(tmp_path: Path) -> None:
    """The checker is not vacuous: broken subcommands, flags, choices and files are reported
    with their line; placeholders, optional brackets and alternatives are not."""
    doc = tmp_path / "probe.md"
    text = "\n".join([
        "`ianvs sandbox doctr` and `ianvs edge certs --outdir x`",           # 1
        "```",                                                              # 2
        "ianvs leaderboard <workspaces>... -o board.md [--html | --metric M]",  # 3
        "ianvs -f job.yaml --log-level LOUD \\",                            # 4
        "   --fresh",                                                       # 5
        "```",                                                              # 6
        "run `ianvs dataset comments|issues --from <dir|sdist> -o out.jsonl [--limit N]`",  # 7
        "`python benchmarks/scale.py --nope` and `.ci/no-such-script.sh`",  # 8
        "`ianvs sandbox\nclean --dry-run --wet`",                           # 9-10
        "`ianvs frobnicate`",                                               # 11
        "`ianvs dataset <kind> --from x -o y` `ianvs dataset <kind> --bogus`",  # 12
        "```",                                                              # 13
        "ianvs -f job.yaml ──TLS──▶ scheduler (cloud)   # a diagram: no subcommand",  # 14
        # 15: a prompt, an assignment, alternatives of a value and of a subcommand
        "$ FOO=1 ianvs -f job.yaml --log-level DEBUG|LOUD|... && ianvs edge certs|demo --out",
        "```",                                                              # 16
        "`python benchmarks/bare_fork_floor.py --n 3` and `ianvs-postgres` and `ianvs`",  # 17
    ])
    doc.write_text(text, encoding="utf-8")
    found = problems_of(doc)
    where = str(doc)
    expected = [
        f"{where}:1: `ianvs sandbox doctr`: 'doctr' is not a subcommand of 'ianvs sandbox'",
        f"{where}:1: `ianvs edge certs --outdir x`: --outdir is not an option of "
        "'ianvs edge certs'",
        f"{where}:4: `ianvs -f job.yaml --log-level LOUD --fresh`: --log-level LOUD: not one of",
        f"{where}:8: `python benchmarks/scale.py --nope`: --nope is not an option of "
        "'python benchmarks/scale.py'",
        f"{where}:8: .ci/no-such-script.sh does not exist",
        f"{where}:9: `ianvs sandbox clean --dry-run --wet`: --wet is not an option of "
        "'ianvs sandbox clean'",
        f"{where}:11: `ianvs frobnicate`: 'frobnicate' is not a subcommand of 'ianvs'",
        f"{where}:12: `ianvs dataset <kind> --bogus`: no subcommand of 'ianvs dataset' takes "
        "what follows <kind> (e.g. --bogus is not an option of 'ianvs dataset ",
        f"{where}:15: `ianvs -f job.yaml --log-level DEBUG|LOUD|...`: --log-level LOUD: not one "
        "of",
        f"{where}:15: `ianvs edge certs|demo --out`: --out is not an option of 'ianvs edge demo'",
        f"{where}:17: `python benchmarks/bare_fork_floor.py --n 3`: --n is not an option of "
        "'python benchmarks/bare_fork_floor.py'",
    ]
    for start in expected:
        assert any(problem.startswith(start) for problem in found), (start, found)
    assert len(found) == len(expected), found
