"""Sweep plots (matplotlib, Agg backend: no display needed), each as PNG and SVG.

- latency_vs_area and energy_vs_latency: one panel per axis, points coloured by that axis's
  value, the Pareto front of the two plotted metrics drawn as a step line, constraints dashed;
- effect_<axis>: each objective against that axis's values (every design as a dot, median line),
  which shows where more of a resource stops paying.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

from .pareto import pareto_front
from .runner import SweepResult
from .sweep import METRICS


def _plt():
    import matplotlib
    matplotlib.use("Agg")  # files only; must precede pyplot's import
    import matplotlib.pyplot as plt
    return plt


_NAMES = {"latency_ms": "latency", "energy_uj": "energy", "power_mw": "average power", "area_mm2": "area",
          "edp": "energy-delay product", "throughput_per_mm2": "throughput per mm²", "mac_utilization": "MAC utilization"}


def _label(metric: str) -> str:
    unit = METRICS[metric][1]
    name = _NAMES.get(metric, metric)
    return f"{name} ({unit})" if unit else name


def _save(fig, plot_dir: Path, stem: str) -> list[Path]:
    paths = [plot_dir / f"{stem}.png", plot_dir / f"{stem}.svg"]
    fig.savefig(paths[0], dpi=110, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    _plt().close(fig)
    return paths


def _colours(n: int):
    plt = _plt()
    cmap = plt.get_cmap("tab10" if n <= 10 else "viridis")
    return [cmap(i if n <= 10 else i / max(n - 1, 1)) for i in range(n)]


def _grid(n: int, plt, width=4.6, height=3.6):
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axs = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False, layout="constrained")
    for ax in axs.flat[n:]:
        ax.set_visible(False)
    return fig, list(axs.flat[:n])


def scatter(result: SweepResult, x: str, y: str, plot_dir: Path, stem: str) -> list[Path]:
    plt, sweep = _plt(), result.sweep
    ok = [r for r in result.designs if r["status"] == "ok" and r.get(x) is not None and r.get(y) is not None]
    front = pareto_front(ok, [x, y], sweep.constraints)
    fig, panels = _grid(len(sweep.axes), plt)
    for ax, axis in zip(panels, sweep.axes):
        colours = _colours(len(axis.values))
        for i in range(len(axis.values)):
            pts = [r for r in ok if r["labels"][axis.name] == axis.label(i)]
            if pts:
                ax.scatter([r[x] for r in pts], [r[y] for r in pts], s=28, color=colours[i],
                           label=axis.label(i), alpha=0.85, edgecolors="none")
        if front:
            ax.step([r[x] for r in front], [r[y] for r in front], where="post", color="black", lw=1,
                    label="Pareto front")
            ax.scatter([r[x] for r in front], [r[y] for r in front], s=60, facecolors="none", edgecolors="black")
        for c in sweep.constraints:
            if c.metric == x:
                ax.axvline(c.bound, color="grey", ls="--", lw=1)
            if c.metric == y:
                ax.axhline(c.bound, color="grey", ls="--", lw=1)
        ax.set_xlabel(_label(x))
        ax.set_ylabel(_label(y))
        ax.set_title(f"coloured by {axis.name}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, title=axis.name, title_fontsize=7)
    fig.suptitle(f"{sweep.name}: {y} vs {x}", fontsize=10)
    return _save(fig, plot_dir, stem)


def effect(result: SweepResult, axis_index: int, plot_dir: Path) -> list[Path]:
    plt, sweep = _plt(), result.sweep
    axis = sweep.axes[axis_index]
    metrics = list(sweep.objectives)
    ok = [r for r in result.designs if r["status"] == "ok"]
    fig, panels = _grid(len(metrics), plt, width=4.2, height=3.2)
    n = len(axis.values)
    for ax, metric in zip(panels, metrics):
        medians = []
        for i in range(n):
            ys = sorted(r[metric] for r in ok if r["labels"][axis.name] == axis.label(i) and r.get(metric) is not None)
            # a little horizontal spread keeps designs that share an axis value apart
            xs = [i + (j - (len(ys) - 1) / 2) * min(0.3 / max(len(ys), 1), 0.05) for j in range(len(ys))]
            ax.scatter(xs, ys, s=18, color="tab:blue", alpha=0.7, edgecolors="none", zorder=3)
            medians.append(ys[len(ys) // 2] if ys else float("nan"))
        ax.plot(range(n), medians, color="tab:red", marker="_", ms=14, lw=1.2, alpha=0.8, label="median", zorder=2)
        ax.set_xticks(range(n), [axis.label(i) for i in range(n)], rotation=30 if n > 5 else 0, fontsize=8)
        ax.set_xlabel(axis.name)
        ax.set_ylabel(_label(metric))
        ax.grid(alpha=0.3)
    panels[0].legend(fontsize=7)
    fig.suptitle(f"{sweep.name}: effect of {axis.name}", fontsize=10)
    return _save(fig, plot_dir, "effect_" + re.sub(r"[^A-Za-z0-9]+", "_", axis.name).strip("_"))


def make_plots(result: SweepResult, plot_dir: Path | None = None) -> list[Path]:
    plot_dir = Path(plot_dir or result.outdir / "plots")
    plot_dir.mkdir(parents=True, exist_ok=True)
    files = []
    if result.sweep.base.area is not None:
        files += scatter(result, "area_mm2", "latency_ms", plot_dir, "latency_vs_area")
    files += scatter(result, "latency_ms", "energy_uj", plot_dir, "energy_vs_latency")
    for i in range(len(result.sweep.axes)):
        files += effect(result, i, plot_dir)
    return files
