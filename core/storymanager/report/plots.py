"""Report figures (matplotlib's object API on the Agg canvas: headless, no pyplot state).

Each function returns PNG bytes, or None when there is nothing to draw. matplotlib is optional
(the ``[plots]`` extra): :func:`available` says whether figures can be drawn.
"""
from __future__ import annotations

import importlib.util
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

OUTCOMES = ("passed", "failed", "error", "syntax_error", "timeout", "memory_exceeded",
            "sandbox_violation", "infra_error", "generation_error")
COLOURS = ("#2e7d32", "#c62828", "#ef6c00", "#6a1b9a", "#1565c0", "#00838f", "#4e342e",
           "#9e9e9e", "#bdbdbd")


def available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def _figure(width: float, height: float) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def _png(fig: Any) -> bytes:
    out = io.BytesIO()
    fig.tight_layout()
    fig.savefig(out, format="png")
    return out.getvalue()


def metric_with_ci(labels: Sequence[str], values: Sequence[float],
                   intervals: Sequence[tuple[float, float] | None], metric: str) -> bytes | None:
    """Bars of ``metric`` per test case with 95% bootstrap intervals where known."""
    if not labels:
        return None
    fig, ax = _figure(max(6.0, 0.9 * len(labels) + 2), 4.0)
    xs = range(len(labels))
    heights = [0.0 if math.isnan(v) else v for v in values]
    ax.bar(xs, heights, color="#1565c0", label=metric)
    lows = [v - ci[0] if ci else 0.0 for v, ci in zip(heights, intervals)]
    highs = [ci[1] - v if ci else 0.0 for v, ci in zip(heights, intervals)]
    if any(intervals):
        ax.errorbar(list(xs), heights, yerr=[lows, highs], fmt="none", ecolor="black",
                    capsize=4, label="95% bootstrap CI over tasks")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(f"{metric} (fraction of tasks)")
    ax.set_xlabel("test case")
    ax.set_title(f"{metric} per test case")
    ax.set_ylim(0, max(1.0, max(heights) * 1.1))
    ax.legend(loc="upper right", fontsize=8)
    return _png(fig)


def outcome_breakdown(labels: Sequence[str], counts: Sequence[Mapping[str, float]]
                      ) -> bytes | None:
    """Stacked bars of sample outcomes per test case."""
    present = [o for o in OUTCOMES if any(c.get(o) for c in counts)]
    if not labels or not present:
        return None
    fig, ax = _figure(max(6.0, 0.9 * len(labels) + 3), 4.0)
    bottom = [0.0] * len(labels)
    for outcome in present:
        heights = [float(c.get(outcome) or 0) for c in counts]
        ax.bar(range(len(labels)), heights, bottom=bottom, label=outcome,
               color=COLOURS[OUTCOMES.index(outcome)])
        bottom = [b + h for b, h in zip(bottom, heights)]
    ax.set_xticks(list(range(len(labels))))
    ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("samples (count)")
    ax.set_xlabel("test case")
    ax.set_title("Sample outcomes per test case")
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    return _png(fig)


def score_vs_cost(labels: Sequence[str], scores: Sequence[float], latency: Sequence[float],
                  metric: str, tokens_per_s: Sequence[float] | None = None) -> bytes | None:
    """Score against generation latency per sample and, when reported, tokens per second
    (edge trade-offs): one panel per cost."""
    costs = [("generation latency per sample (s)", latency)]
    if tokens_per_s is not None and any(not math.isnan(t) for t in tokens_per_s):
        costs.append(("generation speed (tokens/s)", tokens_per_s))
    panels = []
    for xlabel, values in costs:
        points = [(lab, s, c) for lab, s, c in zip(labels, scores, values)
                  if not (math.isnan(s) or math.isnan(c))]
        if points:
            panels.append((xlabel, points))
    if not panels:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0 * len(panels), 4.0), dpi=100)
    FigureCanvasAgg(fig)
    for n, (xlabel, points) in enumerate(panels, start=1):
        ax = fig.add_subplot(1, len(panels), n)
        for lab, s, c in points:
            ax.scatter([c], [s], label=lab, s=40)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(metric)
        ax.set_title(f"{metric} against {xlabel.split(' (')[0]}")
        ax.legend(loc="best", fontsize=7)
    return _png(fig)


