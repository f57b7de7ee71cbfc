"""A sweep's figures and its one-page report (``report.md``: what ran, the table, the figures).

Per cluster of the sweep: the average JCT and the responsiveness against the load, one line
per composition with its 95 % band over seeds, and the JCT CDFs on a log axis, one panel per
load (up to four, spread over the sweep's range), seeds pooled. A sweep over traces gets bars
per trace instead of lines per load. Drawn on an off-screen Agg canvas like ``plot.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from .plot import figure, plot_jct_cdf, save
from .records import RunResult
from .styles import Style, styles
from .sweep_report import (
    Estimate,
    Group,
    estimates,
    pivot_markdown,
    table_markdown,
    write_tables,
)

Estimates = Mapping[Group, Mapping[str, Estimate]]
#: Bars spanning more than this factor are drawn on a log axis.
LOG_SPAN = 20.0
METRICS = (("avg_jct", "average JCT (hours)", "jct"),
           ("avg_responsiveness", "average responsiveness (minutes)", "responsiveness"))


def _subtitle(results: Sequence[RunResult], cluster: str) -> str:
    jobs = {r.params.get("jobs") for r in results if r.params.get("cluster") == cluster}
    seeds = {r.params.get("seed") for r in results if r.params.get("cluster") == cluster}
    return (f"cluster {cluster}, {'/'.join(str(j) for j in sorted(map(str, jobs)))} jobs, "
            f"{len(seeds)} seed(s)")


def load_figure(est: Estimates, metric: str, label: str, cluster: str, colour: Mapping[str, Style],
                title: str, path: Path) -> Path:
    """``metric`` against the load, a line per composition, its 95 % band over seeds."""
    fig, (ax,) = figure()
    loads: set[float] = set()
    for comp, st in colour.items():
        points = sorted((g.load, e[metric]) for g, e in est.items()
                        if g.cluster == cluster and g.composition == comp
                        and g.load is not None and metric in e)
        if not points:
            continue
        x = [p[0] for p in points]
        loads.update(x)
        ax.plot(x, [p[1].mean for p in points], color=st.colour, linestyle=st.line,
                marker=st.marker, label=comp, markersize=4)
        if any(p[1].n > 1 for p in points):
            ax.fill_between(x, [max(0.0, p[1].mean - p[1].half_width) for p in points],
                            [p[1].mean + p[1].half_width for p in points],
                            color=st.colour, alpha=0.12, linewidth=0)
    ax.set_xticks(sorted(loads))
    ax.set_xlabel("load (jobs/hour)")
    ax.set_ylabel(label)
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", frameon=True)
    return save(fig, path)


def trace_figure(est: Estimates, metric: str, label: str, cluster: str,
                 colour: Mapping[str, Style], title: str, path: Path) -> Path:
    """Bars per trace, one per composition (a sweep over traces has no load axis). On a log
    axis when the bars span more than :data:`LOG_SPAN` (Gavel's 0e4a51 trace averages 30x its
    siblings' JCT): on a linear one the light traces' bars are flat and unreadable."""
    traces = sorted({g.workload for g in est if g.cluster == cluster})
    fig, (ax,) = figure()
    width = 0.8 / max(1, len(colour))
    heights = []
    for k, (comp, st) in enumerate(colour.items()):
        for i, trace in enumerate(traces):
            e = next((v[metric] for g, v in est.items() if g.cluster == cluster
                      and g.workload == trace and g.composition == comp and metric in v), None)
            if e is not None:
                ax.bar(i + k * width, e.mean, width, color=st.colour, yerr=e.half_width or None,
                       label=comp if i == 0 else None)
                heights.append(e.mean)
    ax.set_xticks([i + width * (len(colour) - 1) / 2 for i in range(len(traces))], traces,
                  fontsize=8)
    positive = [h for h in heights if h > 0]
    if positive and max(positive) > LOG_SPAN * min(positive):
        from matplotlib.ticker import LogLocator, ScalarFormatter

        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))  # 5, 10, 20, 50...
        ax.yaxis.set_major_formatter(ScalarFormatter())
        label = label.replace(")", ", log scale)")
    ax.set_ylabel(label)
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return save(fig, path)


def write_report(name: str, compositions: Sequence[str], results: Sequence[RunResult],
                 out: Path) -> Path:
    """``results.csv``, ``summary.csv``, the figures and ``report.md`` into ``out``."""
    write_tables(results, out)
    est = estimates(results)
    colour = styles(compositions)
    clusters = sorted({g.cluster for g in est})
    figures: list[Path] = []
    for i, cluster in enumerate(clusters):
        tag = f"-{i}" if len(clusters) > 1 else ""
        sub = _subtitle(results, cluster)
        for metric, label, stem in METRICS:
            title = f"{name}: {label.split(' (')[0]}\n{sub}"  # one line is cut at 80 chars
            draw = load_figure if any(g.load is not None for g in est) else trace_figure
            figures.append(draw(est, metric, label, cluster, colour, title,
                                out / f"{stem}{tag}.png"))
        mine = [r for r in results if r.params.get("cluster") == cluster]
        figures.append(plot_jct_cdf(mine, out / f"jct_cdf{tag}.png", f"{name}: JCT CDF — {sub}"))
    text = [f"# Sweep `{name}`", "", f"{len(results)} runs; compositions "
            f"{', '.join(compositions)}; cluster(s) {', '.join(clusters)}.",
            "Values: mean over seeds ± half-width of the 95 % confidence interval.", "",
            *(part for cluster in clusters for column in ("avg JCT h", "resp. min")
              for part in (f"### {column} on {cluster}", "", pivot_markdown(est, cluster, column),
                           "")),
            *(f"![{p.stem}]({p.name})" for p in figures), "", "### Every metric", "",
            table_markdown(est), ""]
    report = out / "report.md"
    report.write_text("\n".join(text))
    return report
