"""Value types shared by every generator.

A :class:`GenerationRequest` asks for ``decoding.n`` samples of one task; a generator
answers with one :class:`Generation` per sample. Both are frozen dataclasses that
round-trip through plain JSON dicts (:meth:`Generation.to_dict` / ``from_dict``),
which is what prediction files store.
"""
from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from core.common.errors import ConfigError

Mode = Literal["complete", "chat"]
MODES: tuple[str, ...] = ("complete", "chat")

DEFAULT_COMPLETION_STOPS: tuple[str, ...] = (
    "\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#", "\nassert ", '\n"""', "\n```", "\n@",
)
"""Stops for raw completion of a function body: anything that starts a new top-level
statement after the body (``\n@``: the next definition's decorator, which left dangling at the
end of a module is a syntax error). Column-0 only, so nested code and indented comments pass."""

DEFAULT_CHAT_INSTRUCTION = (
    "Complete the following Python function. Reply with the complete function "
    "(signature included) in one ```python code block."
)


class DecodingError(ConfigError, ValueError):
    """A decoding setting with a wrong type or value; :attr:`key` names it. A
    :class:`~core.common.errors.ConfigError` (one line, no traceback) and a ``ValueError``."""


def _bad(key: str, problem: str) -> DecodingError:
    """The error for setting ``key``: ``<key> <problem>``, with a valid example as the fix."""
    example = _EXAMPLES.get(key)
    return DecodingError(f"{key} {problem}", key=key,
                         hint=f"write e.g. '{key}: {example}'" if example else
                         f"the decoding settings are {', '.join(_EXAMPLES)}")


#: a valid value of each decoding setting, for messages
_EXAMPLES = {"temperature": "0.0", "top_p": "1.0", "max_tokens": "512", "stop": '["\\n\\n"]',
             "seed": "1234", "n": "1"}


def _number(value: Any, whole: bool) -> bool:
    kind = numbers.Integral if whole else numbers.Real
    return isinstance(value, kind) and not isinstance(value, bool)


@dataclass(frozen=True)
class DecodingSettings:
    """How to sample.

    Attributes:
        temperature: 0.0 means greedy (deterministic; the default).
        top_p: nucleus sampling mass, in (0, 1].
        max_tokens: upper bound of generated tokens per sample (>= 1).
        stop: stop strings; ``None`` means the mode's default
            (:data:`DEFAULT_COMPLETION_STOPS` for ``complete``, none for ``chat``).
        seed: base seed; sample ``i`` uses ``seed + i`` (``None``: backend default).
        n: samples per task (>= 1).
    """

    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    n: int = 1

    def __post_init__(self) -> None:
        """Raises :class:`DecodingError` (a ``ValueError``) naming the setting: a wrong type
        (``max_tokens: "many"``) or value."""
        for key, whole in (("temperature", False), ("top_p", False), ("max_tokens", True),
                           ("n", True)):
            value = getattr(self, key)
            if not _number(value, whole):
                raise _bad(key, f"must be a {'whole ' if whole else ''}number, got "
                                f"{type(value).__name__} {value!r}")
        if self.seed is not None and not _number(self.seed, True):
            raise _bad("seed", f"must be a whole number or null, got "
                               f"{type(self.seed).__name__} {self.seed!r}")
        if self.temperature < 0:
            raise _bad("temperature", f"must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise _bad("top_p", f"must be in (0, 1], got {self.top_p}")
        if self.max_tokens < 1:
            raise _bad("max_tokens", f"must be >= 1, got {self.max_tokens}")
        if self.n < 1:
            raise _bad("n", f"must be >= 1, got {self.n}")
        if self.stop is not None:
            stop = (self.stop,) if isinstance(self.stop, str) else self.stop
            if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) for s in stop):
                raise _bad("stop", f"must be a string or a list of strings, got {self.stop!r}")
            if not isinstance(self.stop, tuple):
                object.__setattr__(self, "stop", tuple(stop))

    def resolved_stop(self, mode: str) -> tuple[str, ...]:
        """The stop strings actually sent for ``mode``."""
        if self.stop is not None:
            return self.stop
        return DEFAULT_COMPLETION_STOPS if mode == "complete" else ()

    def sample_seed(self, sample_index: int) -> int | None:
        """Seed of one sample: ``seed + sample_index``, or None."""
        return None if self.seed is None else self.seed + sample_index

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | None) -> "DecodingSettings":
        """Build from hyperparameters; unknown keys raise ValueError (no silent typos)."""
        values = dict(values or {})
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(values) - known)
        if unknown:
            raise _bad(unknown[0], f"is not a decoding setting (unknown decoding settings "
                                   f"{unknown}; known: {sorted(known)})")
        return cls(**values)


