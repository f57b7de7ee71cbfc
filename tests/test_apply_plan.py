"""make_plan: the diff between what a round wants and what Slurm shows (pure); the applier
carrying out a move in one round, against the in-memory Slurm."""

from __future__ import annotations

from dataclasses import replace

from blox_slurm.core.model import (
    ClusterSnapshot,
    Decisions,
    Drain,
    Job,
    JobState,
    Move,
    Start,
    Stop,
    build_cluster,
)
from blox_slurm.slurm.apply import Applier, make_plan
from blox_slurm.slurm.client import REVOKE_MARGIN, JobUpdate, SlurmJob
from blox_slurm.testing.fake_slurm import FakeSlurm

NODES, GPUS = build_cluster([("gpu", 2, 4)])  # node1: gpus 0-3, node2: gpus 4-7
SNAP = ClusterSnapshot(now=0.0, nodes=NODES, gpus=GPUS, jobs=())


def job(job_id: int, state: str = "PENDING", held: bool = True,
        req_nodes: tuple[str, ...] = (), gpus: int = 1) -> SlurmJob:
    return SlurmJob(job_id=job_id, name="j", user="u", account="", partition="blox",
                    state=state, reason="JobHeldAdmin" if held else "None",
                    priority=0 if held else 100, num_gpus=gpus, req_nodes=req_nodes)


def test_started_held_jobs_are_pinned_by_node_set_and_released() -> None:
    managed = {1: job(1), 2: job(2), 3: job(3, gpus=2)}
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
    d = Decisions(stop=(Stop(1), Stop(2), Stop(99)))  # 2 is pending, 99 is not managed
    assert make_plan(managed, d, SNAP).preempt == (1,)


def test_drains_skip_nodes_already_draining() -> None:
    d = Decisions(drain=(Drain("node1", "gpu errors"), Drain("node2", "gpu errors")))
    plan = make_plan({}, d, SNAP, drained=frozenset({"node2"}))
    assert plan.drain == (Drain("node1", "gpu errors"),)


def test_only_requeued_jobs_have_their_delay_lifted() -> None:
    """A fresh job's StartTime is its owner's --begin (red team item 8); a requeued one's is
    Slurm's ~120 s requeue delay, which the pin lifts."""
    fresh, requeued = job(1), replace(job(2), restart_cnt=1)
    plan = make_plan({1: fresh, 2: requeued},
                     Decisions(start=(Start(1, (0,)), Start(2, (1,)))), SNAP)
    assert plan.release == {("node1",): (1, 2)} and plan.lift_delay == {2}


def test_a_job_its_owner_requeued_is_repinned_with_its_delay_lifted() -> None:
    """Red team item 13: released, pinned where the policy wants it, but kept waiting ~120 s
    by Slurm's requeue delay: the plan lifts it, it does not leave it alone."""
    waiting = replace(job(1, held=False, req_nodes=("node1",)), restart_cnt=1,
                      reason="BeginTime")
    plan = make_plan({1: waiting}, Decisions(start=(Start(1, (0,)),)), SNAP)
    assert plan.repin == {("node1",): (1,)} and plan.lift_delay == {1}
    unstarted = replace(waiting, restart_cnt=0)  # its owner's --begin: not ours to lift
    assert make_plan({1: unstarted}, Decisions(start=(Start(1, (0,)),)), SNAP).empty


def test_a_delay_an_earlier_round_lifted_is_not_lifted_again() -> None:
    """Once lifted, the job waits for now+2 with reason BeginTime; lifting that again every
    round (1 s rounds) pushed its start out forever. Slurm's own delay is still lifted."""
    ours = replace(job(1, held=False, req_nodes=("node1",)), restart_cnt=1,
                   reason="BeginTime", eligible_time=SNAP.now + REVOKE_MARGIN)
    start = Decisions(start=(Start(1, (0,)),))
    assert make_plan({1: ours}, start, SNAP).empty
    skewed = replace(ours, eligible_time=SNAP.now + REVOKE_MARGIN + 8)  # slurmctld 8 s ahead
    assert make_plan({1: skewed}, start, SNAP).empty
    slurms = replace(ours, eligible_time=SNAP.now + 120)
    plan = make_plan({1: slurms}, start, SNAP)
    assert plan.repin == {("node1",): (1,)} and plan.lift_delay == {1}


def test_a_move_stops_the_job_and_pins_it_to_its_new_nodes() -> None:
    managed = {1: job(1, state="RUNNING", held=False)}
    plan = make_plan(managed, Decisions(move=(Move(1, (4,)),)), SNAP)
    assert plan.preempt == (1,) and plan.move == {("node2",): (1,)}
    assert plan.release == {} and plan.hold == ()


