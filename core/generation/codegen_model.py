"""The code-generation "basemodel": hyperparameters -> generator -> per-task predictions.

An example's ``basemodel.py`` registers :class:`CodegenModel` (or a thin subclass) under
its alias. Hyperparameters (all optional):

=================== ===================================================================
``generator``       ``embedded`` (default), ``openai``, ``replay``, ``canonical``, ``broken``
``mode``            ``complete`` (raw continuation of the prompt, default) or ``chat``
``temperature``, ``top_p``, ``max_tokens``, ``stop``, ``seed``, ``n``
                    decoding settings (greedy, 512 tokens, 1 sample by default)
anything else       passed to the generator's constructor (e.g. ``model_path``,
                    ``n_threads`` for embedded; ``base_url``, ``model``, ``api_key_env``,
                    ``concurrency`` for openai; ``samples_path`` for replay; ``variant``
                    for broken)
=================== ===================================================================

``predict(x, context)`` receives the pending test records through the context, generates
``n`` samples per task (each sample cached in ``generations.jsonl`` of the test case folder
under a key of model, prompt and decoding settings, so a killed run redoes nothing that
finished) and stores one prediction per task as soon as all its samples are in::

    {"task_id": "HumanEval/0", "samples": [<Generation.to_dict()>, ...]}

Nothing is loaded until the first ``predict``: a re-score of stored predictions never
starts the model.
"""
from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError, IanvsError, RegistryError, suggest
from core.common.progress import progress_bar
from core.common.signatures import annotation_problem
from core.generation import (DEFAULT_GENERATOR, create_generator, generator_class,
                             generator_parameters)
from core.generation.base import Generator
from core.generation.cache_key import GenerationCache, cached_generate
from core.generation.types import DecodingError, DecodingSettings, Generation, GenerationRequest

logger = logging.getLogger(__name__)

DECODING_KEYS = ("temperature", "top_p", "max_tokens", "stop", "seed", "n")
CACHE_FILE = "generations.jsonl"


#: the gold and broken controls (:mod:`core.generation.reference`)
CONTROL_GENERATORS = ("canonical", "broken")


def _other_generator_takes(name: str, generator: str) -> bool:
    """Whether a registered generator other than ``generator`` takes option ``name``."""
    from core.common.class_factory import ClassFactory, ClassType
    from core.common.errors import IanvsError

    for other in ClassFactory.aliases(ClassType.GENERATOR):
        if other == generator:
            continue
        try:
            if name in generator_parameters(other).accepted:
                return True
        except (IanvsError, ImportError):
            continue
    return False


def record_identity(folder: Path, identity: Mapping[str, Any]) -> None:
    """Write ``identity`` to ``folder/model.json`` after :func:`check_same_identity` (which
    raises when the folder's stored predictions were made by another identity)."""
    plain = json.loads(json.dumps(identity, default=str))
    check_same_identity(folder, plain)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "model.json").write_text(json.dumps(plain, indent=2))
    except OSError as exc:
        logger.warning("could not write %s: %s", folder / "model.json", exc)


