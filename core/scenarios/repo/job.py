"""The ``repo`` job: generate function bodies for repo tasks, inject them, run the tests, report.

Run: ``python -m core.scenarios.repo.job -f examples/smart_coding/smart_coding_learning_bench/repo/job.yaml``.
The YAML (keys checked strictly; an unknown key is an error naming it)::

    repo_job:
      datasets:                      # one or more shipped sets
        - {name: toolz, tasks: data/toolz-tasks.jsonl, source: data/toolz-1.0.0.tar.gz, requirements: []}
        - {name: dataset-postgres, tasks: ..., source: ..., requirements: [...], services: [postgres]}
      limit: 10                      # first N tasks per set (null = the full set)
      generator: embedded            # embedded | reference | blank (gold controls)
      n: 1                           # samples per task
      k: [1]
      workers: 2
      timeout: 60
      output: ./workspace/repo

Paths are relative to the YAML file. The repository is materialised once per set into
``<output>/src/<content hash>`` and checked against the tasks' recorded content hash. Results
(one JSON line per sample) go to ``<output>/<set>/<generator>/results.jsonl``; a line already
there is not run again (resume). A summary row per set is printed and written to ``summary.json``.
``services: [postgres]`` starts a private PostgreSQL server for the set (:mod:`.postgres`) and
gives every sample its own database; it is stopped when the set is done.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import textwrap
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Iterator

import yaml

from core.common.errors import IanvsError
from core.scenarios.repo.env import ensure_env
from core.scenarios.repo.execute import Sample, SampleResult, run_samples
from core.scenarios.repo.metrics import summarise
from core.scenarios.repo.postgres import PostgresService
from core.scenarios.repo.source import materialise

__all__ = ["prompt_of", "header_of", "run_set", "main", "load_tasks"]

LOG = logging.getLogger(__name__)

_KEYS = {"datasets", "limit", "generator", "n", "k", "workers", "timeout", "output"}
_SET_KEYS = {"name", "tasks", "source", "requirements", "services"}
_SERVICES = {"postgres"}


def header_of(task: dict) -> str:
    """The task's ``def`` line(s) and docstring, dedented to column 0 (what the model continues)."""
    sig = textwrap.dedent(task["signature"])
    doc = task.get("docstring") or task.get("problem")
    if not doc:
        return sig + "\n"
    return sig + "\n" + textwrap.indent(f'"""{doc}\n"""', "    ") + "\n"


#: Context characters put in the prompt (the nearest ones): small models on shared CPUs spend
#: most of their time reading the prompt.
PROMPT_CONTEXT_CHARS = 1500


def prompt_of(task: dict, context_chars: int = PROMPT_CONTEXT_CHARS) -> str:
    """Complete-mode prompt: the nearest ``context_chars`` of the task's context (cut at a line
    start), a ``# file:`` line, then the function header."""
    context = task["context"]
    if len(context) > context_chars:
        context = context[-context_chars:]
        context = context[context.find("\n") + 1:]
    where = f"# file: {task['file']}" + (f" (method of class {task['class_name']})" if task.get("class_name") else "")
    return f"{context.rstrip()}\n\n\n{where}\n{header_of(task)}"


def load_tasks(path: Path, limit: int | None) -> list[dict]:
    tasks = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return tasks[:limit] if limit is not None else tasks


def _reference_code(task: dict) -> str:
    return header_of(task) + textwrap.indent(textwrap.dedent(task["reference"]), "    ")


def _generate(tasks: list[dict], generator: str, n: int) -> Iterator[tuple[dict, int, str | None]]:
    if generator in ("reference", "blank"):
        for t in tasks:
            for i in range(n):
                yield t, i, (_reference_code(t) if generator == "reference" else None)
        return
    if generator != "embedded":
        raise IanvsError(f"repo_job.generator: unknown generator {generator!r}",
                         hint="use embedded, reference or blank")
    from core.generation.embedded import EmbeddedGenerator  # noqa: PLC0415 - heavy, optional
    from core.generation.types import DecodingSettings, GenerationRequest  # noqa: PLC0415
    by_id = {t["task_id"]: t for t in tasks}
    decoding = DecodingSettings(n=n, max_tokens=256, temperature=0.0 if n == 1 else 0.8, seed=1234)
    with EmbeddedGenerator(n_ctx=4096) as gen:
        reqs = [GenerationRequest(task_id=t["task_id"], prompt=prompt_of(t), mode="complete", decoding=decoding)
                for t in tasks]
        for g in gen.generate(reqs):
            t = by_id[g.task_id]
            LOG.info("generated %s#%d: %s tokens in %.1fs (%s)", g.task_id, g.sample_index,
                     g.completion_tokens, g.latency_s, g.finish_reason or g.error)
            yield t, g.sample_index, header_of(t) + g.raw_output if g.ok else ""


