"""The trajectory kinds' gold controls in the sandbox, shared by implement-change and revise."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

from core.scenarios.trajectories.implement_change.scoring import task_sample
from core.scenarios.repo.env import record_env
from core.scenarios.repo.execute import Sample, SampleResult, default_views_dir, run_samples
from core.scenarios.repo.scoring import source_root


def gold_and_unchanged(tasks: list[dict[str, Any]], reference: Callable[[dict[str, Any]], str],
                       sources: Path) -> dict[str, tuple[str, SampleResult, SampleResult]]:
    """``task id -> (form, result of the reference change, result of the tree left unchanged)``.

    The reference reply is parsed and run as any model's reply (``task_sample``, as the kinds'
    ``grade`` does: the task's test side refused and pinned; a reply that does not parse fails
    the caller's assertion on ``form``/outcome: its result is the parse failure, nothing run).
    The unchanged tree runs its tests for real (not short-cut as ``no_change``). Both samples of
    every task sharing a root run in one executor on two workers: a task root's fork server
    (with the repository's dependencies preloaded) starts once, not once per sample."""
    by_root: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for task in tasks:
        by_root[task["repo"]["content_hash"]].append(task)
    out: dict[str, tuple[str, SampleResult, SampleResult]] = {}
    for want, group in by_root.items():
        root = source_root(sources / group[0]["repo"]["source"], want)
        env = record_env(group[0])
        samples: list[Sample] = []
        failed: dict[str, SampleResult] = {}
        forms: dict[str, str] = {}
        for task in group:
            item, forms[task["id"]] = task_sample(f"{task['id']}#ref", task, reference(task), root)
            if isinstance(item, SampleResult):
                failed[task["id"]] = item
            else:
                samples.append(item)
            samples.append(Sample(f"{task['id']}#unchanged", task, None, edits={}))
        results = {r.sample_id: r for r in run_samples(samples, root, env, default_views_dir(), workers=2,
                                                        timeout=300)}
        for task in group:
            ref = failed.get(task["id"]) or results[f"{task['id']}#ref"]
            out[task["id"]] = (forms[task["id"]], ref, results[f"{task['id']}#unchanged"])
    return out
