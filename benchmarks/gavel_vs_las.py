"""Must-show: Gavel max-min fairness vs heterogeneity-agnostic LAS on Gavel's Philly traces.

    python benchmarks/gavel_vs_las.py --data DIR            # msr_seed0_2869ce, every job
    python benchmarks/gavel_vs_las.py --data DIR --trace 0e4a51 --jobs 400
    python benchmarks/gavel_vs_las.py --data DIR --trace e13805 --cluster k80:4x9,p100:4x9,v100:4x9
    python benchmarks/gavel_vs_las.py --data DIR --trace e13805 --arrival-scale 2   # 2x the load

``DIR`` holds Gavel's ``msr_seed0_<id>.trace`` files and ``simulation_throughputs.json``
(``$GAVEL_DATA`` when ``--data`` is not given).

Cluster: 36 V100 + 36 P100 + 36 K80 GPUs (9 nodes x 4 of each type). The simulator's speeds
come from Gavel's measured ``simulation_throughputs.json`` (GavelThroughput, as with
``--throughputs``): a job runs at its V100 rate on V100s and at its measured rate on P100/K80
(slower for most models; Recommendation runs faster on P100 and K80 in Gavel's table). Every
composition runs the identical job stream, 360 s rounds (Gavel's), 30 s restart cost.
Jobs whose model does not run on some type at its GPU count (Gavel measured 0.0, e.g. large
models on K80s) are dropped and counted (``handle_unrunnable(..., "drop")``, what
``--unrunnable drop`` does): a heterogeneity-agnostic scheduler would place them there and
make no progress (the simulator rejects that).

Prints the trace's offered load, then per composition the average and median JCT,
preemptions per job, queueing delay (time not holding GPUs), the average JCT per duration
bucket (isolated V100 run time), and the LAS / Gavel ratios. Diagnostics (see
docs/compositions.md, "Gavel vs LAS"): ``--cluster`` reorders the node types (LAS with
first_fit takes the lowest GPU ids, so which type is listed first decides where an
underloaded LAS runs), ``--arrival-scale k`` divides every submit time by ``k`` (k times the
load), ``--restart-cost`` changes the restart penalty.
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from blox_slurm.core.throughput import DEFAULT_THROUGHPUT
from blox_slurm.loading import build, load
from blox_slurm.sim.config import ClusterSpec, SimConfig
from blox_slurm.sim.metrics import summarize
from blox_slurm.sim.simulator import Simulator
from blox_slurm.workloads.gavel import load_gavel
from blox_slurm.workloads.gavel_throughput import GavelThroughput
from blox_slurm.workloads.runnable import handle_unrunnable
from blox_slurm.workloads.schema import Workload

CLUSTER = "v100:4x9,p100:4x9,k80:4x9"
COMPOSITIONS: dict[str, str | dict[str, Any]] = {
    "gavel (max-min fairness)": "gavel",
    "gavel, migrate = false": {"name": "gavel-confined",
                               "scheduling": {"policy": "gavel", "migrate": False},
                               "placement": {"policy": "consolidated", "spread_if_needed": True}},
    "las + first_fit": "las",
    "las + consolidated": {"name": "las-consolidated", "scheduling": "las",
                           "placement": {"policy": "consolidated", "spread_if_needed": True}},
}
# Duration buckets (isolated run time on V100s, hours): [lo, hi).
BUCKETS = ((0.0, 1.0), (1.0, 4.0), (4.0, 24.0), (24.0, float("inf")))


@dataclass(frozen=True)
class Setup:
    data: Path
    trace: str
    jobs: int | None = None
    cluster: str = CLUSTER
    arrival_scale: float = 1.0
    restart_cost: float = 30.0


@dataclass(frozen=True)
class Outcome:
    label: str
    avg_jct: float
    p50_jct: float
    preemptions_per_job: float
    queueing: float
    bucket_jct: tuple[float, ...]  # average JCT per BUCKETS entry (nan when empty)
    finished: int
    wall: float


def workload(setup: Setup) -> tuple[Workload, GavelThroughput, int]:
    """The job stream every composition runs, its throughput model and the dropped count."""
    thr = GavelThroughput(setup.data / "simulation_throughputs.json",
                          fallback=DEFAULT_THROUGHPUT)
    wl = load_gavel(setup.data / f"msr_seed0_{setup.trace}.trace", throughputs=thr)
    if setup.jobs is not None:
        wl = replace(wl, jobs=wl.jobs[:setup.jobs], measure=None)
    types = [t for t, _, _ in ClusterSpec.parse(setup.cluster).groups]
    wl, dropped = handle_unrunnable(wl, thr, types, "drop")
    if setup.arrival_scale != 1.0:
        wl = replace(wl, jobs=tuple(replace(j, submit_time=j.submit_time / setup.arrival_scale)
                                    for j in wl.jobs))
    return wl, thr, dropped


def data_dir(given: str | None) -> Path:
    """Gavel's data directory from ``--data`` or ``$GAVEL_DATA``: an argument, never a path
    baked into the repository."""
    if given is None:
        raise SystemExit("where is Gavel's data? pass --data DIR or set $GAVEL_DATA")
    if not (Path(given) / "simulation_throughputs.json").exists():
        raise SystemExit(f"{given}: no simulation_throughputs.json (pass --data DIR)")
    return Path(given)


def offered_load(wl: Workload, gpus: int) -> float:
    """GPU-seconds asked for (at V100 speed) per second of the arrival span, per GPU."""
    submits = [j.submit_time for j in wl.jobs]
    span = max(submits) - min(submits)
    work = sum((j.duration or 0.0) * j.num_gpus for j in wl.jobs)
    return work / span / gpus if span > 0 else float("nan")


def run(args: tuple[str, str | dict[str, Any], Setup]) -> Outcome:
    label, comp, setup = args
    wl, thr, _ = workload(setup)
    c = load(comp) if isinstance(comp, str) else build(comp)
    cfg = SimConfig(round_duration=360.0, restart_cost=setup.restart_cost)
    t0 = time.perf_counter()
    result = Simulator(wl, c, ClusterSpec.parse(setup.cluster).build(), cfg, thr).run()
    wall = time.perf_counter() - t0
    m = summarize(result)
    jct = np.array([r.jct for r in result.jobs])
    dur = np.array([r.duration for r in result.jobs]) / 3600
    buckets = tuple(float(jct[(dur >= lo) & (dur < hi)].mean())
                    if ((dur >= lo) & (dur < hi)).any() else float("nan") for lo, hi in BUCKETS)
    return Outcome(label, m.avg_jct or float("nan"), m.p50_jct or float("nan"),
                   m.preemptions_per_job or 0.0, m.avg_queueing_delay or 0.0, buckets,
                   len(result.jobs), wall)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=os.environ.get("GAVEL_DATA"),
                    help="directory with msr_seed0_<id>.trace and simulation_throughputs.json"
                    " (default: $GAVEL_DATA)")
    ap.add_argument("--trace", default="2869ce", choices=["0e4a51", "2869ce", "e13805"])
    ap.add_argument("--jobs", type=int, default=None, help="only the first N jobs (a prefix)")
    ap.add_argument("--cluster", default=CLUSTER, help="node types in GPU-id order")
    ap.add_argument("--arrival-scale", type=float, default=1.0,
                    help="divide submit times by this (2 = twice the load)")
    ap.add_argument("--restart-cost", type=float, default=30.0)
    ap.add_argument("--workers", type=int, default=len(COMPOSITIONS))
    a = ap.parse_args()
    setup = Setup(data_dir(a.data), a.trace, a.jobs, a.cluster, a.arrival_scale, a.restart_cost)
    wl, _, dropped = workload(setup)
    gpus = len(ClusterSpec.parse(a.cluster).build()[1])
    print(f"trace msr_seed0_{a.trace} ({'all jobs' if a.jobs is None else f'first {a.jobs}'},"
          f" {len(wl.jobs)} kept, {dropped} dropped: not runnable on every GPU type),"
          f" cluster {a.cluster}, GavelThroughput, 360 s rounds, {a.restart_cost:g} s restart"
          f" cost, arrivals / {a.arrival_scale:g}")
    print(f"offered load {offered_load(wl, gpus):.2f} (V100 GPU-s asked per s of arrivals"
          f" per GPU)")
    work = [(label, comp, setup) for label, comp in COMPOSITIONS.items()]
    with ProcessPoolExecutor(max_workers=max(1, a.workers)) as pool:
        results = list(pool.map(run, work))
    heads = "".join(f"{f'{lo:g}-{hi:g}h' if hi != float('inf') else f'>={lo:g}h':>8}"
                    for lo, hi in BUCKETS)
    print(f"{'':<26}{'':>35}  avg JCT (h) by isolated duration")
    print(f"{'composition':<26}{'JCT h':>8}{'p50 h':>7}{'preempt':>9}{'queue h':>9}"
          f"  {heads}{'jobs':>6}{'wall s':>8}")
    for r in results:
        cells = "".join(f"{b / 3600:>8.2f}" for b in r.bucket_jct)
        print(f"{r.label:<26}{r.avg_jct / 3600:>8.2f}{r.p50_jct / 3600:>7.2f}"
              f"{r.preemptions_per_job:>9.2f}{r.queueing / 3600:>9.2f}  {cells}"
              f"{r.finished:>6}{r.wall:>8.1f}")
    gavel = results[0].avg_jct
    for r in results[1:]:
        print(f"avg JCT {r.label} / gavel: {r.avg_jct / gavel:.2f}x")


if __name__ == "__main__":
    main()
