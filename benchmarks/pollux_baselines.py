"""Pollux and its baselines on the artifact's workloads: average JCT and run time.

    python benchmarks/pollux_baselines.py --data ../shared/data/pollux
    python benchmarks/pollux_baselines.py --data ../shared/data/pollux \\
        --workloads all --loads workloads workloads-0.5 workloads-2.0

Each workload runs under the bundled compositions ``pollux``, ``tiresias-tuned`` and
``optimus-tuned`` (the artifact's world: 60 s rounds, 30 s per (re-)allocation) on the
published cluster, 16 nodes of 4 GPUs, one run at a time. Beside workload-6 at the published
load it prints the artifact's figures (OSDI'21, Figure 8's workload). A benchmark, not a
test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from blox_slurm.loading import load
from blox_slurm.sim.config import SimConfig
from blox_slurm.sim.experiment import Experiment, WorkloadSpec, run
from blox_slurm.sim.metrics import summarize
from blox_slurm.sim.options import sim_table

COMPOSITIONS = ("pollux", "tiresias-tuned", "optimus-tuned")
# The artifact's average JCTs (seconds) on workload-6 at the published load.
PUBLISHED = {"pollux": 2446.0, "tiresias-tuned": 3470.0, "optimus-tuned": 5302.0}
CLUSTER = "gpu:4x16"


def simulate(name: str, path: Path) -> tuple[float, float]:
    """Average JCT and the run's wall seconds of composition ``name`` on ``path``."""
    exp = Experiment(composition=load(name).config, cluster=CLUSTER,
                     sim=SimConfig.model_validate(sim_table(name)),
                     workload=WorkloadSpec(path=str(path), format="pollux"))
    result = run(exp)
    return summarize(result).avg_jct or 0.0, result.wall_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True,
                        help="the artifact's simulator/ directory (workloads*/, traces/)")
    parser.add_argument("--workloads", nargs="+", default=["workload-6"],
                        help="workload names, or 'all' (default: workload-6)")
    parser.add_argument("--loads", nargs="+", default=["workloads"],
                        help="workload directories, e.g. workloads-0.5 (default: workloads)")
    parser.add_argument("--compositions", nargs="+", default=list(COMPOSITIONS))
    args = parser.parse_args()
    print(f"{'load':14} {'workload':11} {'composition':15} {'avg JCT s':>10} {'wall s':>7}"
          f" {'artifact s':>11} {'diff':>7}")
    for load_dir in args.loads:
        directory = args.data / load_dir
        names = (sorted(p.stem for p in directory.glob("*.csv")) if args.workloads == ["all"]
                 else args.workloads)
        for workload in names:
            for name in args.compositions:
                jct, wall = simulate(name, directory / f"{workload}.csv")
                ref = PUBLISHED.get(name) if (load_dir, workload) == (
                    "workloads", "workload-6") else None
                tail = f" {ref:11.0f} {jct / ref - 1:+7.1%}" if ref else ""
                print(f"{load_dir:14} {workload:11} {name:15} {jct:10.0f} {wall:7.2f}{tail}",
                      flush=True)


if __name__ == "__main__":
    main()
