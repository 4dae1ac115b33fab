"""The self-align loop of one task: generate code and tests, run the tests, retry.

Try 1 asks for both the code and ``tests_per_task`` tests. Every valid test unit runs against
the code in the sandbox (:mod:`.sandbox`); when every unit passes (at least one, none invalid)
the task is *aligned* and the loop stops. Otherwise the next try regenerates what
``generate`` says (``code``, ``tests`` or ``both``) and keeps the rest, telling the model
what failed when ``feedback`` is ``failures``; at most ``max_tries`` tries.

The model side is a :class:`Responder`: :class:`GeneratorResponder` wraps any registered
generator (``embedded``, ``openai``, ...) and sends the reply's JSON schema as
``response_format`` (the server compiles it into a grammar); :class:`ControlResponder` is a
gold control answering from the record itself: ``reference`` (the reference solution, with the
dataset's hidden tests as its own tests: aligns at try 1 and scores 1.0) and ``broken`` (a body
that raises, with the same tests: never aligns).

With greedy decoding (and for the controls) a try whose messages equal the previous try's
would get the same reply: it is not sent again; the record says ``extra.repeat_of`` and keeps
the tokens and latency of the call it repeats (what a loop sending it would pay).

Every finished try is stored (:mod:`.store`) before the next starts; a resumed run replays the
stored tries whose key matches and continues after them, so no finished try is repeated.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from core.common.errors import IanvsError
from core.generation.base import Generator
from core.generation.cache_key import canonical_json
from core.generation.embedded import refused_own_reply
from core.generation.extract import extract_code
from core.generation.reference import BROKEN_BODIES
from core.generation.types import DecodingSettings, GenerationRequest
from core.scenarios.selfalign.reply import (FEEDBACK_CHARS, Feedback, ParsedReply,
                                            invalid_text, messages, parse_reply, reply_schema,
                                            response_format, wanted)
from core.scenarios.selfalign import repo
from core.scenarios.selfalign.sandbox import INVALID, UnitOutcome, UnitRunner
from core.scenarios.selfalign.store import TryRecord, TryStore
from core.scenarios.selfalign.units import check_unit

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoopSettings:
    """The loop's hyperparameters (see the module docstring)."""

    max_tries: int = 5
    generate: str = "both"
    feedback: str = "failures"
    tests_per_task: int = 3
    test_style: str = "assert"

    def describe(self) -> dict[str, Any]:
        return {"max_tries": self.max_tries, "generate": self.generate,
                "feedback": self.feedback, "tests_per_task": self.tests_per_task,
                "test_style": self.test_style}


@dataclass(frozen=True)
class Reply:
    """One model call: its raw text and cost; ``error`` set when the backend failed (an
    infrastructure problem: the try is not recorded and is redone by the next run)."""

    raw_output: str
    structured: bool
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    finish_reason: str | None = None
    error: str | None = None
    format_error: str | None = None
    control: str | None = None
    route: str | None = None  # how the backend served it when not the obvious way (Generation)


class GenerationFailed(IanvsError):
    """The backend produced no reply for a try (server down, ...): retried by the next run."""


class Responder(Protocol):
    """Answers one try's messages for a record."""

    #: True when the same messages always get the same reply (greedy decoding, controls)
    deterministic: bool

    def describe(self) -> dict[str, Any]:
        """Identity for try keys (no secrets)."""

    def reply(self, record: Mapping[str, Any], try_index: int, msgs: list[dict[str, str]],
              schema: Mapping[str, Any], sample: int | None = None) -> Reply:
        """The reply to ``msgs`` constrained (when the backend can) by ``schema``;
        ``sample``: the index of one of several independent samples of the same messages
        (the selection baselines, :mod:`.selection`), seeded apart."""

    def sample_replies(self, record: Mapping[str, Any], msgs: list[dict[str, str]],
                       schema: Mapping[str, Any],
                       samples: Sequence[int]) -> Iterator[tuple[int, Reply]]:
        """``(sample, reply)`` for each of ``samples`` (as ``reply(..., sample=k)``), in the
        order they finish: a backend that answers several requests at once may."""


