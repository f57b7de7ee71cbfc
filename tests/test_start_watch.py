"""StartWatch: which managed jobs the policy must not see because Slurm will not start them
(red team item 1), and for how long (pure: jobs and clocks are given)."""

from __future__ import annotations

from dataclasses import replace

from blox_slurm.slurm.client import SlurmJob
from blox_slurm.start_watch import MAX_BACKOFF, StartWatch

HELD = SlurmJob(job_id=1, name="j", user="u", account="", partition="blox", state="PENDING",
                reason="JobHeldUser", priority=0, num_gpus=1)
RELEASED = replace(HELD, reason="Resources", priority=100)


def test_an_unfulfilled_dependency_is_not_runnable_even_while_held() -> None:
    w = StartWatch(timeout=60, backoff=300)
    job = replace(HELD, dependency="afterok:7(unfulfilled)")
    assert "dependency afterok:7(unfulfilled)" in w.update({1: job}, 0.0)[1]
    assert "dependency" in w.update({1: replace(job, dependency="afterok:7(failed)")}, 1.0)[1]
    assert w.update({1: replace(job, dependency="")}, 2.0) == {}  # fulfilled: Slurm drops it


def test_a_released_job_waiting_for_resources_gets_the_timeout_then_is_set_aside() -> None:
    w = StartWatch(timeout=60, backoff=300)
    assert w.update({1: HELD}, 0.0) == {}
    assert w.update({1: RELEASED}, 10.0) == {}
    assert w.update({1: RELEASED}, 69.0) == {}
    why = w.update({1: RELEASED}, 70.0)[1]
    assert "within 60 s (Resources)" in why and "for 300 s" in why
    assert w.update({1: HELD}, 200.0) == {1: why}  # held again by the plan, still aside
    assert w.update({1: HELD}, 370.0) == {}  # back to the policy


def test_a_dependency_found_after_the_release_sets_aside_at_once() -> None:
    w = StartWatch(timeout=60, backoff=300)
    why = w.update({1: replace(RELEASED, reason="Dependency")}, 0.0)[1]
    assert "Slurm would not start it (Dependency)" in why


def test_other_reasons_get_the_timeout() -> None:
    """26.05 says ReqNodeNotAvail for seconds after a pin to a node still completing."""
    w = StartWatch(timeout=60, backoff=300)
    busy = replace(RELEASED, reason="ReqNodeNotAvail")
    assert w.update({1: busy}, 0.0) == {} and w.update({1: busy}, 59.0) == {}
    assert "within 60 s (ReqNodeNotAvail)" in w.update({1: busy}, 60.0)[1]


def test_a_begin_time_keeps_it_aside_until_slurms_eligible_time() -> None:
    w = StartWatch(timeout=60, backoff=300)
    begin = replace(RELEASED, reason="BeginTime", eligible_time=3600.0)
    assert "for 3600 s" in w.update({1: begin}, 0.0)[1]
    assert 1 in w.update({1: replace(begin, reason="JobHeldUser", priority=0)}, 3599.0)
    assert w.update({1: replace(begin, reason="JobHeldUser", priority=0)}, 3600.0) == {}


def test_backoff_doubles_per_strike_up_to_an_hour_and_resets_once_it_runs() -> None:
    w = StartWatch(timeout=1, backoff=1000)
    stuck = replace(RELEASED, reason="Dependency")
    now, spans = 0.0, []
    for _ in range(4):
        why = w.update({1: stuck}, now)[1]
        spans.append(int(why.split("for ")[1].split(" s")[0]))
        now += spans[-1]
    assert spans == [1000, 2000, int(MAX_BACKOFF), int(MAX_BACKOFF)]
    assert w.update({1: replace(stuck, state="RUNNING")}, now) == {}
    assert "for 1000 s" in w.update({1: stuck}, now + 1)[1]


def test_jobs_that_left_the_queue_are_forgotten() -> None:
    w = StartWatch(timeout=1, backoff=10)
    w.update({1: replace(RELEASED, reason="Dependency")}, 0.0)
    w.update({}, 1.0)
    assert w.update({1: RELEASED}, 2.0) == {}  # a new start: no strike, a fresh timeout


def test_a_requeued_jobs_begin_time_is_the_requeue_delay_and_only_gets_the_timeout() -> None:
    w = StartWatch(timeout=60, backoff=300)
    requeued = replace(RELEASED, reason="BeginTime", restart_cnt=1, eligible_time=120.0)
    assert w.update({1: requeued}, 0.0) == {}
    assert "within 60 s (BeginTime)" in w.update({1: requeued}, 60.0)[1]
