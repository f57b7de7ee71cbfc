"""The regression set: every bundled composition but the synthesizer on three synthetic
workloads, per job, so a refactor of the engine can show it changed no decision.

    PYTHONPATH=. python benchmarks/regression_set.py run OUT_DIR
    PYTHONPATH=. python benchmarks/regression_set.py diff OLD_DIR NEW_DIR

``run`` writes, per workload, ``blox-slurm compare --out`` (``jobs.csv``: every measured
job's start, end and preemptions under every composition). ``diff`` compares two such
directories byte for byte per workload and prints where they differ. Run it on the commit
before a refactor (``git worktree add /tmp/base <commit>``) and after.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from pathlib import Path

from blox_slurm.core.composition import bundled_names

#: (name, compare options): Blox's Figure 6 (1 GPU), its multi-GPU mix, and a two-type
#: cluster where GPU types and Gavel matter.
WORKLOADS = {
    "fig6-single": ["--rate", "8"],
    "fig6-multi-gpu": ["--rate", "6", "--gpu-demand", "blox-multi-gpu"],
    "hetero-multi-gpu": ["--rate", "6", "--gpu-demand", "blox-multi-gpu",
                         "--cluster", "v100:4x16,k80:4x16"],
}


def compositions() -> list[str]:
    return [n for n in bundled_names() if n != "synthesizer"]


def run(out: Path) -> None:
    configs = [a for n in compositions() for a in ("--config", n)]
    for name, options in WORKLOADS.items():
        target = out / name
        subprocess.run([sys.executable, "-m", "blox_slurm", "compare", *configs, *options,
                        "--out", str(target)], check=True, stdout=subprocess.DEVNULL)
        print(f"{name}: {len(compositions())} compositions -> {target / 'jobs.csv'}")


def diff(old: Path, new: Path) -> int:
    differing = 0
    for name in WORKLOADS:
        a, b = (list(csv.reader((d / name / "jobs.csv").open())) for d in (old, new))
        changed = [(x, y) for x, y in zip(a, b, strict=False) if x != y]
        if len(a) != len(b) or changed:
            differing += 1
            print(f"{name}: {len(a)} vs {len(b)} rows, {len(changed)} differ; first: "
                  f"{changed[:1]}")
        else:
            print(f"{name}: {len(a) - 1} job rows identical")
    return differing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run").add_argument("out", type=Path)
    d = sub.add_parser("diff")
    d.add_argument("old", type=Path)
    d.add_argument("new", type=Path)
    args = parser.parse_args()
    if args.cmd == "run":
        run(args.out)
    else:
        sys.exit(1 if diff(args.old, args.new) else 0)


if __name__ == "__main__":
    main()