class GeneratorResponder:
    """A registered generator in chat mode with structured output.

    ``structured``: ``auto`` sends the schema as ``response_format`` and, when the server
    refuses the request (HTTP 400 or 422: a server without structured output), sends it again
    without one and from then on parses plain replies; ``none`` never sends it. Each try
    records which it was (``structured``).
    """

    def __init__(self, generator: Generator, decoding: DecodingSettings,
                 structured: str = "auto") -> None:
        self.generator = generator
        self.decoding = decoding
        self.structured = structured != "none"
        self.deterministic = decoding.temperature == 0.0

    def describe(self) -> dict[str, Any]:
        d = self.decoding
        return {"generator": self.generator.describe(),
                "decoding": {"temperature": d.temperature, "top_p": d.top_p,
                             "max_tokens": d.max_tokens, "seed": d.seed}}

    def _request(self, record: Mapping[str, Any], try_index: int, msgs: list[dict[str, str]],
                 schema: Mapping[str, Any] | None, sample: int | None = None
                 ) -> GenerationRequest:
        prompt, entry_point = shown(record)
        # a try is asked as <task>#try<n>; sample k of several as <task>#sample<k>, with the
        # seed seed + k, so that each sample is reproducible and differs from the others
        label, decoding = f"#try{try_index}", self.decoding
        if sample is not None:
            label = f"#sample{sample}"
            decoding = dataclasses.replace(decoding, seed=decoding.sample_seed(sample))
        return GenerationRequest(
            task_id=f"{record['task_id']}{label}", prompt=prompt,
            entry_point=entry_point, mode="chat", decoding=decoding,
            messages=tuple(msgs),
            response_format=response_format(schema) if schema is not None else None)

    def _ask(self, record: Mapping[str, Any], try_index: int, msgs: list[dict[str, str]],
             schema: Mapping[str, Any] | None, sample: int | None = None) -> Any:
        request = self._request(record, try_index, msgs, schema, sample)
        return next(iter(self.generator.generate([request])))

    @staticmethod
    def _refused(gen: Any, structured: bool) -> bool:
        """The server refused ``response_format`` (HTTP 400 or 422)."""
        return bool(gen.error) and structured and gen.error.startswith(("HTTP 400", "HTTP 422"))

    def _stop_structured(self, gen: Any) -> None:
        logger.warning("the server refused response_format (%s); replies are parsed "
                       "without a schema from now on", gen.error[:120])
        self.structured = False

    @staticmethod
    def _reply(gen: Any, structured: bool) -> Reply:
        # llama.cpp's chat endpoint refusing a constrained reply it made (valid ones included):
        # a parse failure of the try (``server_format``). The embedded generator reads such a
        # reply through its completion endpoint instead; an ``openai`` llama.cpp server cannot
        if gen.error and refused_own_reply(gen.error):
            return Reply(gen.raw_output, structured, gen.prompt_tokens, gen.completion_tokens,
                         gen.latency_s, gen.finish_reason, format_error=gen.error[:300])
        return Reply(gen.raw_output, structured, gen.prompt_tokens, gen.completion_tokens,
                     gen.latency_s, gen.finish_reason, gen.error,
                     route=getattr(gen, "route", None))

    def reply(self, record: Mapping[str, Any], try_index: int, msgs: list[dict[str, str]],
              schema: Mapping[str, Any], sample: int | None = None) -> Reply:
        structured = self.structured
        gen = self._ask(record, try_index, msgs, schema if structured else None, sample)
        if self._refused(gen, structured):
            self._stop_structured(gen)
            structured = False
            gen = self._ask(record, try_index, msgs, None, sample)
        return self._reply(gen, structured)

    def sample_replies(self, record: Mapping[str, Any], msgs: list[dict[str, str]],
                       schema: Mapping[str, Any],
                       samples: Sequence[int]) -> Iterator[tuple[int, Reply]]:
        """The samples' requests in one call of the generator, which answers several at
        once when it can (the embedded model: one per instance); a refused schema is asked
        again without it, one sample at a time."""
        structured = self.structured
        requests = [self._request(record, 1, msgs, schema if structured else None, k)
                    for k in samples]
        sample_of = {r.task_id: k for r, k in zip(requests, samples)}
        for gen in self.generator.generate(requests):
            k = sample_of[gen.task_id]
            if self._refused(gen, structured):
                if self.structured:
                    self._stop_structured(gen)
                yield k, self.reply(record, 1, msgs, schema, sample=k)
            else:
                yield k, self._reply(gen, structured)


