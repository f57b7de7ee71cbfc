"""Starts in flight: a job released by the controller and not yet run by Slurm is shown to
the policy as running where it was placed, so the next round keeps it there (at 1 s rounds
it was placed again and re-pinned elsewhere, and its start put off)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from blox_slurm.core.model import ClusterSnapshot, Decisions, Move, Start, Stop, build_cluster
from blox_slurm.slurm.apply import make_plan
from blox_slurm.slurm.client import GresAlloc, SlurmJob, SlurmNode
from blox_slurm.slurm.in_flight import InFlight

NODES, GPUS = build_cluster([("v100", 2, 4)])  # node1: GPUs 0-3, node2: 4-7
SNAP = ClusterSnapshot(now=100.0, nodes=NODES, gpus=GPUS, jobs=())
SLURM_NODES = [SlurmNode(name, "idle", gpus_total=4, gpu_type="v100")
               for name in ("node1", "node2")]


def _held(job_id: int = 1, gpus: int = 2) -> SlurmJob:
    return SlurmJob(job_id=job_id, name="j", user="u", account="", partition="blox",
                    state="PENDING", reason="JobHeldAdmin", priority=0, num_gpus=gpus)


def _released(job: SlurmJob, nodes: tuple[str, ...]) -> SlurmJob:
    return replace(job, reason="None", priority=1, req_nodes=nodes)


def _in_flight(job: SlurmJob) -> InFlight:
    flight = InFlight(limit=60.0)
    flight.released(Decisions(start=(Start(job.job_id, (5, 6)),)), [job.job_id],
                    {job.job_id: job}, SNAP, 100.0)
    return flight


def test_a_released_job_slurm_has_not_run_is_shown_running_where_it_was_placed() -> None:
    job = _held()
    flight = _in_flight(job)
    shown = flight.view({1: _released(job, ("node2",))}, SLURM_NODES, 101.0)[1]
    assert shown.state == "RUNNING" and shown.nodes == ("node2",)
    # Slurm pins nodes, not GPUs: it will give the lowest free indices, not the policy's 1, 2
    assert shown.gpu_alloc["node2"] == GresAlloc("v100", 2, (0, 1)) and shown.start_time == 101.0
    assert flight.nodes() == {1: ("node2",)}


def test_a_start_is_no_longer_in_flight_once_anything_else_happened_to_it() -> None:
    job = _held()
    pinned = _released(job, ("node2",))
    for later, now in [(replace(pinned, state="RUNNING"), 101.0),  # Slurm ran it
                       (job, 101.0),  # held again
                       (_released(job, ("node1",)), 101.0),  # pinned elsewhere
                       (replace(pinned, reason="Resources"), 101.0),  # Slurm found it wanting
                       (replace(pinned, restart_cnt=1), 101.0),  # requeued meanwhile
                       (pinned, 161.0)]:  # past the limit
        flight = _in_flight(job)
        assert flight.view({1: later}, SLURM_NODES, now)[1] is later
        assert flight.nodes() == {}


def test_the_plan_keeps_an_in_flight_start_the_policy_keeps_and_holds_one_it_stops() -> None:
    pinned = _released(_held(), ("node2",))
    kept = make_plan({1: pinned}, Decisions(), SNAP, in_flight={1: ("node2",)})
    assert kept.empty  # no hold, no re-pin: it stays released where it is
    stopped = make_plan({1: pinned}, Decisions(stop=(Stop(1),)), SNAP, in_flight={1: ("node2",)})
    assert stopped.hold == (1,) and stopped.preempt == ()  # it never ran: held, not requeued
    moved = make_plan({1: pinned}, Decisions(start=(Start(1, (0, 1)),)), SNAP,
                      in_flight={1: ("node2",)})
    assert moved.repin == {("node1",): (1,)}
    assert make_plan({1: pinned}, Decisions(), SNAP).hold == (1,)  # not in flight: held


def test_starts_in_flight_are_shown_on_gpus_nobody_else_holds() -> None:
    """Slurm reports GPU 0 of node2 used (another partition's job), a managed job runs on
    GPU 1: the start is shown on 2, 3; a second start on node2 finds no room and is shown
    pending, free to be placed elsewhere."""
    first, second = _held(1), _held(2)
    flight = InFlight(limit=60.0)
    flight.released(Decisions(start=(Start(1, (4, 5)), Start(2, (6, 7)))), [1, 2],
                    {1: first, 2: second}, SNAP, 100.0)
    running = replace(_held(3, gpus=1), state="RUNNING", reason="None", priority=1,
                      nodes=("node2",), gpu_alloc={"node2": GresAlloc("v100", 1, (1,))})
    nodes = [SLURM_NODES[0], replace(SLURM_NODES[1], gpus_used=1, gpus_used_indices=(0,))]
    managed = {1: _released(first, ("node2",)), 2: _released(second, ("node2",)), 3: running}
    shown = flight.view(managed, nodes, 101.0)
    assert shown[1].gpu_alloc["node2"].indices == (2, 3)
    assert shown[2] is managed[2] and flight.nodes() == {1: ("node2",)}


def test_a_start_pinned_to_a_node_that_takes_no_work_is_shown_pending() -> None:
    job = _held()
    pinned = _released(job, ("node2",))
    for node in (replace(SLURM_NODES[1], flags=frozenset({"DRAIN"})),
                 replace(SLURM_NODES[1], state="down")):
        flight = _in_flight(job)
        assert flight.view({1: pinned}, [SLURM_NODES[0], node], 101.0)[1] is pinned


def test_a_start_moved_within_its_nodes_never_shares_gpus_with_another() -> None:
    """A start moved to other GPUs of its own node keeps its pins (no re-pin, so it is not
    released again): the GPUs it left may go to a new start, which must not be shown on
    the same indices."""
    flight = _in_flight(_held(1))
    moved = _released(_held(1), ("node2",))
    flight.view({1: moved}, SLURM_NODES, 101.0)
    d = Decisions(start=(Start(2, (5, 6)),), move=(Move(1, (4, 7)),))
    plan = make_plan({1: moved, 2: _held(2)}, d, SNAP, in_flight=flight.nodes())
    assert plan.repin == {} and plan.release == {("node2",): (2,)}
    flight.released(d, [2], {1: moved, 2: _held(2)}, SNAP, 102.0)
    shown = flight.view({1: moved, 2: _released(_held(2), ("node2",))}, SLURM_NODES, 103.0)
    taken = Counter(i for j in shown.values() for a in j.gpu_alloc.values() for i in a.indices)
    assert sorted(taken) == [0, 1, 2, 3] and set(taken.values()) == {1}
