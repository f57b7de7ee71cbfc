"""Resizing a held elastic job on the real emulated slurmctld (issue 15 part 3), on every
Slurm version CI runs: the controller's pin call also sets the job's new GPU request
(:class:`~blox_slurm.slurm.client.GpuRequest`), and once released Slurm must *allocate* the
new count, which the job sees. Slurm 22.05 records ``TresPerNode=gres/gpu:N`` on a pending
job yet allocates the old count (SLURM_NOTES.md): reading the request back is not enough, so
these tests read the allocation and the job's own ``CUDA_VISIBLE_DEVICES``."""

from __future__ import annotations

from typing import Any

import pytest
from _live import Jobs, clean_round, wait_for, world_controller

from blox_slurm.demo.world import FakeJob, ManagedWorld
from blox_slurm.loading import load
from blox_slurm.slurm.client import GpuRequest, JobUpdate, SlurmClient

pytestmark = pytest.mark.slurm

SHOW_GPUS = "echo gpus=$CUDA_VISIBLE_DEVICES; exec sleep 300"
ELASTIC_TRAINER = "--scaling 0.9 --batch-per-gpu 32"


def seen_gpus(jobs: Jobs, job: int) -> list[str]:
    """The GPU indices the job's own environment names."""
    out = jobs.workdir / f"{job}.out"
    wait_for(lambda: out.exists() and "gpus=" in out.read_text(), 15, "job output")
    line = next(x for x in out.read_text().splitlines() if x.startswith("gpus="))
    return line.removeprefix("gpus=").split(",")


@pytest.mark.parametrize(("ask", "resize", "gpu_type"), [
    ("--gres=gpu:1", GpuRequest(3, per_node=True), None),
    ("--gpus=1", GpuRequest(2, per_node=False), None),
    ("--gres=gpu:v100:3", GpuRequest(1, per_node=True, gpu_type="v100"), "v100"),
])
def test_a_held_job_resized_with_its_pin_runs_on_the_new_count(
        client: SlurmClient, jobs: Jobs, ask: str, resize: GpuRequest,
        gpu_type: str | None) -> None:
    job = jobs.submit(ask, "--hold", cmd=SHOW_GPUS)
    client.update_jobs([job], JobUpdate(req_nodes=("node1",), gpus=resize))
    client.release([job])
    j = jobs.wait_state(job, "RUNNING")
    assert j.nodes == ("node1",) and j.num_gpus == resize.count
    alloc = j.gpu_alloc["node1"]
    assert alloc.count == len(alloc.indices) == resize.count
    if gpu_type:
        assert alloc.type == gpu_type
    assert seen_gpus(jobs, job) == [str(i) for i in alloc.indices]


def test_a_requeued_job_restarts_on_its_new_count(client: SlurmClient, jobs: Jobs) -> None:
    """A grow or shrink of a running elastic job is a move: requeued held, then pinned with
    its new request (and its requeue delay lifted) and released. Slurm had allocated it
    before; the restart must still get the new count."""
    job = jobs.submit("--gres=gpu:4", "--requeue", cmd=SHOW_GPUS)
    jobs.wait_state(job, "RUNNING")
    client.requeue_hold([job])
    jobs.wait_state(job, "PENDING")
    client.update_jobs([job], JobUpdate(req_nodes=("node2",), lift_delay=True,
                                        gpus=GpuRequest(1, per_node=True)))
    client.release([job])
    j = jobs.wait_state(job, "RUNNING", timeout=30.0)
    assert j.nodes == ("node2",) and j.num_gpus == 1 and j.restart_cnt == 1
    assert j.gpu_alloc["node2"].count == 1


def test_the_controller_grows_an_elastic_job_through_the_plugin_and_it_adapts() -> None:
    """End to end: plain ``sbatch`` with ``--comment=blox:elastic=1,max_gpus=4`` through the
    job-submit plugin, the controller running Optimus (which grows a job whose remaining
    time drops), Slurm allocating the new count, and the fake trainer running and batching
    by it. A job beside it that did not opt in runs on exactly its request."""
    with ManagedWorld() as w:
        elastic = w.submit_fake(FakeJob("daemon", 1, 400, 0.0), 10, trainer=ELASTIC_TRAINER,
                                options=["--comment=blox:elastic=1,max_gpus=4,duration=40"])
        fixed = w.submit_fake(FakeJob("bin", 1, 400, 0.0), 10, trainer=ELASTIC_TRAINER,
                              options=["--comment=blox:duration=40"])
        client = w.emu.client()
        clean_round(world_controller(w, load("optimus"), "elastic.db"))
        got = {j.job_id: j for j in (client.get_job(elastic), client.get_job(fixed)) if j}
        assert (got[elastic].num_gpus, got[fixed].num_gpus) == (4, 1)

        def progress(job: int, user: str) -> dict[str, Any] | None:
            p = w.progress(job, user)
            return p if p and p.get("iteration", 0) > 0 else None
        grown = wait_for(lambda: progress(elastic, "daemon"), 30, "the elastic job to run")
        kept = wait_for(lambda: progress(fixed, "bin"), 30, "the other job to run")
        assert (grown["gpus"], grown["batch_size"]) == (4, 128)
        assert grown["rate"] == pytest.approx(10 * (1 + 0.9 * 3))
        assert (kept["gpus"], kept["batch_size"], kept["rate"]) == (1, 32, 10)
