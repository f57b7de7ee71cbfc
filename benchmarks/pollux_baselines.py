"""Pollux and its baselines on the artifact's workloads: average JCT and run time.

    python benchmarks/pollux_baselines.py --data ../shared/data/pollux
    python benchmarks/pollux_baselines.py --data ../shared/data/pollux --workloads all \\
        --loads workloads-0.5 workloads workloads-1.5 workloads-2.0 --plot docs/pollux_fig8.png

Each workload runs under the bundled compositions ``pollux``, ``tiresias-tuned`` and
``optimus-tuned`` (the artifact's world: 60 s rounds, 30 s per (re-)allocation) on the
published cluster, 16 nodes of 4 GPUs, one run at a time. Beside workload-6 at the published
load it prints the artifact's figures (OSDI'21, Figure 8's workload); after the runs, per load,
the mean, least and most average JCT over the workloads beside the artifact's mean, and with
``--plot`` draws them as the paper's Figure 8a. A benchmark, not a test: it prints figures
and asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from blox_slurm.loading import load
from blox_slurm.sim.config import SimConfig
from blox_slurm.sim.experiment import Experiment, WorkloadSpec, run
from blox_slurm.sim.metrics import summarize
from blox_slurm.sim.options import sim_table

COMPOSITIONS = ("pollux", "tiresias-tuned", "optimus-tuned")
# The artifact's average JCTs (seconds) on workload-6 at the published load.
PUBLISHED = {"pollux": 2446.0, "tiresias-tuned": 3470.0, "optimus-tuned": 5302.0}
# The artifact's mean over its 8 workloads of their average JCTs (seconds) per relative load:
# "mean" of simulator/results-jobload/<policy>-<load>/summary.json (Figure 8a's points).
ARTIFACT_MEANS = {
    "pollux": {0.5: 1534.0, 1.0: 2751.0, 1.5: 3685.0, 2.0: 5289.0},
    "tiresias-tuned": {0.5: 2091.0, 1.0: 4038.0, 1.5: 6182.0, 2.0: 10040.0},
    "optimus-tuned": {0.5: 2395.0, 1.0: 5682.0, 1.5: 7235.0, 2.0: 9721.0},
}
LABELS = {"pollux": "Pollux (p = -1)", "tiresias-tuned": "Tiresias+TunedJobs",
          "optimus-tuned": "Optimus+Oracle+TunedJobs"}
CLUSTER = "gpu:4x16"


class Run(NamedTuple):
    load: float
    workload: str
    composition: str
    jct: float


class Spread(NamedTuple):
    mean: float
    least: float
    most: float


def simulate(name: str, path: Path) -> tuple[float, float]:
    """Average JCT and the run's wall seconds of composition ``name`` on ``path``."""
    exp = Experiment(composition=load(name).config, cluster=CLUSTER,
                     sim=SimConfig.model_validate(sim_table(name)),
                     workload=WorkloadSpec(path=str(path), format="pollux"))
    result = run(exp)
    return summarize(result).avg_jct or 0.0, result.wall_seconds


def relative_load(load_dir: str) -> float:
    """The artifact's naming: ``workloads`` is the published load, ``workloads-0.5`` half."""
    _, _, factor = load_dir.partition("-")
    return float(factor) if factor else 1.0


def run_all(data: Path, loads: Sequence[str], workloads: Sequence[str],
            compositions: Sequence[str]) -> list[Run]:
    """Every (load, workload, composition), printed as it finishes (a run takes seconds)."""
    print(f"{'load':14} {'workload':11} {'composition':15} {'avg JCT s':>10} {'wall s':>7}"
          f" {'artifact s':>11} {'diff':>7}")
    runs = []
    for load_dir in loads:
        directory = data / load_dir
        names = (sorted(p.stem for p in directory.glob("*.csv")) if list(workloads) == ["all"]
                 else workloads)
        for workload in names:
            for name in compositions:
                jct, wall = simulate(name, directory / f"{workload}.csv")
                ref = PUBLISHED.get(name) if (load_dir, workload) == (
                    "workloads", "workload-6") else None
                tail = f" {ref:11.0f} {jct / ref - 1:+7.1%}" if ref else ""
                print(f"{load_dir:14} {workload:11} {name:15} {jct:10.0f} {wall:7.2f}{tail}",
                      flush=True)
                runs.append(Run(relative_load(load_dir), workload, name, jct))
    return runs


