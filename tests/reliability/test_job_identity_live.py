"""Red team item 16 on the real emulator: slurmctld that lost its saved state starts job ids
again at 1, and the store used to key jobs by id alone, so the new job inherited the old
one's attained service, marks and preemptions."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from _wait import wait_for
from test_unrunnable_live import fifo, jobs, rounds, runs, submit

from blox_slurm.demo.world import ManagedWorld

pytestmark = [pytest.mark.reliability, pytest.mark.slurm]


def test_item16_a_job_id_reused_after_slurmctld_lost_its_state_is_a_new_job(
        clean_queue: ManagedWorld, tmp_path: Path) -> None:
    world = clean_queue
    world.emu.restart_controller(lose_state=True)  # ids start at 1: the next job gets it
    ctl = fifo(world, tmp_path)
    old = submit(world, "--gres=gpu:2", user="nobody")
    wait_for(lambda: runs(world, old), 60, "the first job to run",
             step=lambda: rounds(ctl))
    ran_since = time.time()
    wait_for(lambda: time.time() > ran_since + 2, 10, "the first job to run a while",
             step=lambda: rounds(ctl))
    world.client().cancel([old])
    wait_for(lambda: not getattr(jobs(world).get(old), "queued", False), 30,
             "the first job to end", step=lambda: rounds(ctl))
    rounds(ctl)
    assert (ctl.store.job(old) or {}).get("attained_base", 0) > 0

    world.emu.restart_controller(lose_state=True)  # a lost disk: the queue and the counter
    new = submit(world, "--gres=gpu:1", user="daemon")
    assert new == old  # the premise: Slurm gave the new job the old job's id
    wait_for(lambda: runs(world, new), 60, "the new job to run",
             step=lambda: rounds(ctl))
    row = ctl.store.job(new) or {}
    assert (row["user"], row["preemptions"]) == ("daemon", 0), row
    assert row["attained_base"] == 0.0, row  # nothing of the old job's service
    retired = list(ctl.store.db.table("retired_jobs").rows)
    assert [(r["job_id"], r["user"]) for r in retired] == [(old, "nobody")]
    assert ctl.store.usage(time.time(), 1e9).get("user:nobody", 0) > 0  # still counted
