"""Metrics summary cost: ``summarize`` over a large finished run, which every ``compare`` cell
and every plot pays once.

    python benchmarks/bench_metrics.py            # 100k jobs, best of 3
    python benchmarks/bench_metrics.py --jobs 1000000

Prints the best wall time and the per-job cost (about 0.12 s for 100k jobs on the dev box).
"""

from __future__ import annotations

import argparse
import time

from blox_slurm.sim.metrics import summarize
from blox_slurm.sim.records import JobRecord, RunResult


def synthetic_run(n: int, measured: range | None = None) -> RunResult:
    """``n`` one-GPU jobs with varied waits and run times, two busy-steps each; ``measured``
    (default: all but the first 5 %) are the jobs the metrics count. tests/test_metrics.py
    checks the summary of this same run."""
    jobs = tuple(
        JobRecord(i, i * 10.0, 1, 50.0 + i % 97, i * 10.0 + i % 13, i * 10.0 + 200 + i % 97,
                  i % 3, 50.0 + i % 97)
        for i in range(n)
    )
    busy = tuple((j.first_start + k * j.jct, k) for j in jobs for k in (0, 1))
    window = range(n // 20, n) if measured is None else measured
    return RunResult("bench", 1024, jobs, busy, measured=frozenset(window))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    run = synthetic_run(args.jobs)
    best = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        metrics = summarize(run)
        best = min(best, time.perf_counter() - t0)
    print(f"summarize: {args.jobs} jobs ({metrics.count} measured) in {best * 1e3:.1f} ms "
          f"(best of {args.repeat}), {best / args.jobs * 1e6:.2f} us per job")


if __name__ == "__main__":
    main()
