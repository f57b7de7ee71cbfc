"""The controller's whole round (observe, decide, plan, apply, record) against the in-memory
Slurm (:mod:`blox_slurm.testing.fake_slurm`), in milliseconds: what must hold for any
workload and composition. The live suites run the same controller on a real slurmctld."""

from __future__ import annotations

import gc
import json
import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blox_slurm.loading import load
from blox_slurm.slurm import controller as controller_module
from blox_slurm.slurm.client import REVOKE_MARGIN, JobUpdate
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.job_submit import read_heartbeat
from blox_slurm.slurm.store import Store
from blox_slurm.testing.fake_slurm import FakeSlurm

ROUND = 30.0


def controller(fake: FakeSlurm, tmp: Path, composition: str) -> Controller:
    cfg = ControllerConfig(store=str(tmp / "state.db"), heartbeat=str(tmp / "heartbeat"),
                           plugin_config="", round_seconds=ROUND)
    return Controller(cfg, load(composition), fake, Store(cfg.store), clock=lambda: fake.now)


def run_to_the_end(fake: FakeSlurm, ctl: Controller, max_rounds: int = 400) -> int:
    """Rounds until every job has ended; Slurm's invariants checked after every step."""
    for n in range(max_rounds):
        report = ctl.round()
        assert report.error == "", report.error
        assert report.decisions is not None
        handed_out = [g for s in report.decisions.start for g in s.gpus]
        assert len(handed_out) == len(set(handed_out)), report.decisions.start
        fake.check()
        if not any(fj.job.queued for fj in fake.jobs.values()):
            return n
        fake.advance(ROUND)
        fake.check()
    raise AssertionError(f"jobs left after {max_rounds} rounds: "
                         f"{[fj.job for fj in fake.jobs.values() if fj.job.queued]}")


def actions(ctl: Controller, verb: str) -> list[int]:
    return [i for r in ctl.store.db.query("SELECT ids FROM actions WHERE verb = ? AND ok = 1",
                                         [verb]) for i in json.loads(r["ids"])]


def test_every_start_follows_a_release_and_every_run_is_accounted(tmp_path: Path) -> None:
    """FIFO with backfill: a small job backfilled ahead of a 4-GPU one is preempted when the
    big one's turn comes, and restarts. Slurm started nothing the controller did not
    release; the store counts exactly the runs Slurm made."""
    fake = FakeSlurm([(4, 4)])
    ids = [fake.submit_job(g, runtime=60.0 * (1 + i % 5), user=f"u{i % 3}")
           for i, g in enumerate([4, 1, 2, 3, 1, 4, 2, 2, 1, 3, 4, 1])]
    ctl = controller(fake, tmp_path, "fifo")
    run_to_the_end(fake, ctl)
    assert all(fake.jobs[j].job.state == "COMPLETED" for j in ids)
    starts = Counter(j for j, _ in fake.starts)
    released = Counter(actions(ctl, "release"))
    for j in ids:
        restarts = fake.jobs[j].job.restart_cnt
        assert starts[j] == restarts + 1 <= released[j], (j, starts[j], released[j])
        assert (ctl.store.job(j) or {})["preemptions"] == restarts
    assert sum(starts.values()) > len(ids)  # the backfilled job was preempted once
    assert list(ctl.store.db.query("SELECT * FROM actions WHERE ok = 0")) == []
    assert all(row["state"] == "done" for row in ctl.store.jobs(active_only=False))


def test_tiresias_preempts_and_every_preempted_job_comes_back(tmp_path: Path) -> None:
    """A 16-GPU job runs past Tiresias's first threshold; the small jobs after it preempt it
    (requeuehold), and it restarts (StartTime=now+2 lifts the requeue delay) and completes."""
    fake = FakeSlurm([(4, 4)])
    big = fake.submit_job(4, runtime=3000.0, gpus_per_node=True, nodes=4)
    ctl = controller(fake, tmp_path, "tiresias")
    for _ in range(4):
        ctl.round()
        fake.advance(ROUND)
    small = [fake.submit_job(1, runtime=120.0, user="bob") for _ in range(6)]
    run_to_the_end(fake, ctl)
    assert big in actions(ctl, "requeuehold")
    assert fake.jobs[big].job.restart_cnt >= 1 and fake.jobs[big].job.state == "COMPLETED"
    assert all(fake.jobs[j].job.state == "COMPLETED" for j in small)
    assert (ctl.store.job(big) or {})["preemptions"] == fake.jobs[big].job.restart_cnt


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 10), st.sampled_from([1, 4, 8]),
                               st.booleans()), min_size=1, max_size=8),
       composition=st.sampled_from(["fifo", "las", "tiresias", "srtf", "themis"]))
