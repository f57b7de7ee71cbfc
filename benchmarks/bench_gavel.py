"""Gavel's allocation LP solve time: 256 / 512 / 1,024 jobs x 3 GPU types (HiGHS via highspy).

    python benchmarks/bench_gavel.py

Jobs are Gavel's measured models (``simulation_throughputs.json`` when present, else random
per-type speed-ups) with Gavel-trace GPU counts (1/2/4/8) on 36 V100 + 36 P100 + 36 K80 GPUs.
Timed: building and solving the LP (both passes for the min-objectives), best of 3.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from blox_slurm.policies.scheduling.gavel import Objective, allocate

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "gavel"
TYPES = ("v100", "p100", "k80")
CAPACITY = np.array([36.0, 36.0, 36.0])
OBJECTIVES: tuple[Objective, ...] = ("max_min_fairness", "min_makespan", "max_sum_throughput")


def throughputs(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, str]:
    gpus = rng.choice([1, 2, 4, 8], size=n, p=[0.7, 0.1, 0.15, 0.05])
    path = DATA / "simulation_throughputs.json"
    if not path.exists():
        thr = np.column_stack([np.ones(n), rng.uniform(0.3, 0.8, n), rng.uniform(0.05, 0.4, n)])
        return thr, gpus.astype(float), "random speed-ups (Gavel data not found)"
    from blox_slurm.core.model import Job
    from blox_slurm.workloads.gavel_throughput import GavelThroughput

    model = GavelThroughput(path)
    kinds = model.job_types
    rows = []
    for i, g in enumerate(gpus):
        job = Job(i, 0.0, int(g), model=kinds[rng.integers(len(kinds))])
        rows.append([model.rate(job, int(g), 1, t) for t in TYPES])
    thr = np.array(rows)
    keep = thr.max(axis=1) > 0
    return thr[keep], gpus[keep].astype(float), "Gavel's measured throughputs"


def main() -> None:
    rng = np.random.default_rng(0)
    print("Gavel allocation LP, 3 GPU types (36 each), best of 3")
    print(f"{'jobs':>6}  " + "".join(f"{o:>22}" for o in OBJECTIVES))
    for n in (256, 512, 1024):
        thr, gpus, source = throughputs(n, rng)
        remaining = rng.uniform(600, 86_400, len(gpus))
        cells = []
        for objective in OBJECTIVES:
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                allocate(thr, gpus, CAPACITY, objective, remaining)
                best = min(best, time.perf_counter() - t0)
            cells.append(f"{best:>20.3f} s")
        print(f"{len(gpus):>6}  " + "".join(cells))
    print(f"throughputs: {source}; target: 1,024 jobs in under 5 s")


if __name__ == "__main__":
    main()
