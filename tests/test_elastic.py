"""Elastic jobs (issue 15 part 3): a Slurm job that opted in (``blox:elastic=1,max_gpus=N``)
may be started with another GPU count than it asked for, within its bounds; any other job
keeps its request whatever a policy wants. The engine's clamp, the plan's resize and refusal,
and the whole controller against the in-memory Slurm; the live suites run the resize on a
real slurmctld (tests/slurm/test_elastic_live.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from _core_helpers import cluster, comp, pending, running, snapshot, started

from blox_slurm.core.abstractions import Schedule, SchedulingBase
from blox_slurm.core.fit import gpu_count, gpu_range
from blox_slurm.core.model import (
    ClusterSnapshot,
    Decisions,
    Job,
    JobState,
    Move,
    NodeState,
    Start,
    build_cluster,
)
from blox_slurm.core.registry import register
from blox_slurm.core.round import decide
from blox_slurm.loading import load
from blox_slurm.sim.config import ClusterSpec
from blox_slurm.sim.simulator import Simulator
from blox_slurm.slurm.apply import Applier, make_plan
from blox_slurm.slurm.client import REVOKE_MARGIN, GpuRequest, JobUpdate, SlurmJob
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.parse import ParsedJob
from blox_slurm.slurm.store import Store
from blox_slurm.testing.fake_slurm import FakeSlurm
from blox_slurm.workloads.schema import JobSpec, Workload

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


# ---------------------------------------------------------------- the engine resizes running jobs

@register("scheduling", "test-sizes")
class FixedSizes(SchedulingBase):
    """Test scheduler: FIFO, with the GPU counts of ``SIZES`` (job id -> count)."""

    SIZES: dict[int, int] = {}

    def __init__(self, params: object = None) -> None:
        pass

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule:
        return Schedule(sorted(jobs, key=lambda j: (j.submit_time, j.id)), dict(self.SIZES))


def round_with(sizes: dict[int, int], *jobs: Job,
               states: dict[str, NodeState] | None = None) -> Decisions:
    FixedSizes.SIZES = sizes
    return decide(snapshot(cluster(4, 4), jobs, states=states), comp("test-sizes"))


ELASTIC = (("elastic", "1"), ("max_gpus", "8"), ("min_gpus", "1"))


def test_a_running_job_given_fewer_gpus_moves_onto_part_of_its_own() -> None:
    d = round_with({1: 2}, running(1, [0, 1, 2, 3], hints=ELASTIC))
    assert [m.job_id for m in d.move] == [1] and len(d.move[0].gpus) == 2
    assert set(d.move[0].gpus) <= {0, 1, 2, 3} and d.start == () and d.stop == ()


def test_a_running_job_grows_into_free_gpus_only() -> None:
    d = round_with({1: 4}, running(1, [0], hints=ELASTIC), pending(2, gpus=2))
    assert started(d) == {1: (0, 1, 2, 3), 2: (4, 5)}
    # With the cluster full nobody is stopped for it: it keeps what it has.
    full = round_with({1: 8}, running(1, [0, 1, 2, 3], hints=ELASTIC), running(3, [4, 5, 6, 7]))
    assert full.move == () and full.stop == ()


@pytest.mark.parametrize("size", [1, 2, 4, 6])
def test_a_job_on_a_draining_node_keeps_its_gpus_whatever_count_it_is_given(size: int) -> None:
    """A drain is the cluster manager's business: the job neither shrinks on nor grows off a
    node that takes no new work (its GPUs are not in the free pool to be placed among)."""
    job = running(1, [0, 1, 2], hints=ELASTIC)
    d = round_with({1: size}, job, states={"node1": NodeState.DRAIN})
    assert d.move == () and d.stop == ()


def test_a_job_that_did_not_opt_in_is_never_resized_while_it_runs() -> None:
    fixed = (("max_gpus", "4"), ("min_gpus", "4"))  # what the Slurm snapshot writes
    d = round_with({1: 1, 2: 8}, running(1, [0, 1, 2, 3], hints=fixed))
    assert d.move == () and d.stop == ()


@register("scheduling", "test-shrink-at-300")
class ShrinkAt300(SchedulingBase):
    """Test scheduler: FIFO; from t = 300 every running job is given 2 GPUs."""

    time_dependent = True

    def __init__(self, params: object = None) -> None:
        pass

    def order(self, snapshot: ClusterSnapshot, jobs: Sequence[Job]) -> Schedule:
        sizes = {j.id: 2 for j in jobs if j.gpus} if snapshot.now >= 300 else {}
        return Schedule(sorted(jobs, key=lambda j: (j.submit_time, j.id)), sizes)


def test_the_simulator_carries_a_shrink_out_and_the_job_runs_on_at_its_new_speed() -> None:
    """A 4-GPU job shrunk to 2 at t = 300 restarts on 2 (one restart), and the job arriving
    at t = 400 starts on the 2 it freed; the shrunk job finishes later than it would on 4."""
    wl = Workload((JobSpec(0, 0.0, 4, 1000.0), JobSpec(1, 400.0, 2, 100.0)))
    shape = ClusterSpec.parse("gpu:4x1").build()
    shrunk = {r.id: r for r in Simulator(wl, comp("test-shrink-at-300"), shape).run().jobs}
    kept = {r.id: r for r in Simulator(wl, comp("fifo"), shape).run().jobs}
    assert shrunk[0].preemptions == 1 and kept[0].preemptions == 0
    assert shrunk[0].finish > kept[0].finish
    assert shrunk[1].first_start < kept[1].first_start  # it did not wait for job 0's end