def test_no_job_is_lost_and_no_gpu_given_twice(tmp_path_factory: pytest.TempPathFactory,
                                               jobs: list[tuple[int, int, int, bool]],
                                               composition: str) -> None:
    """Any workload, any of these compositions: every job completes and none stays held,
    and no round hands a GPU to two jobs. Jobs ask for up to all 8 CPUs of a node, and
    some are bound to one node (``--gres=gpu:N``), so where the controller places them
    matters: a job pinned where its CPUs are taken waits, and only the controller's start
    timeout gets it going again."""
    fake = FakeSlurm([(2, 4)])
    ids = [fake.submit_job(gpus, runtime=30.0 * units, user=f"u{i % 2}", cpus=cpus,
                           gpus_per_node=one_node)
           for i, (gpus, units, cpus, one_node) in enumerate(jobs)]
    ctl = controller(fake, tmp_path_factory.mktemp("ctl"), composition)
    run_to_the_end(fake, ctl)
    assert [fake.jobs[j].job.state for j in ids] == ["COMPLETED"] * len(ids)


def test_a_round_whose_verbs_all_worked_refreshes_the_lease_at_its_end(tmp_path: Path) -> None:
    """The heartbeat written when the round observed ages while it applies (a move waits up
    to grace_seconds): a round that Slurm answered in full writes it again at its end."""
    fake = FakeSlurm([(1, 4)])
    fake.submit_job(1, runtime=600.0)
    ticks = iter(range(1, 10**6))  # every clock reading is one second later
    cfg = ControllerConfig(store=str(tmp_path / "state.db"), heartbeat=str(tmp_path / "hb"),
                           plugin_config="", round_seconds=ROUND)
    ctl = Controller(cfg, load("fifo"), fake, Store(cfg.store),
                     clock=lambda: fake.now + next(ticks))
    report = ctl.round()
    assert report.error == "" and report.plan is not None and report.plan.released
    observed_at = report.started + 1  # the second reading: when the round observed
    assert report.observed == observed_at  # the report says when the queue was read
    stamp = read_heartbeat(cfg.heartbeat)
    assert stamp is not None and observed_at < stamp < report.started + report.seconds


@pytest.mark.parametrize("handback", [True, False])
def test_a_stopping_controller_hands_back_its_held_jobs_if_configured(
        tmp_path: Path, handback: bool) -> None:
    """Red team item 14: however the controller ends, its heartbeat goes first (the plugin
    fails open for new jobs); with ``handback_on_exit`` the jobs it still holds are released
    to Slurm's own scheduling too, without it they wait for its successor."""
    fake = FakeSlurm([(1, 4)])
    first, waiting = fake.submit_job(4, runtime=600.0), fake.submit_job(4, runtime=600.0)
    cfg = ControllerConfig(store=str(tmp_path / "state.db"), heartbeat=str(tmp_path / "hb"),
                           plugin_config="", round_seconds=ROUND, handback_on_exit=handback)
    ctl = Controller(cfg, load("fifo"), fake, Store(cfg.store), clock=lambda: fake.now)
    stop = threading.Event()
    assert ctl.run(stop, on_round=lambda _: stop.set()) == 1  # stopped after its round
    assert read_heartbeat(cfg.heartbeat) is None
    fake.schedule()
    assert fake.jobs[first].job.state == "RUNNING"
    left = fake.jobs[waiting].job
    assert left.pending and left.held is not handback


