"""The controller's cost to Slurm (how well the simulator predicts the emulator is
``benchmarks/agreement.py``).

    sudo PYTHONPATH=. python benchmarks/bench_controller.py   # ~3 min on 2 cores

1. **Slurm calls per round** (``RoundReport.slurm_calls``) and round wall time on a 4x4
   emulator with the job-submit plugin (heartbeat fresh, so every job is held for the
   controller) and 10, 100, 1,000 queued 1-GPU ``sleep`` jobs, for
   (a) steady rounds, nothing to change (FIFO after its first round), and
   (b) rounds that start and/or preempt (Tiresias with a 1 GPU-s threshold: every round
       demotes the running jobs, so waiting ones preempt them; with 10 jobs nothing waits
       and only the first round's starts count).
   The verbs are batched (one ``hold``/``release``/``requeuehold`` for any number of jobs);
   only pinning costs one call per *started* job (Slurm rejects a job list with
   ``ReqNodeList``), so (b) is bounded by the GPUs that free up, never by the queue; the
   round's *time* grows with the queue (reading and folding it; at 1,000 to 20,000 queued
   jobs see ``benchmarks/bench_queue_scale.py``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from blox_slurm.core.composition import build
from blox_slurm.demo.world import PARTITION, ManagedWorld
from blox_slurm.slurm.controller import Controller, RoundReport
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.job_submit import write_heartbeat
from blox_slurm.slurm.store import Store

SIZES = (10, 100, 1000)
FIFO = {"name": "fifo", "scheduling": "fifo", "placement": "consolidated"}
CHURN = {"name": "tiresias-1gpus", "scheduling": {"policy": "tiresias", "thresholds": [1.0],
                                                  "promote_knob": 0},
         "placement": "consolidated"}


def controller(world: ManagedWorld, comp: dict, tag: str) -> Controller:
    cfg = ControllerConfig(partitions=[PARTITION], round_seconds=1.0,
                           store=str(world.base / f"{tag}.db"), heartbeat=str(world.heartbeat))
    return Controller(cfg, build(comp), world.client(),
                      Store(cfg.store))


def changed(r: RoundReport) -> bool:
    return bool(r.plan and (r.plan.preempt or r.plan.release))


def fill(world: ManagedWorld, n: int) -> float:
    """Submit ``n`` held sleep jobs (4 sbatch at a time); returns submissions per second."""
    write_heartbeat(world.heartbeat)  # the plugin holds only while the controller looks alive
    t0 = time.monotonic()
    per = [n // 4 + (i < n % 4) for i in range(4)]
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(world.submit_sleep, per))
    return n / (time.monotonic() - t0)


def drain_queue(world: ManagedWorld) -> None:
    client = world.client()
    ids = [j.job_id for j in client.list_jobs([PARTITION])]
    if ids:
        client.cancel(ids)
    while any(True for _ in client.list_jobs([PARTITION])):
        time.sleep(0.5)


def measure(world: ManagedWorld, n: int) -> dict[str, float]:
    rate = fill(world, n)
    steady = controller(world, FIFO, f"fifo{n}")
    first = steady.round()
    time.sleep(2)
    warm = [steady.round() for _ in range(2)]
    quiet = [r for r in (steady.round() for _ in range(5)) if not changed(r) and not r.error]
    churn = controller(world, CHURN, f"churn{n}")
    busy = []
    for _ in range(6):
        time.sleep(1.5)
        r = churn.round()
        if changed(r) and not r.error:
            busy.append(r)
    busy = busy or [r for r in (first, *warm) if changed(r)]
    drain_queue(world)
    return {"jobs": n, "sbatch_per_s": rate,
            "steady_calls": statistics.median(r.slurm_calls for r in quiet),
            "steady_s": statistics.median(r.seconds for r in quiet),
            "busy_calls_max": max(r.slurm_calls for r in busy),
            "busy_calls_median": statistics.median(r.slurm_calls for r in busy),
            "busy_s": statistics.median(r.seconds for r in busy), "busy_rounds": len(busy),
            # one ReqNodeList update per started job (Slurm refuses a batched node list)
            "busy_calls_less_starts": max(r.slurm_calls - len(r.plan.released)
                                          for r in busy if r.plan),
            "preempted": sum(len(r.plan.preempt) for r in busy if r.plan),
            "started": sum(len(r.plan.released) for r in busy if r.plan)}


def slurm_cost() -> None:
    with ManagedWorld() as world:
        rows = [measure(world, n) for n in SIZES]
    print("Slurm calls per controller round, 4x4 emulator, 1-GPU jobs (16 run, the rest wait)")
    print(f"{'queued':>7}{'steady calls':>14}{'steady s':>10}{'busy calls':>12}"
          f"{'(max)':>7}{'- starts':>9}{'busy s':>8}{'started':>9}{'preempted':>10}"
          f"{'sbatch/s':>10}")
    for r in rows:
        print(f"{r['jobs']:>7}{r['steady_calls']:>14g}{r['steady_s']:>10.3f}"
              f"{r['busy_calls_median']:>12g}{r['busy_calls_max']:>7g}"
              f"{r['busy_calls_less_starts']:>9g}{r['busy_s']:>8.3f}"
              f"{r['started']:>9}{r['preempted']:>10}{r['sbatch_per_s']:>10.1f}")
    lo, hi = rows[0], rows[-1]
    print(f"1000 vs 10: steady calls x{hi['steady_calls'] / lo['steady_calls']:.2f}, "
          f"busy calls (max) x{hi['busy_calls_max'] / lo['busy_calls_max']:.2f} "
          f"(less one pin per started job: "
          f"x{hi['busy_calls_less_starts'] / lo['busy_calls_less_starts']:.2f}); "
          f"round time steady x{hi['steady_s'] / lo['steady_s']:.1f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.parse_args()
    slurm_cost()


if __name__ == "__main__":
    main()
