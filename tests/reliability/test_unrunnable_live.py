"""Jobs Slurm will not start cannot idle the partition; a user's --begin is theirs; a job its
owner requeued does not sit out Slurm's requeue delay and keeps its place; placement counts
CPUs (red team items 1, 2, 8, 13 and 18), on the real 4 x 4 GPU emulator with the plugin, a
FIFO controller run round by round in this process.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from _audit import unexpected_failures
from _wait import wait_for
from conftest import write_controller_toml

from blox_slurm.demo.world import ManagedWorld
from blox_slurm.slurm.client import SlurmJob
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.controller_config import load_config
from blox_slurm.slurm.store import Store

pytestmark = [pytest.mark.reliability, pytest.mark.slurm]


def fifo(world: ManagedWorld, tmp_path: Path, **extra: object) -> Controller:
    config = write_controller_toml(tmp_path / "controller.toml", world, tmp_path / "state.db",
                                   "fifo", 0.5, **extra)
    cfg, comp = load_config(config)
    ctl = Controller(cfg, comp, world.client(), Store(cfg.store))
    assert ctl.round().error == ""  # a fresh heartbeat: the plugin holds what follows
    return ctl


def submit(world: ManagedWorld, *options: str, user: str = "nobody",
           partition: str = "blox") -> int:
    return world.client().submit([f"--partition={partition}", "--chdir=/tmp",
                                  "--output=/dev/null", *options, "--wrap", "sleep 600"],
                                 as_user=user)


def jobs(world: ManagedWorld) -> dict[int, SlurmJob]:
    return {j.job_id: j for j in world.client().list_jobs()}


def runs(world: ManagedWorld, job_id: int) -> bool:
    """Whether the job is listed running. Not listed is "not yet": slurmctld 24.11 and 26.05
    have each once left a job just requeued or cancelled out of one `squeue --json`."""
    job = jobs(world).get(job_id)
    return job is not None and job.active


def reason(ctl: Controller, job_id: int) -> str:
    row = ctl.store.job(job_id)
    return (row or {}).get("reason") or ""


def test_item1_jobs_waiting_on_a_dependency_do_not_idle_the_partition(
        clean_queue: ManagedWorld, tmp_path: Path) -> None:
    """Four 4-GPU jobs that depend on a job that runs for ten minutes come first in FIFO
    order; they used to be pinned and released every round, all 16 GPUs promised to jobs that
    cannot start, while the job behind them stayed held."""
    world = clean_queue
    ctl = fifo(world, tmp_path)
    blocker = submit(world, partition="plain")  # unmanaged, no GPUs, never ends in the test
    waiting = [submit(world, "--gres=gpu:4", f"--dependency=afterok:{blocker}")
               for _ in range(4)]
    behind = submit(world, "--gres=gpu:4", user="daemon")

    wait_for(lambda: runs(world, behind), 60, "the job behind the dependent ones to run",
          step=lambda: rounds(ctl))
    now = jobs(world)
    assert all(now[j].pending and now[j].held for j in waiting), {j: now[j] for j in waiting}
    assert all("waits for its dependency" in reason(ctl, j) for j in waiting)
    assert not set(waiting) & released_ids(ctl)


def test_item5_array_tasks_are_scheduled_one_by_one(clean_queue: ManagedWorld,
                                                    tmp_path: Path) -> None:
    """One release of an array started every task Slurm found room for, past the policy,
    and re-pinning the array failed every round. Now tasks are split off (at most
    ``array_window`` waiting), and each starts only when the policy releases it; an array's
    throttle (``%1``) is kept without idling GPUs on tasks that could not start."""
    world = clean_queue
    ctl = fifo(world, tmp_path, array_window=3)
    big = submit(world, "--gres=gpu:3", "--array=0-7")  # one per node: 4 run, 4 GPUs spare
    small = submit(world, "--gres=gpu:1", "--array=0-3%1", user="daemon")

    def tasks(array: int) -> list[SlurmJob]:
        return [j for j in jobs(world).values() if j.array_job_id == array]

    def round_within_window() -> None:
        rounds(ctl)
        # the array's own record (its last task at the end) is there anyway
        split_waiting = [j for j in tasks(big) if j.pending and j.job_id != big]
        assert len(split_waiting) <= 3, split_waiting

    def running(array: int) -> list[SlurmJob]:
        return [j for j in tasks(array) if j.active]

    wait_for(lambda: len(running(big)) == 4 and len(running(small)) == 1, 60,
             "4 tasks of the big array and 1 of the throttled one to run",
             step=round_within_window)
    for _ in range(3):  # nothing escapes in later rounds either
        round_within_window()
    assert len(running(big)) == 4 and len(running(small)) == 1
    started = {j.job_id for j in running(big) + running(small)}
    assert started <= released_ids(ctl)  # every task started by a release of its own
    assert len({j.array_task_id for j in running(big)}) == 4
    waiting_small = [j for j in tasks(small) if j.pending and not j.unsplit_array]
    assert waiting_small and all(j.held for j in waiting_small)
    assert all("may run 1 at once" in reason(ctl, j.job_id) for j in waiting_small)
    splits = ctl.store.db.query("SELECT verb, ids FROM actions WHERE verb LIKE 'split %'")
    assert {json.loads(r["ids"])[0] for r in splits} == {big, small}
    assert unexpected_failures(ctl.store.db) == []
    stopped = list(ctl.store.db.query("SELECT ids FROM actions WHERE verb = 'requeuehold'"))
    assert stopped == []  # FIFO never swapped a released task for another

    world.client().cancel([running(big)[0].job_id])  # a task ends: the next one follows
    wait_for(lambda: len(running(big)) == 4, 60, "the next task to run",
             step=round_within_window)
    assert {j.job_id for j in running(big)} <= released_ids(ctl)


def test_item5_an_array_slurm_ran_while_failing_open_is_taken_back(
        clean_queue: ManagedWorld, tmp_path: Path) -> None:
    """With no controller the plugin leaves an array to Slurm; the controller that comes back
    holds its waiting tasks whole, then splits them off like any array's."""
    world = clean_queue
    world.heartbeat.unlink(missing_ok=True)  # no controller: the plugin fails open
    array = submit(world, "--gres=gpu:4", "--array=0-7")

    def tasks() -> list[SlurmJob]:
        return [j for j in jobs(world).values() if j.array_job_id == array]

    wait_for(lambda: sum(j.active for j in tasks()) == 4, 60, "Slurm to start 4 tasks")
    ctl = fifo(world, tmp_path, array_window=2)
    # two split off (the window), two still in the array's record
    wait_for(lambda: len([j for j in tasks() if j.pending]) == 3, 30,
             lambda: f"the waiting tasks to be split off: {tasks()}, "
                     f"{list(ctl.store.db.query('SELECT verb, ids, error FROM actions'))}",
             step=lambda: rounds(ctl))
    verbs = [(r["verb"], json.loads(r["ids"])) for r in ctl.store.db.query(
        "SELECT verb, ids FROM actions WHERE ok = 1")]
    assert verbs[0] == ("hold", [array]), verbs
    assert ("split [4-5]", [array]) in verbs, verbs
    assert sum(j.active for j in tasks()) == 4 and all(j.held for j in tasks() if j.pending)
    assert unexpected_failures(ctl.store.db) == []


