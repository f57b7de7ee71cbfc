"""Starts in flight: a job released by the controller and not yet run by Slurm is shown to
the policy as running where it was placed, so the next round keeps it there (at 1 s rounds
it was placed again and re-pinned elsewhere, and its start put off)."""

from __future__ import annotations

from dataclasses import replace

from blox_slurm.core.model import ClusterSnapshot, Decisions, Start, Stop, build_cluster
from blox_slurm.slurm.apply import make_plan
from blox_slurm.slurm.client import SlurmJob
from blox_slurm.slurm.in_flight import InFlight

NODES, GPUS = build_cluster([("v100", 2, 4)])  # node1: GPUs 0-3, node2: 4-7
SNAP = ClusterSnapshot(now=100.0, nodes=NODES, gpus=GPUS, jobs=())


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
    shown = flight.view({1: _released(job, ("node2",))}, 101.0)[1]
    assert shown.state == "RUNNING" and shown.nodes == ("node2",)
    assert shown.gpu_alloc["node2"].indices == (1, 2) and shown.start_time == 101.0
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
        assert flight.view({1: later}, now)[1] is later
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
