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

ReferencePoints = Mapping[str, Sequence[tuple[float, float]]]
"""Published figures to draw beside ours: series name -> ``[(x, y), ...]``."""


def _figure() -> tuple[Figure, Axes]:
    fig = Figure(figsize=(7, 4.5), dpi=110, layout="tight")
    FigureCanvasAgg(fig)  # attaches the off-screen Agg canvas to the figure
    return fig, fig.add_subplot()


def _save(fig: Figure, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out


def plot_jct_cdf(results: Sequence[RunResult], path: str | Path) -> Path:
    """Empirical CDF of the measured jobs' JCT, one line per run, log-scaled hours.

    Non-positive JCTs (possible only in hand-made records) cannot sit on a log axis and are
    left out of the line."""
    fig, ax = _figure()
    for result in results:
        hours = sorted(j.jct / 3600 for j in measured_jobs(result) if j.jct > 0)
        if hours:
            fractions = [(i + 1) / len(hours) for i in range(len(hours))]
            ax.step(hours, fractions, where="post", label=result.name)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.02)
    ax.grid(True, which="both", alpha=0.3)
    if ax.has_data():
        ax.legend()
    return _save(fig, path)


def plot_utilization(results: Sequence[RunResult], path: str | Path, bins: int = 200) -> Path:
    """GPU utilization over time (mean per bin), one line per run."""
    fig, ax = _figure()
    for result in results:
        edges, util = utilization_timeline(result, bins)
        if util:
            mids = [(a + b) / 2 / 3600 for a, b in zip(edges[:-1], edges[1:], strict=True)]
            ax.plot(mids, [u * 100 for u in util], label=result.name)
    ax.set_xlabel("time (hours)")
    ax.set_ylabel("GPU utilization (%)")
    ax.set_ylim(0, 102)
    ax.grid(True, alpha=0.3)
    if ax.has_data():
        ax.legend()
    return _save(fig, path)


def plot_sweep(
    rows: Sequence[Mapping[str, object]],
    metric: str,
    path: str | Path,
    x: str = "load",
    series: str = "name",
    reference: ReferencePoints | None = None,
) -> Path:
    """``metric`` against ``x`` (default: the load in jobs/hour), one line per ``series`` value;
    ``reference`` points (e.g. what Blox published) as unconnected markers in the same colour
    as the series of the same name. Rows missing ``x`` or ``metric`` (or with ``None``) are
    skipped."""
    lines: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        xv, yv = row.get(x), row.get(metric)
        if isinstance(xv, int | float) and isinstance(yv, int | float):
            lines.setdefault(str(row.get(series, "")), []).append((float(xv), float(yv)))
    fig, ax = _figure()
    colours: dict[str, object] = {}
    for name, points in lines.items():
        points.sort()
        (line,) = ax.plot([p[0] for p in points], [p[1] for p in points], "-o", label=name)
        colours[name] = line.get_color()
    for name, published in (reference or {}).items():
        ax.plot(
            [p[0] for p in published],
            [p[1] for p in published],
            linestyle="none",
            marker="X",
            markersize=10,
            color=colours.get(name),
            label=f"{name} (published)",
        )
    ax.set_xlabel(x)
    ax.set_ylabel(metric)
    ax.grid(True, alpha=0.3)
    if ax.has_data():
        ax.legend()
    return _save(fig, path)


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
        paths += [
            plot_sweep(rows, metric, out / f"sweep_{metric}.png", reference=refs.get(metric))
            for metric in metrics
        ]
    return paths
