"""make_plan: the diff between what a round wants and what Slurm shows (pure)."""

from __future__ import annotations

from dataclasses import replace

from blox_slurm.model import ClusterSnapshot, Decisions, Drain, Start, build_cluster
from blox_slurm.slurm.apply import make_plan
from blox_slurm.slurm.client import SlurmJob

NODES, GPUS = build_cluster([("gpu", 2, 4)])  # node1: gpus 0-3, node2: gpus 4-7
SNAP = ClusterSnapshot(now=0.0, nodes=NODES, gpus=GPUS, jobs=())


def job(job_id: int, state: str = "PENDING", held: bool = True,
        req_nodes: tuple[str, ...] = ()) -> SlurmJob:
    return SlurmJob(job_id=job_id, name="j", user="u", account="", partition="blox",
                    state=state, reason="JobHeldAdmin" if held else "None",
                    priority=0 if held else 100, num_gpus=1, req_nodes=req_nodes)


def test_started_held_jobs_are_pinned_by_node_set_and_released() -> None:
    managed = {1: job(1), 2: job(2), 3: job(3)}
    d = Decisions(start=(Start(1, (0,)), Start(2, (1,)), Start(3, (4, 5))))
    plan = make_plan(managed, d, SNAP)
    assert plan.release == {("node1",): (1, 2), ("node2",): (3,)}
    assert plan.hold == () and plan.preempt == () and plan.repin == {}


def test_a_released_job_the_policy_no_longer_starts_is_held_again() -> None:
    managed = {1: job(1, held=False), 2: job(2)}
    plan = make_plan(managed, Decisions(), SNAP)
    assert plan.hold == (1,)  # job 2 is already held: nothing to do for it
    assert plan.release == {}


def test_a_released_job_placed_elsewhere_is_repinned_not_released_again() -> None:
    managed = {1: job(1, held=False, req_nodes=("node1",)),
               2: job(2, held=False, req_nodes=("node2",))}
    d = Decisions(start=(Start(1, (4,)), Start(2, (5,))))
    plan = make_plan(managed, d, SNAP)
    assert plan.repin == {("node2",): (1,)}  # job 2 is already pinned where it goes
    assert plan.release == {} and plan.hold == ()


def test_matching_state_is_a_no_op() -> None:
    managed = {1: job(1, state="RUNNING", held=False), 2: job(2)}
    assert make_plan(managed, Decisions(), SNAP).empty


def test_only_running_managed_jobs_are_preempted() -> None:
    managed = {1: job(1, state="RUNNING", held=False), 2: job(2)}
    d = Decisions(preempt=(1, 2, 99))  # 2 is pending, 99 is not managed
    assert make_plan(managed, d, SNAP).preempt == (1,)


def test_drains_skip_nodes_already_draining() -> None:
    d = Decisions(drain=(Drain("node1", "gpu errors"), Drain("node2", "gpu errors")))
    plan = make_plan({}, d, SNAP, drained=frozenset({"node2"}))
    assert plan.drain == (Drain("node1", "gpu errors"),)


def test_only_requeued_jobs_get_starttime_now() -> None:
    """A fresh job's StartTime is its owner's --begin (red team item 8); a requeued one's is
    Slurm's ~120 s requeue delay, which the pin lifts."""
    fresh, requeued = job(1), replace(job(2), restart_cnt=1)
    plan = make_plan({1: fresh, 2: requeued},
                     Decisions(start=(Start(1, (0,)), Start(2, (1,)))), SNAP)
    assert plan.release == {("node1",): (1, 2)} and plan.start_now == {2}


def test_a_job_its_owner_requeued_is_repinned_with_starttime_now() -> None:
    """Red team item 13: released, pinned where the policy wants it, but kept waiting ~120 s
    by Slurm's requeue delay: the plan lifts it, it does not leave it alone."""
    waiting = replace(job(1, held=False, req_nodes=("node1",)), restart_cnt=1,
                      reason="BeginTime")
    plan = make_plan({1: waiting}, Decisions(start=(Start(1, (0,)),)), SNAP)
    assert plan.repin == {("node1",): (1,)} and plan.start_now == {1}
    unstarted = replace(waiting, restart_cnt=0)  # its owner's --begin: not ours to lift
    assert make_plan({1: unstarted}, Decisions(start=(Start(1, (0,)),)), SNAP).empty
