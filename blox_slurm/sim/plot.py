"""PNG figures of simulation (or emulator) results: JCT CDFs, utilization timelines, sweeps.

Why ``Figure`` + ``FigureCanvasAgg`` instead of ``pyplot``: pyplot keeps global state and picks
a GUI backend when a display exists. Drawing on an explicit Agg canvas renders off-screen,
needs no display, never switches the backend of a host program that also uses matplotlib, and
is safe in the process pool ``compare`` and ``sweep`` run in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .metrics import measured_jobs, utilization_timeline
from .records import RunResult
from .styles import UNITS, styles

ReferencePoints = Mapping[str, Sequence[tuple[float, float]]]
"""Published figures to draw beside ours: series name -> ``[(x, y), ...]``."""


def figure(panels: int = 1) -> tuple[Figure, list[Axes]]:
    """A figure of ``panels`` side by side sharing their y axis (one per load or trace)."""
    fig = Figure(figsize=(7, 4.5) if panels == 1 else (3.3 * panels + 0.8, 4.5), dpi=110,
                 layout="constrained")
    FigureCanvasAgg(fig)  # attaches the off-screen Agg canvas to the figure
    return fig, list(fig.subplots(1, panels, sharey=True, squeeze=False)[0])


def save(fig: Figure, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out


def _load(result: RunResult) -> float | None:
    load = result.params.get("jobs_per_hour")
    return float(load) if isinstance(load, int | float) else None


def context(results: Sequence[RunResult]) -> str:
    """What a figure shows, for its title: cluster, jobs, load(s) or trace."""
    def values(key: str) -> list[str]:
        return list(dict.fromkeys(str(r.params[key]) for r in results if key in r.params))

    loads = sorted({x for r in results if (x := _load(r)) is not None})
    parts = [", ".join(values("cluster")), f"{'/'.join(values('jobs'))} jobs",
             ", ".join(f"{x:g}" for x in loads) + " jobs/h" if loads else
             ", ".join(Path(w).name for w in values("workload"))]
    return ", ".join(p for p in parts if p and p != " jobs")


def panels(results: Sequence[RunResult]) -> list[tuple[str, list[RunResult]]]:
    """The runs by load (or trace), lowest load first: one panel each, so every composition
    keeps its one style; beyond four, the lowest, the highest and two spread between."""
    groups: dict[tuple[bool, float, str], list[RunResult]] = {}
    for r in results:
        load = _load(r)
        name = f"{load:g} jobs/h" if load is not None else Path(
            str(r.params.get("trace") or r.params.get("workload") or "")).name
        groups.setdefault((load is None, load or 0.0, name), []).append(r)
    ordered = [(key[2], runs) for key, runs in sorted(groups.items())]
    if len(ordered) > 4:
        step = (len(ordered) - 1) / 3
        ordered = [ordered[round(i * step)] for i in range(4)]
    return ordered


def plot_jct_cdf(results: Sequence[RunResult], path: str | Path, title: str = "") -> Path:
    """Empirical CDF of the measured jobs' JCT on a log axis of hours: a panel per load (or
    trace), a line per composition, its runs (seeds) pooled.

    Non-positive JCTs (possible only in hand-made records) cannot sit on a log axis and are
    left out of the line."""
    groups = panels(results) or [("", [])]
    style = styles([r.name for r in results])
    fig, axes = figure(len(groups))
    for ax, (name, runs) in zip(axes, groups, strict=True):
        for comp, st in style.items():
            hours = sorted(j.jct / 3600 for r in runs if r.name == comp
                           for j in measured_jobs(r) if j.jct > 0)
            if hours:
                ax.step(hours, [(i + 1) / len(hours) for i in range(len(hours))], where="post",
                        label=comp, color=st.colour, linestyle=st.line)
        ax.set_xscale("log")
        ax.set_xlabel("JCT (hours, log scale)")
        ax.set_title(name if len(groups) > 1 else "", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("fraction of measured jobs")
    axes[0].set_ylim(0, 1.02)
    fig.suptitle(title or f"JCT CDF — {context(results)}", fontsize=10)
    if axes[0].has_data():
        axes[0].legend(fontsize=8, loc="lower right" if len(groups) == 1 else "upper left")
    return save(fig, path)


def plot_utilization(results: Sequence[RunResult], path: str | Path, bins: int = 200) -> Path:
    """GPU utilization over time (mean per bin): a panel per load, a line per run; the
    legend sits beside the axes, where it cannot cover a line."""
    groups = panels(results) or [("", [])]
    style = styles([r.name for r in results])
    fig, axes = figure(len(groups))
    for ax, (name, runs) in zip(axes, groups, strict=True):
        for i, r in enumerate(runs):
            edges, util = utilization_timeline(r, bins)
            if util:
                mids = [(a + b) / 2 / 3600 for a, b in zip(edges[:-1], edges[1:], strict=True)]
                first = all(q.name != r.name for q in runs[:i])
                ax.plot(mids, [u * 100 for u in util], color=style[r.name].colour,
                        linestyle=style[r.name].line, linewidth=1,
                        label=r.name if first and ax is axes[0] else None)
        ax.set_xlabel("time (hours)")
        ax.set_title(name if len(groups) > 1 else "", fontsize=9)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("GPU utilization (%)")
    axes[0].set_ylim(0, 102)
    fig.suptitle(f"GPU utilization — {context(results)}", fontsize=10)
    if axes[0].has_data():
        fig.legend(loc="outside right upper", fontsize=8)
    return save(fig, path)


def plot_sweep(
    rows: Sequence[Mapping[str, object]],
    metric: str,
    path: str | Path,
    x: str = "load",
    series: str = "name",
    reference: ReferencePoints | None = None,
    title: str = "",
) -> Path:
    """``metric`` against ``x`` (default: the load in jobs/hour), one line per ``series`` value;
    ``reference`` points (e.g. what Blox published, in the rows' units) as unconnected markers
    in the same colour as the series of the same name. A metric in seconds is drawn in the
    unit the tables use (hours for JCTs, minutes for waits). Rows missing ``x`` or ``metric``
    (or with ``None``) are skipped."""
    scale, ylabel = UNITS.get(metric, (1.0, metric))
    lines = sweep_lines(rows, metric, x, series)
    fig, (ax,) = figure()
    style = styles([*lines, *(reference or {})])
    for name, points in lines.items():
        st = style[name]
        ax.plot([p[0] for p in points], [p[1] for p in points], color=st.colour,
                linestyle=st.line, marker=st.marker, markersize=4, label=name)
    for name, published in (reference or {}).items():
        ax.plot([p[0] for p in published], [p[1] / scale for p in published], linestyle="none",
                marker="X", markersize=10, color=style[name].colour, label=f"{name} (published)")
    xs = sorted({p[0] for points in lines.values() for p in points})
    if x == "load" and 1 < len(xs) <= 12:
        ax.set_xticks(xs)
    ax.set_xlabel("load (jobs/hour)" if x == "load" else x)
    ax.set_ylabel(ylabel)
    ax.set_title(title or ylabel, fontsize=10)
    ax.grid(True, alpha=0.3)
    if ax.has_data():
        ax.legend(fontsize=8, loc="upper left")
    return save(fig, path)


def sweep_lines(rows: Sequence[Mapping[str, object]], metric: str, x: str = "load",
                series: str = "name") -> dict[str, list[tuple[float, float]]]:
    """Per ``series`` value, the sorted ``(x, metric)`` points in the tables' unit."""
    scale = UNITS.get(metric, (1.0, metric))[0]
    lines: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        xv, yv = row.get(x), row.get(metric)
        if isinstance(xv, int | float) and isinstance(yv, int | float):
            lines.setdefault(str(row.get(series, "")), []).append((float(xv), float(yv) / scale))
    return {name: sorted(points) for name, points in lines.items()}


def write_plots(
    results: Sequence[RunResult],
    out_dir: str | Path,
    rows: Sequence[Mapping[str, object]] = (),
    metrics: Sequence[str] = ("avg_jct", "avg_responsiveness"),
    reference: Mapping[str, ReferencePoints] | None = None,
) -> list[Path]:
    """What ``blox-slurm plot`` writes into ``out_dir``: ``jct_cdf.png``,
    ``utilization.png`` and, when sweep ``rows`` are given, ``sweep_<metric>.png`` for each
    metric (``reference`` maps a metric to its published points). Returns the paths written."""
    out = Path(out_dir)
    paths = [
        plot_jct_cdf(results, out / "jct_cdf.png"),
        plot_utilization(results, out / "utilization.png"),
    ]
    if rows:
        refs = reference or {}
        what = context(results)
        paths += [
            plot_sweep(rows, metric, out / f"sweep_{metric}.png", reference=refs.get(metric),
                       title=f"{UNITS.get(metric, (1.0, metric))[1]} — {what}")
            for metric in metrics
        ]
    return paths