def test_a_move_to_a_shape_slurm_would_misread_is_a_stop_and_refused() -> None:
    """A per-node job (the ``nodes`` hint) spread over two nodes: stopped as the policy wants
    it off its GPUs, but not pinned where Slurm would give it twice its GPUs."""
    running = Job(1, 0.0, 2, state=JobState.RUNNING, gpus=(0, 1), hints=(("nodes", "1"),))
    snap = replace(SNAP, jobs=(running,))
    managed = {1: job(1, state="RUNNING", held=False)}
    plan = make_plan(managed, Decisions(move=(Move(1, (3, 4)),)), snap)
    assert plan.preempt == (1,) and plan.move == {} and set(plan.refused) == {1}


def _running_on_node1(fake: FakeSlurm) -> int:
    job_id = fake.submit_job(1, runtime=3600)
    fake.update_jobs([job_id], JobUpdate(req_nodes=("node1",)))
    fake.release([job_id])
    fake.schedule()
    assert fake.get_job(job_id).nodes == ("node1",)  # type: ignore[union-attr]
    return job_id


def _apply_move(fake: FakeSlurm, job_id: int) -> Applier:
    managed = {j.job_id: j for j in fake.list_jobs()}
    plan = make_plan(managed, Decisions(move=(Move(job_id, (4,)),)), SNAP)
    applier = Applier(fake, lambda *a: None, grace_seconds=1.0, poll_seconds=0.0,
                      sleep=lambda _: None)
    applier.apply(plan)
    return applier


def test_the_applier_restarts_a_moved_job_on_its_new_node_in_the_same_round() -> None:
    fake = FakeSlurm(nodes=((2, 4),))
    job_id = _running_on_node1(fake)
    applier = _apply_move(fake, job_id)
    assert applier.restarted == [job_id] and applier.deferred == []
    fake.advance(REVOKE_MARGIN)  # not 120 s: the pin lifted the requeue delay
    moved = fake.get_job(job_id)
    assert moved is not None and moved.active and moved.nodes == ("node2",)
    assert moved.restart_cnt == 1


def test_a_job_stopped_and_started_again_on_its_node_runs_and_does_not_fail() -> None:
    """slurmd refuses a credential made in the second it revoked the job's last one: a job
    requeued and started again on the same node in that second fails ("Job credential
    revoked", seen in CI on 22.05). The lifted delay ends seconds later, never in that one."""
    fake = FakeSlurm(nodes=((2, 4),))
    job_id = _running_on_node1(fake)
    applier = Applier(fake, lambda *a: None, sleep=lambda _: None)
    applier.apply(make_plan({job_id: fake.get_job(job_id)},  # type: ignore[dict-item]
                            Decisions(stop=(Stop(job_id),)), SNAP))
    requeued = fake.get_job(job_id)
    assert requeued is not None and requeued.held and requeued.restart_cnt == 1
    applier.apply(make_plan({job_id: requeued}, Decisions(start=(Start(job_id, (0,)),)), SNAP))
    fake.advance(0.5)  # the same second: not eligible yet, so not started into a refusal
    assert fake.get_job(job_id).pending  # type: ignore[union-attr]
    fake.advance(REVOKE_MARGIN)
    again = fake.get_job(job_id)
    assert again is not None and again.state == "RUNNING" and again.nodes == ("node1",)


class _Completing(FakeSlurm):
    """Shows requeued jobs as still COMPLETING, as Slurm does until their epilog is done."""

    def list_jobs(self, *args, **kw):  # type: ignore[no-untyped-def]
        return [replace(j, state="COMPLETING") if j.restart_cnt and j.pending else j
                for j in super().list_jobs(*args, **kw)]


def test_a_moved_job_still_completing_is_left_held_for_the_next_round() -> None:
    fake = _Completing(nodes=((2, 4),))
    job_id = _running_on_node1(fake)
    applier = _apply_move(fake, job_id)
    assert applier.deferred == [job_id] and applier.restarted == []
    left = FakeSlurm.get_job(fake, job_id)
    assert left is not None and left.pending and left.held and left.req_nodes == ("node1",)


def test_the_starts_of_every_placement_are_released_in_one_call() -> None:
    """Pins cost a call per job (Slurm takes no id list with ReqNodeList); the release of a
    round is one call whatever the placements (a 10k-job round once made one per node set)."""
    fake = FakeSlurm(nodes=((2, 4),))
    ids = [fake.submit_job(1, runtime=60) for _ in range(3)]
    plan = make_plan({j.job_id: j for j in fake.list_jobs()},
                     Decisions(start=(Start(ids[0], (0,)), Start(ids[1], (1,)),
                                      Start(ids[2], (4,)))), SNAP)
    assert len(plan.release) == 2  # two placements
    verbs: list[tuple[str, tuple[int, ...]]] = []
    Applier(fake, lambda verb, done, *_: verbs.append((verb, tuple(done))),
            sleep=lambda _: None).apply(plan)
    assert [v for v in verbs if v[0] == "release"] == [("release", tuple(ids))]
    assert sum(v[0].startswith("pin ") for v in verbs) == 2
    fake.schedule()
    assert {fake.get_job(j).nodes for j in ids} == {("node1",), ("node2",)}  # type: ignore[union-attr]


