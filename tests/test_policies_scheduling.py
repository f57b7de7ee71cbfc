"""Exact logic of the built-in scheduling policies on small hand-built snapshots."""

from __future__ import annotations

import pytest
from _core_helpers import apply, cluster, comp, pending, running, snapshot, started

from blox_slurm.core.composition import CompositionError
from blox_slurm.core.model import NodeState
from blox_slurm.core.round import decide
from blox_slurm.core.throughput import ParametricThroughput
from blox_slurm.policies.scheduling.fifo import Fifo
from blox_slurm.policies.scheduling.las import Las
from blox_slurm.policies.scheduling.optimus import Optimus
from blox_slurm.policies.scheduling.srtf import Srtf
from blox_slurm.policies.scheduling.tiresias import Tiresias


def ids(schedule) -> list[int]:
    return [j.id for j in schedule.order]


# --------------------------------------------------------------------------- FIFO

def test_fifo_orders_by_submit_time_then_id_running_jobs_included() -> None:
    shape = cluster(4)
    jobs = [pending(3, submit=5.0), pending(1, submit=5.0), running(7, [0], submit=2.0),
            pending(2, submit=0.0), pending(9, submit=9.5)]
    s = snapshot(shape, jobs, now=100.0)
    # submit 0 -> 2; submit 2 -> 7 (running, not moved ahead); submit 5 tie -> ids 1, 3; 9.5 -> 9
    assert ids(Fifo().order(s, s.jobs)) == [2, 7, 1, 3, 9]
    assert Fifo.time_dependent is False


def test_fifo_order_does_not_change_with_time_or_service() -> None:
    shape = cluster(2)
    jobs = [running(1, [0], submit=0.0, since=0.0), pending(2, submit=1.0)]
    early, late = snapshot(shape, jobs, now=10.0), snapshot(shape, jobs, now=1e6)
    assert ids(Fifo().order(early, jobs)) == ids(Fifo().order(late, jobs)) == [1, 2]


# --------------------------------------------------------------------------- LAS

def test_las_ranks_by_attained_gpu_seconds_which_grow_for_running_jobs() -> None:
    shape = cluster(4)
    # R: 2 GPUs since t=100 with 50 GPU-s before -> service(now) = 50 + 2 * (now - 100).
    r = running(1, [0, 1], submit=0.0, since=100.0, attained_base=50.0)
    p = pending(2, submit=10.0, attained_base=300.0)  # waiting: service fixed at 300
    assert r.attained_service(200.0) == 250.0
    at200 = snapshot(shape, [r, p], now=200.0)
    assert ids(Las().order(at200, at200.jobs)) == [1, 2]  # 250 < 300
    at300 = snapshot(shape, [r, p], now=300.0)
    assert r.attained_service(300.0) == 450.0
    assert ids(Las().order(at300, at300.jobs)) == [2, 1]  # 450 > 300: the waiting job overtakes
    assert Las.time_dependent is True


def test_las_ties_broken_by_arrival_then_id() -> None:
    shape = cluster(4)
    jobs = [pending(5, submit=3.0), pending(4, submit=3.0), pending(6, submit=1.0),
            pending(1, submit=0.0, attained_base=10.0)]
    s = snapshot(shape, jobs, now=50.0)
    # service 0: 6 (t=1), then 4, 5 (t=3, by id); service 10: 1 last despite arriving first
    assert ids(Las().order(s, s.jobs)) == [6, 4, 5, 1]


def test_las_composition_preempts_the_job_with_most_service() -> None:
    shape = cluster(1)
    old = running(1, [0], submit=0.0, since=0.0)  # 1 GPU for 600 s -> 600 GPU-s
    new = pending(2, submit=500.0)
    d = decide(snapshot(shape, [old, new], now=600.0), comp("las"))
    assert d.preempt == (1,) and started(d) == {2: (0,)}


# --------------------------------------------------------------------------- SRTF

def test_srtf_uses_oracle_remaining_time_of_running_and_waiting_jobs() -> None:
    shape = cluster(4)
    # R: duration 1000, 200 s of work before, now running at rate 0.5 since t=100:
    # work_done(300) = 200 + 0.5 * 200 = 300 -> remaining 700.
    r = running(1, [0], submit=0.0, since=100.0, duration=1000.0, work_base=200.0, rate=0.5)
    p = pending(2, submit=1.0, duration=800.0)
    q = pending(3, submit=2.0, duration=650.0)
    s = snapshot(shape, [r, p, q], now=300.0)
    assert r.remaining(300.0) == 700.0
    assert ids(Srtf().order(s, s.jobs)) == [3, 1, 2]  # 650 < 700 < 800
    # 200 s later R has 600 left, so it passes Q (650).
    s2 = snapshot(shape, [r, p, q], now=500.0)
    assert ids(Srtf().order(s2, s2.jobs)) == [1, 3, 2]


