"""Which node read is cheaper: ``sinfo --json`` or ``scontrol show nodes --json``.

    python3 benchmarks/bench_node_read.py [--nodes 64] [--repeat 15]

Starts an emulator with ``--nodes`` 4-GPU nodes in two partitions (as the controller sees a
site), then times each read ``--repeat`` times (median wall time, output size, the client's
peak RSS from ``wait4``). ``scontrol show nodes --json`` exists from Slurm 23.02 on; on 22.05
only ``sinfo`` is timed. Prints one table; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from blox_slurm.emulator.cluster import Emulator
from blox_slurm.emulator.spec import EmulatorSpec, NodeGroup

READS = {"sinfo --json": ["sinfo", "--json"],
         "scontrol show nodes --json": ["scontrol", "show", "nodes", "--json"]}


def measure(argv: list[str], env: dict[str, str], repeat: int) -> tuple[float, int, int] | None:
    """(median seconds, output bytes, peak client RSS in KiB), or None if unsupported."""
    times, rss, size = [], 0, 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,  # noqa: S603
                                env=env)
        out = proc.stdout.read() if proc.stdout else b""
        _, status, usage = os.wait4(proc.pid, 0)
        times.append(time.perf_counter() - t0)
        if os.waitstatus_to_exitcode(status) != 0:
            return None
        size, rss = len(out), max(rss, usage.ru_maxrss)
    return statistics.median(times), size, rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="blox-bench-") as tmp:
        emu = Emulator(EmulatorSpec(run_dir=Path(tmp) / "emu",
                                    groups=(NodeGroup("v100", 4, args.nodes),)))
        emu.up(timeout=120)
        try:
            env = {**os.environ, **emu.env()}
            version = emu.client().version()
            print(f"Slurm {version}, {args.nodes} nodes x 4 GPUs, 2 partitions, "
                  f"median of {args.repeat}")
            print(f"{'read':<28} {'median':>9} {'output':>10} {'client RSS':>11}")
            for name, argv in READS.items():
                got = measure(argv, env, args.repeat)
                if got is None:
                    print(f"{name:<28} {'not supported on this version':>32}")
                    continue
                secs, size, rss = got
                print(f"{name:<28} {secs * 1000:>7.1f} ms {size / 1024:>7.0f} KiB "
                      f"{rss / 1024:>8.1f} MiB")
        finally:
            emu.down()


if __name__ == "__main__":
    main()
