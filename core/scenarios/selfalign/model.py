"""The self-align basemodel: any generator wrapped in the self-align loop.

An example's ``basemodel.py`` registers :class:`SelfAlignModel` under its alias. Hyperparameters
(all optional):

==================== ========================================================================
``generator``        the inner generator: ``embedded`` (default), ``openai``, any registered
                     one; or a gold control: ``reference`` (reference solution with the hidden
                     tests as its own: aligns at try 1, scores 1.0), ``broken`` (never aligns)
``max_tries``        tries per task (default 5)
``generate``         what a try after the first regenerates: ``code``, ``tests``, ``both``
                     (default)
``feedback``         ``failures`` (default: failing tests, messages, truncated output go back
                     to the model) or ``none``
``tests_per_task``   tests the model writes per try (default 3)
``test_style``       ``assert`` (default: each test one assert line, enforced by the schema)
                     or ``free`` (any Python per test)
``structured``       ``auto`` (default: JSON schema as ``response_format``; plain parsing when
                     the server refuses it) or ``none``
``temperature``, ``top_p``, ``max_tokens`` (default 512), ``seed``   decoding
``test_timeout``     seconds per model-written test in the sandbox (default 3)
``min_isolation``    sandbox level the model-written tests need (default and least:
                     ``kernel``, so no run whose report goes back to the model can read the
                     hidden tests; :data:`.sandbox.MIN_ISOLATION`)
``sandbox_workers``  parallel sandbox slots for them (default 2)
``task_workers``     tasks run side by side (default 1). Each task's tries stay in order, so
                     a task's result does not depend on it; 2 keeps both instances of the
                     embedded model busy on a 2-core machine (it starts one per core)
``sources_dir``      repository-level set only (repo kind records): the folder holding each
                     repository's source as ``<repo name>.tar.gz`` (or a folder or bundle of
                     that name), checked against the tasks' content hash
``repo_timeout``     repository-level set only: seconds for one run of a try's tests in the
                     repository (default 120)
``selection``        ``loop`` (default: the self-align loop) or a selection baseline without
                     the loop (:mod:`.selection`): ``codet`` (dual execution agreement over
                     K samples) or ``examples`` (the sample passing the prompt's examples);
                     function tasks only
``samples``          K, the samples a selection draws per task (default 5); a model row
                     needs ``temperature`` > 0 and a ``seed`` (sample k is seeded seed + k)
``anchor_fallback``  ``examples`` only: the choice when no sample passes the examples or the
                     prompt has none: ``codet`` (default) or ``first`` (the first sample)
anything else        passed to the inner generator (``model_path``, ``n_threads``,
                     ``base_url``, ...)
==================== ========================================================================

With a ``selection`` the prediction's sample is the selected program and ``selfalign`` holds
``selection``, ``selected``, ``agreed``, ``fallback``, ``samples``; the choice is in
``selfalign_selection.jsonl`` and the samples in the job's shared folder (:mod:`.selection`).

``predict`` stores, per task, a prediction in the codegen layout, so the codegen metrics grade
it unchanged: ``samples`` holds one sample whose ``code`` is the **final** code (the aligned
try's, else the last try's; the prompt's stub when the last reply was unreadable, so it is
graded as a failure, not skipped) and whose token and latency counts are the sums over the
tries; ``selfalign`` summarises the loop (``aligned_at``, ``tries``, ``first_code``). Every try
is in ``selfalign_tries.jsonl`` (:mod:`.store`), the model-written tests' sandbox results in
``selfalign_units.jsonl``; the metrics read those, never the model.
"""
from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from core.common.errors import ConfigError, suggest
from core.common.progress import progress_bar
from core.generation import create_generator, generator_parameters
from core.generation.codegen_model import DECODING_KEYS, CodegenModel, record_identity
from core.generation.types import DecodingSettings
from core.scenarios.selfalign import repo
from core.scenarios.selfalign.loop import (ControlResponder, GenerationFailed,
                                           GeneratorResponder, LoopSettings, Responder, Runner,
                                           run_task)
