"""Whole-process simulator speed at scale, beside issue 18's figures.

    python benchmarks/bench_scale.py                        # Figure 6, 100k and 1M jobs
    python benchmarks/bench_scale.py --sizes 20000 100000   # other trace sizes
    python benchmarks/bench_scale.py --against /tmp/base --repeat 3

Each run is ``blox-slurm simulate --json`` in a process of its own, so its wall time includes
start-up, workload generation and the metrics, and its peak memory (the process's own
``ru_maxrss``, read with ``wait4``) is what a user's machine needs. The runs: Blox's Figure 6
(``simulate -c las`` with its defaults) and LAS at 60 jobs/h on 128 nodes x 8 GPUs, every job
measured, the load under which issue 18 measured 186k preemptions per 100k jobs. Jobs/s is per wall
second; CPU seconds (user + system) say more when others share the machine, and each row
ends with the 1-minute load average after it (2 cores: above ~1, others were running). (Issue 18's
Figure-6 figure, 2.20 s, is the Blox-compatible mode on Blox's own job list: the nearest.)

``--against DIR`` also runs an older checkout (its ``PYTHONPATH``), alternating with this one,
and says whether both printed the same metrics (wall time left out): a speed-up must not
change a result. Medians of ``--repeat`` runs are printed; this machine's timings vary by
+-20 % from run to run, more when others share it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

#: Issue 18's figures on this machine class: (wall s, peak MiB) by run name.
ISSUE_18 = {"figure 6": (2.20, None), "100,000": (25.5, 246.0), "1,000,000": (265.0, 1802.0)}
SCALE = ["-c", "las", "--rate", "60", "--cluster", "gpu:8x128", "--measure", "all"]


@dataclass(frozen=True)
class Sample:
    wall: float
    cpu: float  # user + system seconds of the process: steadier than wall on a shared machine
    peak_mib: float
    metrics: str  # the printed rows without wall time: equal runs print equal text


#: This checkout: the runs without ``--against`` import it.
HERE = str(Path(__file__).resolve().parents[1])


def simulate(args: list[str], checkout: str) -> Sample:
    """One ``blox-slurm simulate --json`` process of ``checkout``'s code: wall time, peak
    RSS, metrics. It runs in that directory as well as on its ``PYTHONPATH``: ``python -m``
    puts the working directory first on the path, so a run started in another checkout
    would import that one's code instead."""
    env = {**os.environ, "PYTHONPATH": checkout}
    command = [sys.executable, "-m", "blox_slurm", "simulate", *args, "--json"]
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, env=env, cwd=checkout)
    out = proc.stdout.read() if proc.stdout is not None else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(command)} exited with {proc.returncode}")
    rows = json.loads(out)
    for row in rows:
        row.pop("wall_seconds", None)
    return Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
                  json.dumps(rows, sort_keys=True))


def runs(sizes: list[int]) -> list[tuple[str, int, list[str]]]:
    """(name, jobs, simulate options) of each benchmark run."""
    out = [("figure 6", 5000, ["-c", "las"])]
    out += [(f"{n:,}", n, [*SCALE, "--jobs", str(n)]) for n in sizes]
    return out


def row(label: str, jobs: int, samples: list[Sample], name: str) -> str:
    wall = statistics.median(s.wall for s in samples)
    cpu = statistics.median(s.cpu for s in samples)
    peak = statistics.median(s.peak_mib for s in samples)
    issue_wall, issue_peak = ISSUE_18.get(name, (None, None))
    then = "-" if issue_wall is None else f"{issue_wall:.1f} s, {jobs / issue_wall:,.0f}/s"
    if issue_peak is not None:
        then += f", {issue_peak:,.0f} MiB"
    load = os.getloadavg()[0]
    return (f"{label:<18}{wall:>8.1f}{cpu:>8.1f}{jobs / wall:>9,.0f}{peak:>9,.0f}{load:>6.1f}"
            f"   {then}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000],
                    help="jobs per LAS run at 60/h on gpu:8x128 (default 100000 1000000)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each, median printed")
    ap.add_argument("--against", metavar="DIR", help="an older checkout to run alternately")
    args = ap.parse_args()
    print(f"{'run':<18}{'wall s':>8}{'cpu s':>8}{'jobs/s':>9}{'MiB':>9}{'load':>6}"
          "   issue 18 (before)")
    for name, jobs, options in runs(args.sizes):
        now: list[Sample] = []
        before: list[Sample] = []
        for _ in range(args.repeat):
            if args.against:
                before.append(simulate(options, str(Path(args.against).resolve())))
            now.append(simulate(options, HERE))
        print(row(f"{name} jobs" if name[0].isdigit() else name, jobs, now, name), flush=True)
        if before:
            same = {s.metrics for s in before} == {s.metrics for s in now}
            print(row("  --against", jobs, before, "") + ("" if same else "  METRICS DIFFER"),
                  flush=True)


if __name__ == "__main__":
    main()