class ControlResponder:
    """Gold control (module docstring): ``reference`` or ``broken``, answering from the record
    without a model; every try gets the same reply."""

    def __init__(self, variant: str) -> None:
        if variant not in ("reference", "broken"):
            raise ValueError(f"unknown control {variant!r}")
        self.variant = variant
        self.deterministic = True

    def describe(self) -> dict[str, Any]:
        return {"generator": self.variant}

    def sample_replies(self, record: Mapping[str, Any], msgs: list[dict[str, str]],
                       schema: Mapping[str, Any],
                       samples: Sequence[int]) -> Iterator[tuple[int, Reply]]:
        for k in samples:
            yield k, self.reply(record, 1, msgs, schema, sample=k)

    def reply(self, record: Mapping[str, Any], try_index: int, msgs: list[dict[str, str]],
              schema: Mapping[str, Any], sample: int | None = None) -> Reply:
        if repo.is_repo_record(record):  # the repository's own tests by node id
            fields = repo.control_fields(record, self.variant)
        else:
            body = (str(record.get("canonical_solution", "")) if self.variant == "reference"
                    else BROKEN_BODIES["raise"])
            hidden = f"{record['test']}\n\ncheck({record['entry_point']})\n"
            fields = {"code": str(record["prompt"]) + body, "tests": [hidden]}
        props = schema.get("properties", {})
        return Reply(json.dumps({k: v for k, v in fields.items() if k in props}), True,
                     control=self.variant)


@dataclass(frozen=True)
class TaskOutcome:
    """What the loop ended with for one task (the tries themselves are in the store)."""

    task_id: str
    tries: list[TryRecord]

    @property
    def aligned_at(self) -> int | None:
        return next((t.try_ for t in self.tries if t.aligned), None)

    @property
    def final(self) -> TryRecord:
        return self.tries[-1]


def try_key(model: Mapping[str, Any], task_id: str, try_index: int,
            msgs: Sequence[Mapping[str, str]], schema: Mapping[str, Any],
            settings: LoopSettings) -> str:
    doc = {"v": 1, "model": dict(model), "task_id": task_id, "try": try_index,
           "messages": list(msgs), "schema": dict(schema), "loop": settings.describe()}
    return hashlib.sha256(canonical_json(doc).encode("utf-8")).hexdigest()


def _feedback(tries: TryRecord, entry_point: str) -> list[Feedback]:
    out = []
    for unit in tries.units:
        if unit["outcome"] == "passed":
            continue
        status = invalid_text(unit["reason"], entry_point) if unit["outcome"] == INVALID \
            else unit["outcome"]
        detail = unit.get("detail") or ""
        if unit.get("output"):
            detail = f"{detail} output: {unit['output']}" if detail else f"output: {unit['output']}"
        test = tries.tests[unit["index"]] if unit["index"] < len(tries.tests) else ""
        out.append(Feedback(unit["index"], test, status, detail[:FEEDBACK_CHARS]))
    if tries.parse_error:
        out.append(Feedback(0, "", f"your reply could not be read ({tries.parse_error})"))
    return out


#: what runs a try's units: the HumanEval-style runner, or the repository one for repo records
Runner = UnitRunner | repo.RepoUnitRunner


def shown(record: Mapping[str, Any]) -> tuple[str, str]:
    """``(prompt the model sees, entry point)`` of a record: a codegen record's ``prompt`` and
    ``entry_point``; a repo record's prompt (:func:`.repo.loop_prompt`) and function name
    (``Class.name`` for a method: :func:`.repo.entry_label`)."""
    if repo.is_repo_record(record):
        return repo.loop_prompt(record), repo.entry_label(record)
    return str(record["prompt"]), str(record["entry_point"])


def unit_checks(record: Mapping[str, Any], tests: Sequence[str],
                control: bool = False) -> list[Any]:
    """The static verdict on each of a try's tests (:mod:`.units`; for a repo record
    :func:`.repo.check_units`, where a gold control may name the repository's tests)."""
    if repo.is_repo_record(record):
        return repo.check_units(tests, record, control)
    prompt, entry_point = shown(record)
    return [check_unit(u, entry_point, prompt) for u in tests]


def run_units(runner: Runner, record: Mapping[str, Any], code: str,
              checks: Sequence[Any]) -> list[UnitOutcome]:
    """Every unit's outcome against ``code``, in the sandbox the record's kind needs."""
    if repo.is_repo_record(record):
        if not isinstance(runner, repo.RepoUnitRunner):
            raise IanvsError(f"{record['task_id']}: a repository task needs the repository "
                             "unit runner")
        return runner.run(code, checks, record)
    if not isinstance(runner, UnitRunner):
        raise IanvsError(f"{record['task_id']}: a function task needs the unit runner")
    prompt, entry_point = shown(record)
    return runner.run(code, checks, entry_point, helpers=prompt)