def task_heatmap(labels: Sequence[str], tasks: Sequence[str],
                 rates: Sequence[Sequence[float]]) -> bytes | None:
    """Test cases x tasks, per-task pass rate (small task sets)."""
    if not labels or not tasks:
        return None
    fig, ax = _figure(min(20.0, max(7.0, 4 + 0.18 * len(tasks))), 2.0 + 0.45 * len(labels))
    image = ax.imshow(rates, aspect="auto", cmap="RdYlGn", vmin=0, vmax=1,
                      interpolation="nearest")
    ax.set_yticks(list(range(len(labels))))
    ax.set_yticklabels(labels, fontsize=8)
    step = max(1, len(tasks) // 40)
    ax.set_xticks(list(range(0, len(tasks), step)))
    ax.set_xticklabels(tasks[::step], rotation=90, fontsize=6)
    ax.set_xlabel("task")
    ax.set_ylabel("test case")
    ax.set_title("Pass rate per task")
    fig.colorbar(image, ax=ax, label="pass rate")
    return _png(fig)


def category_summary(labels: Sequence[str], categories: Sequence[str],
                     rates: Sequence[Sequence[float]]) -> bytes | None:
    """Per-category mean pass rate per test case (large task sets)."""
    if not labels or not categories:
        return None
    fig, ax = _figure(max(6.0, 0.5 * len(categories) + 3), 4.0)
    width = 0.8 / len(labels)
    for i, (lab, row) in enumerate(zip(labels, rates)):
        ax.bar([c + i * width for c in range(len(categories))], row, width=width, label=lab)
    ax.set_xticks([c + 0.4 - width / 2 for c in range(len(categories))])
    ax.set_xticklabels(categories, rotation=45, ha="right", fontsize=7)
    ax.set_ylabel("mean pass rate (fraction)")
    ax.set_xlabel("task category")
    ax.set_title("Pass rate per task category")
    ax.legend(loc="best", fontsize=7)
    return _png(fig)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point beats: none has a cloud share (x) as low or lower
    and a score (y) as high or higher with one of the two strictly better. Sorted by x."""
    front = []
    for i, (x, y) in enumerate(points):
        dominated = any((ox <= x and oy >= y) and (ox < x or oy > y)
                        for j, (ox, oy) in enumerate(points) if j != i)
        if not dominated:
            front.append(i)
    return sorted(front, key=lambda i: (points[i][0], -points[i][1]))


def cost_quality_plane(algorithms: Sequence[str], shares: Sequence[float],
                       scores: Sequence[float], metric: str,
                       oracle: Sequence[bool] | None = None) -> bytes | None:
    """The cloud-edge trade-off: ``metric`` against the share of tasks sent to the cloud, one
    marker per test case; the test cases of one algorithm (a threshold sweep) joined as a curve
    in order of cloud share; the Pareto front of the deployable routers as a dashed step line.
    Cases flagged in ``oracle`` (an upper bound that reads the hidden tests) are drawn as stars
    and left out of the front."""
    flags = list(oracle) if oracle is not None else [False] * len(algorithms)
    pts = [(a, x, y, o) for a, x, y, o in zip(algorithms, shares, scores, flags)
           if not (math.isnan(x) or math.isnan(y))]
    if not pts:
        return None
    fig, ax = _figure(7.0, 5.0)
    by_alg: dict[str, list[tuple[float, float, bool]]] = {}
    for a, x, y, o in pts:
        by_alg.setdefault(a, []).append((x, y, o))
    for n, (alg, xy) in enumerate(sorted(by_alg.items())):
        xy.sort()
        colour = COLOURS[n % len(COLOURS)]
        star = all(p[2] for p in xy)
        ax.plot([p[0] for p in xy], [p[1] for p in xy], marker="*" if star else "o",
                markersize=12 if star else 6, color=colour,
                label=f"{alg} (upper bound)" if star else alg,
                linestyle="-" if len(xy) > 1 else "none")
    deployable = [(x, y) for _a, x, y, o in pts if not o]
    if deployable:
        front = pareto_front(deployable)
        ax.step([deployable[i][0] for i in front], [deployable[i][1] for i in front],
                where="post", linestyle="--", color="black", linewidth=1, label="Pareto front")
    ax.set_xlabel("cloud share (fraction of tasks sent to the cloud model)")
    ax.set_ylabel(f"{metric} of the final answers")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(0, max(1.0, max(p[2] for p in pts) * 1.05))
    ax.set_title("cost/quality plane: correctness bought by cloud traffic")
    ax.legend(loc="lower right", fontsize=8)
    return _png(fig)


def per_try_curves(labels: Sequence[str], curves: Sequence[Mapping[str, Any]]) -> bytes | None:
    """Self-align test cases: alignment (solid) and hidden pass@1 (dashed) against the try
    number, one colour per test case; false alignment (dotted) where defined."""
    if not labels:
        return None
    fig, ax = _figure(7.5, 4.0)
    for i, (label, curve) in enumerate(zip(labels, curves)):
        xs = list(curve.get("tries") or [])
        colour = f"C{i % 10}"

        def ys(name: str) -> list[float]:
            return [math.nan if v is None else float(v) for v in (curve.get(name) or [])]

        ax.plot(xs, ys("align"), color=colour, marker="o", label=f"{label}: align")
        ax.plot(xs, ys("hidden_pass@1"), color=colour, linestyle="--", marker="x",
                label=f"{label}: hidden pass@1")
        ax.plot(xs, ys("false_alignment"), color=colour, linestyle=":",
                label=f"{label}: false alignment")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("tries")
    ax.set_ylabel("share of tasks (false alignment: of aligned tasks)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("self-align: alignment, hidden pass@1 and false alignment per try")
    ax.legend(loc="best", fontsize=6)
    return _png(fig)