def _snap_at(now: float) -> ClusterSnapshot:
    return replace(SNAP, now=now)


def test_a_job_revoked_long_enough_ago_is_lifted_to_now() -> None:
    """StartTime=now for a job whose last run was revoked REVOKE_MARGIN s or more ago: a
    credential made now is of a later second. One revoked less long ago, or when nobody
    knows (see Revocations), keeps now+2."""
    requeued = replace(job(1), restart_cnt=1)
    start = Decisions(start=(Start(1, (0,)),))
    now = 1000.0
    plan = make_plan({1: requeued}, start, _snap_at(now), revoked={1: now - REVOKE_MARGIN})
    assert plan.lift_delay == {1} and plan.lift_now == {1}
    assert plan.release == {("node1",): (1,)}
    recent = make_plan({1: requeued}, start, _snap_at(now), revoked={1: now - 1})
    assert recent.lift_delay == {1} and recent.lift_now == frozenset()
    assert make_plan({1: requeued}, start, _snap_at(now)).lift_now == frozenset()


def test_a_released_job_whose_lifted_begin_time_has_passed_is_nudged() -> None:
    """Slurm evaluates begin times only when it schedules, and it schedules on events: a job
    whose now+2 has passed waits, with its pinned GPUs idle, until something else happens.
    StartTime=now (one call for all such jobs) is that event; before its begin time the job
    is left alone, and a job the policy no longer starts is held, not nudged."""
    now = 1000.0
    waiting = replace(job(1, held=False, req_nodes=("node1",)), restart_cnt=1,
                      reason="BeginTime", eligible_time=now - 1)
    start = Decisions(start=(Start(1, (0,)),))
    plan = make_plan({1: waiting}, start, _snap_at(now))
    assert plan.nudge == (1,) and plan.repin == {} and not plan.empty
    ahead = replace(waiting, eligible_time=now + 1)
    assert make_plan({1: ahead}, start, _snap_at(now)).empty
    unwanted = make_plan({1: waiting}, Decisions(), _snap_at(now))
    assert unwanted.hold == (1,) and unwanted.nudge == ()


def test_a_lifted_restart_runs_once_nudged_when_slurm_schedules_only_on_events() -> None:
    """With Slurm's event-driven passes, a job moved and pinned with now+2 is still pending
    after its begin time; the plan's nudge starts it. The applier reports what it lifted."""
    fake = FakeSlurm(nodes=((2, 4),), event_passes=True)
    job_id = _running_on_node1(fake)
    applier = _apply_move(fake, job_id)
    assert applier.restarted == [job_id] and applier.lifted == [job_id]
    assert applier.lifted_at is not None
    fake.advance(0.5)  # the release's pass: before its begin time
    fake.advance(REVOKE_MARGIN + 1)  # no event since: no pass
    waiting = fake.get_job(job_id)
    assert waiting is not None and waiting.pending and waiting.reason == "BeginTime"
    plan = make_plan({job_id: waiting}, Decisions(start=(Start(job_id, (4,)),)),
                     _snap_at(fake.now))
    assert plan.nudge == (job_id,)
    Applier(fake, lambda *a: None, sleep=lambda _: None).apply(plan)
    fake.advance(0.5)
    moved = fake.get_job(job_id)
    assert moved is not None and moved.state == "RUNNING" and moved.nodes == ("node2",)


def test_a_restart_lifted_to_now_runs_on_the_pass_its_release_sets_off() -> None:
    """Stopped more than REVOKE_MARGIN s before: pinned with StartTime=now and released, it
    starts on the release's own pass, on the node it ran on, without failing."""
    fake = FakeSlurm(nodes=((2, 4),), event_passes=True)
    job_id = _running_on_node1(fake)
    applier = Applier(fake, lambda *a: None, sleep=lambda _: None)
    applier.apply(make_plan({job_id: fake.get_job(job_id)},  # type: ignore[dict-item]
                            Decisions(stop=(Stop(job_id),)), SNAP))
    assert applier.stopped == [job_id]
    stopped_at = fake.now
    fake.advance(REVOKE_MARGIN)
    requeued = fake.get_job(job_id)
    assert requeued is not None and requeued.held
    plan = make_plan({job_id: requeued}, Decisions(start=(Start(job_id, (0,)),)),
                     _snap_at(fake.now), revoked={job_id: stopped_at})
    assert plan.lift_now == {job_id}
    again = Applier(fake, lambda *a: None, sleep=lambda _: None)
    again.apply(plan)
    assert again.lifted == []  # nothing left to nudge
    fake.advance(0.5)
    restarted = fake.get_job(job_id)
    assert restarted is not None and restarted.state == "RUNNING"
    assert restarted.nodes == ("node1",)