def run_task(record: Mapping[str, Any], responder: Responder, runner: Runner,
             store: TryStore, settings: LoopSettings) -> TaskOutcome:
    """Run (or resume) the loop of one task; see the module docstring.

    Raises:
        GenerationFailed: the backend gave no reply. SandboxInfraError: the sandbox failed.
            Either way the tries finished so far are stored and the next run continues.
    """
    task_id = str(record["task_id"])
    prompt, entry_point = shown(record)
    model = responder.describe()
    stored = store.tries(task_id)
    done: list[TryRecord] = []
    for t in range(1, settings.max_tries + 1):
        want_code, want_tests = wanted(settings.generate, t)
        prev = done[-1] if done else None
        msgs = messages(prompt, entry_point, t, settings.generate, settings.feedback,
                        settings.tests_per_task, settings.test_style, prev.code if prev else None,
                        prev.tests if prev else None,
                        _feedback(prev, entry_point) if prev else ())
        schema = reply_schema(want_code, want_tests, settings.tests_per_task, settings.test_style)
        key = try_key(model, task_id, t, msgs, schema, settings)
        old = stored[t - 1] if len(stored) >= t else None
        if old is not None and old.key == key:
            rec = old
        else:
            if old is not None:
                logger.warning("%s: stored try %d was made with other settings; redone",
                               task_id, t)
                stored = []
            rec = _one_try(record, responder, runner, t, msgs, schema, key, prev,
                           want_code, want_tests)
            store.add(rec)
        done.append(rec)
        if rec.aligned:
            break
    return TaskOutcome(task_id, done)


def _one_try(record: Mapping[str, Any], responder: Responder, runner: Runner, t: int,
             msgs: list[dict[str, str]], schema: Mapping[str, Any], key: str,
             prev: TryRecord | None, want_code: bool, want_tests: bool,
             sample: int | None = None, given: Reply | None = None) -> TryRecord:
    """Make try ``t`` (or, with ``sample``, sample k of several: ``given`` its reply when it
    was asked for already) and run its tests."""
    prompt, entry_point = shown(record)
    extra: dict[str, Any] = {}
    if prev is not None and prev.messages == msgs and responder.deterministic:
        # greedy decoding of the same messages: the reply is the previous one; not sent again,
        # but its tokens and latency are what a loop sending it would pay, so they are kept
        reply = Reply(prev.raw_output, prev.structured, prev.prompt_tokens,
                      prev.completion_tokens, prev.latency_s, prev.finish_reason,
                      control=prev.extra.get("control"), route=prev.extra.get("route"))
        extra["repeat_of"] = prev.extra.get("repeat_of", prev.try_)
    elif sample is not None:  # one of several independent samples (:mod:`.selection`)
        reply = given if given is not None else \
            responder.reply(record, t, msgs, schema, sample=sample)
        extra["sample"] = sample
    else:
        reply = responder.reply(record, t, msgs, schema)
    if reply.error is not None:
        which = f"sample {sample}" if sample is not None else f"try {t}"
        raise GenerationFailed(f"{record['task_id']} {which}: {reply.error}")
    if reply.format_error is not None:  # the server refused the reply it made: a parse failure
        parsed = ParsedReply(None, None, "server_format")
        extra["server_error"] = reply.format_error
    else:
        parsed = parse_reply(reply.raw_output, want_code, want_tests)
    if reply.control is not None:
        extra["control"] = reply.control  # a gold control's try: may name hidden tests
    if reply.route is not None:
        extra["route"] = reply.route
    if want_code and parsed.code is not None:
        code = repo.final_code(parsed.code, record) if repo.is_repo_record(record) \
            else extract_code(parsed.code, prompt, entry_point)
    elif want_code:
        code = ""
    else:
        code = prev.code if prev else ""
    if want_tests:
        tests = list(parsed.tests) if parsed.tests is not None else []
    else:
        tests = list(prev.tests) if prev else []
    checks = unit_checks(record, tests, reply.control is not None)
    runs_before = runner.runs
    started = time.perf_counter()
    outcomes = run_units(runner, record, code, checks)
    sandbox_s = time.perf_counter() - started
    aligned = bool(outcomes) and all(o.passed for o in outcomes)
    return TryRecord(
        task_id=str(record["task_id"]), try_=t, key=key, messages=msgs,
        structured=reply.structured, raw_output=reply.raw_output, parse_error=parsed.error,
        asked={"code": want_code, "tests": want_tests}, code=code, tests=tests,
        units=[o.to_dict() for o in outcomes], aligned=aligned,
        prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
        latency_s=round(reply.latency_s, 4), finish_reason=reply.finish_reason,
        sandbox_runs=runner.runs - runs_before, sandbox_s=round(sandbox_s, 4), extra=extra)
