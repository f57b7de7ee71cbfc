"""How fast a large CSV trace loads (the loader's speed; tests only check what it loads).

    PYTHONPATH=. python benchmarks/bench_trace_load.py [ROWS]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from blox_slurm.workloads.csv_trace import load_csv


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    lines = ["job_id,submit_time,num_gpus,duration,model,user"]
    lines += [f"{i},{i * 0.5},{1 << (i % 4)},{60 + i % 997},m{i % 7},u{i % 13}"
              for i in range(rows)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.csv"
        path.write_text("\n".join(lines) + "\n")
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            workload = load_csv(path)
            best = min(best, time.perf_counter() - t0)
    print(f"{len(workload.jobs):,} CSV rows: best of 3 {best:.2f} s "
          f"({len(workload.jobs) / best:,.0f} rows/s)")


if __name__ == "__main__":
    main()
