"""The policy synthesizer: what one decision costs, and how close it gets to the best static
composition on a steady and on a bursty workload.

    python benchmarks/bench_synthesizer.py            # both parts (about 2 minutes on 2 cores)
    python benchmarks/bench_synthesizer.py --cost     # the decision cost only (seconds)

Cost: a snapshot with 200 active jobs (the Blox multi-GPU mix on 32 x 4 GPUs, FIFO-started,
the rest waiting) and nine candidates; prints the wall time of one evaluation (every candidate
forked and played over the horizon). Issue target: under 1 s.

Quality: the same jobs arriving steadily (Poisson) and in bursts (4 h of every 24 h at 4x the
mean rate); every candidate alone and the synthesizer over all of them, on identical job
streams; prints the measured jobs' average JCT and the synthesizer's ratio to the best static
candidate (Blox's claim: within 5 %).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from blox_slurm.core import transitions
from blox_slurm.core.model import ClusterSnapshot, Job
from blox_slurm.core.round import decide
from blox_slurm.loading import build, load
from blox_slurm.sim.config import ClusterSpec
from blox_slurm.sim.metrics import measured_jobs
from blox_slurm.sim.simulator import Simulator
from blox_slurm.sim.synthesizer import Synthesizer
from blox_slurm.workloads import generate

NINE = ["fifo", "las", "srtf", "tiresias", "las-load-based",
        "tiresias-consolidated-load-based", "optimus", "themis", "fair-share"]
# The quality comparison leaves out the oracle SRTF (it knows every duration, so it wins alone
# and the question "which policy suits this load" disappears) and Optimus (elastic: a
# different job model).
QUALITY = ["fifo", "las", "tiresias", "las-load-based", "tiresias-consolidated-load-based",
           "themis", "fair-share"]


def synthesizer(candidates: list[str], **params: Any) -> Synthesizer:
    comp = build({"name": "synthesizer", "synthesizer": {"candidates": candidates, **params}})
    assert isinstance(comp, Synthesizer)
    return comp


def busy_snapshot(n_active: int = 200) -> ClusterSnapshot:
    """``n_active`` jobs that arrived over the last hours, FIFO-started an hour ago."""
    wl = generate(n_jobs=n_active, jobs_per_hour=40.0, measure=None, seed=3,
                  gpu_demand="blox-multi-gpu", users=8)
    nodes, gpus = ClusterSpec.uniform(32, 4).build()
    t0 = wl.jobs[-1].submit_time
    jobs = tuple(Job(s.id, s.submit_time, s.num_gpus, s.user, s.user, s.model, s.duration)
                 for s in wl.jobs)
    snap = ClusterSnapshot(t0, nodes, gpus, jobs)
    started = transitions.apply(snap, decide(snap, load("fifo")))
    return ClusterSnapshot(t0 + 3600.0, nodes, gpus, started.jobs)


def cost(repeat: int = 3) -> None:
    snap = busy_snapshot()
    running = sum(1 for j in snap.jobs if j.running)
    synth = synthesizer(NINE)
    walls, predictions = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        predictions = synth.predict(snap)
        walls.append(time.perf_counter() - t0)
    assert synth.params is not None
    print(f"One evaluation: {len(snap.jobs)} active jobs ({running} running) on "
          f"{len(snap.gpus)} GPUs, {len(NINE)} candidates, horizon "
          f"{synth.params.horizon / 3600:g} h of {synth.params.round_duration:g} s rounds")
    print(f"{'candidate':<36}{'predicted avg JCT h':>20}{'finished':>10}")
    for p in predictions:
        print(f"{p.name:<36}{p.score / 3600:>20.2f}{p.finished:>10}")
    print(f"wall per decision: median {statistics.median(walls):.3f} s over {repeat} "
          f"(target < 1 s)")


def quality(n_jobs: int, rate: float, nodes: int) -> None:
    cluster = ClusterSpec.uniform(nodes, 4)
    measure = (n_jobs // 4, 3 * n_jobs // 4)
    shapes = {"steady": None, "bursty": {"every_hours": 24, "hours": 4, "factor": 4}}
    print(f"\nQuality: {n_jobs} jobs (Blox duration mix, multi-GPU mix) at {rate:g} jobs/h on "
          f"{nodes} x 4 GPUs, jobs {measure[0]}-{measure[1]} measured")
    for shape, bursts in shapes.items():
        wl = generate(n_jobs=n_jobs, jobs_per_hour=rate, measure=measure, seed=5,
                      gpu_demand="blox-multi-gpu", users=8, bursts=bursts)
        scores: dict[str, float] = {}
        print(f"\n{shape}:\n{'composition':<36}{'avg JCT h':>11}{'wall s':>9}")
        for comp in [*(load(n) for n in QUALITY), synthesizer(QUALITY)]:
            t0 = time.perf_counter()
            result = Simulator(wl, comp, cluster.build()).run()
            wall = time.perf_counter() - t0
            scores[comp.name] = statistics.fmean(j.jct for j in measured_jobs(result))
            print(f"{comp.name:<36}{scores[comp.name] / 3600:>11.2f}{wall:>9.1f}")
        best = min((v, k) for k, v in scores.items() if k != "synthesizer")
        ratio = scores["synthesizer"] / best[0]
        verdict = "within 5 %" if ratio <= 1.05 else "NOT within 5 %"
        print(f"synthesizer / best static ({best[1]}): {ratio:.3f}  -> {verdict}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cost", action="store_true", help="the decision cost only")
    ap.add_argument("--jobs", type=int, default=1200)
    ap.add_argument("--rate", type=float, default=1.9, help="mean jobs/hour (~95 % load)")
    ap.add_argument("--nodes", type=int, default=16)
    args = ap.parse_args()
    cost()
    if not args.cost:
        quality(args.jobs, args.rate, args.nodes)


if __name__ == "__main__":
    main()
