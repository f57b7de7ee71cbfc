"""Elastic jobs (issue 15 part 3): a Slurm job that opted in (``blox:elastic=1,max_gpus=N``)
may be started with another GPU count than it asked for, within its bounds; any other job
keeps its request whatever a policy wants. The engine's clamp, the plan's resize and refusal,
and the whole controller against the in-memory Slurm; the live suites run the resize on a
real slurmctld (tests/slurm/test_elastic_live.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from blox_slurm.core.fit import gpu_count, gpu_range
from blox_slurm.core.model import (
    ClusterSnapshot,
    Decisions,
    Job,
    JobState,
    Move,
    Start,
    build_cluster,
)
from blox_slurm.loading import load
from blox_slurm.slurm.apply import Applier, make_plan
from blox_slurm.slurm.client import REVOKE_MARGIN, GpuRequest, JobUpdate, SlurmJob
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.parse import ParsedJob
from blox_slurm.slurm.store import Store
from blox_slurm.testing.fake_slurm import FakeSlurm

NODES, GPUS = build_cluster([("gpu", 2, 4)])  # node1: gpus 0-3, node2: gpus 4-7


def hinted(gpus: int, **hints: str) -> Job:
    return Job(1, 0.0, gpus, hints=tuple(sorted(hints.items())))


@pytest.mark.parametrize(("job", "asked", "gets"), [
    (Job(1, 0.0, 2), 8, 8),  # a simulated job: its scheduler decides
    (hinted(2, min_gpus="2", max_gpus="2"), 8, 2),  # a Slurm job that did not opt in
    (hinted(2, min_gpus="2", max_gpus="2"), None, 2),
    (hinted(1, elastic="1", min_gpus="1", max_gpus="4"), 8, 4),
    (hinted(4, elastic="1", min_gpus="2", max_gpus="8"), 1, 2),
    (hinted(4, elastic="1", min_gpus="1", max_gpus="8"), None, 4),
    # per node on two nodes: a multiple of two, or it could never be placed
    (hinted(2, elastic="1", min_gpus="1", max_gpus="8", nodes="2"), 5, 4),
    (hinted(2, elastic="1", min_gpus="1", max_gpus="8", nodes="2"), 1, 2),
    # a malformed bound (only a world writes them) reads as the request: nothing resized
    (hinted(3, min_gpus="x", max_gpus="-1"), 8, 3),
])
def test_gpu_count_keeps_every_job_within_what_it_allows(job: Job, asked: int | None,
                                                         gets: int) -> None:
    assert gpu_count(job, asked) == gets


def test_gpu_range_defaults_to_unbounded_above() -> None:
    assert gpu_range(Job(1, 0.0, 2)) == (1, None)
    assert gpu_range(hinted(1, elastic="1", max_gpus="6")) == (1, 6)


@pytest.mark.parametrize(("request_", "field"), [
    (GpuRequest(2, per_node=True), "TresPerNode=gres:gpu:2"),
    (GpuRequest(3, per_node=False), "TresPerJob=gres:gpu:3"),
    (GpuRequest(4, per_node=False, gpu_type="a100"), "TresPerJob=gres:gpu:a100:4"),
])
def test_a_resize_is_the_colon_form_slurm_applies(request_: GpuRequest, field: str) -> None:
    assert request_.field == field


@pytest.mark.parametrize("bad", [dict(count=0), dict(count=2**16),
                                 dict(count=1, gpu_type="a100 Priority=1"),
                                 dict(count=1, gpu_type="a,b")])
def test_a_resize_never_carries_another_field(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        GpuRequest(per_node=False, **bad)  # type: ignore[arg-type]


def slurm_job(job_id: int, gpus: int, gpu_nodes: int = 0) -> SlurmJob:
    return ParsedJob(job_id=job_id, name="j", user="u", account="", partition="blox",
                     state="PENDING", reason="JobHeldAdmin", priority=0, num_gpus=gpus,
                     num_nodes=max(1, gpu_nodes), gpu_nodes=gpu_nodes)


def test_the_plan_resizes_an_elastic_job_and_refuses_to_resize_any_other() -> None:
    jobs = (Job(1, 0.0, 1, hints=(("elastic", "1"),)), Job(2, 0.0, 1),
            Job(3, 0.0, 1, hints=(("elastic", "1"), ("nodes", "1"))))
    snap = ClusterSnapshot(now=0.0, nodes=NODES, gpus=GPUS, jobs=jobs)
    managed = {1: slurm_job(1, 1), 2: slurm_job(2, 1), 3: slurm_job(3, 1, gpu_nodes=1)}
    d = Decisions(start=(Start(1, (0, 1, 2)), Start(2, (4, 5)), Start(3, (6, 7))))
    plan = make_plan(managed, d, snap)
    assert plan.resize == {1: GpuRequest(3, per_node=False), 3: GpuRequest(2, per_node=True)}
    assert plan.release == {("node1",): (1,), ("node2",): (3,)}
    assert "did not opt in to resizing" in plan.refused[2]


def controller(fake: FakeSlurm, tmp: Path, composition: str) -> Controller:
    cfg = ControllerConfig(store=str(tmp / "state.db"), heartbeat=str(tmp / "heartbeat"),
                           plugin_config="", round_seconds=30.0)
    return Controller(cfg, load(composition), fake, Store(cfg.store), clock=lambda: fake.now)


def test_optimus_grows_the_elastic_job_slurm_allocates_it_and_the_rest_keep_their_count(
        tmp_path: Path) -> None:
    """On an idle 8-GPU cluster Optimus gives spare GPUs to jobs whose remaining time drops:
    the elastic one (up to its max_gpus) is resized in Slurm and starts with them; the other,
    which did not opt in, starts with exactly its request."""
    fake = FakeSlurm([(2, 4)])
    elastic = fake.submit_job(1, runtime=600.0, user="a",
                              hints={"elastic": 1, "max_gpus": 3, "duration": 600})
    fixed = fake.submit_job(1, runtime=600.0, user="b", hints={"duration": 600})
    ctl = controller(fake, tmp_path, "optimus")
    report = ctl.round()
    assert report.error == "", report.error
    fake.advance(1.0)
    assert fake.jobs[elastic].job.state == "RUNNING"
    assert fake.jobs[elastic].job.num_gpus == 3
    assert fake.jobs[fixed].job.state == "RUNNING"
    assert fake.jobs[fixed].job.num_gpus == 1
    fake.check()


def test_a_running_elastic_job_shrinks_by_a_move_and_restarts_on_the_new_count() -> None:
    """A policy taking GPUs back from a running elastic job moves it: it is requeued held,
    then pinned with its new request and released in the same round; Slurm runs it on 2."""
    fake = FakeSlurm([(2, 4)])
    job_id = fake.submit_job(4, runtime=3600.0, hints={"elastic": 1, "max_gpus": 4})
    fake.update_jobs([job_id], JobUpdate(req_nodes=("node1",)))
    fake.release([job_id])
    fake.schedule()
    running = Job(job_id, 0.0, 4, state=JobState.RUNNING, gpus=(0, 1, 2, 3),
                  hints=(("elastic", "1"),))
    snap = ClusterSnapshot(now=0.0, nodes=NODES, gpus=GPUS, jobs=(running,))
    plan = make_plan({j.job_id: j for j in fake.list_jobs()},
                     Decisions(move=(Move(job_id, (4, 5)),)), snap)
    assert plan.preempt == (job_id,) and plan.resize == {job_id: GpuRequest(2, False)}
    applier = Applier(fake, lambda *a: None, grace_seconds=1.0, poll_seconds=0.0,
                      sleep=lambda _: None)
    applier.apply(plan)
    assert applier.restarted == [job_id]
    fake.advance(REVOKE_MARGIN)
    shrunk = fake.get_job(job_id)
    assert shrunk is not None and shrunk.active and shrunk.nodes == ("node2",)
    assert shrunk.num_gpus == 2 and shrunk.restart_cnt == 1
    fake.check()


def test_a_move_that_would_resize_a_job_that_did_not_opt_in_is_a_stop_and_refused() -> None:
    running = Job(1, 0.0, 4, state=JobState.RUNNING, gpus=(0, 1, 2, 3))
    snap = ClusterSnapshot(now=0.0, nodes=NODES, gpus=GPUS, jobs=(running,))
    managed = {1: replace(slurm_job(1, 4), state="RUNNING", reason="None", priority=1)}
    plan = make_plan(managed, Decisions(move=(Move(1, (4, 5)),)), snap)
    assert plan.preempt == (1,) and plan.move == {} and plan.resize == {}
    assert "did not opt in to resizing" in plan.refused[1]
