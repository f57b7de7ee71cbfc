"""Simulator speed: Blox's Figure-6 configuration and a 100,000-job trace.

    python benchmarks/bench_simulator.py            # everything (~1-2 min on 2 cores)
    python benchmarks/bench_simulator.py --quick    # smaller large-trace sizes

Prints wall time and simulated jobs/s per run, and the speed-up over Blox's own simulator
measured on this machine class on the same configuration (LAS: 123 s at 6 jobs/h, 170 s at
7 jobs/h). Timings are wall-clock of ``Simulator.run`` only (workload generation excluded).
"""

from __future__ import annotations

import argparse
import time

from blox_slurm.loading import load
from blox_slurm.sim.config import ClusterSpec
from blox_slurm.sim.simulator import Simulator
from blox_slurm.workloads import generate

BLOX_SECONDS = {("las", 6.0): 123.0, ("las", 7.0): 170.0}


def timed(workload, comp_name: str, cluster: ClusterSpec, repeat: int = 1) -> tuple[float, int]:
    best, finished = float("inf"), 0
    for _ in range(repeat):
        sim = Simulator(workload, load(comp_name), cluster.build())
        t0 = time.perf_counter()
        result = sim.run()
        best = min(best, time.perf_counter() - t0)
        finished = len(result.jobs)
    return best, finished


def figure6() -> None:
    print("Blox Figure 6: 32 nodes x 4 GPUs, 1-GPU jobs, 300 s rounds, jobs 3000-4000 measured")
    print(f"{'policy':<10}{'jobs/h':>7}{'simulated':>11}{'wall s':>9}{'jobs/s':>10}{'vs Blox':>10}")
    cluster = ClusterSpec.uniform(32, 4)
    for rate in (6.0, 7.0):
        workload = generate(n_jobs=5000, jobs_per_hour=rate, measure=(3000, 4000), seed=0)
        for name in ("fifo", "las", "tiresias"):
            wall, n = timed(workload, name, cluster, repeat=3)
            ref = BLOX_SECONDS.get((name, rate))
            ratio = f"{ref / wall:,.0f}x" if ref else "-"
            print(f"{name:<10}{rate:>7g}{n:>11}{wall:>9.2f}{n / wall:>10,.0f}{ratio:>10}")


def large(sizes: list[int]) -> None:
    print("\nLarge traces: 256 nodes x 4 GPUs (1,024 GPUs), Blox multi-GPU demand mix, "
          "load ~70% (24 jobs/h, a stable queue)")
    print(f"{'policy':<10}{'jobs':>9}{'wall s':>9}{'jobs/s':>10}{'s per 10k jobs':>16}")
    cluster = ClusterSpec.uniform(256, 4)
    for n in sizes:
        workload = generate(n_jobs=n, jobs_per_hour=24.0, measure=None, seed=0,
                            gpu_demand="blox-multi-gpu")
        for name in ("fifo", "las"):
            wall, done = timed(workload, name, cluster)
            print(f"{name:<10}{done:>9}{wall:>9.2f}{done / wall:>10,.0f}{wall / n * 1e4:>16.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="large traces of 10k/20k jobs only")
    args = ap.parse_args()
    figure6()
    large([10_000, 20_000] if args.quick else [25_000, 50_000, 100_000])


if __name__ == "__main__":
    main()