def test_srtf_puts_jobs_without_duration_last_in_arrival_order() -> None:
    shape = cluster(4)
    jobs = [pending(1, submit=0.0), pending(2, submit=5.0, duration=1e9),
            pending(3, submit=1.0), pending(4, submit=9.0, duration=10.0)]
    s = snapshot(shape, jobs, now=20.0)
    assert ids(Srtf().order(s, s.jobs)) == [4, 2, 1, 3]


def test_srtf_remaining_frozen_during_restart_window() -> None:
    shape = cluster(2)
    # Restarted at t=100 with a 30 s restore: no progress until 130.
    r = running(1, [0], since=100.0, work_since=130.0, duration=500.0, work_base=100.0)
    assert r.remaining(120.0) == 400.0 and r.remaining(140.0) == 390.0
    p = pending(2, submit=50.0, duration=400.0)
    s = snapshot(shape, [r, p], now=120.0)
    # Both have 400 s left at t=120 (R restores until 130): the tie goes by submit time,
    # R (t=0) before P (t=50).
    assert ids(Srtf().order(s, s.jobs)) == [1, 2]
    later = snapshot(shape, [r, p], now=140.0)  # R: 390 left
    assert ids(Srtf().order(later, later.jobs)) == [1, 2]
    p_short = pending(2, submit=50.0, duration=395.0)
    s3 = snapshot(shape, [r, p_short], now=120.0)
    assert ids(Srtf().order(s3, s3.jobs)) == [2, 1]  # 395 < 400 while R restores


# --------------------------------------------------------------------------- Tiresias

def tiresias(**params) -> Tiresias:
    return Tiresias(Tiresias.Params(**params))


@pytest.mark.parametrize(("service", "queue"), [
    (0.0, 0), (99.999, 0), (100.0, 1), (500.0, 1), (999.0, 1), (1000.0, 2), (1e9, 2)])
def test_tiresias_queue_from_thresholds_boundary_goes_to_next_queue(service, queue) -> None:
    t = tiresias(thresholds=[100.0, 1000.0], promote_knob=0)
    assert t.queue(pending(1, attained_base=service), now=0.0) == queue


def test_tiresias_service_is_two_dimensional_gpus_times_time() -> None:
    t = tiresias(thresholds=[100.0], promote_knob=0)
    wide = running(1, [0, 1, 2, 3], since=0.0)  # 4 GPUs x 30 s = 120 GPU-s -> queue 1
    narrow = running(2, [4], since=0.0)  # 1 GPU x 30 s = 30 GPU-s -> queue 0
    assert t.queue(wide, 30.0) == 1 and t.queue(narrow, 30.0) == 0


def test_tiresias_is_fifo_within_a_queue_where_las_is_not() -> None:
    shape = cluster(4)
    old = pending(1, submit=0.0, attained_base=500.0)  # queue 1, waiting long
    new = pending(2, submit=100.0, attained_base=200.0)  # queue 1, less service
    fresh = pending(3, submit=200.0)  # queue 0
    s = snapshot(shape, [old, new, fresh], now=300.0)
    t = tiresias(thresholds=[100.0, 1000.0], promote_knob=0)
    assert ids(t.order(s, s.jobs)) == [3, 1, 2]  # lower queue first, then arrival order
    assert ids(Las().order(s, s.jobs)) == [3, 2, 1]  # plain LAS lets the newer job jump ahead


def test_tiresias_running_job_in_same_queue_is_not_preempted_by_newer_job() -> None:
    shape = cluster(1)
    r = running(1, [0], submit=0.0, since=0.0)  # 400 GPU-s at now=400: queue 1 of [100, 1e4]
    p = pending(2, submit=300.0, attained_base=150.0)  # also queue 1, arrived later
    s = snapshot(shape, [r, p], now=400.0)
    c = comp({"policy": "tiresias", "thresholds": [100.0, 10000.0], "promote_knob": 0})
    assert decide(s, c).preempt == ()
    # LAS would preempt: 150 < 400.
    assert decide(s, comp("las")).preempt == (1,)


def test_tiresias_starvation_promotion_at_exactly_knob_times_executed() -> None:
    t = tiresias(thresholds=[100.0, 1000.0], promote_knob=2.0)
    # 400 GPU-s on 2 GPUs -> executed 200 s; last event (preemption) at t=1000.
    job = pending(1, gpus=2, submit=0.0, attained_base=400.0, last_event=1000.0)
    assert t.queue(job, 1399.0) == 1  # waited 399 < 2 x 200
    assert t.queue(job, 1400.0) == 0  # waited 400 >= 2 x 200: promoted to the top queue


