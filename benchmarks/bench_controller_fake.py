"""A controller round with 1,000 / 10,000 / 50,000 queued jobs, through the in-memory Slurm.

    PYTHONPATH=. python benchmarks/bench_controller_fake.py [--sizes 1000,10000]
    PYTHONPATH=. python benchmarks/bench_controller_fake.py --world held --sizes 10000,20000

No slurmctld: :class:`blox_slurm.testing.fake_slurm.FakeSlurm` answers in microseconds, so
what is measured is the controller itself. Two worlds:

* ``mixed`` (default): 64 nodes x 8 GPUs, LAS, jobs of 1 to 8 GPUs: the first round (every
  job new to the store, 512 GPUs' worth started) and a steady round after Slurm started
  them. Issue 13's target: decide + plan under 0.5 s at 10,000 jobs;
* ``held``: the world of ``bench_queue_scale.py`` without Slurm's own time and the parsing:
  32 x 4 GPUs all busy with 1-GPU jobs, the queue held 1-GPU jobs, a dry-run FIFO
  controller: the first round on an empty store, the second, and the median of ``--warm``
  rounds after them (issue 18: a warm round cheap at 20,000 queued jobs).

Each round is split into decide (the policies, :func:`blox_slurm.core.round.decide`), plan
(:func:`blox_slurm.slurm.apply.make_plan`) and the whole round (store writes and the verbs
included), and the whole round's CPU time: on a shared machine the wall time moves with the
load, the CPU time much less.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from blox_slurm.core.composition import build
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


Row = tuple[str, float, float, float, float, int]


def timed_round(ctl: Controller, label: str) -> Row:
    """One round: (label, decide s, plan s, round s, round CPU s, Slurm calls)."""
    decide, plan = Timed(controller_module.decide), Timed(controller_module.make_plan)
    controller_module.decide, controller_module.make_plan = decide, plan
    try:
        t0, cpu0 = time.perf_counter(), time.process_time()
        report = ctl.round()
        total, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        controller_module.decide, controller_module.make_plan = decide.fn, plan.fn
    assert report.error == "", report.error
    return label, decide.seconds, plan.seconds, total, cpu, report.slurm_calls


def mixed(n: int, tmp: Path, warm: int) -> list[Row]:
    """LAS on 64 x 8 GPUs: the first round and one steady round (``warm`` unused)."""
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
        rows.append(timed_round(ctl, label))
        fake.advance(30.0)
    return rows


def held(n: int, tmp: Path, warm: int) -> list[Row]:
    """FIFO, dry run, 32 x 4 GPUs busy and ``n`` held jobs: first, second, median warm."""
    fake = FakeSlurm([(32, 4)])
    fake.release([fake.submit_job(1, runtime=1e9) for _ in range(128)])
    fake.schedule()
    for _ in range(n):
        fake.submit_job(1, runtime=1e9)
    cfg = ControllerConfig(partitions=["blox"], dry_run=True, store=str(tmp / f"held-{n}.db"),
                           heartbeat=str(tmp / "hb"), plugin_config="")
    fifo = build({"name": "fifo", "scheduling": "fifo", "placement": "consolidated"})
    ctl = Controller(cfg, fifo, fake, Store(cfg.store), clock=lambda: fake.now)
    rows = [timed_round(ctl, "first round"), timed_round(ctl, "second round")]
    rounds = [timed_round(ctl, "warm") for _ in range(warm)]
    return [*rows, ("warm (median)", *(statistics.median(r[k] for r in rounds)
                                       for k in (1, 2, 3, 4)), rounds[0][5])]


WORLDS = {"mixed": mixed, "held": held}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--world", choices=sorted(WORLDS), default="mixed")
    parser.add_argument("--warm", type=int, default=5, help="warm rounds (held world)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'queued':>7} {'round':<13} {'decide s':>9} {'plan s':>7} {'d+p s':>7} "
          f"{'round s':>8} {'cpu s':>7} {'calls':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            for label, d, p, total, cpu, calls in WORLDS[args.world](n, Path(tmp), args.warm):
                print(f"{n:>7} {label:<13} {d:>9.3f} {p:>7.3f} {d + p:>7.3f} {total:>8.3f} "
                      f"{cpu:>7.3f} {calls:>6}")


if __name__ == "__main__":
    main()
