"""How well the Pollux step-time model fits the artifact's measurements, and how fast.

    python benchmarks/pollux_fit.py --data ../shared/data/pollux/traces

Per application: the rows of ``placements.csv`` the model is fitted to, the seconds the fit
took, and the relative step-time error ``|predicted - measured| / measured`` (median and
maximum) on those rows and on ``scalability.csv``, which the fit never sees (larger
placements: how the model extrapolates). Then the fitted parameters. A benchmark, not a
test: it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from blox_slurm.pollux.throughput import as_tuple, fit_perf_params, relative_errors
from blox_slurm.pollux.traces import load_application


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True,
                        help="the artifact's traces/ directory (one directory per application)")
    args = parser.parse_args()
    apps = sorted(p for p in args.data.iterdir() if (p / "placements.csv").exists())
    if not apps:
        parser.error(f"{args.data}: no <application>/placements.csv below it")
    print(f"{'application':12} {'rows':>5} {'fit s':>6} {'median':>7} {'max':>7}"
          f" {'held-out median':>16} {'max':>7}")
    params = []
    for directory in apps:
        trace = load_application(directory)
        start = time.perf_counter()
        perf = fit_perf_params(trace.placements)
        seconds = time.perf_counter() - start
        err = relative_errors(perf, trace.placements)
        held = relative_errors(perf, trace.scalability) if trace.scalability else np.array([np.nan])
        print(f"{trace.name:12} {len(err):5d} {seconds:6.2f} {np.median(err):7.1%} "
              f"{err.max():7.1%} {np.median(held):16.1%} {held.max():7.1%}")
        params.append((trace.name, as_tuple(perf)))
    print("\nparameters: alpha_c beta_c alpha_n beta_n alpha_r beta_r gamma")
    for name, values in params:
        print(f"{name:12} " + " ".join(f"{v:.3g}" for v in values))


if __name__ == "__main__":
    main()