def test_tiresias_promotion_reorders_and_only_applies_to_waiting_jobs() -> None:
    shape = cluster(2)
    t = tiresias(thresholds=[100.0], promote_knob=1.0)
    starving = pending(1, submit=50.0, attained_base=150.0, last_event=100.0)
    fresh = pending(2, submit=10.0)  # queue 0, earlier arrival
    r = running(3, [0], submit=0.0, since=0.0)  # 1e4 GPU-s, but running: never promoted
    s = snapshot(shape, [starving, fresh, r], now=10_000.0)
    # starving waited 9900 >= 150: queue 0; FIFO in queue 0 -> fresh (t=10) before it (t=50)
    assert ids(t.order(s, s.jobs)) == [2, 1, 3]
    assert t.queue(r, 10_000.0) == 1


def test_tiresias_promote_knob_zero_disables_promotion() -> None:
    t = tiresias(thresholds=[100.0], promote_knob=0.0)
    job = pending(1, submit=0.0, attained_base=150.0, last_event=0.0)
    assert t.queue(job, 1e12) == 1


def test_tiresias_no_promotion_for_jobs_that_never_ran() -> None:
    t = tiresias(thresholds=[100.0], promote_knob=8.0)
    assert t.queue(pending(1, last_event=0.0), 1e9) == 0  # queue 0 anyway (service 0)


@pytest.mark.parametrize("bad", [[100.0, 100.0], [1000.0, 100.0], [0.0, 5.0], [-1.0]])
def test_tiresias_rejects_invalid_thresholds(bad) -> None:
    with pytest.raises(CompositionError) as e:
        comp({"policy": "tiresias", "thresholds": bad})
    msg = str(e.value)
    assert "[scheduling]" in msg and "thresholds" in msg and "strictly increasing" in msg


def test_tiresias_rejects_negative_promote_knob() -> None:
    with pytest.raises(CompositionError, match="promote_knob"):
        comp({"policy": "tiresias", "promote_knob": -1})


def test_tiresias_promoted_job_keeps_its_gpus_after_it_starts() -> None:
    shape = cluster(1)
    c = comp({"policy": "tiresias", "thresholds": [3600.0], "promote_knob": 8.0})
    # A: 4000 GPU-s on 1 GPU (queue 1), waiting since t=0; at t=40000 it waited 40000 >=
    # 8 x 4000 -> promoted to queue 0 and, arriving first, outranks B (queue 0, 1000 GPU-s).
    a = pending(1, submit=0.0, attained_base=4000.0, last_event=0.0)
    b = running(2, [0], submit=100.0, since=39_000.0)
    s = snapshot(shape, [a, b], now=40_000.0)
    d = decide(s, c)
    assert d.preempt == (2,) and started(d) == {1: (0,)}
    # Promotion resets A's service counter (as published): the world keeps the mark ...
    assert d.marks == ((1, "tiresias.reset", 4000.0),)
    after = apply(s, d)
    # ... so, running, A sits in queue 0 until it earns 3600 GPU-s more, and B (queue 0,
    # arrived later) does not preempt it straight back.
    again = decide(after, c)
    assert again.preempt == () and again.start == ()
    a_running = next(j for j in after.jobs if j.id == 1)
    t = Tiresias(Tiresias.Params(thresholds=[3600.0], promote_knob=8.0))
    assert t.queue(a_running, 40_000.0 + 3599.0) == 0
    assert t.queue(a_running, 40_000.0 + 3600.0) == 1


# --------------------------------------------------------------------------- Optimus

def optimus(**params) -> Optimus:
    return Optimus(Optimus.Params(**params))


def grow(shape, jobs, now=0.0, throughput=None, states=None, **params) -> dict[int, int]:
    s = snapshot(shape, jobs, now=now, throughput=throughput or ParametricThroughput(),
                 states=states)
    return dict(optimus(**params).order(s, s.jobs).gpus)


def test_optimus_lone_job_grows_to_max_scale() -> None:
    # T(n) = 1000 / n**0.8 on one node: 1000, 574.3, 415.2, 329.9 -> every step gains.
    assert grow(cluster(8), [pending(1, duration=1000.0)]) == {1: 4}  # cap 4 x 1
    assert grow(cluster(8), [pending(1, duration=1000.0)], max_scale=2.0) == {1: 2}
    assert grow(cluster(8), [pending(1, duration=1000.0)], max_gpus=3) == {1: 3}
    # 2-GPU job, max_scale 1.5 -> cap int(3.0) = 3
    assert grow(cluster(8), [pending(1, gpus=2, duration=1000.0)], max_scale=1.5) == {1: 3}


