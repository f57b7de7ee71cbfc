"""Pollux on the emulator (issue 15): an elastic fake job submitted with plain ``sbatch`` grows
as the controller running the bundled ``pollux`` composition lets it, one doubling per round
at most, and shrinks when jobs that did not opt in need its GPUs; Slurm allocates every count
and the trainer runs and batches by what it was given. The restart penalty's delay is
compressed from the artifact's 30 s to 2 s, as the demo compresses Tiresias' thresholds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from _live import clean_round, wait_for, world_controller

from blox_slurm.core.composition import read
from blox_slurm.demo.world import FakeJob, ManagedWorld
from blox_slurm.loading import build
from blox_slurm.slurm.controller import Controller

pytestmark = pytest.mark.slurm

TRAINER = "--scaling 0.9 --batch-per-gpu 32"
LONG = 100_000  # iterations: the jobs outlive the test, which cancels them on leaving


def pollux_controller(w: ManagedWorld) -> Controller:
    path, data = read("pollux")
    data = {**data, "scheduling": {**data["scheduling"], "restart_delay": 2.0}}
    return world_controller(w, build(data, "pollux"), "pollux.db")


class Watch:
    """Runs the controller's rounds and records the GPU counts its decisions gave the job,
    in order (a count repeated while Slurm carries it out is one entry). Decisions, not
    Slurm's state between rounds: a run can start and be resized between two looks."""

    def __init__(self, ctl: Controller, job: int) -> None:
        self.ctl, self.job = ctl, job
        self.counts: list[int] = []

    def step(self) -> None:
        report = clean_round(self.ctl)
        placed = report.decisions.placed if report.decisions is not None else ()
        for s in placed:
            if s.job_id == self.job and (not self.counts or self.counts[-1] != len(s.gpus)):
                self.counts.append(len(s.gpus))

    def until(self, probe: Callable[[], Any], timeout: float, what: str) -> Any:
        return wait_for(probe, timeout, lambda: f"{what}; counts so far {self.counts}",
                        step=self.step, every=1.0)


def trains_on(w: ManagedWorld, job: int, user: str, gpus: int) -> dict[str, Any] | None:
    """The trainer's last report if it says it runs on ``gpus`` and has made progress."""
    p = w.progress(job, user)
    return p if p and p.get("gpus") == gpus and p.get("iteration", 0) > 0 else None


def test_pollux_grows_an_elastic_job_then_shrinks_it_for_jobs_that_did_not_opt_in() -> None:
    with ManagedWorld() as w:
        # --gpus (a total): it may grow beyond one node, which --gres=gpu:1 would forbid
        elastic = w.submit_fake(FakeJob("daemon", 1, LONG, 0.0), 10, trainer=TRAINER,
                                options=["--comment=blox:elastic=1,max_gpus=8"], per_job=True)
        watch = Watch(pollux_controller(w), elastic)
        grown = watch.until(lambda: trains_on(w, elastic, "daemon", 8), 120,
                            "the elastic job to train on 8 GPUs")
        # One doubling at most per round (the artifact's growth cap), each carried out by Slurm
        # (the job trains on 8 GPUs: Slurm allocated the last, which the others led to).
        assert watch.counts == [1, 2, 4, 8]
        assert (grown["batch_size"], grown["rate"]) == (8 * 32, pytest.approx(10 * (1 + 0.9 * 7)))

        fixed = [w.submit_fake(FakeJob("bin", 4, LONG, 0.0), 10, trainer=TRAINER)
                 for _ in range(3)]
        shrunk = watch.until(lambda: trains_on(w, elastic, "daemon", 4), 120,
                             "the elastic job to shrink to 4 GPUs")
        assert watch.counts == [1, 2, 4, 8, 4]
        assert shrunk["batch_size"] == 4 * 32
        client = w.emu.client()
        for job in fixed:  # every one runs, on exactly what it asked for
            got = watch.until(lambda j=job: trains_on(w, j, "bin", 4), 60, f"job {job} to run")
            assert got["batch_size"] == 4 * 32
        assert sum(j.num_gpus for j in map(client.get_job, [elastic, *fixed]) if j) == 16