def test_the_collector_waits_for_the_end_of_a_round(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Python's garbage collector is off while a round runs (see collector_paused), on
    again after it, a round that fails included; one that was off stays off."""
    fake = FakeSlurm([(2, 4)])
    fake.submit_job(1, runtime=60.0)
    ctl = controller(fake, tmp_path, "fifo")
    during: list[bool] = []
    decide = controller_module.decide

    def watching(*args: object, **kwargs: object) -> object:
        during.append(gc.isenabled())
        return decide(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(controller_module, "decide", watching)
    assert gc.isenabled()
    assert ctl.round().error == "" and during == [False] and gc.isenabled()
    monkeypatch.setattr(controller_module, "decide", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        ctl.round()
    assert gc.isenabled()
    monkeypatch.setattr(controller_module, "decide", watching)
    gc.disable()
    try:
        ctl.round()
        assert not gc.isenabled() and during == [False, False]
    finally:
        gc.enable()


def _released_waiting_for_a_pass(fake: FakeSlurm, job_id: int) -> None:
    """Stop ``job_id``, lift its delay to now+2 and release it, then let its begin time pass
    without an event: Slurm shows it pending, ``BeginTime``, and starts nothing."""
    fake.requeue_hold([job_id])
    fake.update_jobs([job_id], JobUpdate(lift_delay=True))
    fake.release([job_id])
    fake.advance(0.5)  # the release's pass: its begin time is still ahead
    fake.advance(REVOKE_MARGIN + 1)  # nothing happened since: no pass
    waiting = fake.jobs[job_id].job
    assert waiting.pending and waiting.reason == "BeginTime" and not waiting.held


def test_a_job_tiresias_preempted_restarts_on_the_pass_its_release_sets_off(
        tmp_path: Path) -> None:
    """Slurm schedules on events: the controller restarts a job it stopped rounds ago with
    StartTime=now, so the release's own pass starts it (with now+2 it would wait, its GPUs
    idle, for whatever woke Slurm next)."""
    fake = FakeSlurm([(4, 4)], event_passes=True)
    big = fake.submit_job(4, runtime=3000.0, gpus_per_node=True, nodes=4)
    ctl = controller(fake, tmp_path, "tiresias")
    for _ in range(4):
        ctl.round()
        fake.advance(ROUND)
    for _ in range(6):
        fake.submit_job(1, runtime=120.0, user="bob")
    for _ in range(40):
        report = ctl.round()
        assert report.plan is not None
        if fake.jobs[big].job.restart_cnt and big in report.plan.released:
            break
        fake.advance(ROUND)
    else:
        raise AssertionError("the preempted job was never restarted")
    assert report.plan.lift_now == {big} and report.lifted == ()
    fake.advance(0.5)
    assert fake.jobs[big].job.state == "RUNNING"


def test_nudge_sets_off_a_pass_for_jobs_waiting_only_for_one(tmp_path: Path) -> None:
    fake = FakeSlurm([(1, 4)], event_passes=True)
    job_id = fake.submit_job(1, runtime=600.0)
    ctl = controller(fake, tmp_path, "fifo")
    first = ctl.round()
    fake.advance(1)
    assert fake.jobs[job_id].job.state == "RUNNING"
    _released_waiting_for_a_pass(fake, job_id)
    assert ctl.nudge(first.round_id, [job_id]) == [job_id]
    fake.advance(0.1)
    assert fake.jobs[job_id].job.state == "RUNNING"
    assert actions(ctl, "start now") == [job_id]
    calls = fake.calls
    assert ctl.nudge(first.round_id, [job_id]) == []  # running: one read, no update
    assert fake.calls == calls + 1


def test_the_daemon_nudges_between_rounds_only_when_the_next_round_is_later(
        tmp_path: Path) -> None:
    """After a round that lifted delays to now+2, the daemon nudges once they have passed,
    unless the next round, which nudges on its own, comes first."""
    fake = FakeSlurm([(1, 4)], event_passes=True)
    job_id = fake.submit_job(1, runtime=600.0)
    ctl = controller(fake, tmp_path, "fifo")
    first = ctl.round()
    fake.advance(1)
    _released_waiting_for_a_pass(fake, job_id)
    lifted = replace(first, lifted=(job_id,), lifted_at=time.monotonic() - REVOKE_MARGIN - 1)
    calls = fake.calls
    ctl._nudge_later(lifted, time.monotonic() - 1, threading.Event())  # next round is due
    assert fake.calls == calls and fake.jobs[job_id].job.pending
    stopping = threading.Event()
    stopping.set()
    ctl._nudge_later(lifted, time.monotonic() + 60, stopping)  # stopping: no more calls
    assert fake.calls == calls
    ctl._nudge_later(lifted, time.monotonic() + 60, threading.Event())
    fake.advance(0.1)
    assert fake.jobs[job_id].job.state == "RUNNING"


def test_a_job_slurm_started_before_its_nudge_is_no_failure(tmp_path: Path) -> None:
    """Slurm may start a job between the read that found it waiting and the nudge: the
    update then fails for it ("no longer pending"), which is what the nudge was for."""
    fake = FakeSlurm([(1, 4)], event_passes=True)
    job_id = fake.submit_job(1, runtime=600.0)
    waiting = fake.submit_job(1, runtime=600.0)
    ctl = controller(fake, tmp_path, "fifo")
    first = ctl.round()
    fake.advance(1)
    _released_waiting_for_a_pass(fake, waiting)
    applier = ctl._applier(first.round_id)
    assert applier.nudge([job_id, waiting]) == [job_id, waiting]
    assert applier.failures == 0
    assert not list(ctl.store.db.query("SELECT * FROM actions WHERE ok = 0"))


def test_the_daemon_loop_nudges_after_a_round_that_lifted(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """A requeued job the policy starts (first seen pending: now+2) makes the loop call
    for a nudge with the round's report."""
    fake = FakeSlurm([(1, 4)], event_passes=True)
    job_id = fake.submit_job(1, runtime=600.0)
    ctl = controller(fake, tmp_path, "fifo")
    ctl.round()
    fake.advance(1)
    fake.requeue_hold([job_id])  # by someone else: no stop time known
    fake.advance(1)
    calls: list[tuple[int, ...]] = []
    monkeypatch.setattr(ctl, "_nudge_later", lambda report, *a: calls.append(report.lifted))
    monkeypatch.setattr(ctl.cfg, "round_seconds", 0.01)
    assert ctl.run(threading.Event(), max_rounds=1) == 1
    assert calls == [(job_id,)]