def test_optimus_gives_each_spare_gpu_to_the_largest_marginal_gain() -> None:
    shape = cluster(4)
    # A 1000 s, B 600 s, 1 GPU each; 2 spare GPUs.
    # gains 1->2: A 1000(1 - 2^-.8) = 425.6, B 600(1 - 2^-.8) = 255.4 -> A gets the first;
    # then A 2->3: 574.3 - 415.2 = 159.1 < B 255.4 -> B gets the second. Result 2 + 2.
    jobs = [pending(1, submit=0.0, duration=1000.0), pending(2, submit=1.0, duration=600.0)]
    assert grow(shape, jobs) == {1: 2, 2: 2}
    # With B only 100 s: B's gain 42.6 < A's second step 159.1 -> A gets both: 3 + 1.
    jobs = [pending(1, submit=0.0, duration=1000.0), pending(2, submit=1.0, duration=100.0)]
    assert grow(shape, jobs) == {1: 3}  # B keeps its request and is not listed


def test_optimus_no_gain_means_no_extra_gpu() -> None:
    # scaling 0: rate is 1.0 at any GPU count -> gain 0 -> nothing is handed out.
    assert grow(cluster(4), [pending(1, duration=1000.0)],
                throughput=ParametricThroughput(scaling=0.0)) == {}
    # 1-GPU nodes and a harsh spread penalty: 2 GPUs on 2 nodes run at 2^.8 x .5 = 0.87 < 1.
    assert grow(cluster(1, 1, 1, 1), [pending(1, duration=1000.0)],
                throughput=ParametricThroughput(spread_penalty=0.5)) == {}
    # 2-GPU nodes, penalty .5: 2 GPUs gain (one node); a 3rd spans -> 1000/(3^.8 x .5) = 830
    # > 574 -> stops at 2.
    assert grow(cluster(2, 2), [pending(1, duration=1000.0)],
                throughput=ParametricThroughput(spread_penalty=0.5)) == {1: 2}


def test_optimus_does_not_grow_jobs_without_a_duration() -> None:
    assert grow(cluster(4), [pending(1)]) == {}


def test_optimus_running_jobs_keep_their_size_and_rank_first() -> None:
    shape = cluster(4)
    r = running(5, [0], submit=100.0, since=100.0, duration=1e6)
    p = pending(1, submit=0.0, duration=10.0)
    s = snapshot(shape, [p, r], now=200.0, throughput=ParametricThroughput())
    sched = optimus().order(s, s.jobs)
    assert ids(sched) == [5, 1]
    assert 5 not in sched.gpus
    # 3 GPUs are free: P (1 GPU, cap 4) gains from each, but only 3 are spare -> 3.
    assert sched.gpus == {1: 3}


def test_optimus_ranks_pending_by_remaining_and_skips_jobs_that_do_not_fit() -> None:
    shape = cluster(4)
    x = pending(1, gpus=3, submit=0.0, duration=50.0)
    y = pending(2, gpus=2, submit=1.0, duration=100.0)
    z = pending(3, gpus=1, submit=2.0, duration=200.0)
    s = snapshot(shape, [z, y, x], throughput=ParametricThroughput())
    sched = optimus().order(s, s.jobs)
    assert ids(sched) == [1, 2, 3]
    assert sched.gpus == {}  # X takes 3, Y (2) does not fit, Z takes the last one: no spare
    d = decide(s, comp("optimus"))
    assert started(d) == {1: (0, 1, 2), 3: (3,)}


def test_optimus_decide_starts_the_job_on_the_grown_allocation() -> None:
    shape = cluster(4, 4)
    s = snapshot(shape, [pending(1, gpus=2, duration=3600.0)], throughput=ParametricThroughput())
    d = decide(s, comp("optimus"))  # max_scale 4 -> cap min(8, 8) = 8
    # T(n) = 3600 / rate(n), rate = (n/2)^.8, x .85 beyond one 4-GPU node:
    # T(2..8) = 3600, 2603, 2068, 2035, 1758, 1554, 1397 -- always falling, so 2 -> 8 GPUs.
    assert started(d) == {1: tuple(range(8))}
    assert apply(s, d).jobs[0].gpus == tuple(range(8))


def test_optimus_counts_spare_gpus_on_up_nodes_only() -> None:
    # node1 drains with a 4-GPU job on it; node2 is up and empty: 4 GPUs are spare.
    shape = cluster(4, 4)
    r = running(9, [0, 1, 2, 3], since=0.0, duration=1e6)
    p = pending(1, duration=1000.0)
    got = grow(shape, [r, p], now=10.0, states={"node1": NodeState.DRAIN})
    assert got == {1: 4}
    s = snapshot(shape, [r, p], now=10.0, throughput=ParametricThroughput(),
                 states={"node1": NodeState.DRAIN})
    assert started(decide(s, comp("optimus"))) == {1: (4, 5, 6, 7)}