def spreads(runs: Sequence[Run]) -> dict[str, dict[float, Spread]]:
    """Per composition and load, the mean, least and most average JCT over the workloads."""
    groups: dict[tuple[str, float], list[float]] = {}
    for r in runs:
        groups.setdefault((r.composition, r.load), []).append(r.jct)
    out: dict[str, dict[float, Spread]] = {}
    for (name, x), jcts in groups.items():
        out.setdefault(name, {})[x] = Spread(statistics.fmean(jcts), min(jcts), max(jcts))
    return out


def print_table(table: dict[str, dict[float, Spread]]) -> None:
    """The per-load table (seconds), as docs/pollux.md shows it: ours, then the artifact's."""
    names = list(table)
    print("\n| load | " + " | ".join(f"`{n}` mean (least-most)" for n in names)
          + " | " + " | ".join(f"artifact `{n}`" for n in names) + " |")
    print("| --- |" + " ---: |" * (2 * len(names)))
    for x in sorted({x for by_load in table.values() for x in by_load}):
        ours = [table[n].get(x) for n in names]
        cells = [f"{s.mean:,.0f} ({s.least:,.0f}-{s.most:,.0f})" if s else "" for s in ours]
        refs = [f"{ARTIFACT_MEANS.get(n, {}).get(x, float('nan')):,.0f}" for n in names]
        print(f"| {x:g}x | " + " | ".join(cells + refs) + " |")


def plot(table: dict[str, dict[float, Spread]], workloads: int, path: Path) -> None:
    """Figure 8a's shape: average JCT (hours) against the relative load, a line per
    composition through the means over the workloads, whiskers from the least to the most
    workload, and the artifact's means dotted in the same colour. Compositions are nudged
    apart on x so their whiskers do not hide each other."""
    from blox_slurm.sim.plot import figure, save  # matplotlib only when a plot is asked for
    from blox_slurm.sim.styles import styles

    fig, (ax,) = figure()
    for i, (name, style) in enumerate(styles(list(table)).items()):
        xs = sorted(table[name])
        pts = [table[name][x] for x in xs]
        shift = [x + 0.03 * (i - 1) for x in xs]
        ax.errorbar(shift, [s.mean / 3600 for s in pts], capsize=4, color=style.colour,
                    yerr=[[(s.mean - s.least) / 3600 for s in pts],
                          [(s.most - s.mean) / 3600 for s in pts]],
                    marker=style.marker, linestyle="-", label=LABELS.get(name, name))
        ref = ARTIFACT_MEANS.get(name, {})
        ax.plot(sorted(ref), [ref[x] / 3600 for x in sorted(ref)], color=style.colour,
                marker=style.marker, markerfacecolor="none", linestyle=":",
                label=f"{LABELS.get(name, name)}, artifact")
    loads = sorted({x for by_load in [*table.values(), *ARTIFACT_MEANS.values()]
                    for x in by_load})
    ax.set_xticks(loads, [f"{x:g}x" for x in loads])
    ax.set_xlabel("relative job load (x the published workloads' arrival rate)")
    ax.set_ylabel("average JCT (hours)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.set_title(f"Average JCT against job load: mean of {workloads} workloads "
                 "(whiskers: least to most), 64 GPUs", fontsize=10)
    handles, labels = ax.get_legend_handles_labels()  # ours first, then the artifact's
    order = sorted(range(len(labels)), key=lambda i: labels[i].endswith("artifact"))
    ax.legend([handles[i] for i in order], [labels[i] for i in order], fontsize=8,
              loc="upper left")
    save(fig, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True,
                        help="the artifact's simulator/ directory (workloads*/, traces/)")
    parser.add_argument("--workloads", nargs="+", default=["workload-6"],
                        help="workload names, or 'all' (default: workload-6)")
    parser.add_argument("--loads", nargs="+", default=["workloads"],
                        help="workload directories, e.g. workloads-0.5 (default: workloads)")
    parser.add_argument("--compositions", nargs="+", default=list(COMPOSITIONS))
    parser.add_argument("--plot", type=Path, help="draw the per-load figure to this PNG")
    args = parser.parse_args()
    runs = run_all(args.data, args.loads, args.workloads, args.compositions)
    table = spreads(runs)
    print_table(table)
    if args.plot:
        plot(table, len({r.workload for r in runs}), args.plot)
        print(f"wrote {args.plot}")


if __name__ == "__main__":
    main()
