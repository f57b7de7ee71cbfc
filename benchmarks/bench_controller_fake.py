"""A controller round with 1,000 / 10,000 / 50,000 queued jobs, through the in-memory Slurm.

    PYTHONPATH=. python benchmarks/bench_controller_fake.py [--sizes 1000,10000]

No slurmctld: :class:`blox_slurm.testing.fake_slurm.FakeSlurm` answers in microseconds, so
what is measured is the controller itself. For each queue size, on 64 nodes x 8 GPUs, LAS:
the first round (every job new to the store, 512 GPUs' worth started) and a steady round
after Slurm started them, split into decide (the policies, :func:`blox_slurm.core.round.decide`),
plan (:func:`blox_slurm.slurm.apply.make_plan`) and the whole round (store writes and the
verbs included). Issue 13's target: decide + plan under 0.5 s at 10,000 jobs.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from blox_slurm.loading import load
from blox_slurm.slurm import controller as controller_module
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.store import Store
from blox_slurm.testing.fake_slurm import FakeSlurm


class Timed:
    """Wraps a function the round calls and adds up the seconds spent in it."""

    def __init__(self, fn):  # type: ignore[no-untyped-def]
        self.fn, self.seconds = fn, 0.0

    def __call__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0


def one_size(n: int, tmp: Path) -> list[tuple[str, float, float, float, int]]:
    rng = random.Random(n)
    fake = FakeSlurm([(64, 8)])
    for i in range(n):
        fake.submit_job(rng.choice([1, 1, 2, 4, 8]), runtime=rng.uniform(600, 36000),
                        user=f"user{i % 50}")
    cfg = ControllerConfig(store=str(tmp / f"state-{n}.db"), heartbeat=str(tmp / "hb"),
                           plugin_config="")
    ctl = Controller(cfg, load("las"), fake, Store(cfg.store), clock=lambda: fake.now)
    rows = []
    for label in ("first round", "steady round"):
        decide, plan = Timed(controller_module.decide), Timed(controller_module.make_plan)
        controller_module.decide, controller_module.make_plan = decide, plan
        try:
            t0 = time.perf_counter()
            report = ctl.round()
            total = time.perf_counter() - t0
        finally:
            controller_module.decide, controller_module.make_plan = decide.fn, plan.fn
        assert report.error == "", report.error
        rows.append((label, decide.seconds, plan.seconds, total, report.slurm_calls))
        fake.advance(30.0)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    sizes = [int(s) for s in parser.parse_args().sizes.split(",")]
    print(f"{'queued':>7} {'round':<13} {'decide s':>9} {'plan s':>7} {'d+p s':>7} "
          f"{'round s':>8} {'calls':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            for label, d, p, total, calls in one_size(n, Path(tmp)):
                print(f"{n:>7} {label:<13} {d:>9.3f} {p:>7.3f} {d + p:>7.3f} {total:>8.3f} "
                      f"{calls:>6}")


if __name__ == "__main__":
    main()
