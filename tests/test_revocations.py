"""Revocations: a restart may begin at once (StartTime=now) only when its last run's
credential was revoked REVOKE_MARGIN s before, as far as anyone can tell; the in-memory
Slurm fails a job started in the second its credential was revoked, as slurmd does."""

from __future__ import annotations

from dataclasses import replace

from blox_slurm.core.model import ClusterSnapshot, Decisions, Start, build_cluster
from blox_slurm.slurm.apply import Applier, make_plan
from blox_slurm.slurm.client import REVOKE_MARGIN, JobUpdate
from blox_slurm.slurm.revocations import Revocations
from blox_slurm.testing.fake_slurm import FakeSlurm

NODES, GPUS = build_cluster([("gpu", 1, 4)])


def _round(fake: FakeSlurm, rev: Revocations, job_id: int) -> Applier:
    """One round that starts ``job_id`` on GPU 0, as the controller runs it."""
    managed = {j.job_id: j for j in fake.list_jobs()}
    rev.observe(managed, fake.now)
    snap = ClusterSnapshot(now=fake.now, nodes=NODES, gpus=GPUS, jobs=())
    plan = make_plan(managed, Decisions(start=(Start(job_id, (0,)),)), snap, revoked=rev.times())
    applier = Applier(fake, lambda *a: None, sleep=lambda _: None)
    applier.apply(plan)
    return applier


def _running(fake: FakeSlurm) -> int:
    job_id = fake.submit_job(1, runtime=3600)
    fake.update_jobs([job_id], JobUpdate(req_nodes=("node1",)))
    fake.release([job_id])
    fake.schedule()
    return job_id


def test_our_stop_dates_the_revocation_and_the_first_pending_look_dates_anyone_elses() -> None:
    rev = Revocations()
    fake = FakeSlurm(nodes=((1, 4),))
    job_id = _running(fake)
    before = fake.get_job(job_id)
    assert before is not None
    fake.requeue_hold([job_id])
    rev.stopped([before], fake.now)  # our stop: the count it leaves is one more
    stopped_at = fake.now
    fake.advance(5)
    rev.observe({job_id: fake.jobs[job_id].job}, fake.now)
    assert rev.times() == {job_id: stopped_at}
    owners = replace(fake.jobs[job_id].job, restart_cnt=2)  # requeued again, by its owner
    rev.observe({job_id: owners}, fake.now + 1)
    assert rev.times() == {job_id: fake.now + 1}  # seen pending with that count: from now
    rev.observe({}, fake.now + 2)
    assert rev.times() == {}  # gone from the queue


def test_a_requeue_by_its_owner_after_our_restart_waits_for_now_plus_2_and_does_not_fail(
        ) -> None:
    """The stop time of our own stop is about one run: the owner's requeue of the run our
    restart began must not let the next restart start in the second it revoked."""
    fake = FakeSlurm(nodes=((1, 4),), event_passes=True)
    rev = Revocations()
    job_id = _running(fake)
    before = fake.get_job(job_id)
    assert before is not None
    fake.requeue_hold([job_id])
    rev.stopped([before], fake.now)
    fake.advance(REVOKE_MARGIN + 0.5)
    assert _round(fake, rev, job_id).lifted == []  # lifted to now: ...
    fake.advance(0.1)
    assert fake.jobs[job_id].job.state == "RUNNING"  # ... and started on the release's pass
    fake.requeue([job_id])  # its owner requeues it, 0.1 s into its run
    fake.advance(0.1)
    again = _round(fake, rev, job_id)
    assert again.lifted == [job_id]  # now+2, not now
    fake.advance(0.5)
    assert fake.jobs[job_id].job.pending
    fake.advance(REVOKE_MARGIN + 1)
    _round(fake, rev, job_id)  # its begin time has passed: the plan nudges it
    fake.advance(0.1)
    assert fake.jobs[job_id].job.state == "RUNNING"
    assert fake.jobs[job_id].job.restart_cnt == 2