def run_set(spec: dict, base: Path, cfg: dict) -> dict[str, Any]:
    """Run one dataset; return its summary row (also written to ``summary.json``)."""
    tasks = load_tasks(base / spec["tasks"], cfg.get("limit"))
    if not tasks:
        raise IanvsError(f"repo_job.datasets[{spec['name']}]: {spec['tasks']} holds no tasks")
    out = Path(base, cfg.get("output", "./workspace/repo")).resolve()
    want = tasks[0]["repo"]["content_hash"]
    src_dir = out / "src" / want[:16]
    roots = [p for p in src_dir.iterdir() if p.is_dir()] if src_dir.exists() else []
    if not roots:
        src = materialise(str(base / spec["source"]), src_dir)
        if src.content_hash != want:
            raise IanvsError(f"repo_job.datasets[{spec['name']}]: {spec['source']} has content hash "
                             f"{src.content_hash[:12]}, the tasks were built from {want[:12]}",
                             hint="point 'source' at the archive or bundle the tasks file names")
        roots = [src.root]
    env = ensure_env(list(spec.get("requirements") or []))
    generator = cfg.get("generator", "embedded")
    run_dir = out / spec["name"] / generator
    run_dir.mkdir(parents=True, exist_ok=True)
    results_path = run_dir / "results.jsonl"
    done: dict[str, SampleResult] = {}
    if results_path.exists():
        for line in results_path.read_text().splitlines():
            rec = json.loads(line)
            done[rec["sample_id"]] = SampleResult(**rec)
    n = int(cfg.get("n", 1))
    samples = [Sample(f"{t['task_id']}#{i}", t, code) for t, i, code in _generate(
        [t for t in tasks if any(f"{t['task_id']}#{i}" not in done for i in range(n))], generator, n)]
    with open(results_path, "a") as fh, ExitStack() as stack:
        service = stack.enter_context(PostgresService()) if samples and "postgres" in (spec.get("services") or []) else None
        for r in run_samples(samples, roots[0], env, out / "views", workers=int(cfg.get("workers", 2)),
                             timeout=float(cfg.get("timeout", 60)), reference=False, service=service):
            fh.write(json.dumps(r.__dict__) + "\n")
            fh.flush()
            done[r.sample_id] = r
    row = {"dataset": spec["name"], "generator": generator, "tasks": len(tasks),
           **summarise(done.values(), {t["task_id"]: t for t in tasks}, tuple(cfg.get("k", [1])))}
    (run_dir / "summary.json").write_text(json.dumps(row, indent=1))
    return row


def _check(cfg: Any, path: Path) -> dict:
    if not isinstance(cfg, dict) or not isinstance(cfg.get("repo_job"), dict):
        raise IanvsError(f"{path}: expected a top-level 'repo_job:' mapping")
    job = cfg["repo_job"]
    bad = sorted(set(job) - _KEYS)
    if bad:
        raise IanvsError(f"{path}: repo_job.{bad[0]}: unknown key", hint=f"known keys: {', '.join(sorted(_KEYS))}")
    for i, s in enumerate(job.get("datasets") or []):
        missing = sorted({"name", "tasks", "source"} - set(s))
        extra = sorted(set(s) - _SET_KEYS)
        if missing or extra:
            raise IanvsError(f"{path}: repo_job.datasets[{i}]: " + (f"missing {missing}" if missing else f"unknown {extra}"))
        services = s.get("services") or []
        if not isinstance(services, list) or set(services) - _SERVICES:
            raise IanvsError(f"{path}: repo_job.datasets[{i}].services: {services!r} is not a list of known services",
                             hint=f"known services: {', '.join(sorted(_SERVICES))}")
    if not job.get("datasets"):
        raise IanvsError(f"{path}: repo_job.datasets: at least one dataset is needed")
    return job


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m core.scenarios.repo.job", description=__doc__.splitlines()[0])
    parser.add_argument("-f", "--file", required=True, type=Path)
    parser.add_argument("--generator", choices=["embedded", "reference", "blank"])
    parser.add_argument("--limit", type=int)
    parser.add_argument("--debug", action="store_true")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO, format="%(levelname)s %(message)s")
    try:
        job = _check(yaml.safe_load(args.file.read_text()), args.file)
        if args.generator:
            job["generator"] = args.generator
        if args.limit is not None:
            job["limit"] = args.limit
        for spec in job["datasets"]:
            row = run_set(spec, args.file.parent.resolve(), job)
            sys.stdout.write(json.dumps(row) + "\n")
    except (IanvsError, OSError) as exc:
        if args.debug:
            raise
        sys.stderr.write(f"error: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
