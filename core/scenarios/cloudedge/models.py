"""The code models of the cloud-edge scenario: any generator as an ``edgemodel`` or ``cloudmodel``.

:class:`CodeModel` (registered as ``CodeModel``, ``CodeEdgeModel`` and ``CodeCloudModel``) takes
the codegen basemodel's hyperparameters (``generator``, ``mode``, decoding settings and the
generator's own, e.g. ``model: qwen2.5-coder-1.5b`` or ``logprobs: true`` for ``embedded``) and
answers one task per call with upstream's response shape plus what grading needs::

    {"completion": <raw model text>, "task_id": ..., "role": "edge" | "cloud",
     "usage": {"prompt_tokens", "completion_tokens", "total_tokens"},
     "perf": {"latency_s": <generation wall time>, "cached": <reused from the cache>,
              # a model on an edge node (the edge_node generator) adds how its answer
              # crossed the link: "node", "link_s", "bytes_up", "bytes_down"},
     "mean_logprob": ..., "min_logprob": ...,
     "samples": [<Generation.to_dict()>]}        # graded like a codegen prediction

**Caching.** Answers are cached by content (model identity, prompt, decoding settings: the
project's sample key) in ``generations.jsonl`` of the job's shared folder (the paradigm's
``cache_dir``), so every router and threshold of a sweep reuses one edge pass and one cloud pass,
and a killed run repeats no finished answer. ``perf.latency_s`` of a reused answer is the wall
time measured when it was generated (the cost a deployment would pay), and ``perf.cached`` says
it was reused. Each answer is also noted in ``answers.jsonl`` there (model identity, task, role
and sample key), which lets the metrics find the other model's answer to a task (the oracle and
the regret need both), and ``models.json`` in the test case folder names this case's two models.
The model itself is loaded at the first call that is not in the cache (and, in the first case of
an ``ianvs`` process that uses it, once to learn its identity for the cache keys).
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError, IanvsError, ModelUnavailable
from core.common.jsonl import open_append
from core.common.progress import progress_bar
from core.generation import create_generator
from core.generation.base import Generator
from core.generation.cache_key import GenerationCache, canonical_json, sample_key
from core.generation.codegen_model import CodegenModel
from core.generation.types import Generation, GenerationRequest

logger = logging.getLogger(__name__)

CACHE_FILE = "generations.jsonl"
ANSWERS_FILE = "answers.jsonl"
MODELS_FILE = "models.json"

_lock = threading.Lock()
#: configured model id -> its generator's identity, for the cases of one process (see
#: :meth:`CodeModel._model_identity`)
_IDENTITIES: dict[str, dict[str, Any]] = {}


def model_id(generator: str, params: dict[str, Any], mode: str, decoding: Any) -> str:
    """Short stable id of a configured model (generator, its parameters, mode, decoding), known
    without loading it. Answers are found by it in ``answers.jsonl``; the answer itself is read
    by its sample key, which also covers the loaded model's identity (e.g. the GGUF's hash)."""
    doc = {"generator": generator, "params": params, "mode": mode, "decoding": repr(decoding)}
    return hashlib.sha256(canonical_json(doc).encode("utf-8")).hexdigest()[:16]


class CodeModel:
    """A generator behind upstream's ``edgemodel``/``cloudmodel`` interface (module docstring)."""

    def __init__(self, **hyperparameters: Any) -> None:
        (self.generator_name, self.mode, self.decoding,
         self.generator_params) = CodegenModel._parse(hyperparameters,
                                                         who="the cloud-edge model")
        if self.decoding.n != 1:
            raise ConfigError("the cloud-edge models answer with one sample per task (n: 1)")
        self._generator: Generator | None = None
        self._identity: dict[str, Any] | None = None
        self._cache: GenerationCache | None = None
        self.ctx: Any = None

    # -- the paradigm's calls ------------------------------------------------------------
    def bind(self, ctx: Any) -> None:
        """Receive the run's :class:`JointContext` (records, the shared cache folder) and
        name this model under its role in the case's ``models.json``."""
        self.ctx = ctx
        ctx.cache_dir.mkdir(parents=True, exist_ok=True)
        self._cache = GenerationCache(ctx.cache_dir / CACHE_FILE)
        with _lock:
            models_path = Path(ctx.case_dir) / MODELS_FILE
            models = json.loads(models_path.read_text()) if models_path.exists() else {}
            models[self._role()] = {"id": self.id, "generator": self.generator_name}
            models_path.write_text(json.dumps(models, indent=2))

    @property
    def id(self) -> str:
        """See :func:`model_id`."""
        return model_id(self.generator_name, self.generator_params, self.mode, self.decoding)

    def load(self, **_kwargs: Any) -> None:
        """Nothing to do yet: the model loads at its first answer that is not cached."""

    def predict(self, data: Any, **_kwargs: Any) -> dict[str, Any]:
        """The answer to the task being routed (``ctx.current``); ``data`` is its prompt."""
        return self.answer(self._record(), self._role())

    def inference(self, data: Any, **kwargs: Any) -> dict[str, Any]:
        """The cloud side of upstream's interface: the same as :meth:`predict`."""
        return self.predict(data, **kwargs)

    def cleanup(self) -> None:
        if self._generator is not None:
            self._generator.close()
            self._generator = None

    # -- answering -------------------------------------------------------------------------
    def _record(self) -> dict[str, Any]:
        if self.ctx is None:
            raise IanvsError("CodeModel needs the jointinference paradigm's context",
                             hint="use it as an edgemodel or cloudmodel of a jointinference job")
        return self.ctx.records[self.ctx.current]

    def _role(self) -> str:
        return "cloud" if self.ctx is not None and self.ctx.cloudmodel is self else "edge"

    def _request(self, record: dict[str, Any]) -> GenerationRequest:
        return GenerationRequest(task_id=str(record["task_id"]), prompt=str(record["prompt"]),
                                 entry_point=record.get("entry_point"), mode=self.mode,
                                 decoding=self.decoding)

    def _ensure_generator(self, records: list[dict[str, Any]]) -> Generator:
        if self._generator is None:
            params = dict(self.generator_params)
            if self.generator_name == "canonical" and "dataset_path" not in params:
                params.setdefault("solutions", {r["task_id"]: r["canonical_solution"]
                                                for r in records if "canonical_solution" in r})
            self._generator = create_generator(self.generator_name, **params)
            self._identity = self._generator.describe()
            with _lock:
                _IDENTITIES[self.id] = self._identity
        return self._generator

    def _model_identity(self, records: list[dict[str, Any]]) -> dict[str, Any]:
        """The generator's identity (part of every cache key). Known without loading the model
        when another case of this ``ianvs`` process loaded the same configured model: the
        cases of a sweep after the first then load a model only to answer a task not cached.
        ``canonical`` is always rebuilt (its answers come from the records)."""
        if self._identity is None and self.generator_name != "canonical":
            with _lock:
                self._identity = _IDENTITIES.get(self.id)
        if self._identity is None:
            self._ensure_generator(records)
        assert self._identity is not None
        return self._identity

    def answer(self, record: dict[str, Any], role: str) -> dict[str, Any]:
        """This model's answer to ``record`` (from the cache when it was made before)."""
        request = self._request(record)
        gen, cached = self.generate_cached(request, [record])
        if gen.error is not None and role == "edge" and (gen.transport or {}).get("lost"):
            raise ModelUnavailable(f"the edge model could not answer {request.task_id}: "
                                   f"{gen.error}")
        if gen.error is not None:
            raise IanvsError(f"the {role} model could not answer {request.task_id}: {gen.error}",
                             hint="nothing was stored for this task; the next run asks again")
        self._note(role, request.task_id, gen)
        return response(gen, role, cached)

    def generate_cached(self, request: GenerationRequest,
                        fallback: list[dict[str, Any]] | None = None) -> tuple[Generation, bool]:
        """One sample of ``request`` from this model, through the job's cache (answers, and
        what routers ask the edge model besides, e.g. tests); ``(generation, was_cached)``.
        ``fallback``: the records to build a generator from when there is no context."""
        records = self.ctx.records if self.ctx else (fallback or [])
        identity = self._model_identity(records)
        assert self._cache is not None
        key = sample_key(identity, request, 0)
        gen = self._cache.get(key)
        if gen is not None:
            return gen, True
        generator = self._ensure_generator(records)
        return next(iter(self._cache.append(generator.generate([request])))), False

    def prefetch(self, records: list[dict[str, Any]]) -> int:
        """Answer every record not in the job's cache in one batch, so a generator with several
        model instances (``embedded`` by default: one per core) decodes them side by side
        instead of one at a time; returns how many were asked. Answers land in the cache (a
        failed one too, for the record, but it is asked again later) and are read from it as
        usual; each keeps the latency of its own call. Routers that need a model's answer to
        every task up front (the oracle, the fitted routers on the train split) call this."""
        if not records:
            return 0
        identity = self._model_identity(records)
        assert self._cache is not None
        todo = [r for r in (self._request(rec) for rec in records)
                if self._cache.get(sample_key(identity, r, 0)) is None]
        if todo:
            generator = self._ensure_generator(self.ctx.records if self.ctx else records)
            show = bool(getattr(self.ctx, "show_progress", True))
            with progress_bar(total=len(todo), desc=f"answers[{self._role()}]", unit="task",
                              enabled=show) as bar:
                for _gen in self._cache.append(generator.generate(todo)):
                    bar.update(1)
        return len(todo)

    def _note(self, role: str, task_id: str, gen: Generation) -> None:
        """One line of ``answers.jsonl`` (job-wide) for the metrics: this model's answer to
        ``task_id`` is the cached sample ``gen.key`` (a later line wins)."""
        line = json.dumps({"model": self.id, "role": role, "task_id": task_id, "key": gen.key})
        with _lock:
            with open_append(self.ctx.cache_dir / ANSWERS_FILE) as fh:
                fh.write(line + "\n")


def response(gen: Generation, role: str, cached: bool) -> dict[str, Any]:
    """Upstream's response dict for one generation, plus the fields grading needs."""
    prompt, completion = gen.prompt_tokens or 0, gen.completion_tokens or 0
    return {"completion": gen.raw_output, "task_id": gen.task_id, "role": role,
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion},
            "perf": {"latency_s": gen.latency_s, "cached": cached, **_transport(gen)},
            "mean_logprob": gen.mean_logprob, "min_logprob": gen.min_logprob,
            "samples": [gen.to_dict()]}


def _transport(gen: Generation) -> dict[str, Any]:
    """The link fields of an answer made on an edge node (none for a local model)."""
    t = gen.transport or {}
    return {k: t[k] for k in ("node", "link_s", "bytes_up", "bytes_down") if k in t}