def test_handback_lifts_to_now_the_restarts_revoked_long_enough_ago() -> None:
    """Nothing wakes Slurm after a controller hands back on exit: a requeued job whose last
    run was revoked 2 s or more before is lifted to now and starts on the release's pass;
    one revoked just now, or when nobody knows, waits for now+2 (and does not fail)."""
    fake = FakeSlurm([(2, 4)], event_passes=True)
    old, new = fake.submit_job(1, runtime=600.0), fake.submit_job(1, runtime=600.0)
    fake.release([old, new])
    fake.advance(1)
    fake.requeue_hold([old])
    fake.advance(REVOKE_MARGIN + 1)
    fake.requeue_hold([new])
    revoked = {old: fake.now - REVOKE_MARGIN - 1, new: fake.now}
    assert sorted(controller_module.handback(fake, ["blox"], revoked, fake.now)) == [old, new]
    lifted = int(fake.now) + REVOKE_MARGIN
    fake.advance(0.5)
    assert fake.jobs[old].job.state == "RUNNING"
    assert fake.jobs[new].job.pending and not fake.jobs[new].job.held
    assert fake.jobs[new].job.eligible_time == lifted


def test_a_start_slurm_has_not_run_by_the_next_round_is_kept_not_placed_again(
        tmp_path: Path) -> None:
    fake = FakeSlurm([(2, 4)])
    job_id = fake.submit_job(2, runtime=600.0)
    ctl = controller(fake, tmp_path, "fifo")
    first = ctl.round()
    assert first.decisions is not None and [s.job_id for s in first.decisions.start] == [job_id]
    second = ctl.round()  # Slurm has had no pass yet: still pending, released
    assert fake.jobs[job_id].job.pending and not fake.jobs[job_id].job.held
    assert second.decisions is not None and second.decisions.start == ()
    assert second.running == 1 and second.plan is not None and second.plan.empty
    fake.advance(1)
    assert fake.jobs[job_id].job.state == "RUNNING"


def test_an_in_flight_start_is_never_shown_on_gpus_another_job_holds(tmp_path: Path) -> None:
    """A requeued job A waits out its now+2 while B, released in the same round, starts on
    the lowest free GPUs, the ones the policy gave A: A must not be shown there (0, 1 twice,
    2, 3 free), or a third job is started on GPUs the node does not have."""
    fake = FakeSlurm([(1, 4)])
    ctl = controller(fake, tmp_path, "fifo")
    a = fake.submit_job(2, runtime=1000.0)
    ctl.round()
    fake.advance(1)
    fake.requeue_hold([a])
    fake.advance(5)
    b = fake.submit_job(2, runtime=1000.0)
    ctl.round()
    fake.advance(1)
    assert fake.jobs[a].job.pending and fake.jobs[b].job.state == "RUNNING"
    c = fake.submit_job(2, runtime=1000.0)
    second = ctl.round()
    assert second.decisions is not None
    assert c not in [s.job_id for s in second.decisions.start]
    fake.check()


def test_an_in_flight_start_books_the_cpus_it_will_take(tmp_path: Path) -> None:
    """4 GPUs, 8 CPUs: A (2 GPUs, 6 CPUs) released, Slurm has had no pass; B (2 GPUs, 4
    CPUs) would find Slurm's 8 free CPUs, but only 2 are left once A runs."""
    fake = FakeSlurm([(1, 4)])
    ctl = controller(fake, tmp_path, "fifo")
    fake.submit_job(2, runtime=1000.0, cpus=6, gpus_per_node=True)
    ctl.round()
    b = fake.submit_job(2, runtime=1000.0, cpus=4, gpus_per_node=True)
    second = ctl.round()
    assert second.decisions is not None
    assert b not in [s.job_id for s in second.decisions.start]


def test_a_start_pinned_to_a_node_drained_before_slurm_ran_it_is_placed_again(
        tmp_path: Path) -> None:
    fake = FakeSlurm([(2, 4)])
    ctl = controller(fake, tmp_path, "fifo")
    a = fake.submit_job(4, runtime=1000.0, gpus_per_node=True)
    ctl.round()
    pinned = fake.jobs[a].job.req_nodes
    fake.nodes[pinned[0]].drained = True  # no scheduling pass yet: Slurm gives no reason
    second = ctl.round()
    assert second.plan is not None and second.plan.repin
    assert pinned not in second.plan.repin

