"""Gavel-compatible mode beside Gavel's own simulator, on Gavel's three Philly traces.

    python benchmarks/gavel_compat.py --data DIR               # all three traces, kept jobs
    python benchmarks/gavel_compat.py --data DIR --trace 0e4a51 --all-jobs

``DIR`` holds Gavel's ``msr_seed0_<id>.trace`` files and ``simulation_throughputs.json``
(``$GAVEL_DATA`` when ``--data`` is not given).

Runs the bundled ``gavel-fifo``, ``gavel-agnostic`` and ``gavel-max-min`` compositions (their
``[simulation]`` tables set Gavel's world: consolidated rates, no restart cost, 360 s rounds)
on 36 V100 + 36 P100 + 36 K80 GPUs (``v100:4x9,p100:4x9,k80:4x9``) with Gavel's measured
``simulation_throughputs.json`` (``GavelThroughput``: steps/s for GPU counts Gavel did not
measure are estimated, the same steps/s Gavel's simulator was given). Jobs: those whose model
runs on every type at its GPU count (the set Gavel's simulator ran for the figures below:
``--unrunnable drop``); ``--all-jobs`` keeps every job, each on the types it progresses on
(``--unrunnable restrict``).

Prints, per trace and composition: average JCT beside Gavel's own simulator's (its HEAD,
ECOS, same cluster, jobs and steps/s), the difference, the agnostic / Gavel ratios, wall
and CPU time of the run (compare CPU time on a busy machine), and the allocation's cost:
solves against rounds, and the solve time per round that solved (median) and in total.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from gavel_vs_las import data_dir

from blox_slurm.core.composition import read
from blox_slurm.core.throughput import DEFAULT_THROUGHPUT
from blox_slurm.loading import load
from blox_slurm.sim.config import ClusterSpec, SimConfig
from blox_slurm.sim.metrics import summarize
from blox_slurm.sim.simulator import Simulator
from blox_slurm.workloads.gavel import load_gavel
from blox_slurm.workloads.gavel_throughput import GavelThroughput
from blox_slurm.workloads.runnable import handle_unrunnable

CLUSTER = "v100:4x9,p100:4x9,k80:4x9"
TRACES = ("2869ce", "e13805", "0e4a51")
COMPOSITIONS = ("gavel-fifo", "gavel-agnostic", "gavel-max-min")
# Gavel's own simulator (HEAD, ECOS, 360 s rounds, this cluster, the kept jobs, the same
# steps/s): average JCT in hours, and its wall time in seconds where measured.
GAVEL = {"2869ce": (7.43, 9.09, 6.37), "e13805": (15.52, 22.77, 15.20),
         "0e4a51": (162.7, 104.9, 78.6)}
GAVEL_WALL = {"0e4a51": 100.0, "2869ce": 13.1, "e13805": 23.5}


@dataclass(frozen=True)
class Outcome:
    trace: str
    composition: str
    jobs: int
    avg_jct_h: float
    wall: float
    cpu: float
    rounds: int
    solves: int
    solve_times: tuple[float, ...]


def run(args: tuple[Path, str, str, bool]) -> Outcome:
    data, trace, name, all_jobs = args
    thr = GavelThroughput(data / "simulation_throughputs.json", fallback=DEFAULT_THROUGHPUT)
    wl = load_gavel(data / f"msr_seed0_{trace}.trace", throughputs=thr)
    types = [t for t, _, _ in ClusterSpec.parse(CLUSTER).groups]
    wl, _ = handle_unrunnable(wl, thr, types, "restrict" if all_jobs else "drop")
    comp = load(name)
    cfg = SimConfig.model_validate(read(name)[1].get("simulation", {}))
    t0, c0 = time.perf_counter(), time.process_time()
    result = Simulator(wl, comp, ClusterSpec.parse(CLUSTER).build(), cfg, thr).run()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    sched = comp.scheduling
    return Outcome(trace, name, len(result.jobs), (summarize(result).avg_jct or 0.0) / 3600,
                   wall, cpu, result.rounds, getattr(sched, "solves", 0),
                   tuple(getattr(sched, "solve_times", ())))


def report(outcomes: list[Outcome], all_jobs: bool) -> None:
    print(f"{'trace':<8}{'composition':<16}{'jobs':>6}{'ours h':>9}{'Gavel h':>9}{'diff':>8}"
          f"{'wall s':>8}{'cpu s':>8}{'rounds':>8}{'solves':>8}{'median ms':>10}{'LP s':>7}")
    for o in outcomes:
        gavel = GAVEL[o.trace][COMPOSITIONS.index(o.composition)]
        diff = "" if all_jobs else f"{(o.avg_jct_h / gavel - 1) * 100:+.1f}%"
        med = statistics.median(o.solve_times) * 1e3 if o.solve_times else 0.0
        print(f"{o.trace:<8}{o.composition:<16}{o.jobs:>6}{o.avg_jct_h:>9.2f}{gavel:>9.2f}"
              f"{diff:>8}{o.wall:>8.2f}{o.cpu:>8.2f}{o.rounds:>8}{o.solves:>8}{med:>10.1f}"
              f"{sum(o.solve_times):>7.2f}")
    print("\nagnostic / Gavel max-min average JCT, and the whole run's wall time:")
    for trace in dict.fromkeys(o.trace for o in outcomes):
        by = {o.composition: o for o in outcomes if o.trace == trace}
        if {"gavel-agnostic", "gavel-max-min"} <= set(by):
            ours = by["gavel-agnostic"].avg_jct_h / by["gavel-max-min"].avg_jct_h
            theirs = GAVEL[trace][1] / GAVEL[trace][2]
            wall = sum(o.wall for o in by.values())
            print(f"  {trace}: ours {ours:.2f}x, Gavel's {theirs:.2f}x; max-min run "
                  f"{by['gavel-max-min'].wall:.2f} s wall, {by['gavel-max-min'].cpu:.2f} s CPU"
                  f" (Gavel's simulator: "
                  f"{GAVEL_WALL[trace]:g} s), all three {wall:.2f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=os.environ.get("GAVEL_DATA"),
                    help="directory with msr_seed0_<id>.trace and simulation_throughputs.json"
                    " (default: $GAVEL_DATA)")
    ap.add_argument("--trace", choices=TRACES, action="append",
                    help="trace id (repeatable; default: all three)")
    ap.add_argument("--all-jobs", action="store_true",
                    help="keep jobs that cannot run on some type (never placed there)")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    data = data_dir(a.data)
    work = [(data, t, c, a.all_jobs) for t in a.trace or TRACES for c in COMPOSITIONS]
    print(f"cluster {CLUSTER}, Gavel's measured throughputs, "
          f"{'every job' if a.all_jobs else 'jobs that run on every type'}")
    with ProcessPoolExecutor(max_workers=max(1, a.workers)) as pool:
        outcomes = list(pool.map(run, work))
    report(outcomes, a.all_jobs)


if __name__ == "__main__":
    main()
