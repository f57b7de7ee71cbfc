"""A requeued job's start delay is lifted once, not every round (live, every Slurm version).

When a managed job is requeued (by its owner here; the controller's own stops are alike),
Slurm keeps it waiting ~120 s; the controller's pin lifts that to ``now+2``. Once Slurm
has evaluated the job, it shows the lifted wait with the same reason, ``BeginTime``. Lifting
that again pushed the start 2 s out every round: with rounds under 2 s the job never
started. Slurm's default ``batch_sched_delay`` (3 s) evaluates released jobs too rarely for
this to show; a site that lowers it (here: 0, every second) must see the job restart."""

from __future__ import annotations

import pytest
from _live import clean_round, wait_for, world_controller

from blox_slurm.demo.world import FakeJob, ManagedWorld
from blox_slurm.loading import load

pytestmark = pytest.mark.slurm

EAGER_SLURM = ("SchedulerParameters=batch_sched_delay=0",)


def test_a_requeued_job_restarts_under_one_second_rounds() -> None:
    with ManagedWorld(extra_conf=EAGER_SLURM) as w:
        job = w.submit_fake(FakeJob("daemon", 2, 100_000, 0.0), 10)
        client = w.emu.client()
        ctl = world_controller(w, load("fifo"), "requeue.db")

        def step() -> None:
            clean_round(ctl)

        def state(want: str, restarts: int) -> bool:
            j = client.get_job(job)
            return j is not None and j.state == want and j.restart_cnt == restarts

        wait_for(lambda: state("RUNNING", 0), 30, "the job to start", step=step, every=1.0)
        client.requeue([job])  # as its owner may: Slurm delays its next start ~120 s
        wait_for(lambda: state("PENDING", 1), 30, "Slurm to requeue it")
        # Rounds every second; Slurm's own delay would hold it far longer than this.
        wait_for(lambda: state("RUNNING", 1), 30, "the requeued job to restart", step=step,
                 every=1.0)
