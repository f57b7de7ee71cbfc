"""Must-show: Gavel max-min fairness vs heterogeneity-agnostic LAS on Gavel's Philly traces.

    python benchmarks/gavel_vs_las.py                       # msr_seed0_2869ce, every job
    python benchmarks/gavel_vs_las.py --trace 0e4a51 --jobs 400

Cluster: 36 V100 + 36 P100 + 36 K80 GPUs (9 nodes x 4 of each type). The simulator's speeds
come from Gavel's measured ``simulation_throughputs.json`` (GavelThroughput, as with
``--throughputs``): a job runs at its V100 rate on V100s and slower on P100/K80. Both
compositions run the identical job stream, 360 s rounds (Gavel's), 30 s restart cost.
Jobs whose model does not run on some type at its GPU count (Gavel measured 0.0, e.g. large
models on K80s) are dropped and counted: a heterogeneity-agnostic scheduler would place them
there and make no progress (the simulator rejects that). Prints each composition's average
JCT and the LAS / Gavel ratio.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from blox_slurm.composition import build, load
from blox_slurm.model import Job
from blox_slurm.sim.config import ClusterSpec, SimConfig
from blox_slurm.sim.metrics import summarize
from blox_slurm.sim.simulator import Simulator
from blox_slurm.throughput import DEFAULT_THROUGHPUT
from blox_slurm.workloads.gavel import load_gavel
from blox_slurm.workloads.gavel_throughput import GavelThroughput
from blox_slurm.workloads.schema import JobSpec

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "gavel"
CLUSTER = "v100:4x9,p100:4x9,k80:4x9"
COMPOSITIONS = {
    "gavel (max-min fairness)": "gavel",
    "las + first_fit": "las",
    "las + consolidated": {"name": "las-consolidated", "scheduling": "las",
                           "placement": {"policy": "consolidated", "spread_if_needed": True}},
}


def runs_everywhere(thr: GavelThroughput, spec: JobSpec) -> bool:
    job = Job(spec.id, spec.submit_time, spec.num_gpus, model=spec.model)
    return all(thr.rate(job, spec.num_gpus, nodes, t) > 0
               for t in ("v100", "p100", "k80") for nodes in (1, 2))


def run(args: tuple[str, object, str, int | None]) -> tuple[str, float, int, float, int]:
    label, comp, trace, jobs = args
    thr = GavelThroughput(DATA / "simulation_throughputs.json", fallback=DEFAULT_THROUGHPUT)
    workload = load_gavel(DATA / f"msr_seed0_{trace}.trace", throughputs=thr)
    if jobs is not None:
        workload = replace(workload, jobs=workload.jobs[:jobs], measure=None)
    kept = tuple(j for j in workload.jobs if runs_everywhere(thr, j))
    dropped = len(workload.jobs) - len(kept)
    workload = replace(workload, jobs=kept)
    c = load(comp) if isinstance(comp, str) else build(comp)
    cfg = SimConfig(round_duration=360.0, restart_cost=30.0)
    t0 = time.perf_counter()
    result = Simulator(workload, c, ClusterSpec.parse(CLUSTER).build(), cfg, thr).run()
    return label, summarize(result).avg_jct or float("nan"), len(result.jobs), \
        time.perf_counter() - t0, dropped


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace", default="2869ce", choices=["0e4a51", "2869ce", "e13805"])
    ap.add_argument("--jobs", type=int, default=None, help="only the first N jobs (a prefix)")
    a = ap.parse_args()
    if not (DATA / "simulation_throughputs.json").exists():
        raise SystemExit(f"Gavel reference data not found at {DATA}")
    print(f"trace msr_seed0_{a.trace} ({'all jobs' if a.jobs is None else f'first {a.jobs}'}),"
          f" cluster {CLUSTER}, GavelThroughput, 360 s rounds, 30 s restart cost")
    work = [(label, comp, a.trace, a.jobs) for label, comp in COMPOSITIONS.items()]
    with ProcessPoolExecutor(max_workers=len(work)) as pool:
        results = list(pool.map(run, work))
    print(f"{'composition':<28}{'avg JCT (h)':>12}{'jobs':>7}{'wall s':>9}")
    for label, jct, n, wall, _ in results:
        print(f"{label:<28}{jct / 3600:>12.2f}{n:>7}{wall:>9.1f}")
    print(f"dropped {results[0][4]} jobs that do not run on every GPU type")
    gavel = results[0][1]
    for label, jct, *_ in results[1:]:
        print(f"avg JCT {label} / gavel: {jct / gavel:.2f}x")


if __name__ == "__main__":
    main()