def check_same_identity(folder: Path, identity: Mapping[str, Any]) -> None:
    """Raise :class:`IanvsError` when ``folder`` has stored predictions and its ``model.json``
    names another identity than ``identity`` (see :meth:`CodegenModel._write_identity`)."""
    recorded_path, predictions = folder / "model.json", folder / "predictions.jsonl"
    try:
        if not recorded_path.is_file() or predictions.stat().st_size == 0:
            return
        recorded = json.loads(recorded_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # no predictions, or no readable record of who made them: nothing to compare
    if recorded == identity:
        return
    differs = sorted(_differences(recorded, dict(identity)))
    raise IanvsError(
        f"the stored predictions in {folder} were made by another model setup than this "
        f"run's (differs in: {', '.join(differs) or 'its identity'}); resuming would score "
        "two setups as one row",
        source=recorded_path,
        hint="to redo the job's test cases with the current setup, run 'ianvs -f <job> "
             "--fresh' (new test-case folders; this one stays); to finish it as it was begun, "
             "go back to the setup its model.json records")


def _differences(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """Dotted paths of the keys whose values differ between ``old`` and ``new``."""
    for key in set(old) | set(new):
        a, b = old.get(key), new.get(key)
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            yield from _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            yield f"{prefix}{key}"


class CodegenModel:
    """Ianvs basemodel generating code for codegen records (see module docstring)."""

    #: generators whose answers come from the records themselves (rebuilt for every window)
    PER_WINDOW_GENERATORS: tuple[str, ...] = ("canonical",)

    def __init__(self, **hyperparameters: Any) -> None:
        (self.generator_name, self.mode, self.decoding,
         self.generator_params) = self._parse(hyperparameters)
        self._generator: Generator | None = None
        self._cache: GenerationCache | None = None

    @classmethod
    def check_hyperparameters(cls, hyperparameters: Mapping[str, Any]) -> None:
        """Raise if these hyperparameters cannot work; loads no model (``ianvs validate``).

        Raises:
            RegistryError: unknown ``generator`` (with suggestions).
            ConfigError: bad ``mode`` or decoding values, a name neither this model nor the
                chosen generator takes (typos get a suggestion), or a missing required one.
        """
        cls._parse(hyperparameters)

    @staticmethod
    def _parse(hyperparameters: Mapping[str, Any], who: str = "the codegen model"
               ) -> tuple[str, str, DecodingSettings, dict[str, Any]]:
        """(generator, mode, decoding, generator options) of ``hyperparameters``; ``who``
        names the model in errors (e.g. ``the comment model``).

        A gold or broken control (generator ``canonical``/``broken``) sits in one grid beside
        real generators, so it ignores an option another registered generator takes (e.g.
        ``samples_path`` of ``replay``); every other generator refuses options it does not
        take."""
        params = dict(hyperparameters)
        generator = str(params.pop("generator", DEFAULT_GENERATOR))
        mode = str(params.pop("mode", "complete"))
        decoding = {k: params.pop(k) for k in DECODING_KEYS if k in params}
        try:
            settings = DecodingSettings.from_mapping(decoding)
        except DecodingError as exc:
            raise ConfigError(f"decoding hyperparameter {exc.message}", key=exc.key,
                              hint=exc.hint) from exc
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"bad decoding hyperparameters: {exc}") from exc
        if mode not in ("complete", "chat"):
            raise ConfigError(f"mode must be 'complete' or 'chat', got {mode!r}", key="mode")
        try:
            takes = generator_parameters(generator)
        except RegistryError as exc:
            raise RegistryError(exc.message, hint=exc.hint, key="generator") from exc
        accepted = list(takes.accepted)
        unknown = sorted(set(params) - set(accepted))
        if unknown and generator in CONTROL_GENERATORS and not takes.takes_any:
            for name in [u for u in unknown if _other_generator_takes(u, generator)]:
                params.pop(name)
                unknown.remove(name)
        if unknown and not takes.takes_any:
            own = ["generator", "mode", *DECODING_KEYS]
            raise ConfigError(
                f"hyperparameter {unknown[0]!r} is not used by {who} nor by "
                f"generator {generator!r}",
                hint=suggest(unknown[0], own + accepted)
                or f"the model takes {', '.join(own)}; generator {generator!r} takes "
                   f"{', '.join(accepted) or 'nothing'}", key=unknown[0])
        missing = [name for name in takes.required if name not in params]
        if missing:
            raise ConfigError(f"generator {generator!r} needs hyperparameter {missing[0]!r}",
                              hint=f"add '- {missing[0]}: {{values: [...]}}' to the module's "
                                   "hyperparameters", key=missing[0])
        cls = generator_class(generator)
        for name, value in params.items():
            problem = annotation_problem(cls, name, value) if name in accepted else None
            if problem:
                raise ConfigError(f"hyperparameter {name!r} of generator {generator!r} "
                                  f"{problem}", key=name,
                                  hint=f"change the value of '{name}' in the algorithm YAML")
        check_options = getattr(cls, "check_options", None)  # Generator.check_options
        if check_options is not None:  # values a type annotation cannot judge
            check_options(params)
        return generator, mode, settings, params

    def _make_generator(self, records: Sequence[dict[str, Any]]) -> Generator:
        params = dict(self.generator_params)
        if self.generator_name == "canonical" and "dataset_path" not in params:
            params.setdefault("solutions", {r["task_id"]: r["canonical_solution"]
                                            for r in records if "canonical_solution" in r})
        return create_generator(self.generator_name, **params)

    def _requests(self, records: Sequence[dict[str, Any]]) -> list[GenerationRequest]:
        """One request per record (subclasses for other task kinds render them differently)."""
        return [GenerationRequest(task_id=str(r["task_id"]), prompt=str(r["prompt"]),
                                  entry_point=r.get("entry_point"), mode=self.mode,
                                  decoding=self.decoding) for r in records]

    def _write_identity(self, folder: Path) -> None:
        """``model.json`` in the test case folder: the generator's identity (no secrets: see
        :meth:`Generator.describe`), the mode and the decoding settings, for reports.

        Raises:
            IanvsError: the folder holds predictions made by a generator of another identity
                (another model file, llama.cpp build, way of sending requests...): resuming
                would score two models as one row. Nothing is changed; the message says how to
                redo the case or go back.
        """
        assert self._generator is not None
        d = self.decoding
        identity = {"generator": self._generator.describe(), "mode": self.mode,
                    "decoding": {"temperature": d.temperature, "top_p": d.top_p,
                                 "max_tokens": d.max_tokens, "seed": d.seed, "n": d.n,
                                 "stop": list(d.stop) if d.stop else None}}
        record_identity(folder, identity)

    def train(self, train_data: Any = None, **kwargs: Any) -> None:
        """Nothing to train: generation only."""

    def predict(self, data: Any, context: Any = None, **kwargs: Any) -> list[dict[str, Any]]:
        """One prediction per record of ``context.records`` (see the module docstring)."""
        if context is None:
            raise ConfigError("CodegenModel.predict needs the framework's context",
                              hint="run it through 'ianvs -f'")
        records: list[dict[str, Any]] = list(context.records)
        per_window = self.generator_name in self.PER_WINDOW_GENERATORS and "dataset_path" not in \
            self.generator_params  # its solutions come from the records of each window
        if self._generator is None or per_window:
            first = self._generator is None
            self._generator = self._make_generator(records)
            if first:  # the identity does not change from window to window
                self._write_identity(Path(context.workspace))
        requests = self._requests(records)
        position = {req.task_id: i for i, req in enumerate(requests)}
        expected = {req.task_id: len(req.sample_indices) for req in requests}
        got: dict[str, list[Generation]] = defaultdict(list)
        results: list[dict[str, Any] | None] = [None] * len(requests)
        total = sum(expected.values())
        # replay yields exactly the recorded samples, whatever n says: finish at the end
        streaming = self.generator_name != "replay"
        cache_path = Path(context.workspace) / CACHE_FILE
        if self._cache is None or self._cache.path != cache_path:
            self._cache = GenerationCache(cache_path)
        cache = self._cache
        speed = _Throughput()
        with progress_bar(total=total, desc=f"generate ({self.generator_name})", unit="sample",
                          enabled=getattr(context, "show_progress", True)) as bar:
            for seen, gen in enumerate(cached_generate(self._generator, requests, cache), 1):
                if seen <= cache.reused:  # reused samples come first and are not timed
                    speed.restart()
                elif speed.add(gen):
                    bar.set_postfix_str(speed.text())
                if gen.task_id not in position:
                    continue
                got[gen.task_id].append(gen)
                bar.update(1)
                if streaming and len(got[gen.task_id]) >= expected[gen.task_id]:
                    pos = position[gen.task_id]
                    results[pos] = self._finish(pos, gen.task_id, got[gen.task_id], context)
        if getattr(context, "final", True):
            self.close()  # frees the embedded model's memory before execution starts
        for pos, stored in enumerate(results):
            if stored is None:
                task_id = requests[pos].task_id
                results[pos] = self._finish(pos, task_id, got.get(task_id, []), context)
        samples_made = [g for gens in got.values() for g in gens]
        failed = [g for g in samples_made if g.error is not None]
        if samples_made and len(failed) == len(samples_made):
            raise IanvsError(f"generator {self.generator_name!r} produced no sample: all "
                             f"{len(failed)} failed, e.g. {failed[0].task_id}: {failed[0].error}",
                             hint="check the generator's hyperparameters (endpoint, model, "
                                  "paths); nothing was stored, so the next run retries")
        if failed:
            logger.warning("%d of %d sample(s) could not be generated (counted as "
                           "generation_error, never as model failures); their tasks are "
                           "retried by the next run", len(failed), len(samples_made))
        return [r for r in results if r is not None]

    @staticmethod
    def _finish(pos: int, task_id: str, generations: Sequence[Generation],
                context: Any) -> dict[str, Any]:
        """The prediction of one task: stored at once, or, when a sample failed to generate,
        left for the next run to ask again."""
        samples = sorted(generations, key=lambda g: g.sample_index)
        pred: dict[str, Any] = {"task_id": task_id, "samples": [g.to_dict() for g in samples]}
        if any(g.error is not None for g in samples):
            context.retry_later(pos)
        else:
            context.save(pos, pred)
        return pred

    def close(self) -> None:
        if self._generator is not None:
            self._generator.close()
            self._generator = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class _Throughput:
    """Generated tokens per second of wall time over the samples made in this run (reused ones
    excluded), for the progress line: a slow or overloaded machine is visible at once."""

    def __init__(self) -> None:
        self.tokens = 0
        self.started = time.monotonic()

    def restart(self) -> None:
        """A reused sample arrived: new ones are timed from after it."""
        self.started = time.monotonic()

    def add(self, gen: Generation) -> bool:
        """Count a new sample; True when a rate can be shown."""
        self.tokens += gen.completion_tokens or 0
        return self.tokens > 0

    def text(self) -> str:
        return f"{self.tokens / max(1e-6, time.monotonic() - self.started):.1f} tokens/s"