@pytest.mark.parametrize("resource", ["cpus", "memory"])
def test_item2_placement_keeps_jobs_off_a_node_whose_cpus_or_memory_are_taken(
        resource: str, clean_queue: ManagedWorld, tmp_path: Path) -> None:
    """A 1-GPU job with every CPU of node1 left 3 GPUs there that no job could use; the
    policy kept pinning the next jobs to them (``Resources`` for ever) while other nodes
    idled. The snapshot now carries Slurm's free CPUs and memory and placement skips such
    nodes. (The emulator's memory is consumable, each CPU getting DefMemPerCPU by default:
    the 1-GPU jobs need more than the 1000 MB left on node1.)"""
    world = clean_queue
    ctl = fifo(world, tmp_path)
    node1 = next(n for n in world.client().list_nodes() if n.name == "node1")
    takes_node1 = (f"--cpus-per-task={node1.cpus}" if resource == "cpus"
                   else f"--mem={node1.memory_mb - 1000}M")
    hog = submit(world, "--gres=gpu:1", takes_node1)
    wait_for(lambda: runs(world, hog), 60, f"the job taking node1's {resource} to run",
             step=lambda: rounds(ctl))
    assert jobs(world)[hog].nodes == ("node1",)  # first fit: node1
    small = [submit(world, "--gres=gpu:1", user="daemon") for _ in range(3)]
    wait_for(lambda: all(runs(world, j) for j in small), 60,
             f"the 1-GPU jobs to run on the nodes with free {resource}",
             step=lambda: rounds(ctl))
    assert all("node1" not in jobs(world)[j].nodes for j in small)