@dataclass(frozen=True)
class GenerationRequest:
    """One task to generate code for.

    Attributes:
        task_id: dataset task id (e.g. ``HumanEval/0``).
        prompt: the task prompt; in ``complete`` mode the text the model continues.
        entry_point: name of the function under test (helps code extraction), optional.
        mode: ``complete`` (raw continuation) or ``chat`` (instruction + reply).
        decoding: sampling settings.
        messages: chat messages to send in ``chat`` mode; ``None`` means the default
            rendering of :func:`default_chat_messages`.
        samples: which sample indices to produce; ``None`` means ``range(decoding.n)``.
            Resume uses it to skip finished samples; it is not part of the cache key.
        response_format: chat mode only: an OpenAI-style ``response_format`` object sent as
            is (e.g. ``{"type": "json_schema", "json_schema": {"name": ..., "schema": ...}}``),
            which llama.cpp turns into a grammar that constrains the reply; ``None`` (default)
            sends none. Part of the cache key when set.
    """

    task_id: str
    prompt: str
    entry_point: str | None = None
    mode: str = "complete"
    decoding: DecodingSettings = field(default_factory=DecodingSettings)
    messages: tuple[Mapping[str, str], ...] | None = None
    samples: tuple[int, ...] | None = None
    response_format: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.messages is not None and not isinstance(self.messages, tuple):
            object.__setattr__(self, "messages", tuple(self.messages))
        if self.samples is not None:
            object.__setattr__(self, "samples", tuple(self.samples))
            bad = [i for i in self.samples if not 0 <= i < self.decoding.n]
            if bad:
                raise ValueError(f"sample indices {bad} outside range(n={self.decoding.n})")
        if self.response_format is not None and self.mode != "chat":
            raise ValueError("response_format needs mode 'chat'")

    @property
    def sample_indices(self) -> tuple[int, ...]:
        """Indices to produce, in order."""
        return self.samples if self.samples is not None else tuple(range(self.decoding.n))

    def chat_messages(self) -> list[dict[str, str]]:
        """Messages sent in chat mode (explicit ones, or the default rendering)."""
        if self.messages is not None:
            return [dict(m) for m in self.messages]
        return default_chat_messages(self.prompt)

    def with_samples(self, samples: Sequence[int]) -> "GenerationRequest":
        """Copy restricted to ``samples``."""
        return replace(self, samples=tuple(samples))


def default_chat_messages(prompt: str, instruction: str = DEFAULT_CHAT_INSTRUCTION) -> list[dict[str, str]]:
    """The user message used in chat mode: the instruction, then the prompt fenced."""
    return [{"role": "user", "content": f"{instruction}\n\n```python\n{prompt.rstrip()}\n```\n"}]


@dataclass(frozen=True)
class Generation:
    """One sample's result.

    Attributes:
        task_id, sample_index: identify the sample (``sample_index`` in ``range(n)``).
        raw_output: exactly what the model (or the recording) returned; ``""`` on error.
        code: a complete Python module meant to define the entry point: for raw
            completions ``prompt + completion``; for chat replies the extracted code
            (see :mod:`core.generation.extract`). ``""`` on error.
        prompt_tokens, completion_tokens: usage as reported by the backend, or None.
        latency_s: wall time of the call that produced this sample (0 for replay).
        error: ``None`` on success, else a one-line reason (infrastructure, not model
            failure: the request could not be served).
        key: stable cache key (see :mod:`core.generation.cache_key`).
        finish_reason: backend's reason (``stop``, ``length``...), if known.
        mean_logprob, min_logprob: mean and minimum log-probability of the generated tokens,
            when the backend returned them (the embedded generator with ``logprobs: true``; an
            OpenAI-compatible server asked for them in ``extra_body``), else None.
        finished_at: UNIX time at which the call that produced this sample returned (None
            for recorded or gold answers): with ``latency_s`` it places the call in time, so
            generation wall time counts concurrent calls once (``edge_cost``).
        transport: for a sample made on another machine (the ``edge_node`` generator), how it
            crossed the link: ``{"node", "link_s", "bytes_up", "bytes_down"}`` and ``"lost":
            true`` when the node was lost before it answered (then ``error`` says so); None
            for a sample made in this process. ``latency_s`` is then the node's own time.
        route: how a backend served a request when not the obvious way, else None: the
            embedded generator's ``completion`` for a constrained chat reply its chat endpoint
            refused, made again as its chat template's prompt completed under the schema (see
            :mod:`core.generation.embedded`).
    """

    task_id: str
    sample_index: int
    raw_output: str
    code: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    error: str | None = None
    key: str = ""
    finish_reason: str | None = None
    mean_logprob: float | None = None
    min_logprob: float | None = None
    finished_at: float | None = None
    transport: Mapping[str, Any] | None = None
    route: str | None = None

    @property
    def ok(self) -> bool:
        """True when the backend produced output (the code may still be wrong)."""
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-serialisable dict (every field is a plain value: no deep copy needed,
        which ``dataclasses.asdict`` would make)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Generation":
        """Inverse of :meth:`to_dict`; ignores unknown keys."""
        fields = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in fields})
