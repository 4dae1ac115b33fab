"""Whether a test case's token budget can hold the answers its prompts ask for.

A kind whose prompt asks for a whole answer of a size the task fixes (``implement_change`` and
``revise`` ask for every changed file whole) says how long that answer is
(:meth:`~core.scenarios.base.TaskKind.answer_chars`: the reference answer's characters). A reply
cut at ``max_tokens`` is graded as cut -- a truncated file fails its tests or scores low on
similarity -- so a budget below the answer's size scores the budget, not the model. The runner
warns at a test case's start (:func:`budget_warning`) and ``ianvs validate`` at the
hyperparameter's line; the ``truncated`` column of ``edge_cost`` counts the replies that were
cut. The prompt and the answer must also fit the model's context: ``n_ctx``, when given, is
checked against both together.

Tokens are estimated from characters at :data:`CHARS_PER_TOKEN` = 3, below what BPE tokenizers
give for code and English (Qwen2.5-Coder's replies on networkx files ran at 3.5-4.8 characters
a token), so a budget that passes holds the answer with room to spare; one that fails may still
hold it for a tokenizer that packs more. Edge cases: a kind that fixes no answer size
(``answer_chars`` ``None``) is never checked; nor is a gold control's test case (its answer
is a fixed text), nor a limit not given as an integer hyperparameter (a generator's own
default, such as the embedded model's ``n_ctx`` of 4096, is not seen here).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.generation.codegen_model import CONTROL_GENERATORS
from core.scenarios.base import TaskKind

#: generators that answer with a fixed text, not a model, so no budget cuts them (the
#: trajectory kinds' ``reference`` is :mod:`core.scenarios.model`'s alias of ``canonical``)
GOLD_CONTROLS = frozenset((*CONTROL_GENERATORS, "reference"))

#: characters per token assumed when estimating an answer's tokens (a low estimate: see above)
CHARS_PER_TOKEN = 3.0


def answer_tokens(chars: int) -> int:
    """Tokens an answer of ``chars`` characters may need, at :data:`CHARS_PER_TOKEN`."""
    return math.ceil(chars / CHARS_PER_TOKEN)


@dataclass(frozen=True)
class AnswerSize:
    """One task's whole answer and its prompt, in characters."""

    task_id: str
    answer_chars: int
    prompt_chars: int


def fixes_answer_size(kind: TaskKind) -> bool:
    """Whether ``kind`` says how long its answers are (overrides ``answer_chars``)."""
    return type(kind).answer_chars is not TaskKind.answer_chars


def answer_sizes(kind: TaskKind, records: Iterable[Mapping[str, Any]]) -> list[AnswerSize]:
    """The sizes of every record for which ``kind`` fixes the answer's size (validated
    records: ``id`` set); empty for a kind that fixes none (then nothing is read)."""
    if not fixes_answer_size(kind):
        return []
    sizes: list[AnswerSize] = []
    for record in records:
        chars = kind.answer_chars(record)
        if chars is not None:
            prompt = sum(len(m["content"]) for m in kind.messages(record))
            sizes.append(AnswerSize(str(record.get("id")), chars, prompt))
    return sizes


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class BudgetProblem:
    """One limit that falls short: its hyperparameter (``max_tokens`` or ``n_ctx``) and what
    it cannot hold (the count and the largest task)."""

    limit: str
    text: str


def consequence(kind_name: str) -> str:
    """What a shortfall does, said the same way by a run and by ``ianvs validate``."""
    return (f"the {kind_name} prompt asks for whole files, so those replies can be cut and are "
            f"then graded cut; the truncated column counts them")


def budget_problems(sizes: Sequence[AnswerSize],
                    hyperparameters: Mapping[str, Any]) -> list[BudgetProblem]:
    """What a test case's budget cannot hold: tasks whose whole answer may need more than its
    ``max_tokens``, and tasks whose prompt and answer together may need more than its
    ``n_ctx`` (each checked only when given as an integer), one problem per limit that falls
    short. A gold control (:data:`GOLD_CONTROLS`) has none."""
    if str(hyperparameters.get("generator")) in GOLD_CONTROLS:
        return []
    found: list[BudgetProblem] = []
    max_tokens, n_ctx = _int(hyperparameters.get("max_tokens")), _int(hyperparameters.get("n_ctx"))
    checks = (("max_tokens", max_tokens, lambda x: answer_tokens(x.answer_chars), "answer"),
              ("n_ctx", n_ctx, lambda x: answer_tokens(x.answer_chars + x.prompt_chars),
               "prompt and answer"))
    for name, limit, need, what in checks:
        if limit is None:
            continue
        short = sorted(((need(x), x.task_id) for x in sizes if need(x) > limit), reverse=True)
        if short:
            found.append(BudgetProblem(name, (
                f"{name}={limit} may not hold the whole {what} on {len(short)} of "
                f"{len(sizes)} task(s) (the largest, {short[0][1]}, may need "
                f"{short[0][0]} tokens at {CHARS_PER_TOKEN:g} characters a token)")))
    return found


def budget_warning(kind_name: str, sizes: Sequence[AnswerSize],
                   hyperparameters: Mapping[str, Any]) -> str | None:
    """The warning for a test case whose budget cannot hold the whole answers the
    ``kind_name`` prompts ask for (:func:`budget_problems`), or ``None``."""
    problems = budget_problems(sizes, hyperparameters)
    if not problems:
        return None
    return f"{'; '.join(p.text for p in problems)}: {consequence(kind_name)}; raise the budget"
