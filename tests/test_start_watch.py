"""StartWatch: which managed jobs the policy must not see because Slurm will not start them
(red team item 1), and for how long (pure: jobs and clocks are given)."""

from __future__ import annotations

from dataclasses import replace

from blox_slurm.slurm.client import SlurmJob
from blox_slurm.slurm.start_watch import MAX_BACKOFF, StartWatch

HELD = SlurmJob(job_id=1, name="j", user="u", account="", partition="blox", state="PENDING",
                reason="JobHeldUser", priority=0, num_gpus=1)
RELEASED = replace(HELD, reason="Resources", priority=100)


def span(why: str) -> int:
    return int(why.split("for ")[1].split(" s")[0])


def test_an_unfulfilled_dependency_is_not_runnable_even_while_held() -> None:
    w = StartWatch(timeout=60, backoff=300)
    job = replace(HELD, dependency="afterok:7(unfulfilled)")
    assert "dependency afterok:7(unfulfilled)" in w.update({1: job}, 0.0)[1]
    assert "dependency" in w.update({1: replace(job, dependency="afterok:7(failed)")}, 1.0)[1]
    assert w.update({1: replace(job, dependency="")}, 2.0) == {}  # fulfilled: Slurm drops it


def test_a_job_we_released_gets_the_timeout_then_is_set_aside() -> None:
    w = StartWatch(timeout=60, backoff=300)
    assert w.update({1: HELD}, 0.0) == {}
    w.released([1], 5.0)
    assert w.update({1: RELEASED}, 10.0) == {}
    assert w.update({1: RELEASED}, 64.0) == {}
    why = w.update({1: RELEASED}, 65.0)[1]
    assert "within 60 s (Resources)" in why and span(why) == 300
    assert w.update({1: HELD}, 200.0) == {1: why}  # held again by the plan, still aside
    assert w.update({1: HELD}, 365.0) == {}  # back to the policy


def test_a_job_released_by_someone_else_is_not_timed() -> None:
    """Fail-open jobs (the plugin left them released) and every job of a dry run: not ours."""
    w = StartWatch(timeout=60, backoff=300)
    assert w.update({1: RELEASED}, 0.0) == {} and w.update({1: RELEASED}, 1000.0) == {}


def test_reasons_no_freed_gpu_ends_set_aside_at_once() -> None:
    w = StartWatch(timeout=60, backoff=300)
    assert "Slurm would not start it (Dependency)" in w.update(
        {1: replace(RELEASED, reason="Dependency")}, 0.0)[1]


def test_other_reasons_get_the_timeout() -> None:
    """26.05 says ReqNodeNotAvail for seconds after a pin to a node still completing."""
    w = StartWatch(timeout=60, backoff=300)
    busy = replace(RELEASED, reason="ReqNodeNotAvail")
    w.released([1], 0.0)
    assert w.update({1: busy}, 0.0) == {} and w.update({1: busy}, 59.0) == {}
    assert "within 60 s (ReqNodeNotAvail)" in w.update({1: busy}, 60.0)[1]


def test_a_begin_time_keeps_it_aside_until_slurms_eligible_time() -> None:
    w = StartWatch(timeout=60, backoff=300)
    begin = replace(RELEASED, reason="BeginTime", eligible_time=3600.0)
    assert span(w.update({1: begin}, 0.0)[1]) == 3600
    held = replace(begin, reason="JobHeldUser", priority=0)
    assert 1 in w.update({1: held}, 3599.0)
    assert w.update({1: held}, 3600.0) == {}


def test_a_requeued_jobs_begin_time_is_the_requeue_delay_and_only_gets_the_timeout() -> None:
    w = StartWatch(timeout=60, backoff=300)
    requeued = replace(RELEASED, reason="BeginTime", restart_cnt=1, eligible_time=120.0)
    w.released([1], 0.0)
    assert w.update({1: requeued}, 0.0) == {}
    assert "within 60 s (BeginTime)" in w.update({1: requeued}, 60.0)[1]


def test_a_start_slurm_refused_is_set_aside_at_once() -> None:
    """A pin Slurm refuses (the owner's exclusions, say) leaves the job held: without this
    the policy chose it again every round and its GPUs idled for ever."""
    w = StartWatch(timeout=60, backoff=300)
    w.refused({1: "Requested node configuration is not available"}, 0.0)
    why = w.update({1: HELD}, 1.0)[1]
    assert "refused to start it there (Requested node configuration" in why


def test_backoff_doubles_per_strike_up_to_an_hour_and_resets_once_it_runs() -> None:
    w = StartWatch(timeout=1, backoff=1000)
    stuck = replace(RELEASED, reason="Dependency")
    now, spans = 0.0, []
    for _ in range(4):
        spans.append(span(w.update({1: stuck}, now)[1]))
        now += spans[-1]
    assert spans == [1000, 2000, int(MAX_BACKOFF), int(MAX_BACKOFF)]
    assert w.update({1: replace(stuck, state="RUNNING")}, now) == {}
    assert span(w.update({1: stuck}, now + 1)[1]) == 1000


def test_jobs_that_left_the_queue_are_forgotten() -> None:
    w = StartWatch(timeout=1, backoff=10)
    w.released([1], 0.0)
    w.update({1: replace(RELEASED, reason="Dependency")}, 0.0)
    w.update({}, 1.0)
    assert w.update({1: RELEASED}, 2.0) == {}  # no strike, and not ours to time any more