from core.scenarios.selfalign.reply import FEEDBACK_CHOICES, GENERATE_CHOICES, TEST_STYLES
from core.scenarios.selfalign.sandbox import SandboxInfraError, SandboxSettings, UnitRunner
from core.scenarios.selfalign.selection import (FALLBACKS, METHODS, SAMPLES_FILE,
                                                SELECTION_FILE, SHARED_UNITS_FILE, SampleStore,
                                                SelectionSettings, SelectionStore, draw_samples,
                                                select_task, shared_dir)
from core.scenarios.selfalign.store import TRIES_FILE, TryStore

logger = logging.getLogger(__name__)

UNITS_FILE = "selfalign_units.jsonl"
CONTROLS = ("reference", "broken")
LOOP_KEYS = ("max_tries", "generate", "feedback", "tests_per_task", "test_style")
SANDBOX_KEYS = ("test_timeout", "min_isolation", "sandbox_workers")
REPO_KEYS = ("sources_dir", "repo_timeout")
SELECTION_KEYS = ("selection", "samples", "anchor_fallback")
OWN_KEYS = ("generator", "structured", "task_workers", *LOOP_KEYS, *SANDBOX_KEYS, *REPO_KEYS,
            *SELECTION_KEYS)


def _each_task(records: list[dict[str, Any]], context: Any, bar: Any,
               one: Callable[[dict[str, Any]], tuple[dict[str, Any], bool]],
               word: str, workers: int = 1) -> tuple[list[dict[str, Any]], int]:
    """Each record through ``one`` (its prediction and whether it counts for the progress bar's
    ``word``), saved as it is made; a generation or sandbox failure leaves the task for the next
    run (:func:`_left_for_next_run`). Returns the predictions, in the records' order, and how
    many tasks failed.

    ``workers`` > 1 runs that many tasks side by side on threads (``one`` must then be safe to
    call concurrently: the stores, the unit runner and the generators it uses are); a task's
    tries stay in order, so each task's result is the same as when run alone. Predictions are
    saved from this thread as their tasks finish."""
    results: list[dict[str, Any] | None] = [None] * len(records)
    failed = counted = finished = 0

    def settle(pos: int, outcome: Callable[[], tuple[dict[str, Any], bool]]) -> None:
        nonlocal failed, counted, finished
        try:
            pred, hit = outcome()
        except (GenerationFailed, SandboxInfraError) as exc:
            failed += 1
            results[pos] = _left_for_next_run(records[pos], exc, context, pos)
            bar.update(1)
            return
        counted += hit
        finished += 1
        context.save(pos, pred)
        results[pos] = pred
        bar.set_postfix_str(f"{word} {counted}/{finished}")
        bar.update(1)

    if workers <= 1 or len(records) <= 1:
        for pos, record in enumerate(records):
            settle(pos, functools.partial(one, record))
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="task") as pool:
            futures = {pool.submit(one, record): pos for pos, record in enumerate(records)}
            for future in as_completed(futures):
                settle(futures[future], future.result)
    return [r for r in results if r is not None], failed


def _left_for_next_run(record: Mapping[str, Any], exc: Exception, context: Any,
                       pos: int) -> dict[str, Any]:
    """A task a generation or sandbox failure stopped: logged, marked for the next run
    (``context.retry_later``), and its placeholder prediction (the error, no code)."""
    logger.warning("%s", exc)
    context.retry_later(pos)
    return {"task_id": record["task_id"], "samples": [
        {"task_id": record["task_id"], "sample_index": 0, "raw_output": "", "code": "",
         "error": str(exc)}]}


def _choice(params: Mapping[str, Any], name: str, choices: tuple[str, ...], default: str) -> str:
    value = str(params.get(name, default))
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {value!r}",
                          hint=suggest(value, list(choices)) or None)
    return value


def _positive_int(params: Mapping[str, Any], name: str, default: int) -> int:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