def test_item8_a_users_begin_time_is_kept(clean_queue: ManagedWorld, tmp_path: Path) -> None:
    """The release used to set StartTime=now, so a job submitted with --begin=now+1hour ran at
    once. Now Slurm keeps it waiting (BeginTime); the controller sets it aside, held, and its
    GPUs go to the next job."""
    world = clean_queue
    ctl = fifo(world, tmp_path)
    later = submit(world, "--gres=gpu:4", "--begin=now+1hour")
    wait_for(lambda: "BeginTime" in reason(ctl, later), 60, "the --begin job to be set aside",
          step=lambda: rounds(ctl))
    other = submit(world, "--gres=gpu:4", user="daemon")
    wait_for(lambda: runs(world, other), 60, "the next job to run meanwhile",
          step=lambda: rounds(ctl))
    job = jobs(world)[later]
    assert job.pending and job.held and job.restart_cnt == 0, job
    start = re.search(r"StartTime=(\S+)", world.run("scontrol", "show", "job", str(later)).stdout)
    assert start is None or start[1] == "Unknown" or start[1] > time.strftime(
        "%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 1800)), start  # not "now"


def test_item13_a_job_its_owner_requeues_restarts_without_the_requeue_delay(
        clean_queue: ManagedWorld, tmp_path: Path) -> None:
    """After ``scontrol requeue`` by its owner a job is pending, released, and not eligible
    for ~120 s; the controller used to leave it so (its GPUs idle). Now the pin that starts it
    again lifts the delay."""
    world = clean_queue
    ctl = fifo(world, tmp_path)
    job = started_then_requeued_by_its_owner(world, ctl, submit(world, "--gres=gpu:2"))
    wait_for(lambda: runs(world, job), 60,
          "the requeued job to run again (Slurm alone would wait ~120 s)",
          step=lambda: rounds(ctl))
    pins = [r for r in ctl.store.db.query("SELECT verb, ids FROM actions WHERE ok = 1")
            if r["verb"].startswith("pin ") and job in json.loads(r["ids"])]
    assert len(pins) >= 2, pins  # the first start, and the restart that lifted the delay


def test_item18_a_requeued_job_keeps_its_place(clean_queue: ManagedWorld,
                                                tmp_path: Path) -> None:
    """Slurm resets SubmitTime on a requeue; the store and the policies keep the first."""
    world = clean_queue
    ctl = fifo(world, tmp_path)
    job = submit(world, "--gres=gpu:1")
    rounds(ctl)
    submitted = jobs(world)[job].submit_time
    time.sleep(1.5)  # Slurm's clock has whole seconds: a requeue now gets a later one
    started_then_requeued_by_its_owner(world, ctl, job)
    def resubmitted() -> bool:
        now = jobs(world).get(job)
        return now is not None and now.pending and (now.submit_time or 0) > (submitted or 0)

    wait_for(resubmitted, 30, "Slurm to reset the requeued job's submit time")
    rounds(ctl)
    assert (ctl.store.job(job) or {})["submit_time"] == submitted
    snap = ctl.snapshot({job: jobs(world)[job]}, world.client().list_nodes(), time.time())
    assert [j.submit_time for j in snap.jobs] == [submitted]


def started_then_requeued_by_its_owner(world: ManagedWorld, ctl: Controller, job: int) -> int:
    wait_for(lambda: runs(world, job), 60, "the job to start", step=lambda: rounds(ctl))
    out = world.run("scontrol", "requeue", str(job), user="nobody")
    assert out.returncode == 0, out.stderr
    wait_for(lambda: getattr(jobs(world).get(job), "restart_cnt", 0) == 1, 30,
             "Slurm to requeue it")
    return job


def rounds(ctl: Controller) -> None:
    assert ctl.round().error == ""


def released_ids(ctl: Controller) -> set[int]:
    return {i for r in ctl.store.db.query("SELECT ids FROM actions WHERE verb = 'release' "
                                          "AND ok = 1") for i in json.loads(r["ids"])}