class SelfAlignModel:
    """Ianvs basemodel running the self-align loop over codegen records (module docstring)."""

    def __init__(self, **hyperparameters: Any) -> None:
        (self.generator_name, self.loop, self.structured, self.sandbox, self.decoding,
         self.generator_params) = self._parse(hyperparameters)
        self.sources_dir = hyperparameters.get("sources_dir")
        self.selection = self._selection(hyperparameters)
        self.repo_timeout = float(hyperparameters.get("repo_timeout", 120.0))
        self.task_workers = _positive_int(hyperparameters, "task_workers", 1)
        self._responder: Responder | None = None
        self._generator: Any = None

    @classmethod
    def check_hyperparameters(cls, hyperparameters: Mapping[str, Any]) -> None:
        """Raise ConfigError/RegistryError if these hyperparameters cannot work (no model
        is loaded): ``ianvs validate``."""
        cls._parse(hyperparameters)
        cls._selection(hyperparameters)

    @staticmethod
    def _selection(hp: Mapping[str, Any]) -> SelectionSettings | None:
        """The selection baseline's settings, or None for the loop (module docstring)."""
        method = _choice(hp, "selection", ("loop", *METHODS), "loop")
        if method == "loop":
            extra = [k for k in ("samples", "anchor_fallback") if k in hp]
            if extra:
                raise ConfigError(f"{extra[0]!r} is a setting of a selection baseline, not of "
                                  "the loop", hint="set selection: codet or examples")
            return None
        if "anchor_fallback" in hp and method != "examples":
            raise ConfigError("anchor_fallback is a setting of selection: examples")
        settings = SelectionSettings(method, _positive_int(hp, "samples", 5),
                                     _choice(hp, "anchor_fallback", FALLBACKS, "codet"))
        generator = str(hp.get("generator", "embedded"))
        if generator not in CONTROLS and settings.samples > 1:
            temperature = hp.get("temperature", 0.0)
            if not isinstance(temperature, (int, float)) or temperature <= 0:
                raise ConfigError(f"selection {method!r} draws {settings.samples} samples: "
                                  "greedy decoding would draw the same reply each time",
                                  hint="set temperature > 0 (e.g. 0.8) and a seed")
            if hp.get("seed") is None:
                raise ConfigError(f"selection {method!r} needs a seed (sample k is seeded "
                                  "seed + k, so a rerun draws the same samples)",
                                  hint="seed: 1")
        return settings

    @staticmethod
    def _parse(hp: Mapping[str, Any]) -> tuple[str, LoopSettings, str, SandboxSettings,
                                                DecodingSettings, dict[str, Any]]:
        params = dict(hp)
        generator = str(params.get("generator", "embedded"))
        loop = LoopSettings(
            max_tries=_positive_int(params, "max_tries", 5),
            generate=_choice(params, "generate", GENERATE_CHOICES, "both"),
            feedback=_choice(params, "feedback", FEEDBACK_CHOICES, "failures"),
            tests_per_task=_positive_int(params, "tests_per_task", 3),
            test_style=_choice(params, "test_style", TEST_STYLES, "assert"))
        structured = _choice(params, "structured", ("auto", "none"), "auto")
        _positive_int(params, "task_workers", 1)
        timeout = params.get("test_timeout", 3.0)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigError(f"test_timeout must be a positive number of seconds, got {timeout!r}")
        repo_timeout = params.get("repo_timeout", 120.0)
        if isinstance(repo_timeout, bool) or not isinstance(repo_timeout, (int, float)) \
                or repo_timeout <= 0:
            raise ConfigError("repo_timeout must be a positive number of seconds, got "
                              f"{repo_timeout!r}")
        sources_dir = params.get("sources_dir")  # resolved by the framework; checked on use
        if sources_dir is not None and not isinstance(sources_dir, (str, Path)):
            raise ConfigError(f"sources_dir must be a folder's path, got {sources_dir!r}",
                              hint="the folder of the repositories' <name>.tar.gz sources, "
                                   "relative to the algorithm YAML")
        sandbox = SandboxSettings(
            backend="local", timeout=float(timeout),
            options={"min_isolation": str(params.get("min_isolation", "kernel")),
                     "workers": _positive_int(params, "sandbox_workers", 2)})
        rest = {k: v for k, v in params.items() if k not in OWN_KEYS}
        rest.setdefault("max_tokens", 512)
        if generator in CONTROLS:
            extra = sorted(set(rest) - {"temperature", "top_p", "max_tokens", "seed"})
            if extra:
                raise ConfigError(f"hyperparameter {extra[0]!r} is not used by the {generator!r} "
                                  "control", hint="give the control an algorithm of its own")
            decoding = DecodingSettings.from_mapping(rest)
            return generator, loop, structured, sandbox, decoding, {}
        takes = generator_parameters(generator)  # RegistryError (with suggestions) if unknown
        known = [*OWN_KEYS, *DECODING_KEYS, *takes.accepted]
        unknown = sorted(set(rest) - set(known))
        if unknown and not takes.takes_any:
            raise ConfigError(f"hyperparameter {unknown[0]!r} is not used by the self-align model "
                              f"nor by generator {generator!r}",
                              hint=suggest(unknown[0], known) or f"known: {', '.join(known)}")
        rest["generator"] = generator
        rest["mode"] = "chat"
        name, _mode, decoding, gen_params = CodegenModel._parse(rest, who="the self-align model")
        if decoding.n != 1:
            raise ConfigError("the self-align loop makes one sample per try: n must be 1")
        return name, loop, structured, sandbox, decoding, gen_params

    def _make_responder(self) -> Responder:
        if self.generator_name in CONTROLS:
            return ControlResponder(self.generator_name)
        self._generator = create_generator(self.generator_name, **self.generator_params)
        return GeneratorResponder(self._generator, self.decoding, self.structured)

    def train(self, train_data: Any = None, **kwargs: Any) -> None:
        """Nothing to train."""

    def predict(self, data: Any, context: Any = None, **kwargs: Any) -> list[dict[str, Any]]:
        """Run the loop on every pending record of ``context`` (module docstring)."""
        if context is None:
            raise ConfigError("SelfAlignModel.predict needs the framework's context",
                              hint="run it through 'ianvs -f'")
        records: list[dict[str, Any]] = list(context.records)
        workspace = Path(context.workspace)
        if self._responder is None:
            self._responder = self._make_responder()
            # who answers, and how the loop asks: a resumed case must not mix two of them
            record_identity(workspace, {"responder": self._responder.describe(),
                                        "loop": self.loop.describe(),
                                        "structured": self.structured,
                                        "selection": (dataclasses.asdict(self.selection)
                                                      if self.selection else None)})
        if self.selection is not None:
            return self._predict_selection(records, context, workspace, self.selection)
        store = TryStore(workspace / TRIES_FILE)
        runner: Runner
        if records and repo.is_repo_record(records[0]):
            for record in records:
                if not repo.is_repo_record(record):
                    raise ConfigError(f"{record['task_id']}: a function record among repository "
                                      "records; one set per job")
                repo.check_task(record)
            if self.sources_dir is None:
                raise ConfigError("repository tasks need sources_dir (the folder of the "
                                  "repositories' sources) in the self-align hyperparameters")
            runner = repo.RepoUnitRunner(
                repo.resolve_sources(None, sources_dir=str(self.sources_dir)),
                workspace / repo.REPO_UNITS_FILE, timeout=self.repo_timeout,
                min_isolation=str((self.sandbox.options or {}).get("min_isolation", "kernel")))
        else:
            runner = UnitRunner(self.sandbox, workspace / UNITS_FILE)
        with runner, \
                progress_bar(total=len(records), desc=f"self-align ({self.generator_name})",
                             unit="task", enabled=getattr(context, "show_progress", True)) as bar:
            def one(record: dict[str, Any]) -> tuple[dict[str, Any], bool]:
                assert self._responder is not None
                outcome = run_task(record, self._responder, runner, store, self.loop)
                return self._prediction(record, outcome.tries), outcome.aligned_at is not None

            results, failed = _each_task(records, context, bar, one, "aligned",
                                         self.task_workers)
        self._finish(context, failed, "continues them after their last stored try")
        return results

    def _predict_selection(self, records: list[dict[str, Any]], context: Any, workspace: Path,
                           settings: SelectionSettings) -> list[dict[str, Any]]:
        """Draw K samples per task and select one (:mod:`.selection`); a task whose samples
        or sandbox runs failed is left for the next run, which reuses what was stored."""
        assert self._responder is not None
        if any(repo.is_repo_record(r) for r in records):
            raise ConfigError(f"selection {settings.method!r} runs on function tasks only, not "
                              "on repository tasks", hint="selection: loop")
        shared = shared_dir(workspace)
        samples_store = SampleStore(shared / SAMPLES_FILE)
        choices = SelectionStore(workspace / SELECTION_FILE)
        with UnitRunner(self.sandbox, shared / SHARED_UNITS_FILE) as runner, \
                progress_bar(total=len(records), unit="task",
                             desc=f"{settings.method} ({self.generator_name}, "
                                  f"{settings.samples} samples)",
                             enabled=getattr(context, "show_progress", True)) as bar:
            def one(record: dict[str, Any]) -> tuple[dict[str, Any], bool]:
                assert self._responder is not None
                samples = draw_samples(record, self._responder, runner, samples_store,
                                       self.loop, settings.samples)
                choice = select_task(record, samples, runner, settings, choices)
                return self._selection_prediction(record, samples, choice), bool(choice["agreed"])

            results, failed = _each_task(records, context, bar, one, "agreed",
                                         self.task_workers)
        self._finish(context, failed, "draws their missing samples")
        return results

    def _finish(self, context: Any, failed: int, next_run: str) -> None:
        """After the tasks: release the model on the framework's last call, and say how many
        tasks a failure left for the next run (which ``next_run``)."""
        if getattr(context, "final", True):
            self.close()
        if failed:
            logger.warning("%d task(s) stopped on a generation or sandbox failure; the next run "
                           "%s", failed, next_run)

    @staticmethod
    def _selection_prediction(record: Mapping[str, Any], samples: list[Any],
                              choice: Mapping[str, Any]) -> dict[str, Any]:
        """The codegen-layout prediction of a selection row: the selected program (the
        prompt's stub when no sample had code), with the tokens and latency of all samples."""
        stub = str(record["prompt"])
        chosen = samples[choice["selected"]] if choice["selected"] is not None else None
        sample = {"task_id": record["task_id"], "sample_index": 0,
                  "raw_output": chosen.raw_output if chosen is not None else "",
                  "code": (chosen.code if chosen is not None else "") or stub,
                  "prompt_tokens": sum(s.prompt_tokens or 0 for s in samples),
                  "completion_tokens": sum(s.completion_tokens or 0 for s in samples),
                  "latency_s": round(sum(s.latency_s for s in samples), 4), "error": None,
                  "key": chosen.key if chosen is not None else choice["key"]}
        return {"task_id": record["task_id"], "samples": [sample],
                "selfalign": {"selection": choice["method"], "selected": choice["selected"],
                              "agreed": choice["agreed"], "fallback": choice["fallback"],
                              "samples": len(samples), "first_code": samples[0].code or stub}}

    @staticmethod
    def _prediction(record: Mapping[str, Any], tries: list[Any]) -> dict[str, Any]:
        final = tries[-1]
        is_repo = repo.is_repo_record(record)
        stub = repo.stub_code(record) if is_repo else str(record["prompt"])
        code = final.code or stub
        # a repository task's answer is read from raw_output by the repo kind (repo_tests):
        # there it is the final function itself
        sample = {"task_id": record["task_id"], "sample_index": 0,
                  "raw_output": code if is_repo else final.raw_output, "code": code,
                  "prompt_tokens": sum(t.prompt_tokens or 0 for t in tries),
                  "completion_tokens": sum(t.completion_tokens or 0 for t in tries),
                  "latency_s": round(sum(t.latency_s for t in tries), 4), "error": None,
                  "key": final.key}
        aligned_at = next((t.try_ for t in tries if t.aligned), None)
        return {"task_id": record["task_id"], "samples": [sample],
                "selfalign": {"aligned_at": aligned_at, "tries": len(tries),
                              "first_code": tries[0].code or stub}}

    def close(self) -> None:
        if self._generator is not None:
            self._generator.close()
            self._generator = None
        self._responder = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
